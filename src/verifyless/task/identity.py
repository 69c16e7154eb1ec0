"""Which task a run or a trained head belongs to: the one place that decides "the same task".

A learned critic does not transfer across tasks (docs/benchmarks.md: a head trained on the other tasks ranked
worse than random), so a warm start may only learn from earlier runs of *this* task, and a head trained on another
task is refused unless forced. A task's identity is its fingerprint (``task.fingerprint``: program, scorer,
data files, statement, idea space), which runs record in their ``config`` event and heads in their card. Runs
and heads from before fingerprints existed fall back to the task's name and the content hash of its baseline
program (every run records it as the program of its node ``root``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.node import content_hash
from verifyless.task.base import Task
from verifyless.task.fingerprint import stored_fingerprint, task_fingerprint


@dataclass(frozen=True)
class TaskIdentity:
    """A task's name, its baseline program's content hash and its fingerprint's digest (None: not recorded)."""

    name: str
    baseline: str | None = None
    fingerprint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "baseline": self.baseline, "fingerprint": self.fingerprint}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | str | None) -> TaskIdentity | None:
        """From ``to_dict``'s mapping; a bare string is a task name or folder (older cards); None stays None."""
        if data is None:
            return None
        if isinstance(data, str):
            return cls(Path(data).name)
        return cls(Path(str(data.get("name", ""))).name, data.get("baseline"), data.get("fingerprint"))


def identity_of(task: Task) -> TaskIdentity:
    """The identity of a loaded task."""
    return TaskIdentity(task.name, content_hash(task.baseline_program), task_fingerprint(task).digest)


def run_identity(store: Any, run: Any) -> TaskIdentity:
    """The identity a stored run records: its task name, its ``root`` node's program hash and its fingerprint."""
    root = next((n for n in store.nodes(run.run_id) if n.id == "root"), None)
    fingerprint = stored_fingerprint(store, run.run_id)
    return TaskIdentity(
        Path(run.task).name,
        getattr(root, "program_hash", None) if root is not None else None,
        fingerprint.digest if fingerprint is not None else None,
    )


def same_identity(recorded: TaskIdentity | None, task: TaskIdentity) -> bool:
    """Whether ``recorded`` names ``task``: the same name, and the same fingerprint where both have one (changed
    data, scorer or statement make another task), else the same baseline where both are known.

    The name counts although the fingerprint leaves it out (so that a resume survives a renamed folder): a
    learned head is only worth as much as the task it came from, and a user who names two identical folders
    differently means two tasks; erring that way costs a cold start, never a head from elsewhere.
    """
    if recorded is None or recorded.name != task.name:
        return False
    if recorded.fingerprint is not None and task.fingerprint is not None:
        return recorded.fingerprint == task.fingerprint
    return recorded.baseline is None or task.baseline is None or recorded.baseline == task.baseline


def same_task(store: Any, run: Any, task: Task) -> bool:
    """Whether stored ``run`` (a ``RunInfo``) is a run of ``task``: the predicate the warm start filters with."""
    return same_identity(run_identity(store, run), identity_of(task))


__all__ = ["TaskIdentity", "identity_of", "run_identity", "same_identity", "same_task"]
