"""The two headroom tasks: one real sandboxed verification each reproduces the reference anchor."""

from __future__ import annotations

import pytest

from verifyless.node import Status
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.task.space import size
from verifyless.verify import verify


@pytest.mark.parametrize("name", ["affairs_gbm", "digits_torch"])
def test_headroom_task_baseline_verifies_at_its_reference(name: str) -> None:
    task = load_task(name)
    assert size(task.idea_space) >= 20_000 and len(task.idea_space.dimensions) >= 9
    assert all(o.description for opts in task.idea_space.dimensions.values() for o in opts)
    v = verify(task, task.baseline_program, LocalSandbox())
    assert v.status is Status.OK, v.reason
    assert v.score == pytest.approx(task.anchors.reference, abs=1e-3)
    assert v.test_score is not None and set(task.test_metrics) <= set(v.test_metrics)
