"""Conformance suite: behaviour every ``Sandbox`` backend must show.

Each ``Check`` runs one small Python program through the sandbox in a fresh
workdir and raises ``AssertionError`` with an explanation when the backend
misbehaves. Checks are independent and take about a second at most (the
timeout checks use a 1 s wall clock).

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
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from verifyless.sandbox.base import ExecResult, Sandbox
from verifyless.task.base import Limits

LIMITS = Limits(wall_seconds=5.0, memory_mb=1024, output_bytes=200_000, file_size_mb=8, workspace_mb=64)


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
        r = _py(sb, ws, "import os, json; print(json.dumps(dict(os.environ)))",
                env={"EXTRA_SETTING": "yes"})
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
    limits = Limits(wall_seconds=5.0, memory_mb=1024, output_bytes=20_000)
    r = _py(sb, ws, "while True: print('spam' * 100)", limits)
    _expect(r, "output-limit", "flooding stdout")


def check_memory_bomb(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=5.0, memory_mb=300)
    r = _py(sb, ws, "chunks = []\nwhile True: chunks.append(bytearray(50 * 2**20))", limits)
    _expect(r, "oom", "allocating without bound under a 300 MB limit")


def check_file_size_limit(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=5.0, memory_mb=1024, file_size_mb=2)
    r = _py(sb, ws, "f = open('big.bin', 'wb')\nwhile True: f.write(b'0' * 2**20)", limits)
    _expect(r, "disk-limit", "writing a file past the file-size limit")


def check_workspace_limit(sb: Sandbox, ws: Path) -> None:
    limits = Limits(wall_seconds=5.0, memory_mb=1024, file_size_mb=4, workspace_mb=10)
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
    assert r.network_isolated, "a sandbox that blocks the network must report network_isolated=True"


BASIC = (check_ok_output, check_exit_code, check_missing_executable, check_workspace_writable,
         check_environment_allowlist, check_stdin_closed, check_peak_memory, check_timeout_sleep,
         check_timeout_busy, check_background_process_killed, check_output_cap, check_memory_bomb,
         check_file_size_limit, check_workspace_limit)


def checks(*, hides_paths: bool = True, isolates_network: bool = True) -> list[Check]:
    """The checks a backend with these claims must pass."""
    fns = list(BASIC)
    if hides_paths:
        fns.append(check_hidden_path)
    if isolates_network:
        fns.append(check_no_network)
    return [Check(fn.__name__.removeprefix("check_"), fn) for fn in fns]


def run_conformance(factory: Callable[[], Sandbox], scratch: Path, **claims: bool) -> dict[str, str | None]:
    """Run every applicable check; ``{check name: None if passed else the failure text}``."""
    results: dict[str, str | None] = {}
    for check in checks(**claims):
        try:
            check(factory(), Path(scratch))
            results[check.name] = None
        except AssertionError as exc:
            results[check.name] = str(exc) or "assertion failed"
    return results


__all__ = ["Check", "LIMITS", "checks", "run_conformance"]
