"""``--kind`` is checked against the target (issue 54, item 7): ``checked_problem`` takes a kind the target can pose
and refuses one it cannot with one line naming the kind that fits."""

from __future__ import annotations

import pandas as pd
import pytest

from verifyless.errors import ConfigError
from verifyless.task.tabular.split import checked_problem

TEXT = pd.Series(["a", "b", "c", "a"] * 10, name="y")
THREE = pd.Series([0, 1, 2, 1] * 10, name="y")
TWO = pd.Series([0, 1, 1, 0] * 10, name="y")
CONTINUOUS = pd.Series([0.25 * i + 0.1 for i in range(40)], name="y")


@pytest.mark.parametrize(
    "target, kind, message",
    [
        (
            TEXT,
            "regression",
            "--kind regression needs a numeric target, but 'y' holds values such as 'a'; use --kind multiclass",
        ),
        (THREE, "binary", "--kind binary needs a target with two classes, but 'y' has 3 distinct values (0, 1, 2)"),
        (
            CONTINUOUS,
            "multiclass",
            "--kind multiclass needs class labels, but 'y' holds numbers that are not whole, "
            "like 0.1; use --kind regression",
        ),
    ],
)
def test_a_kind_the_target_cannot_pose_is_refused_naming_the_kind_that_fits(target, kind, message):
    with pytest.raises(ConfigError) as info:
        checked_problem(target, "y", kind)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    "target, kind, expected",
    [
        (TEXT, None, "multiclass"),
        (TWO, "multiclass", "multiclass"),  # two classes scored as a multiclass task: allowed
        (THREE, "regression", "regression"),  # whole numbers may be treated as a quantity
        (CONTINUOUS, None, "regression"),
        (TWO, "binary", "binary"),
    ],
)
def test_a_kind_the_target_can_pose_is_kept(target, kind, expected):
    assert checked_problem(target, "y", kind) == expected
