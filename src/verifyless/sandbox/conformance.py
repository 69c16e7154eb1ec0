"""Conformance suite: behaviour every ``Sandbox`` backend must show.

Each ``Check`` runs one small Python program through the sandbox in a fresh
workdir and raises ``AssertionError`` with an explanation when the backend
misbehaves. Checks are independent and take about a second at most on an
idle machine (the timeout checks use a 1 s wall clock; the others allow 20 s
so that a loaded machine cannot turn a memory or disk check into a timeout).

From pytest::

    @pytest.mark.parametrize("check", checks(), ids=str)
    def test_conformance(check, tmp_path):
        check(MySandbox(), tmp_path)

or ``run_conformance(MySandbox, scratch_dir)`` for a ``{name: error or None}`` table.
Backends that cannot hide paths or cut the network pass
``hides_paths=False`` / ``isolates_network=False`` and must say so in their docs.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import tempfile
import time
import unittest
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from verifyless.sandbox.base import ExecResult, Sandbox
from verifyless.sandbox.doctor import host_torch_cuda
from verifyless.sandbox.gpu import gpu_devices
from verifyless.task.base import Limits

# Generous: the checks that expect another limit to fire (memory, output, disk) must not time out first
# when a busy machine slows start-up; a passing check returns long before this.
WALL = 20.0
LIMITS = Limits(wall_seconds=WALL, memory_mb=1024, output_bytes=200_000, file_size_mb=8, workspace_mb=64)


@dataclass(frozen=True)
class Check:
    """One named contract check: ``check(sandbox, scratch_dir)``."""

    name: str
    run: Callable[[Sandbox, Path], None]

    def __call__(self, sandbox: Sandbox, scratch: Path) -> None:
        workdir = scratch / f"ws-{self.name}"
        workdir.mkdir(parents=True, exist_ok=True)
        self.run(sandbox, workdir)

    def __str__(self) -> str:
        return self.name


def _py(sandbox: Sandbox, workdir: Path, code: str, limits: Limits = LIMITS, **kw) -> ExecResult:
    return sandbox.run([sys.executable, "-c", code], workdir, limits, **kw)


def _expect(result: ExecResult, status: str, what: str) -> None:
    assert result.status == status, (
        f"{what}: expected status {status!r}, got {result.status!r} ({result.reason!r}); "
        f"stderr tail: {result.stderr_tail[-500:]!r}"
    )


# ------------------------------------------------------------------ basic behaviour


def check_ok_output(sb: Sandbox, ws: Path) -> None:
    r = _py(sb, ws, "print('hello from the sandbox')")
    _expect(r, "ok", "a trivial program")
    assert r.returncode == 0 and "hello from the sandbox" in r.stdout_tail, r
    assert r.wall_seconds > 0 and r.overhead_seconds >= 0


def check_exit_code(sb: Sandbox, ws: Path) -> None:
    r = _py(sb, ws, "import sys; print('boom: bad input', file=sys.stderr); sys.exit(3)")
    _expect(r, "failed", "exit code 3")
    assert r.returncode == 3, f"returncode {r.returncode} != 3"
    assert "boom: bad input" in r.reason, f"reason should be the last stderr line, got {r.reason!r}"


def check_missing_executable(sb: Sandbox, ws: Path) -> None:
    r = sb.run(["/nonexistent/definitely-not-a-program"], ws, LIMITS)
    _expect(r, "failed", "a missing executable (a candidate failure, not an exception)")


def check_workspace_writable(sb: Sandbox, ws: Path) -> None:
    r = _py(sb, ws, "import os; os.makedirs('out', exist_ok=True); open('out/result.txt','w').write('42')")
    _expect(r, "ok", "writing inside the workspace")
    assert (ws / "out" / "result.txt").read_text() == "42"


def check_environment_allowlist(sb: Sandbox, ws: Path) -> None:
    planted = "VERIFYLESS_CONFORMANCE_SECRET"
    os.environ[planted] = "sk-conformance-must-not-leak"
    try:
        r = _py(sb, ws, "import os, json; print(json.dumps(dict(os.environ)))", env={"EXTRA_SETTING": "yes"})
    finally:
        del os.environ[planted]
    _expect(r, "ok", "printing the environment")
    env = json.loads(r.stdout_tail.strip().splitlines()[-1])
    assert planted not in env and "sk-conformance" not in r.stdout_tail, "a parent variable leaked"
    assert env.get("EXTRA_SETTING") == "yes", "the explicit env argument was not applied"
    assert Path(env["HOME"]).resolve() == ws.resolve(), f"HOME should be the workspace, got {env.get('HOME')}"
    assert env.get("OMP_NUM_THREADS") == str(LIMITS.threads), "thread variables must follow limits.threads"
    assert Path(env["TMPDIR"]).resolve().is_relative_to(ws.resolve()), "TMPDIR must be inside the workspace"


def check_stdin_closed(sb: Sandbox, ws: Path) -> None:
    r = _py(sb, ws, "input()")
    _expect(r, "failed", "reading stdin (must see EOF, not hang)")


def check_peak_memory(sb: Sandbox, ws: Path) -> None:
    r = _py(sb, ws, "b = bytearray(80 * 2**20); b[::4096] = b'x' * len(b[::4096])")
    _expect(r, "ok", "allocating 80 MB")
    assert r.peak_memory_mb >= 60, f"peak memory {r.peak_memory_mb:.1f} MB should reflect the 80 MB buffer"


# ------------------------------------------------------------------ limits


def check_timeout_sleep(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=1.0, memory_mb=1024)
    t0 = time.monotonic()
    r = _py(sb, ws, "import time; time.sleep(60)", limits)
    _expect(r, "timeout", "sleeping past the wall clock")
    assert time.monotonic() - t0 < 4.0, "the timeout took too long to enforce"


def check_timeout_busy(sb: Sandbox, ws: Path) -> None:
    r = _py(sb, ws, "while True: pass", Limits(wall_seconds=1.0, memory_mb=1024))
    _expect(r, "timeout", "an infinite loop")


def check_background_process_killed(sb: Sandbox, ws: Path) -> None:
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        while True:\n"
        "            with open('heartbeat', 'a') as fh: fh.write('x')\n"
        "            time.sleep(0.02)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
    )
    r = _py(sb, ws, code)
    _expect(r, "ok", "a program leaving a daemon behind")
    beat = ws / "heartbeat"
    assert beat.exists(), "the daemon never ran (check is void)"
    size = beat.stat().st_size
    time.sleep(0.3)
    assert beat.stat().st_size == size, "a double-forked setsid daemon outlived the run"


def check_output_cap(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=WALL, memory_mb=1024, output_bytes=20_000)
    r = _py(sb, ws, "while True: print('spam' * 100)", limits)
    _expect(r, "output-limit", "flooding stdout")


def check_memory_bomb(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=WALL, memory_mb=300)
    r = _py(sb, ws, "chunks = []\nwhile True: chunks.append(bytearray(50 * 2**20))", limits)
    _expect(r, "oom", "allocating without bound under a 300 MB limit")


def check_file_size_limit(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=WALL, memory_mb=1024, file_size_mb=2)
    r = _py(sb, ws, "f = open('big.bin', 'wb')\nwhile True: f.write(b'0' * 2**20)", limits)
    _expect(r, "disk-limit", "writing a file past the file-size limit")


def check_workspace_limit(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=WALL, memory_mb=1024, file_size_mb=4, workspace_mb=10)
    code = "for i in range(6): open(f'part{i}.bin', 'wb').write(b'0' * 3 * 2**20)"
    r = _py(sb, ws, code, limits)
    _expect(r, "disk-limit", "filling the workspace past workspace_mb with many small files")


# ------------------------------------------------------------------ isolation claims


def check_hidden_path(sb: Sandbox, ws: Path) -> None:
    secret_dir = ws.parent / f"{ws.name}-hidden"
    secret_dir.mkdir(exist_ok=True)
    (secret_dir / "labels.csv").write_text("id,label\n1,SECRET-LABEL\n")
    code = (
        f"p = {str(secret_dir / 'labels.csv')!r}\n"
        "try:\n    print(open(p).read())\nexcept OSError as e:\n    print('denied', e)\n"
    )
    r = _py(sb, ws, code, hide=[secret_dir])
    _expect(r, "ok", "reading a hidden path")
    assert "SECRET-LABEL" not in r.stdout_tail, "a hidden file was readable from inside"


def _checkout() -> Path | None:
    """The project checkout this verifyless runs from, if any (an editable or source run)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").is_file():
        return None
    prefixes = {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    return None if any(root.is_relative_to(p) for p in prefixes) else root


def _plant(parent: Path, marker: str) -> tuple[Path, Path]:
    """A world-readable secret file in a fresh world-listable directory under ``parent``."""
    folder = Path(tempfile.mkdtemp(prefix=".verifyless-conformance-", dir=parent))
    folder.chmod(0o755)
    secret = folder / f"{marker}.txt"
    secret.write_text(f"{marker}\n")
    secret.chmod(0o644)
    return folder, secret


_PROBE = """
import json, os, sys
paths = json.loads(sys.argv[1])
seen = []
def look(p):
    try:
        seen.append(p + ' -> ' + (open(p).read() if os.path.isfile(p) else repr(os.listdir(p))))
    except OSError:
        pass
for p in paths:
    look(p)
    for pid in (e for e in os.listdir('/proc') if e.isdigit()):
        for link in ('root', 'cwd'):
            look('/proc/' + pid + '/' + link + p)
print('SEEN', len(seen), json.dumps(seen[:3]))
"""


def _assert_unreachable(sb: Sandbox, ws: Path, paths: list[Path], marker: str, what: str) -> None:
    r = sb.run([sys.executable, "-c", _PROBE, json.dumps([str(p) for p in paths])], ws, LIMITS)
    _expect(r, "ok", f"probing {what}")
    assert "SEEN 0 []" in r.stdout_tail and marker not in r.stdout_tail, (
        f"{what} is visible from inside: {r.stdout_tail[-400:]!r}"
    )


def _places() -> list[Path]:
    """Writable places outside /tmp to plant in: /var/tmp and the project checkout (else the home directory)."""
    places = [Path("/var/tmp"), _checkout() or Path.home()]
    return [p for p in places if p.is_dir() and os.access(p, os.W_OK)]


def check_secret_outside_tmp(sb: Sandbox, ws: Path) -> None:
    """World-readable secrets under /var/tmp and the project checkout can be neither listed nor read."""
    marker = f"CONFORMANCE-SECRET-{os.getpid()}-{time.monotonic_ns()}"
    planted = [_plant(parent, marker) for parent in _places()]
    assert planted, "no writable /var/tmp or checkout to plant a secret in (check is void)"
    try:
        paths = [p for folder, secret in planted for p in (folder, secret)]
        _assert_unreachable(sb, ws, paths, marker, "a world-readable secret outside /tmp")
    finally:
        for folder, _ in planted:
            shutil.rmtree(folder, ignore_errors=True)


def check_other_stores_and_tasks_absent(sb: Sandbox, ws: Path) -> None:
    """Another run store and another task folder (not passed in ``hide``) are absent, also via /proc/*/root."""
    marker = f"CONFORMANCE-LABEL-{os.getpid()}-{time.monotonic_ns()}"
    holders = [ws.parent / f"{ws.name}-elsewhere"] + [
        Path(tempfile.mkdtemp(prefix=".verifyless-conformance-", dir=p)) for p in _places()
    ]
    paths = []
    try:
        for other in holders:
            store, task = other / "runs", other / "task"
            (task / "hidden").mkdir(parents=True, exist_ok=True)
            store.mkdir(exist_ok=True)
            (store / "run.sqlite").write_text(marker)
            (task / "task.yaml").write_text("name: other\n")
            (task / "hidden" / "labels.csv").write_text(f"id,label\n0,{marker}\n")
            for path in (other, store, task, task / "hidden"):
                path.chmod(0o755)
            paths += [store, store / "run.sqlite", task, task / "hidden" / "labels.csv"]
        _assert_unreachable(sb, ws, paths, marker, "another run store or task folder")
    finally:
        for other in holders[1:]:
            shutil.rmtree(other, ignore_errors=True)


_WALK = """
import os, sys
skip = {os.path.realpath(p) for p in sys.argv[2:]}
hits = []
for root, dirs, files in os.walk('/'):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip and os.path.join(root, d) != '/proc']
    hits += [os.path.join(root, n) for n in dirs + files if n.startswith(sys.argv[1])]
for pid in (e for e in os.listdir('/proc') if e.isdigit()):
    for root, dirs, files in os.walk('/proc/' + pid + '/root'):
        dirs[:] = [d for d in dirs if os.path.join(root, d)[len('/proc/' + pid + '/root'):] not in skip | {'/proc'}]
        hits += [os.path.join(root, n) for n in dirs + files if n.startswith(sys.argv[1])]
print('HITS', hits)
"""


def check_walk_finds_no_labels(sb: Sandbox, ws: Path) -> None:
    """Walking ``/`` (and each ``/proc/PID/root``) finds no planted labels file.

    The interpreter's prefixes and ``/usr`` are skipped to keep the check near a
    second: they are host directories the candidate may see, and nothing is
    planted there.
    """
    name = f"labels-conformance-{os.getpid()}-{time.monotonic_ns()}"
    task = ws.parent / f"{ws.name}-walk" / "hidden"
    task.mkdir(parents=True, exist_ok=True)
    (task / f"{name}.csv").write_text("id,label\n0,1\n")
    holders = [Path(tempfile.mkdtemp(prefix=".verifyless-conformance-", dir=p)) for p in _places()]
    try:
        for holder in holders:
            holder.chmod(0o755)
            (holder / f"{name}.csv").write_text("id,label\n0,1\n")
        skip = ["/usr", sys.prefix, sys.base_prefix]
        r = sb.run([sys.executable, "-c", _WALK, name, *skip], ws, LIMITS)
    finally:
        for holder in holders:
            shutil.rmtree(holder, ignore_errors=True)
    _expect(r, "ok", "walking the filesystem")
    assert "HITS []" in r.stdout_tail, f"the walk found planted labels: {r.stdout_tail[-400:]}"


def check_no_network(sb: Sandbox, ws: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi'); print('CONNECTED')\n"
        "except OSError as e:\n    print('blocked', e)\n"
    )
    try:
        r = _py(sb, ws, code)
        server.setblocking(False)  # a completed handshake would be waiting in the backlog
        try:
            server.accept()[0].close()
            reached = True
        except BlockingIOError:
            reached = False
    finally:
        server.close()
    _expect(r, "ok", "connecting to a loopback server")
    assert "CONNECTED" not in r.stdout_tail and not reached, "the candidate reached the host network"
    assert "blocked" in r.stdout_tail, f"the connection neither succeeded nor failed: {r.stdout_tail[-400:]!r}"
    assert r.network_isolated, "a sandbox that blocks the network must report network_isolated=True"


def check_address_space_is_not_memory(sb: Sandbox, ws: Path) -> None:
    code = (
        "import mmap\n"
        "m = mmap.mmap(-1, 64 * 2**30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x4000)  # MAP_NORESERVE\n"
        "print('mapped')\n"
    )
    r = _py(sb, ws, code, Limits(wall_seconds=WALL, memory_mb=300))
    _expect(r, "ok", "mapping 64 GB of address space it never touches (CUDA and JAX reserve this way)")


def check_gpu(sb: Sandbox, ws: Path) -> None:
    """Where a CUDA device and a CUDA build of torch are present: a GPU run trains on the GPU inside the sandbox.

    Raises ``unittest.SkipTest`` (a skip under pytest and in ``run_conformance``) elsewhere.
    """
    if not any(d[len("/dev/nvidia") :].isdigit() for d in gpu_devices()) or not host_torch_cuda():
        raise unittest.SkipTest("no CUDA device here (no /dev/nvidiaN, or torch is a CPU build)")
    code = (
        "import torch\n"
        "assert torch.cuda.is_available(), 'CUDA is not available inside the sandbox'\n"
        "x = torch.randn(1024, 1024, device='cuda')\n"
        "print('device', torch.cuda.get_device_name(0), float((x @ x).abs().mean()))\n"
    )
    r = _py(sb, ws, code, Limits(wall_seconds=120, memory_mb=8192, gpus=1, processes=256))
    _expect(r, "ok", "a CUDA matrix product with one GPU and an 8 GB memory limit")
    assert "device" in r.stdout_tail, "the GPU run printed no device"


BASIC = (
    check_ok_output,
    check_exit_code,
    check_missing_executable,
    check_workspace_writable,
    check_environment_allowlist,
    check_stdin_closed,
    check_peak_memory,
    check_timeout_sleep,
    check_timeout_busy,
    check_background_process_killed,
    check_output_cap,
    check_memory_bomb,
    check_address_space_is_not_memory,
    check_file_size_limit,
    check_workspace_limit,
)


def checks(*, hides_paths: bool = True, isolates_network: bool = True) -> list[Check]:
    """The checks a backend with these claims must pass."""
    fns = list(BASIC)
    if hides_paths:
        fns += [
            check_hidden_path,
            check_secret_outside_tmp,
            check_other_stores_and_tasks_absent,
            check_walk_finds_no_labels,
        ]
    if isolates_network:
        fns.append(check_no_network)
    fns.append(check_gpu)
    return [Check(fn.__name__.removeprefix("check_"), fn) for fn in fns]


def run_conformance(factory: Callable[[], Sandbox], scratch: Path, **claims: bool) -> dict[str, str | None]:
    """Run every applicable check; ``{check name: None if passed, "skipped: why", or the failure text}``."""
    results: dict[str, str | None] = {}
    for check in checks(**claims):
        try:
            check(factory(), Path(scratch))
            results[check.name] = None
        except unittest.SkipTest as exc:
            results[check.name] = f"skipped: {exc}"
        except AssertionError as exc:
            results[check.name] = str(exc) or "assertion failed"
    return results


__all__ = ["Check", "LIMITS", "checks", "run_conformance"]
