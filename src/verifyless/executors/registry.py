"""Build executors by name from config: ``build_executor(name, cfg.executor.options, hide=..., capacity=...)``.

``EXECUTORS`` is a ``verifyless.registry.Registry``: each name with its class and its typed options
(``LocalExecutorOptions``, ``RayExecutorOptions``, defined beside the classes). ``EXECUTORS.validate``
checks ``executor.options`` when the configuration loads; an unknown name or option, or a bad value,
is a one-line ``ConfigError`` naming the fix. ``capacity`` (the engine's ``engine.verify_concurrency``)
is used unless the options set their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verifyless.executors.base import Executor
from verifyless.executors.local import LocalExecutor, LocalExecutorOptions
from verifyless.executors.ray import RayExecutor, RayExecutorOptions
from verifyless.registry import Component, Registry

EXECUTORS = Registry(
    "executor",
    [
        Component("local", LocalExecutor, LocalExecutorOptions, "sandboxed subprocesses on this machine"),
        Component("ray", RayExecutor, RayExecutorOptions, "verifications as tasks on a Ray cluster"),
    ],
)


def build_executor(name: str, options: Any = None, *, hide: Sequence[Path] = (), capacity: int = 1) -> Executor:
    """The executor registered as ``name`` with its typed ``options``; ``hide`` is kept out of its sandboxes.

    ``options`` are the run's ``cfg.executor.options`` (``EXECUTORS.validate(name, mapping)`` for a mapping),
    not checked again; None means the executor's defaults; a mapping is a ``TypeError`` (``Registry.typed``).
    """
    opts = EXECUTORS.typed(name, options).model_dump()
    opts["capacity"] = opts["capacity"] or capacity
    executor: Executor = EXECUTORS.get(name).factory(hide=hide, **opts)
    return executor


__all__ = ["EXECUTORS", "build_executor"]
