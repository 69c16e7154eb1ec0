"""Executors run verifications somewhere: threads on this machine, or a Ray cluster.

An executor has one async verb, ``verify(task, program) -> Verification``, and
a fixed ``capacity`` (how many verifications it runs at once). Candidate
failures come back as Verification records; a broken executor raises.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from verifyless.node import Verification
from verifyless.task.base import Task


@runtime_checkable
class Executor(Protocol):
    name: str
    capacity: int

    async def verify(self, task: Task, program: str) -> Verification: ...

    def close(self) -> None: ...
