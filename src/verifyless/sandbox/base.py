"""The Sandbox contract: untrusted command in, ``ExecResult`` out.

A candidate's misbehaviour (crash, timeout, memory bomb, output flood, ...) is
a result with a status and a reason. Only a broken sandbox (cannot create the
workspace, cannot start the process at all) raises ``SandboxUnavailable``.
Every backend must pass ``verifyless.sandbox.conformance``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from verifyless.task.base import Limits

ExecStatus = Literal["ok", "failed", "timeout", "oom", "output-limit", "disk-limit"]


@dataclass(frozen=True)
class ExecResult:
    status: ExecStatus
    reason: str
    returncode: int | None
    wall_seconds: float
    peak_memory_mb: float
    stdout_tail: str
    stderr_tail: str
    overhead_seconds: float = 0.0
    network_isolated: bool = False
    peak_gpu_memory_mb: float | None = None  # None: no GPU was given, or nothing could read its memory
    memory_limit: str = ""  # how memory_mb was enforced ("cgroup2", "cgroup1", "watchdog", "rlimit-data")


@runtime_checkable
class Sandbox(Protocol):
    """Runs ``argv`` with ``workdir`` as cwd and only writable place.

    ``hide`` lists host paths that must be unreadable from inside (hidden data,
    the run store, the task folder); a backend that shows only an allowlist
    (``LocalSandbox``) hides everything else as well. ``expose`` lists host
    directories the run must be able to read (read-only), ``hide`` paths inside
    them excepted (an OpenEvolve task's folder). ``env`` is added to the
    allowlisted base environment (never inherited from the parent).
    """

    name: str

    def run(
        self,
        argv: Sequence[str],
        workdir: Path,
        limits: Limits,
        *,
        env: Mapping[str, str] | None = None,
        hide: Sequence[Path] = (),
        expose: Sequence[Path] = (),
    ) -> ExecResult: ...
