"""Bring your own data: ``new_task`` turns one CSV into a verified task folder (``verifyless task new``).

It writes the folder (``verifyless.task.tabular.prepare``: MLE-bench's prepared layout, a scikit-learn
baseline, a sidecar), loads it like any competition folder (which makes and keeps the validation split),
then measures the normalisation anchors: the baseline program's validation score from one sandboxed
verification (``reference``), a trivial predictor's (``floor``: class shares, the majority label or the
training mean, graded in process) and the metric's best value (``bound``); they are written into the
sidecar. A baseline that does not beat the trivial predictor (noisy or tiny data) is no reference point:
then ``reference`` is left out, so the anchors stay ordered (floor -> 0, bound -> 1).

All of it happens in a hidden staging folder beside the destination (``.NAME.partial-PID``), renamed to the
destination only when everything succeeded: bad input (``ConfigError``), a failing baseline (``TaskError``, exit 3,
with its reason and last stderr lines) or an interruption leaves no folder behind, so a re-run starts clean. A
staging folder left by a killed process is removed by the next ``new_task`` for the same destination.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

import yaml

from verifyless.errors import ConfigError, TaskError
from verifyless.node import Verification
from verifyless.sandbox.base import Sandbox
from verifyless.task import load_task
from verifyless.task.base import Anchors, Task
from verifyless.task.tabular.competition import SIDECAR
from verifyless.task.tabular.grading import metric_def
from verifyless.task.tabular.prepare import Prepared, Request, check_destination, prepare_task
from verifyless.task.tabular.score import floor_score
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
    check_destination(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(dest)
    staging = dest.parent / f".{dest.name}.partial-{os.getpid()}"
    try:
        prepared, baseline, anchors = _make(staging, dest.name, request, sandbox)
        _publish(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return NewTask(replace(prepared, root=dest), load_task(dest), baseline, anchors)


def _make(staging: Path, name: str, request: Request, sandbox: Sandbox) -> tuple[Prepared, Verification, Anchors]:
    prepared = prepare_task(staging, request, name=name)
    task = load_task(staging)
    baseline = verify(task, task.baseline_program, sandbox)
    if baseline.score is None:
        tail = "\n".join(baseline.stderr_tail.strip().splitlines()[-4:])
        raise TaskError(
            f"the baseline program failed on this data ({baseline.status.value}: {baseline.reason}), so no task "
            "was written" + (f"; the last lines of its stderr:\n{tail}" if tail else "")
        )
    floor = floor_score(task)
    reference: float | None = baseline.score
    if task.metric.orient(baseline.score) <= task.metric.orient(floor):
        reference = None  # below the trivial predictor: normalising to it would put 0.5 under 0
    anchors = Anchors(floor=floor, reference=reference, bound=metric_def(prepared.metric).best)
    _write_anchors(staging, anchors)
    return prepared, baseline, anchors


def _publish(staging: Path, dest: Path) -> None:
    """Rename the finished staging folder to ``dest`` (absent, or an empty folder), in one step."""
    try:
        staging.rename(dest)
    except OSError as exc:
        raise ConfigError(f"cannot create {dest} ({exc.strerror}); choose a new folder for the task") from None


def _sweep_stale(dest: Path) -> None:
    """Remove staging folders of ``dest`` left by processes that no longer run (killed mid-way)."""
    for stale in dest.parent.glob(f".{dest.name}.partial-*"):
        pid = stale.name.rpartition("-")[2]
        if pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(stale, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
