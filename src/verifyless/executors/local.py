"""Local worker pool: each verification runs in the sandbox from a worker thread, on GPUs of its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.node import Verification
from verifyless.registry import StrictOptions
from verifyless.sandbox.base import Sandbox
from verifyless.sandbox.gpu import gpu_indices
from verifyless.sandbox.local import LocalSandbox
from verifyless.task.base import Task
from verifyless.verify import verify


class LocalExecutorOptions(StrictOptions):
    """Options of executor ``local`` (``executor.options``)."""

    capacity: int | None = Field(
        None, ge=1, description="verifications in flight at once (default: engine.verify_concurrency)"
    )
    gpus: list[int] | None = Field(
        None,
        description="GPU indices verifications of a GPU task may hold (default: every GPU this machine shows, "
        "narrowed by CUDA_VISIBLE_DEVICES); each verification holds its own, never shared",
    )
    gpus_per_verification: int | None = Field(
        None, ge=1, description="GPUs each verification of a GPU task holds (default: the task's limits.gpus)"
    )


class GpuPool:
    """Hands each concurrent verification its own GPUs and takes them back when it ends.

    ``hold(n)`` waits until ``n`` GPUs are free, so a 4-GPU machine runs four one-GPU verifications
    at once and queues the fifth. The pool lives with its executor: a resumed run builds a new
    executor and starts with every GPU free.
    """

    def __init__(self, devices: Sequence[int]) -> None:
        self.devices = tuple(devices)
        self._free = list(self.devices)
        self._changed: asyncio.Condition | None = None

    @property
    def free(self) -> tuple[int, ...]:
        return tuple(self._free)

    @asynccontextmanager
    async def hold(self, n: int) -> AsyncIterator[tuple[int, ...]]:
        if n <= 0:
            yield ()
            return
        if n > len(self.devices):
            shown = ", ".join(map(str, self.devices)) or "none"
            raise ConfigError(
                f"a verification needs {n} GPU(s) but this executor has {len(self.devices)} ({shown}); "
                "set executor.options.gpus to the GPUs to use, or lower limits.gpus / gpus_per_verification"
            )
        if self._changed is None:
            self._changed = asyncio.Condition()
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._free) >= n)
            held, self._free = tuple(self._free[:n]), self._free[n:]
        try:
            yield held
        finally:
            self._free = sorted([*self._free, *held])
            async with self._changed:
                self._changed.notify_all()


class LocalExecutor:
    """Runs up to ``capacity`` verifications at once in threads (the sandbox forks processes).

    ``hide`` is passed to every verification (e.g. the run store's folder) so
    candidates cannot read the store. A task with ``limits.gpus > 0`` gets its GPUs from ``gpus``
    (default: every GPU this machine shows), ``gpus_per_verification`` of them per verification
    (default: the task's ``limits.gpus``), never two verifications on one GPU.
    """

    name = "local"

    def __init__(
        self,
        sandbox: Sandbox | None = None,
        capacity: int = 1,
        hide: Sequence[Path] = (),
        gpus: Sequence[int] | None = None,
        gpus_per_verification: int | None = None,
    ) -> None:
        if sandbox is None:
            sandbox = LocalSandbox()
        self.sandbox = sandbox
        self.capacity = max(1, int(capacity))
        self.hide = tuple(Path(p) for p in hide)
        self.gpus = GpuPool(gpu_indices() if gpus is None else gpus)
        self._per_verification = gpus_per_verification
        self._slots = asyncio.Semaphore(self.capacity)

    def gpus_for(self, task: Task) -> int:
        """GPUs one verification of ``task`` holds (0 for a CPU task)."""
        return 0 if task.limits.gpus == 0 else (self._per_verification or task.limits.gpus)

    async def verify(self, task: Task, program: str) -> Verification:
        async with self._slots, self.gpus.hold(self.gpus_for(task)) as held:
            return await asyncio.to_thread(verify, task, program, self.sandbox, hide=self.hide, gpus=held)

    def close(self) -> None:
        """Nothing to release: threads finish with their verification."""
