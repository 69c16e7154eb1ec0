"""The tabular idea space fits the data it runs on (issue 54, item 6): a dimension whose kind of column the data
lacks is fixed (no move is paid for that cannot change a prediction: ``numeric`` on text-only data too), and an
option whose setting grows past the data's size is bounded by it (k-NN's k by the training rows)."""

from __future__ import annotations

from competitions import cache, competition, spooky_text_folder  # noqa: F401  (cache: autouse fixture)

from verifyless.node import Status
from verifyless.program import replace
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.task.space import render
from verifyless.verify import verify


def test_text_only_data_has_no_numeric_move(tmp_path):
    space = load_task(spooky_text_folder(tmp_path)).idea_space
    assert space is not None
    assert set(space.dimensions) == {"model", "strength", "text"}, "numeric and categorical are fixed: no such column"


def test_k_nn_on_fewer_rows_than_its_k_is_bounded_by_them_and_verifies(tmp_path):
    task = load_task(competition(tmp_path))  # 80 public rows, 64 after the validation share: fewer than k = 100
    space = task.idea_space
    assert space is not None
    band = render(space, {**space.baseline, "model": "knn", "strength": "strong"})
    assert "min(round(10 * STRENGTH), 64)" in band, band
    done = verify(task, replace(task.baseline_program, task.band, band), LocalSandbox())
    assert done.status is Status.OK, done.reason + done.stderr_tail
