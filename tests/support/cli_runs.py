"""The verifyless command line from a test: in a subprocess (``cli``) or in this process (``in_process``)."""

from __future__ import annotations

import os
import subprocess
import sys


def cli(
    *args: str, cwd=None, timeout: int = 240, prefix: list[str] | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """``verifyless ARGS`` in a subprocess; ``env`` adds variables to this process's environment."""
    return subprocess.run(
        [*(prefix or []), sys.executable, "-m", "verifyless", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )


def in_process(monkeypatch, capsys, *args: str) -> subprocess.CompletedProcess:
    """``verifyless ARGS`` through ``main()`` here: its exit status, stdout and stderr (the environment restored)."""
    from verifyless._cli.app import main

    monkeypatch.setattr(sys, "argv", ["verifyless", *args])
    saved = dict(os.environ)
    try:
        main()
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    finally:
        os.environ.clear()
        os.environ.update(saved)
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)
