"""How a verification's host memory is bounded: the kernel's memory controller, or a watchdog.

``Limits.memory_mb`` bounds the *resident* memory of the whole run (every process it starts), not
its address space. ``RLIMIT_AS`` is not used: CUDA, JAX, the JVM and Go reserve far more virtual
address space than any sensible memory limit (importing a CUDA build of torch maps more than 3 GB),
so an address-space limit turns a healthy GPU program into an ``oom``.

Mechanisms, best first (``pick_mechanism("auto")`` takes the first this host allows):

``cgroup2``
    a child group of this process's cgroup (v2) per run: ``memory.max`` = the limit,
    ``memory.swap.max`` = 0, ``pids.max`` = ``Limits.processes`` when the pids controller is on.
    The bootstrap joins it before it forks anything; the kernel OOM-kills inside the group only.
``cgroup1``
    the same with the v1 memory hierarchy: ``memory.limit_in_bytes``, and
    ``memory.memsw.limit_in_bytes`` equal to it (no swap) where swap accounting exists.
``watchdog``
    the parent samples the resident memory of the run's process tree every ``WATCHDOG_SECONDS``
    and kills the tree once the sum passes the limit. Needs nothing from the host, but an
    allocation faster than the sampling can overshoot the limit briefly.
``rlimit-data``
    ``RLIMIT_DATA`` per process (private writable mappings; measured to let CUDA initialise). Only
    on request: a program that maps a large buffer it never touches fails under it.

A cgroup needs root (or a delegated subtree) and, for v2, a parent group whose controllers may be
enabled for children (the kernel refuses that on a non-root group that holds processes itself).
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MemoryMechanism = Literal["cgroup2", "cgroup1", "watchdog", "rlimit-data"]
MemoryChoice = Literal["auto", "cgroup", "cgroup2", "cgroup1", "watchdog", "rlimit-data"]
CGROUP_ROOT = Path("/sys/fs/cgroup")
WATCHDOG_SECONDS = 0.1
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MIB = 2**20
_picked: dict[str, MemoryMechanism] = {}


@dataclass(frozen=True)
class MemoryReport:
    """What the mechanism saw of one run: its peak (MB, None when it cannot tell) and whether it killed."""

    peak_mb: float | None = None
    oom_kills: int = 0


class RunGroup:
    """One run's cgroup: created with the limit, joined by the bootstrap (``procs``), read, then removed."""

    def __init__(self, path: Path, version: Literal[1, 2]) -> None:
        self.path = path
        self.version = version

    @property
    def procs(self) -> str:
        return str(self.path / "cgroup.procs")

    @classmethod
    def create(cls, memory_mb: int, processes: int, version: Literal[1, 2] | None = None) -> RunGroup:
        """A fresh group under this process's own memory cgroup; OSError when the host does not allow one."""
        versions: tuple[Literal[1, 2], ...] = (version,) if version else (2, 1)
        errors = []
        for v in versions:
            parent = _own_group(v)
            if parent is None:
                errors.append(f"no cgroup v{v} memory hierarchy")
                continue
            try:
                return cls._make(parent, v, memory_mb, processes)
            except OSError as exc:
                errors.append(f"cgroup v{v}: {exc.strerror or exc}")
        raise OSError("; ".join(errors))

    @classmethod
    def _make(cls, parent: Path, version: Literal[1, 2], memory_mb: int, processes: int) -> RunGroup:
        path = parent / f"verifyless-{os.getpid()}-{secrets.token_hex(4)}"
        os.mkdir(path)
        group = cls(path, version)
        try:
            limit = str(memory_mb * _MIB)
            if version == 2:
                if not (path / "memory.max").exists():
                    _write(parent / "cgroup.subtree_control", "+memory")
                _write(path / "memory.max", limit)
                _write_if(path / "memory.swap.max", "0")
                _write_if(path / "pids.max", str(processes))
            else:
                _write(path / "memory.limit_in_bytes", limit)
                _write_if(path / "memory.memsw.limit_in_bytes", limit)
                _write_if(path / "memory.swappiness", "0")
        except OSError:
            group.remove()
            raise
        return group

    def report(self) -> MemoryReport:
        """Peak memory of the run and how many of its processes the controller killed."""
        if self.version == 2:
            peak = _read_int(self.path / "memory.peak")
            kills = _read_keyed(self.path / "memory.events").get("oom_kill", 0)
        else:
            peak = _read_int(self.path / "memory.max_usage_in_bytes")
            kills = _read_keyed(self.path / "memory.oom_control").get("oom_kill", 0)
        return MemoryReport(peak_mb=peak / _MIB if peak is not None else None, oom_kills=int(kills))

    def remove(self, attempts: int = 50) -> None:
        """Kill anything left in the group and remove it (retried while the last processes exit)."""
        if self.version == 2:
            _write_if(self.path / "cgroup.kill", "1")
        for _ in range(attempts):
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)


def pick_mechanism(choice: MemoryChoice = "auto") -> MemoryMechanism:
    """The mechanism a run gets for ``choice`` (cached per process); OSError if a named cgroup is unavailable."""
    if choice in ("watchdog", "rlimit-data"):
        return choice
    if choice not in _picked:
        versions: tuple[Literal[1, 2], ...] = (2,) if choice == "cgroup2" else (1,) if choice == "cgroup1" else (2, 1)
        mechanism: MemoryMechanism = "watchdog"
        for version in versions:
            try:
                RunGroup.create(64, 16, version).remove()
            except OSError:
                continue
            mechanism = "cgroup2" if version == 2 else "cgroup1"
            break
        else:
            if choice != "auto":
                raise OSError(f"memory={choice!r}: this host does not let verifyless make a memory cgroup")
        _picked[choice] = mechanism
    return _picked[choice]


def why_mechanism(mechanism: MemoryMechanism) -> str:
    """One line for ``doctor``: what bounds a run's memory and why this one."""
    return {
        "cgroup2": "cgroup v2 memory controller (memory.max per run, swap off)",
        "cgroup1": "cgroup v1 memory controller (memory.limit_in_bytes per run, swap off)",
        "watchdog": "resident-memory watchdog (no memory cgroup available here: needs root and a cgroup "
        f"this process may make children in); samples every {WATCHDOG_SECONDS:g} s",
        "rlimit-data": "RLIMIT_DATA per process (asked for explicitly)",
    }[mechanism]


def tree_rss_mb(root_pid: int) -> float:
    """Resident memory (MB) of ``root_pid`` and every descendant, read from ``/proc``."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2 :].split()
        pid = int(entry)
        parents[pid] = int(fields[1])
        rss[pid] = int(fields[21])
    total, frontier = rss.get(root_pid, 0), [root_pid]
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    while frontier:
        for kid in children.get(frontier.pop(), []):
            total += rss.get(kid, 0)
            frontier.append(kid)
    return total * _PAGE / _MIB


def _own_group(version: Literal[1, 2]) -> Path | None:
    """This process's memory cgroup folder for ``version``, or None where that hierarchy is not mounted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        hid, controllers, rel = line.split(":", 2)
        if version == 2 and hid == "0" and controllers == "":
            base = CGROUP_ROOT if (CGROUP_ROOT / "cgroup.controllers").exists() else CGROUP_ROOT / "unified"
            folder = base / rel.lstrip("/")
            if "memory" in _read_text(folder / "cgroup.controllers").split():
                return folder
        elif version == 1 and "memory" in controllers.split(","):
            folder = CGROUP_ROOT / "memory" / rel.lstrip("/")
            return folder if folder.is_dir() else None
    return None


def _write(path: Path, text: str) -> None:
    with open(path, "w") as fh:
        fh.write(text)


def _write_if(path: Path, text: str) -> None:
    if path.exists():
        try:
            _write(path, text)
        except OSError:
            pass


def _read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _read_int(path: Path) -> int | None:
    text = _read_text(path).strip()
    return int(text) if text.isdigit() else None


def _read_keyed(path: Path) -> dict[str, int]:
    pairs = (line.split() for line in _read_text(path).splitlines())
    return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}


__all__ = ["MemoryMechanism", "MemoryChoice", "MemoryReport", "RunGroup", "pick_mechanism", "tree_rss_mb"]
