"""Workspaces left by a killed verifier are removed at the next start; a live run's are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time

MAKE_AND_DIE = (
    "import os, signal, sys\n"
    "from verifyless.verify import _new_workspace\n"
    "from pathlib import Path\n"
    "ws = _new_workspace(Path(sys.argv[1]))\n"
    "print(ws, flush=True)\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)
MAKE_AND_WAIT = (
    "import sys, time\n"
    "from verifyless.verify import _new_workspace\n"
    "from pathlib import Path\n"
    "ws = _new_workspace(Path(sys.argv[1]))\n"
    "print(ws, flush=True)\n"
    "time.sleep(120)\n"
)


def test_a_killed_runs_workspaces_are_swept_and_a_live_runs_kept(tmp_path):
    base = tmp_path / "tmp"
    base.mkdir()
    live = subprocess.Popen([sys.executable, "-c", MAKE_AND_WAIT, str(base)], stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout is not None
        live_ws = base / os.path.basename(live.stdout.readline().strip())
        dead = subprocess.run([sys.executable, "-c", MAKE_AND_DIE, str(base)], capture_output=True, text=True)
        assert dead.returncode == -9
        dead_ws = base / os.path.basename(dead.stdout.strip())
        (dead_ws / "leftover.txt").write_text("from the killed run")
        legacy = base / "verifyless-ws-abcd1234"
        legacy.mkdir()
        old = time.time() - 7200
        os.utime(legacy, (old, old))
        assert dead_ws.is_dir() and live_ws.is_dir()
        env = {**os.environ, "TMPDIR": str(base)}
        verified = subprocess.run(
            [sys.executable, "-m", "verifyless", "verify", "diabetes"], capture_output=True, text=True, env=env
        )
        assert verified.returncode == 0, verified.stderr
        assert not dead_ws.exists() and not legacy.exists()
        assert live_ws.is_dir(), "a live process's workspace was removed"
        assert sorted(p.name for p in base.glob("verifyless-ws-*")) == [live_ws.name]
    finally:
        live.kill()
        live.wait()
