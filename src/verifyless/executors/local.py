"""Local worker pool: each verification runs in the sandbox from a worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from pydantic import Field

from verifyless.node import Verification
from verifyless.registry import StrictOptions
from verifyless.sandbox.base import Sandbox
from verifyless.sandbox.local import LocalSandbox
from verifyless.task.base import Task
from verifyless.verify import verify


class LocalExecutorOptions(StrictOptions):
    """Options of executor ``local`` (``executor.options``)."""

    capacity: int | None = Field(
        None, ge=1, description="verifications in flight at once (default: engine.verify_concurrency)"
    )


class LocalExecutor:
    """Runs up to ``capacity`` verifications at once in threads (the sandbox forks processes).

    ``hide`` is passed to every verification (e.g. the run store's folder) so
    candidates cannot read the store.
    """

    name = "local"

    def __init__(self, sandbox: Sandbox | None = None, capacity: int = 1, hide: Sequence[Path] = ()) -> None:
        if sandbox is None:
            sandbox = LocalSandbox()
        self.sandbox = sandbox
        self.capacity = max(1, int(capacity))
        self.hide = tuple(Path(p) for p in hide)
        self._slots = asyncio.Semaphore(self.capacity)

    async def verify(self, task: Task, program: str) -> Verification:
        async with self._slots:
            return await asyncio.to_thread(verify, task, program, self.sandbox, hide=self.hide)

    def close(self) -> None:
        """Nothing to release: threads finish with their verification."""
