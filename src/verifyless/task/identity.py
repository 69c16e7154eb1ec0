"""Which task a run or a trained head belongs to: the one place that decides "the same task".

A learned critic does not transfer across tasks (docs/benchmarks.md: a head trained on the other tasks ranked
worse than random), so a warm start may only learn from earlier runs of *this* task, and a head trained on another
task is refused unless forced. Until the task fingerprint (``task/fingerprint.py``, another issue) lands, a task's
identity is its name and the content hash of its baseline program, which every run already records as the
program of its node ``root``. Switching to the fingerprint means changing ``identity_of``, ``run_identity`` and
``same_identity`` here, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.node import content_hash
from verifyless.task.base import Task


@dataclass(frozen=True)
class TaskIdentity:
    """A task's name and its baseline program's content hash (None: not recorded, e.g. a run without a baseline)."""

    name: str
    baseline: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "baseline": self.baseline}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | str | None) -> TaskIdentity | None:
        """From ``to_dict``'s mapping; a bare string is a task name or folder (older cards); None stays None."""
        if data is None:
            return None
        if isinstance(data, str):
            return cls(Path(data).name)
        return cls(Path(str(data.get("name", ""))).name, data.get("baseline"))


def identity_of(task: Task) -> TaskIdentity:
    """The identity of a loaded task."""
    return TaskIdentity(task.name, content_hash(task.baseline_program))


def run_identity(store: Any, run: Any) -> TaskIdentity:
    """The identity a stored run records: its task name and its ``root`` node's program hash."""
    root = next((n for n in store.nodes(run.run_id) if n.id == "root"), None)
    return TaskIdentity(Path(run.task).name, getattr(root, "program_hash", None) if root is not None else None)


def same_identity(recorded: TaskIdentity | None, task: TaskIdentity) -> bool:
    """Whether ``recorded`` names ``task``: the same name, and the same baseline where both are known."""
    if recorded is None or recorded.name != task.name:
        return False
    return recorded.baseline is None or task.baseline is None or recorded.baseline == task.baseline


def same_task(store: Any, run: Any, task: Task) -> bool:
    """Whether stored ``run`` (a ``RunInfo``) is a run of ``task``: the predicate the warm start filters with."""
    return same_identity(run_identity(store, run), identity_of(task))


__all__ = ["TaskIdentity", "identity_of", "run_identity", "same_identity", "same_task"]
