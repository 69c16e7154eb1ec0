"""Where a stored run's task lives and what its scores are, read from the run rather than from the words it started with.

A run's configuration keeps the task as the user typed it (``task: ../t/wine``, ``diabetes``), which names nothing
from another folder, and the store keeps its name (``wine``), which names no built-in task. Since 2026-12-07 the
run's first event also records the task folder's absolute path (``task_root``) and its metric (``task_metric``:
name and direction; ``docs/design/store-schema.md``). ``run --resume``, ``replay``, ``report`` and ``export`` load
the task through ``load_run_task``: from the recorded folder while it is there, else by the typed reference
(resolved against the current folder, as runs stored before then always were). Reports label scores with
``TaskHome.metric``, which needs no task at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.events import RunCreated
from verifyless.task.base import Task
from verifyless.task.fingerprint import task_fingerprint
from verifyless.task.loader import MissingTask, load_task

__all__ = ["TaskHome", "load_run_task", "recorded", "task_home"]


@dataclass(frozen=True)
class TaskHome:
    """A stored run's task: as typed (``typed``), where it was (``root``: absolute, None in runs stored before
    2026-12-07) and its metric (``metric``, ``direction``: None there too)."""

    typed: str
    root: str | None = None
    metric: str | None = None
    direction: str | None = None

    @property
    def reference(self) -> str:
        """What to load: the recorded folder while it exists, else the task as typed."""
        return self.root if self.root is not None and Path(self.root).is_dir() else self.typed


def task_home(store: Any, run_id: str) -> TaskHome:
    """The ``TaskHome`` recorded by ``run_id``'s first event (``store``: any store with ``events``)."""
    for ev in store.events(run_id, RunCreated):
        head = ev.record
        metric = dict(head.task_metric or {})
        typed = str((head.config or {}).get("task") or head.task)
        return TaskHome(typed, head.task_root, metric.get("name"), metric.get("direction"))
    return TaskHome(str(store.run(run_id).task))


def load_run_task(store: Any, run_id: str) -> Task:
    """The task of stored run ``run_id``, loaded from where the run was made; ``MissingTask`` (exit 2) naming that
    folder when the task is found neither there nor by the reference the run was started with."""
    home = task_home(store, run_id)
    try:
        return load_task(home.reference)
    except MissingTask:
        if home.root is None:
            raise
        raise MissingTask(
            f"the task of run {run_id} is gone from {home.root}, where the run was made ({home.typed!r} names no task "
            f"from here either); put the task folder back, or resume with its new path: verifyless run PATH --resume "
            f"{run_id}"
        ) from None


def recorded(task: Task) -> dict[str, Any]:
    """What a new run records about ``task`` beside its name (``RunStore.create_run``'s keywords): its fingerprint,
    its folder's absolute path and its metric."""
    metric = {"name": task.metric.name, "direction": task.metric.direction}
    return {
        "fingerprint": task_fingerprint(task).to_dict(),
        "task_root": str(task.root.resolve()),
        "task_metric": metric,
    }
