"""The product's command line from a bench: ``cli(*args, env=...)`` runs ``verifyless ARGS`` in a subprocess and
stops the bench with the command's last stderr when it fails. Benches import it by name (``bench/`` is first on
``sys.path`` when one runs as ``python bench/<name>.py``)."""

from __future__ import annotations

import subprocess
import sys


def cli(*args: str, env: dict[str, str]) -> None:
    out = subprocess.run([sys.executable, "-m", "verifyless", *args], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise SystemExit(f"verifyless {' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}")
