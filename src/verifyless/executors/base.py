"""Executors run verifications somewhere: threads on this machine, or a Ray cluster.

An executor has one async verb, ``verify(task, program) -> Verification``, and
a fixed ``capacity`` (how many verifications it runs at once). Candidate
failures come back as Verification records; a broken executor raises.

Two attributes tell the engine where the verifications run. ``sandbox`` is the sandbox they run in on this
machine, or None when they run elsewhere (a Ray cluster, a replay's stored outcomes, a pool world): then the
engine makes no ensemble submission (it would re-run programs here) and computes the data report in a local
sandbox. ``hide`` are the paths every verification masks (the run store's folder).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from verifyless.node import Verification
from verifyless.sandbox.base import Sandbox
from verifyless.task.base import Task


@runtime_checkable
class Executor(Protocol):
    name: str
    capacity: int

    @property
    def sandbox(self) -> Sandbox | None: ...

    @property
    def hide(self) -> Sequence[Path | str]: ...

    async def verify(self, task: Task, program: str) -> Verification: ...

    def close(self) -> None: ...
