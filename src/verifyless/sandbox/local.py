"""``LocalSandbox``: run untrusted candidate code as a contained local process.

Isolation levels (picked once per instance by probing, best first; see
docs/design/sandbox.md for exactly which host paths each one shows):

``namespace`` (running as root)
    new pid + mount + network namespaces; the candidate runs as a throwaway
    unprivileged uid in an *allowlisted root*: a fresh tmpfs holding only the
    interpreter, its environment's site-packages, system libraries, a few
    ``/etc`` entries, minimal ``/dev``, its own ``/proc``, an empty ``/tmp``
    and the workspace (``verifyless.sandbox.view``); everything else of the
    host is absent; the workspace is the only writable place; no network.
``userns`` (unprivileged, user namespaces enabled)
    the same namespaces and root inside a user namespace; the candidate keeps
    the invoking user's uid (only one uid can be mapped) but no capabilities.
``process`` (fallback)
    own session, rlimits, scrubbed environment, and a subreaper that kills
    leftovers; no filesystem hiding, no network isolation.

All levels: wall-clock timeout killing the whole process tree, a bound on the
run's resident host memory (a memory cgroup per run, or a watchdog:
``verifyless.sandbox.memory``; never ``RLIMIT_AS``, which breaks CUDA), rlimits
(CPU, processes, file size, open files, no core dumps), an environment built
from an allowlist (the parent's secrets never leak), and stdout/stderr
captured to files with a size cap. A run whose ``Limits.gpus`` is above 0 sees
the GPU devices and the driver's libraries (``verifyless.sandbox.gpu``) and
reports its peak GPU memory; a CPU run sees no GPU (``CUDA_VISIBLE_DEVICES`` is
empty). The bootstrap that does the
privileged part is ``verifyless/sandbox/_boot.py`` (standard library only).
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from verifyless.errors import SandboxUnavailable
from verifyless.sandbox.base import ExecResult, ExecStatus
from verifyless.sandbox.gpu import (
    gpu_indices,
    gpu_memory_used,
    host_driver_libraries,
    loader_environment,
    parse_visible,
)
from verifyless.sandbox.memory import (
    WATCHDOG_SECONDS,
    MemoryChoice,
    MemoryMechanism,
    MemoryReport,
    RunGroup,
    pick_mechanism,
    tree_rss_mb,
)
from verifyless.sandbox.view import root_view
from verifyless.task.base import Limits

Isolation = Literal["namespace", "userns", "process"]
log = logging.getLogger(__name__)
GPU_SAMPLE_SECONDS = 0.5

BOOT = Path(__file__).with_name("_boot.py")
TAIL_BYTES = 4096
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)
# Sandbox uids are drawn per run from this range (unused by ordinary
# accounts), so RLIMIT_NPROC counts only that run's processes and two
# concurrent runs cannot touch each other's files.
UID_BASE, UID_SPAN = 1_500_000, 1_000_000
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_DISK_MARKERS = ("File too large", "No space left on device", "Disk quota exceeded")
_DESCRIPTIONS = {
    "namespace": "pid+mount+network namespaces, throwaway unprivileged uid, allowlisted read-only root "
    "(interpreter, site-packages, system libraries) plus the writable workspace, rlimits, "
    "scrubbed environment",
    "userns": "user+pid+mount+network namespaces (candidate keeps the invoking uid, no capabilities), "
    "allowlisted read-only root plus the writable workspace, rlimits, scrubbed environment",
    "process": "own session + subreaper, rlimits, scrubbed environment; NO filesystem hiding and "
    "NO network isolation (namespaces unavailable)",
}
_probe_cache: dict[Isolation, bool] = {}
_trial_cache: dict[str, bool] = {}


class LocalSandbox:
    """Runs a command in a fresh workspace with the strongest isolation this host allows.

    ``isolation="auto"`` probes ``namespace`` (root only), then ``userns``,
    then falls back to ``process``; naming a level forces it and raises
    ``SandboxUnavailable`` if the host cannot provide it. ``expose`` adds
    read-only directories to the allowlisted root (the interpreter's prefixes,
    site-packages and system libraries are always there; ``hide`` paths
    inside them are masked). ``uid`` pins the sandbox uid (default: a random
    one per run). ``memory`` picks how ``Limits.memory_mb`` is enforced
    (``auto``: a memory cgroup where this host allows one, else the watchdog;
    see ``verifyless.sandbox.memory``).
    """

    name = "local"

    def __init__(
        self,
        *,
        isolation: Literal["auto", "namespace", "userns", "process"] = "auto",
        uid: int | None = None,
        expose: Sequence[Path] = (),
        hash_seed: str = "0",
        poll_seconds: float = 0.02,
        kill_grace_seconds: float = 2.0,
        memory: MemoryChoice = "auto",
    ) -> None:
        self._requested = isolation
        self._mode: Isolation | None = None
        self._memory_choice = memory
        self._memory: MemoryMechanism | None = None
        self._uid = uid
        self._expose = tuple(str(Path(p).resolve()) for p in expose)
        self._hash_seed = hash_seed
        self._poll = poll_seconds
        self._grace = kill_grace_seconds

    # ----------------------------------------------------------- public

    @property
    def isolation(self) -> Isolation:
        """The isolation level in use (probed on first access)."""
        if self._mode is None:
            self._mode = self._pick_mode()
        return self._mode

    @property
    def memory_mechanism(self) -> MemoryMechanism:
        """How ``Limits.memory_mb`` is enforced here (probed on first access)."""
        if self._memory is None:
            try:
                self._memory = pick_mechanism(self._memory_choice)
            except OSError as exc:
                raise SandboxUnavailable(f"{exc}; use memory='auto' (falls back to the watchdog)") from None
        return self._memory

    @property
    def network_isolated(self) -> bool:
        return self.isolation != "process"

    def describe(self) -> str:
        return f"LocalSandbox[{self.isolation}]: {_DESCRIPTIONS[self.isolation]}"

    def run(
        self,
        argv: Sequence[str],
        workdir: Path,
        limits: Limits,
        *,
        env: Mapping[str, str] | None = None,
        hide: Sequence[Path] = (),
        expose: Sequence[Path] = (),
    ) -> ExecResult:
        """Run ``argv`` in ``workdir``; every candidate misbehaviour comes back as a status.

        ``expose`` adds read-only directories for this run only (an OpenEvolve task's folder).
        A run with ``limits.gpus > 0`` uses the GPUs that ``env["CUDA_VISIBLE_DEVICES"]`` names
        (host numbering; unset: every GPU this process sees) and reports their peak memory.
        """
        started = time.monotonic()
        if not argv:
            raise SandboxUnavailable("LocalSandbox.run needs a non-empty argv")
        workdir = Path(workdir).resolve()
        if not workdir.is_dir():
            raise SandboxUnavailable(f"workspace {workdir} does not exist; create it before calling run()")
        mode = self.isolation
        uid = self._pick_uid() if mode == "namespace" else None
        (workdir / "tmp").mkdir(exist_ok=True)
        if uid is not None:
            _chown_tree(workdir, uid, uid)
        environment = self._environment(workdir, limits, env)
        drivers = host_driver_libraries() if limits.gpus > 0 else None
        if drivers is not None and "LD_LIBRARY_PATH" not in (env or {}):
            environment.update(loader_environment(drivers))
        memory, group = _run_group(self.memory_mechanism, limits)
        spec = {
            "mode": mode,
            "argv": [str(a) for a in argv],
            "env": environment,
            "workdir": str(workdir),
            "uid": uid,
            "gid": uid,
            "rlimits": self._rlimits(limits, uid, memory),
            "cgroup_procs": group.procs if group is not None else None,
            **root_view(
                workdir,
                uid=uid,
                expose=[*self._expose, *(str(Path(p).resolve()) for p in expose)],
                hide=[str(p) for p in hide],
                gpu=drivers,
            ).to_spec(),
            "shm_mb": max(1, min(limits.memory_mb // 4, 512)),
            "parent_pid": os.getpid(),
        }
        gauge = _Gauge(limits, memory, _gpus_of(environment, limits))
        try:
            with tempfile.TemporaryDirectory(prefix="verifyless-ctl-") as ctl:  # root-only: the capture files
                out_path, err_path = Path(ctl, "stdout"), Path(ctl, "stderr")
                proc, status_r = self._launch(spec, out_path, err_path)
                launched = time.monotonic()
                try:
                    stop = self._watch(proc, limits, workdir, out_path, err_path, launched, gauge)
                    if stop is not None:
                        self._kill(proc)
                    report = _read_report(status_r)
                finally:
                    os.close(status_r)
                    if proc.poll() is None:
                        self._kill(proc)
                stdout_tail, stderr_tail = _tail(out_path), _tail(err_path)
        finally:
            held = group.report() if group is not None else MemoryReport()
            if group is not None:
                group.remove()

        if uid is not None:
            _chown_tree(workdir, os.getuid(), os.getgid())  # hand results back to the trusted side
        if report.get("error"):
            raise SandboxUnavailable(
                f"LocalSandbox ({mode}) could not isolate the run: {report['error']}. "
                "Run as root, enable unprivileged user namespaces, or use LocalSandbox(isolation='process')."
            )
        if stop is None and not report:
            raise SandboxUnavailable(
                f"the sandbox supervisor exited (code {proc.returncode}) without reporting the candidate's status; "
                f"its stderr ends with: {stderr_tail[-500:]!r}"
            )
        status, reason = _classify(stop, report, stderr_tail, limits, held, gauge.peak_rss_mb)
        if status == "ok" and _tree_size(workdir) > limits.workspace_mb * 2**20:
            status, reason = "disk-limit", f"the workspace holds more than {limits.workspace_mb} MB after the run"
        if status == "ok" and mode == "process":
            reason = "ran without filesystem or network isolation (process mode)"

        total = time.monotonic() - started
        wall = report["end"] - report["start"] if "end" in report else time.monotonic() - launched
        return ExecResult(
            status=status,
            reason=reason,
            returncode=report.get("exit", -report["signal"] if "signal" in report else None),
            wall_seconds=wall,
            peak_memory_mb=max(held.peak_mb or 0.0, gauge.peak_rss_mb, report.get("maxrss_kb", 0) / 1024),
            stdout_tail=stdout_tail,
            stderr_tail=stderr_tail,
            overhead_seconds=max(0.0, total - wall),
            network_isolated=mode != "process",
            peak_gpu_memory_mb=gauge.peak_gpu_mb,
            memory_limit=memory,
        )

    # ----------------------------------------------------------- steps of run()

    def _launch(self, spec: dict, out_path: Path, err_path: Path) -> tuple[subprocess.Popen, int]:
        status_r, status_w = os.pipe()
        spec = {**spec, "status_fd": status_w}
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", str(BOOT)],
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    pass_fds=(status_w,),
                    start_new_session=True,
                    cwd="/",
                    env={"LANG": "C.UTF-8"},
                )
            _send_spec(proc, spec)
        except OSError as exc:
            os.close(status_r)
            raise SandboxUnavailable(f"cannot start the sandbox bootstrap {BOOT}: {exc}") from exc
        finally:
            os.close(status_w)
        return proc, status_r

    def _watch(
        self,
        proc: subprocess.Popen,
        limits: Limits,
        workdir: Path,
        out_path: Path,
        err_path: Path,
        launched: float,
        gauge: _Gauge,
    ) -> ExecStatus | None:
        """Wait for the run; return why it must be stopped (timeout, output, disk or memory cap) or None."""
        deadline = launched + limits.wall_seconds
        poller = select.poll()
        pidfd = os.pidfd_open(proc.pid)
        poller.register(pidfd, select.POLLIN)  # wakes the moment the run ends
        next_disk_check = launched + 0.25
        try:
            while proc.poll() is None:
                now = time.monotonic()
                if now >= deadline:
                    return "timeout"
                if max(out_path.stat().st_size, err_path.stat().st_size) > limits.output_bytes:
                    return "output-limit"
                if now >= next_disk_check:
                    if _tree_size(workdir) > limits.workspace_mb * 2**20:
                        return "disk-limit"
                    next_disk_check = now + 0.5
                if gauge.sample(proc.pid, now - launched):
                    return "oom"
                poller.poll(1000 * min(self._poll, deadline - now))
            # A flood can hit RLIMIT_FSIZE on the capture file between two polls.
            if max(out_path.stat().st_size, err_path.stat().st_size) > limits.output_bytes:
                return "output-limit"
            return None
        finally:
            os.close(pidfd)

    def _kill(self, proc: subprocess.Popen) -> None:
        """SIGTERM the bootstrap (it SIGKILLs PID 1 / the candidate tree), then SIGKILL its group."""
        try:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=self._grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    # ----------------------------------------------------------- helpers

    def _environment(self, workdir: Path, limits: Limits, extra: Mapping[str, str] | None) -> dict[str, str]:
        """Allowlisted variables only: nothing else from the parent (API keys stay out)."""
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", DEFAULT_PATH)])
        env = {
            "PATH": path,
            "LANG": os.environ.get("LANG", "C.UTF-8"),
            "HOME": str(workdir),
            "TMPDIR": str(workdir / "tmp"),
            "PYTHONHASHSEED": self._hash_seed,
        }
        env.update({name: str(limits.threads) for name in THREAD_VARS})
        if limits.gpus == 0:
            env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU task uses no GPU, whatever the isolation level
        env.update({str(k): str(v) for k, v in (extra or {}).items()})
        return env

    def _rlimits(self, limits: Limits, uid: int | None, memory: MemoryMechanism) -> dict[str, tuple[int, int]]:
        cpu = math.ceil(limits.cpu_seconds if limits.cpu_seconds is not None else 2 * limits.wall_seconds)
        nproc = limits.processes
        if uid is None:
            # RLIMIT_NPROC counts every process of the uid; without a private
            # uid, allow the processes the user already has.
            nproc += _processes_of(os.getuid())
        mib = 2**20
        data = {"RLIMIT_DATA": (limits.memory_mb * mib, limits.memory_mb * mib)} if memory == "rlimit-data" else {}
        return {
            **data,
            "RLIMIT_CPU": (cpu, cpu + 1),  # SIGXCPU first, SIGKILL a second later
            "RLIMIT_NPROC": (nproc, nproc),
            "RLIMIT_FSIZE": (limits.file_size_mb * mib, limits.file_size_mb * mib),
            "RLIMIT_NOFILE": (limits.open_files, limits.open_files),
            "RLIMIT_CORE": (0, 0),
        }

    def _pick_uid(self) -> int:
        return self._uid if self._uid is not None else UID_BASE + secrets.randbelow(UID_SPAN)

    def _pick_mode(self) -> Isolation:
        wanted: tuple[Isolation, ...]
        if self._requested != "auto":
            wanted = (self._requested,)
        else:
            wanted = ("namespace", "userns", "process") if os.geteuid() == 0 else ("userns", "process")
        for mode in wanted:
            if mode == "process" or (_probe(mode) and (self._requested != "auto" or _trial(mode))):
                return mode
        raise SandboxUnavailable(
            f"isolation={self._requested!r} is not available on this host "
            "(namespace needs root; userns needs unprivileged user namespaces). Use isolation='auto'."
        )


# ------------------------------------------------------------------ module helpers


def _probe(mode: Isolation) -> bool:
    """Can the bootstrap create this mode's namespaces and mount /proc? (cached per process)"""
    if mode not in _probe_cache:
        if mode == "namespace" and os.geteuid() != 0:
            _probe_cache[mode] = False
            return False
        status_r, status_w = os.pipe()
        spec = {"mode": mode, "probe": True, "status_fd": status_w, "parent_pid": os.getpid()}
        try:
            done = subprocess.run(
                [sys.executable, "-I", "-S", str(BOOT)],
                input=json.dumps(spec).encode(),
                pass_fds=(status_w,),
                capture_output=True,
                timeout=20,
                cwd="/",
                env={},
            )
            _probe_cache[mode] = done.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _probe_cache[mode] = False
        finally:
            os.close(status_r)
            os.close(status_w)
    return _probe_cache[mode]


def _run_group(memory: MemoryMechanism, limits: Limits) -> tuple[MemoryMechanism, RunGroup | None]:
    """The mechanism for one run and, under a cgroup mechanism, the run's fresh group.

    A group that cannot be made now (the cgroup filesystem changed since the probe) falls back to
    the watchdog for this run, with a warning: the run is still bounded.
    """
    if memory not in ("cgroup1", "cgroup2"):
        return memory, None
    try:
        return memory, RunGroup.create(limits.memory_mb, limits.processes, 2 if memory == "cgroup2" else 1)
    except OSError as exc:
        log.warning("cannot make this run's memory cgroup (%s); bounding its memory with the watchdog", exc)
        return "watchdog", None


def _trial(mode: Isolation) -> bool:
    """Does a whole run at this level work here? (cached per process)

    The namespace probe only shows that namespaces can be made; building the allowlisted root can
    still fail on a host (a ``userns`` mount of the new root's ``/usr`` refused with "Invalid
    argument", as root on a GPU machine). ``auto`` offers a level only after one real run of the
    interpreter through it.
    """
    key = f"{mode}:trial"
    if key not in _trial_cache:
        ws = Path(tempfile.mkdtemp(prefix="verifyless-trial-"))
        try:
            result = LocalSandbox(isolation=mode).run([sys.executable, "-c", "pass"], ws, Limits(wall_seconds=30))
            _trial_cache[key] = result.status == "ok"
            if result.status != "ok":
                log.info("isolation %s skipped: a trial run ended %s (%s)", mode, result.status, result.reason)
        except SandboxUnavailable as exc:
            log.info("isolation %s skipped: %s", mode, exc)
            _trial_cache[key] = False
        finally:
            shutil.rmtree(ws, ignore_errors=True)
    return _trial_cache[key]


def _send_spec(proc: subprocess.Popen, spec: dict) -> None:
    """Write the spec to the bootstrap's stdin and close it (a bootstrap that died early is seen later)."""
    assert proc.stdin is not None
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass


def _classify(
    stop: ExecStatus | None, report: dict, stderr_tail: str, limits: Limits, held: MemoryReport, watched_mb: float
) -> tuple[ExecStatus, str]:
    """Map how the run ended to a status and a one-line reason."""
    if stop == "oom":
        return "oom", (
            f"its processes held {watched_mb:.0f} MB, over the memory limit of {limits.memory_mb} MB "
            "(stopped by the memory watchdog)"
        )
    if held.oom_kills:
        return "oom", (
            f"exceeded the memory limit of {limits.memory_mb} MB "
            "(the kernel's memory controller killed it; raise limits.memory_mb if it needs more)"
        )
    if stop == "timeout":
        return "timeout", f"exceeded the wall-clock limit of {limits.wall_seconds:g}s"
    if stop == "output-limit":
        return "output-limit", f"wrote more than {limits.output_bytes} bytes to stdout or stderr"
    if stop == "disk-limit":
        return "disk-limit", f"the workspace grew past {limits.workspace_mb} MB"
    last_line = next((ln.strip() for ln in reversed(stderr_tail.splitlines()) if ln.strip()), "")
    if "signal" in report:
        sig = report["signal"]
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        if sig == signal.SIGXCPU:
            return "timeout", "exceeded the CPU-time limit"
        if sig == signal.SIGXFSZ:
            return "disk-limit", f"wrote a file larger than {limits.file_size_mb} MB"
        if sig == signal.SIGKILL:
            return "oom", "killed by SIGKILL (the kernel's out-of-memory killer or the CPU hard limit)"
        if any(m in stderr_tail for m in _MEMORY_MARKERS):
            return "oom", f"killed by {name} after running out of memory ({limits.memory_mb} MB)"
        return "failed", f"killed by {name}" + (f": {last_line}" if last_line else "")
    code = report.get("exit", 0)
    if code == 0:
        return "ok", ""
    if any(m in last_line for m in _MEMORY_MARKERS) or last_line.startswith("MemoryError"):
        return "oom", f"ran out of memory (limit {limits.memory_mb} MB): {last_line}"
    if any(m in stderr_tail for m in _DISK_MARKERS):
        return "disk-limit", f"hit the file-size or disk limit: {last_line}"
    return "failed", last_line or f"exited with code {code}"


class _Gauge:
    """Samples a live run: resident memory of its process tree (the watchdog) and its GPUs' memory.

    ``sample`` returns True when the watchdog must stop the run. GPU memory is read every
    ``GPU_SAMPLE_SECONDS`` through ``nvidia-smi``; the run's peak is the largest rise over the
    memory in use before it started, summed over its GPUs (a verification holds its GPUs alone).
    """

    def __init__(self, limits: Limits, memory: MemoryMechanism, gpus: list[int]) -> None:
        self._limit_mb = limits.memory_mb if memory == "watchdog" else None
        self._gpus = gpus
        self._gpu_base = gpu_memory_used(gpus) if gpus else None
        self._next_rss = self._next_gpu = 0.0
        self.peak_rss_mb = 0.0
        self.peak_gpu_mb: float | None = 0.0 if self._gpu_base is not None else None

    def sample(self, pid: int, elapsed: float) -> bool:
        if self._limit_mb is not None and elapsed >= self._next_rss:
            self._next_rss = elapsed + WATCHDOG_SECONDS
            self.peak_rss_mb = max(self.peak_rss_mb, tree_rss_mb(pid))
            if self.peak_rss_mb > self._limit_mb:
                return True
        if self._gpu_base is not None and elapsed >= self._next_gpu:
            self._next_gpu = elapsed + GPU_SAMPLE_SECONDS
            used = gpu_memory_used(self._gpus) or {}
            rise = sum(max(0.0, used.get(i, 0.0) - self._gpu_base.get(i, 0.0)) for i in self._gpus)
            self.peak_gpu_mb = max(self.peak_gpu_mb or 0.0, rise)
        return False


def _gpus_of(env: Mapping[str, str], limits: Limits) -> list[int]:
    """Host indices of the GPUs a run uses: ``CUDA_VISIBLE_DEVICES`` when set, else every GPU (none for a CPU run)."""
    if limits.gpus == 0:
        return []
    named = env.get("CUDA_VISIBLE_DEVICES")
    if named is None:
        return gpu_indices()
    return parse_visible(named)


def _read_report(fd: int) -> dict:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    text = b"".join(chunks).decode("utf-8", "replace").strip()
    try:
        return json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {"error": f"unreadable status report {text[:200]!r}"}


def _tail(path: Path) -> str:
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - TAIL_BYTES))
        return fh.read().decode("utf-8", "ignore")


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    os.chown(root, uid, gid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)


def _tree_size(root: Path, max_entries: int = 200_000) -> int:
    """Apparent bytes under ``root`` (links not followed); huge file counts count as huge."""
    total, entries = 0, 0
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            entries += 1
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
        if entries > max_entries:
            return 2**62
    return total


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


__all__ = ["LocalSandbox", "Isolation"]
