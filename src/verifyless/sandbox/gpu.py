"""What a sandboxed candidate needs to use this host's NVIDIA GPUs, and how to read their memory.

A CUDA program needs three things from the host: the device nodes (``/dev/nvidia*``, and
``/dev/nvidia-caps/*`` for MIG), the kernel driver's ``/proc/driver/nvidia`` (a fresh procfs shows
it), and the driver's **user-space libraries** (``libcuda.so.1``, ``libnvidia-ml.so.1``,
``libnvidia-ptxjitcompiler.so.1``, ``libnvidia-nvvm.so.*`` and the rest of the driver's set). The
libraries are where hosts differ: ``/usr/lib/x86_64-linux-gnu`` on a plain install, under
``/usr/local/cuda*/compat`` for forward compatibility, or a folder a container runtime or the boot
mounted (``/usr/local/nvidia/lib64``, often its own read-only mount, with ``/lib/libcuda.so.1`` a
symlink into it). ``driver_libraries()`` finds them the way the dynamic loader would (its cache, its
configuration files, the folders in ``LD_LIBRARY_PATH``), following each symlink to its real file,
so the view can show exactly those files and nothing else of their folders.

``gpu_memory_used()`` reads per-GPU memory in use through ``nvidia-smi`` (absent: ``None``), which
the sandbox samples while a GPU run is alive: one verification holds its GPUs alone, so the rise
over the value before the run is that run's peak GPU memory.

Standard library only, nothing imported from CUDA: this runs on the trusted side of every host.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

DEVICE_GLOBS = ("/dev/nvidia*", "/dev/nvidia-caps/*")
# File names of the driver's user-space set (not the CUDA toolkit's libcudart/libcublas, which wheels ship).
DRIVER_LIBRARY = re.compile(r"^lib(cuda|cudadebugger|nvidia-[a-z0-9-]+|nvcuvid|nvoptix)\.so(\.[0-9.]+)?$")
LD_CONF = "/etc/ld.so.conf"
# Places the driver lives on hosts whose loader configuration does not name them.
KNOWN_DRIVER_DIRS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib")
KNOWN_DRIVER_GLOBS = ("/usr/local/cuda*/compat",)


def gpu_devices(globs: Sequence[str] = DEVICE_GLOBS) -> list[str]:
    """The NVIDIA character devices of this host (``/dev/nvidia0``, ``nvidiactl``, ``nvidia-uvm``, MIG caps)."""
    found = []
    for pattern in globs:
        for path in glob.glob(pattern):
            try:
                if stat.S_ISCHR(os.stat(path).st_mode):
                    found.append(path)
            except OSError:
                continue
    return sorted(found)


def gpu_indices(devices: Iterable[str] | None = None) -> list[int]:
    """The GPU indices this host shows (``/dev/nvidiaN``), narrowed by ``CUDA_VISIBLE_DEVICES`` when it is set."""
    names = devices if devices is not None else gpu_devices()
    indices = sorted(int(m.group(1)) for d in names if (m := re.fullmatch(r"/dev/nvidia(\d+)", d)))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return indices
    wanted = parse_visible(visible)
    return [i for i in wanted if i in indices] if indices else wanted


def parse_visible(text: str) -> list[int]:
    """The indices a ``CUDA_VISIBLE_DEVICES`` value names (UUIDs and other entries are not indices: left out)."""
    return [int(v) for v in text.split(",") if v.strip().isdigit()]


@dataclass(frozen=True)
class DriverLibraries:
    """The driver's libraries: ``files`` (real paths to show read-only), ``links`` (symlink path -> target
    on the way to them, recreated inside only where their folder is shown anyway) and ``dirs`` (the
    folders the candidate's loader path names: those holding the real files)."""

    files: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    dirs: tuple[str, ...] = ()

    @property
    def found(self) -> bool:
        return any(os.path.basename(f).startswith("libcuda.so") for f in self.files)


def loader_dirs(
    ld_library_path: str | None = None, conf: str = LD_CONF, known: Sequence[str] = KNOWN_DRIVER_DIRS
) -> list[str]:
    """Folders the dynamic loader searches besides its cache: ``LD_LIBRARY_PATH``, then ``ld.so.conf`` (with
    its ``include`` globs), then the well-known driver folders. Missing folders are left out."""
    path = os.environ.get("LD_LIBRARY_PATH", "") if ld_library_path is None else ld_library_path
    dirs = [d for d in path.split(":") if d]
    dirs += _conf_dirs(conf, seen=set())
    dirs += list(known)
    for pattern in KNOWN_DRIVER_GLOBS:
        dirs += sorted(glob.glob(pattern))
    unique: list[str] = []
    for d in dirs:
        if os.path.isabs(d) and os.path.isdir(d) and d not in unique:
            unique.append(d)
    return unique


def _conf_dirs(conf: str, seen: set[str]) -> list[str]:
    if conf in seen or not os.path.isfile(conf):
        return []
    seen.add(conf)
    dirs: list[str] = []
    try:
        lines = open(conf, encoding="utf-8", errors="replace").read().splitlines()
    except OSError:
        return []
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if line.startswith("include"):
            pattern = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            pattern = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(conf), pattern)
            for included in sorted(glob.glob(pattern)):
                dirs += _conf_dirs(included, seen)
        elif line:
            dirs.append(line)
    return dirs


def loader_cache_paths(text: str | None = None) -> list[str]:
    """Library paths the loader cache names for the driver's files (parsed from ``ldconfig -p``)."""
    if text is None:
        text = _ldconfig_print()
    paths = []
    for line in text.splitlines():
        name, _, path = line.strip().partition(" => ")
        if path and DRIVER_LIBRARY.match(name.split(" ", 1)[0]):
            paths.append(path.strip())
    return paths


def _ldconfig_print() -> str:
    tool = shutil.which("ldconfig") or next(
        (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None
    )
    if tool is None:
        return ""
    try:
        return subprocess.run([tool, "-p"], capture_output=True, text=True, timeout=10, env={"LC_ALL": "C"}).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def driver_libraries(cache_paths: Sequence[str] | None = None, dirs: Sequence[str] | None = None) -> DriverLibraries:
    """Find the driver's libraries (defaults: the loader cache and ``loader_dirs()``); see the module docstring."""
    candidates = list(loader_cache_paths() if cache_paths is None else cache_paths)
    for folder in loader_dirs() if dirs is None else dirs:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        candidates += [os.path.join(folder, n) for n in names if DRIVER_LIBRARY.match(n)]
    files: list[str] = []
    links: dict[str, str] = {}
    for path in candidates:
        real = _follow(path, links)
        if real is not None and os.path.isfile(real) and real not in files:
            files.append(real)
    folders = sorted({os.path.dirname(f) for f in files})
    return DriverLibraries(files=tuple(sorted(files)), links=tuple(sorted(links.items())), dirs=tuple(folders))


def _follow(path: str, links: dict[str, str], hops: int = 0) -> str | None:
    """Follow ``path`` (symlinks in the last component, and in its folders) to a real file, recording each link."""
    if hops > 32 or not os.path.lexists(path):
        return None
    folder = os.path.realpath(os.path.dirname(path))
    here = os.path.join(folder, os.path.basename(path))
    if os.path.islink(here):
        target = os.readlink(here)
        links[here] = target
        return _follow(target if os.path.isabs(target) else os.path.join(folder, target), links, hops + 1)
    return here


@lru_cache(maxsize=1)
def host_driver_libraries() -> DriverLibraries:
    """``driver_libraries()`` of this host, found once per process (only when a run is given GPUs)."""
    return driver_libraries()


def gpu_memory_used(indices: Sequence[int], run=subprocess.run) -> dict[int, float] | None:
    """MB of memory in use on each of ``indices`` (host numbering), or None without ``nvidia-smi``."""
    tool = shutil.which("nvidia-smi")
    if tool is None or not indices:
        return None
    try:
        out = run(
            [tool, "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    used = parse_memory_used(out)
    return {i: used[i] for i in indices if i in used} or None


def parse_memory_used(text: str) -> dict[int, float]:
    """``nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits`` lines -> {index: MB}."""
    used = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            try:
                used[int(parts[0])] = float(parts[1])
            except ValueError:
                continue
    return used


def loader_environment(libraries: DriverLibraries) -> Mapping[str, str]:
    """The candidate's loader path: the driver's folders only, never the host's whole ``LD_LIBRARY_PATH``."""
    return {"LD_LIBRARY_PATH": ":".join(libraries.dirs)} if libraries.dirs else {}


__all__ = [
    "DriverLibraries",
    "driver_libraries",
    "host_driver_libraries",
    "loader_dirs",
    "loader_cache_paths",
    "gpu_devices",
    "gpu_indices",
    "parse_visible",
    "gpu_memory_used",
    "parse_memory_used",
    "loader_environment",
]
