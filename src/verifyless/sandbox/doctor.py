"""Say what the sandbox gives a candidate here, and prove a GPU works inside it.

``sandbox_report(sandbox)`` gathers, without running anything untrusted: the isolation level and
why, what the candidate sees, how its memory is bounded, this host's GPUs and the driver's
libraries. ``probe_gpu(sandbox, limits)`` runs a few-second CUDA program *inside* the sandbox
(device nodes, ``libcuda.so.1``, torch's CUDA build, a matrix product) and returns the device
name, or the first missing piece in one line. ``require_gpu`` is the pre-flight of a task that
declares GPUs: it raises ``SandboxUnavailable`` with that line, so a GPU task never trains on the
CPU unnoticed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from verifyless.errors import SandboxUnavailable
from verifyless.sandbox.gpu import DriverLibraries, gpu_devices, gpu_indices, host_driver_libraries
from verifyless.sandbox.local import LocalSandbox
from verifyless.sandbox.memory import why_mechanism
from verifyless.task.base import Limits

PROBE_LIMITS = Limits(wall_seconds=90.0, memory_mb=8192, gpus=1, processes=256)
# Runs inside the sandbox; prints one ``probe:`` line: ``device=NAME`` or ``missing=WHAT``.
PROBE_PROGRAM = r"""
import glob, os, sys
def out(key, text):
    print(f"probe: {key}={text}", flush=True)
    sys.exit(0 if key == "device" else 3)
if not glob.glob("/dev/nvidia[0-9]*") or not os.path.exists("/dev/nvidiactl"):
    out("missing", "no /dev/nvidiaN or /dev/nvidiactl device inside the sandbox")
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
except OSError as exc:
    out("missing", f"the driver library libcuda.so.1 cannot be loaded inside the sandbox ({exc})")
try:
    import torch
except ImportError as exc:
    out("missing", f"torch is not importable inside the sandbox ({exc})")
except MemoryError:
    out("missing", "importing torch ran out of memory (raise limits.memory_mb)")
if torch.version.cuda is None:
    out("missing", f"torch {torch.__version__} is a CPU build: install a CUDA build of torch")
if not torch.cuda.is_available():
    try:
        torch.cuda.init()
        reason = "no CUDA device"
    except Exception as exc:
        reason = str(exc).splitlines()[0]
    out("missing", f"torch.cuda.is_available() is False: {reason}")
x = torch.randn(2048, 2048, device="cuda")
value = float((x @ x).float().abs().mean())
torch.cuda.synchronize()
out("device", f"{torch.cuda.get_device_name(0)} (torch {torch.__version__}, CUDA {torch.version.cuda}, check {value:.1f})")
"""


@dataclass(frozen=True)
class GpuProbe:
    """Outcome of ``probe_gpu``: ``ok`` with ``device``, else ``missing`` says what is absent."""

    ok: bool
    device: str = ""
    missing: str = ""
    seconds: float = 0.0
    peak_gpu_memory_mb: float | None = None
    peak_memory_mb: float = 0.0


@dataclass(frozen=True)
class SandboxReport:
    """What ``verifyless doctor`` prints (``lines()``)."""

    isolation: str
    isolation_why: str
    description: str
    memory: str
    memory_why: str
    gpu_devices: tuple[str, ...]
    gpus: tuple[int, ...]
    driver: DriverLibraries
    host_torch_cuda: str | None
    probe: GpuProbe | None = None

    def lines(self) -> list[str]:
        out = [
            f"isolation:  {self.isolation} ({self.isolation_why})",
            f"candidate:  {self.description}",
            f"memory:     {self.memory}: {self.memory_why}",
        ]
        if not self.gpu_devices:
            out.append("GPUs:       none on this host (no /dev/nvidia* device)")
            return out
        out.append(f"GPUs:       {len(self.gpus)} visible ({', '.join(map(str, self.gpus)) or 'none'})")
        if self.driver.found:
            out.append(f"driver:     {len(self.driver.files)} libraries shown from {', '.join(self.driver.dirs)}")
        else:
            out.append("driver:     libcuda.so.1 not found through the loader cache, ld.so.conf or LD_LIBRARY_PATH")
        torch_line = f"CUDA {self.host_torch_cuda}" if self.host_torch_cuda else "a CPU build or absent"
        out.append(f"torch:      {torch_line} (as this interpreter would import it)")
        if self.probe is None:
            out.append("probe:      not run")
        elif self.probe.ok:
            gpu_mem = f", {self.probe.peak_gpu_memory_mb:.0f} MB GPU" if self.probe.peak_gpu_memory_mb else ""
            out.append(
                f"probe:      CUDA works inside the sandbox: {self.probe.device} "
                f"({self.probe.seconds:.1f} s, peak {self.probe.peak_memory_mb:.0f} MB host{gpu_mem})"
            )
        else:
            out.append(f"probe:      FAILED: {self.probe.missing}")
        return out


def host_torch_cuda() -> str | None:
    """The CUDA version of the torch this interpreter would import, read from its files (no import)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    version = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        found = re.search(r"^cuda\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", version.read_text(), re.M)
    except OSError:
        return None
    return found.group(1) if found else None


def probe_gpu(sandbox: LocalSandbox, limits: Limits = PROBE_LIMITS, gpus: tuple[int, ...] = ()) -> GpuProbe:
    """Run ``PROBE_PROGRAM`` in ``sandbox`` with one GPU (the first of ``gpus``, default: the first visible)."""
    limits = replace(limits, gpus=max(1, limits.gpus), wall_seconds=max(limits.wall_seconds, 60.0))
    chosen = gpus or tuple(gpu_indices()[:1])
    env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, chosen))} if chosen else {}
    ws = Path(tempfile.mkdtemp(prefix="verifyless-gpu-probe-"))
    started = time.monotonic()
    try:
        result = sandbox.run([sys.executable, "-c", PROBE_PROGRAM], ws, limits, env=env)
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    seconds = time.monotonic() - started
    said = re.search(r"^probe: (device|missing)=(.*)$", result.stdout_tail, re.M)
    if said and said.group(1) == "device" and result.status == "ok":
        return GpuProbe(
            True,
            device=said.group(2),
            seconds=seconds,
            peak_gpu_memory_mb=result.peak_gpu_memory_mb,
            peak_memory_mb=result.peak_memory_mb,
        )
    if said:
        return GpuProbe(False, missing=said.group(2), seconds=seconds)
    last = next((ln for ln in reversed(result.stderr_tail.splitlines()) if ln.strip()), "")
    return GpuProbe(False, missing=f"the probe ended {result.status}: {result.reason or last}", seconds=seconds)


def isolation_why(level: str) -> str:
    if level == "namespace":
        return "running as root: namespaces and a throwaway uid"
    if level == "userns":
        return "unprivileged user namespaces" + (
            " (the root-only level failed its trial run)" if os.geteuid() == 0 else ""
        )
    return "no namespaces available here: the candidate sees the host's files and network"


def sandbox_report(sandbox: LocalSandbox, *, probe: bool = True, limits: Limits = PROBE_LIMITS) -> SandboxReport:
    """Everything ``doctor`` says; the GPU probe runs only where a GPU and a CUDA-capable torch are present."""
    devices = tuple(gpu_devices())
    cuda = host_torch_cuda()
    driver = host_driver_libraries() if devices else DriverLibraries()
    ran = probe_gpu(sandbox, limits) if probe and devices and cuda else None
    return SandboxReport(
        isolation=sandbox.isolation,
        isolation_why=isolation_why(sandbox.isolation),
        description=sandbox.describe().split(": ", 1)[-1],
        memory=sandbox.memory_mechanism,
        memory_why=why_mechanism(sandbox.memory_mechanism),
        gpu_devices=devices,
        gpus=tuple(gpu_indices(devices)),
        driver=driver,
        host_torch_cuda=cuda,
        probe=ran,
    )


def require_gpu(sandbox: LocalSandbox, limits: Limits, task_name: str) -> GpuProbe:
    """Pre-flight of a task with ``limits.gpus > 0``: the probe must succeed under the task's own limits."""
    fix = f"run `verifyless doctor` to see what the sandbox gives, or set limits.gpus: 0 in task {task_name!r}"
    if not gpu_devices():
        raise SandboxUnavailable(
            f"task {task_name!r} declares limits.gpus={limits.gpus} but this machine has no NVIDIA GPU "
            f"(no /dev/nvidia* device); {fix}"
        )
    if len(gpu_indices()) < limits.gpus:
        raise SandboxUnavailable(
            f"task {task_name!r} declares limits.gpus={limits.gpus} but only {len(gpu_indices())} GPU(s) are "
            f"visible (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); {fix}"
        )
    result = probe_gpu(sandbox, limits)
    if not result.ok:
        raise SandboxUnavailable(f"task {task_name!r} needs a GPU but inside the sandbox {result.missing}; {fix}")
    return result


__all__ = ["GpuProbe", "SandboxReport", "probe_gpu", "require_gpu", "sandbox_report", "host_torch_cuda"]
