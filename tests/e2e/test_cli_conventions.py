"""The small conventions users of the peers expect from a command-line tool."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "verifyless", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_version_prints_the_installed_version_and_exits_0():
    out = cli("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"verifyless {version('verifyless')}"


def test_shell_completion_script_is_available():
    # Typer detects the user's shell from the process tree, which a detached test runner may not have;
    # Typer's own test switch makes `--show-completion` take the shell by name instead.
    out = cli("--show-completion", "bash", env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"})
    assert out.returncode == 0, out.stderr
    assert "complete" in out.stdout and "verifyless" in out.stdout
