"""The small conventions users of the peers expect from a command-line tool."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "verifyless", *args], capture_output=True, text=True, timeout=60)


def test_version_prints_the_installed_version_and_exits_0():
    out = cli("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"verifyless {version('verifyless')}"


def test_shell_completion_script_is_available():
    out = cli("--show-completion", "bash")
    assert out.returncode == 0, out.stderr
    assert "complete" in out.stdout and "verifyless" in out.stdout
