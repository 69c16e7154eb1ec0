"""Ray executor: each verification is a Ray task with declared CPU/GPU resources.

The task folder must be readable at the same path on every node (a shared
filesystem or the same checkout); the program text travels with the call.
``address=None`` starts a local Ray instance (the tests do this).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.node import Verification
from verifyless.registry import StrictOptions
from verifyless.sandbox.base import Sandbox
from verifyless.sandbox.local import LocalSandbox
from verifyless.task.base import Task
from verifyless.verify import verify


def _verify_remote(task: Task, program: str, hide: tuple[str, ...]) -> dict[str, Any]:
    import ray

    gpus = [int(g) for g in ray.get_gpu_ids()] if task.limits.gpus > 0 else []  # the GPUs Ray gave this task
    return verify(task, program, LocalSandbox(), hide=[Path(h) for h in hide], gpus=gpus).to_dict()


class RayExecutorOptions(StrictOptions):
    """Options of executor ``ray`` (``executor.options``)."""

    address: str | None = Field(None, description="Ray cluster address (None: start a local Ray instance)")
    capacity: int | None = Field(
        None, ge=1, description="verifications in flight at once (default: engine.verify_concurrency)"
    )
    num_cpus: float = Field(1.0, gt=0, description="CPUs declared per verification task")
    num_gpus: float | None = Field(
        None, ge=0, description="GPUs declared per verification task (default: the task's limits.gpus)"
    )
    init_kwargs: dict[str, Any] = Field(default_factory=dict, description="extra keyword arguments of ray.init")


class RayExecutor:
    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        capacity: int = 2,
        num_cpus: float = 1.0,
        num_gpus: float | None = None,
        hide: Sequence[Path] = (),
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("executor.name=ray needs Ray: pip install 'verifyless[ray]'") from None
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            kwargs = {"include_dashboard": False, "log_to_driver": False, **(init_kwargs or {})}
            if address is None:
                kwargs.setdefault("num_cpus", max(1, int(capacity * num_cpus)))
            ray.init(address=address, **kwargs)
            self._owns_ray = True
        self.capacity = max(1, int(capacity))
        self.hide = tuple(str(p) for p in hide)
        self.sandbox: Sandbox | None = None  # the workers' sandboxes are theirs, not this machine's
        self._num_gpus = num_gpus
        self._remote = ray.remote(num_cpus=num_cpus, max_retries=0)(_verify_remote)
        self._slots = asyncio.Semaphore(self.capacity)

    async def verify(self, task: Task, program: str) -> Verification:
        async with self._slots:
            gpus = self._num_gpus if self._num_gpus is not None else task.limits.gpus
            ref = self._remote.options(num_gpus=gpus).remote(task, program, self.hide)
            data = await asyncio.wrap_future(ref.future())
        return Verification.from_dict(data)

    def close(self) -> None:
        if self._owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns_ray = False
