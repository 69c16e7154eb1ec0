"""Bring your own data: ``new_task`` turns one CSV into a verified task folder (``verifyless task new``).

It writes the folder (``verifyless.task.tabular.prepare``: MLE-bench's prepared layout, a scikit-learn
baseline, a sidecar), loads it like any competition folder (which makes and keeps the validation split),
then measures the normalisation anchors: the baseline program's validation score from one sandboxed
verification (``reference``), a trivial predictor's (``floor``: class shares, the majority label or the
training mean, graded in process) and the metric's best value (``bound``); they are written into the
sidecar. A baseline that does not beat the trivial predictor (noisy or tiny data) is no reference point:
then ``reference`` is left out, so the anchors stay ordered (floor -> 0, bound -> 1). A baseline that fails
leaves the folder in place and raises ``TaskError`` (exit 3) with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from verifyless.errors import TaskError
from verifyless.node import Verification
from verifyless.sandbox.base import Sandbox
from verifyless.task import load_task
from verifyless.task.base import Anchors, Task
from verifyless.task.tabular.competition import SIDECAR, floor_score
from verifyless.task.tabular.grading import metric_def
from verifyless.task.tabular.prepare import Prepared, Request, prepare_task
from verifyless.verify import verify

__all__ = ["NewTask", "new_task"]


@dataclass(frozen=True)
class NewTask:
    """The folder written, the task it loads as, and the baseline's verification."""

    prepared: Prepared
    task: Task
    baseline: Verification
    anchors: Anchors


def new_task(dest: Path, request: Request, sandbox: Sandbox) -> NewTask:
    """Write ``dest`` from ``request``, verify its baseline in ``sandbox`` and record the anchors."""
    prepared = prepare_task(dest, request)
    task = load_task(dest)
    baseline = verify(task, task.baseline_program, sandbox)
    floor = floor_score(task)
    best = metric_def(prepared.metric).best
    reference = baseline.score
    if reference is not None and task.metric.orient(reference) <= task.metric.orient(floor):
        reference = None  # below the trivial predictor: normalising to it would put 0.5 under 0
    anchors = Anchors(floor=floor, reference=reference, bound=best)
    _write_anchors(dest, anchors)
    if baseline.score is None:
        raise TaskError(
            f"wrote {dest}, but its baseline program failed ({baseline.status.value}: {baseline.reason}); "
            f"`verifyless verify {dest}` shows the error"
        )
    return NewTask(prepared, load_task(dest), baseline, anchors)


def _write_anchors(dest: Path, anchors: Anchors) -> None:
    path = dest / SIDECAR
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["anchors"] = {
        k: round(v, 6)
        for k, v in (("floor", anchors.floor), ("reference", anchors.reference), ("bound", anchors.bound))
        if v is not None
    }
    head = "# Written by `verifyless task new`; anchors: a trivial predictor (floor), the baseline (reference).\n"
    path.write_text(head + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
