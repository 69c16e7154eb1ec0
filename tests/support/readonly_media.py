"""Stores a test cannot write, made without another user (so nothing depends on where the clone lives).

Both helpers return a command prefix (like ``setpriv ...``) for a subprocess, or ``None`` and the reason:

* ``read_only_prefix(folder)`` runs the command where ``folder`` is a real read-only mount (``EROFS`` on any
  write, for root too): ``unshare --map-root-user --mount`` and a read-only bind mount of the folder onto itself.
* ``unprivileged_prefix()`` runs the command without root's power to ignore mode bits, so that ``chmod``
  protects a file: ``[]`` for a non-root caller; for root, ``unshare --user`` mapped to a non-zero id.

Both use a user namespace, needing no root, and keep the caller's own files (the interpreter, the clone)
readable: another user (``setpriv --reuid``) cannot import a package that sits in a private folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

_UNPRIVILEGED = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
_REMOUNT = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'


def read_only_prefix(folder: Path) -> tuple[list[str] | None, str]:
    """``(prefix, "")`` when ``folder`` can be made a read-only mount for one command, else ``(None, reason)``."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None, "no unshare/mount on this machine: cannot make a read-only mount"
    prefix = ["unshare", "--map-root-user", "--mount", "sh", "-c", _REMOUNT, str(folder)]
    return _unwritable(prefix, folder, "a read-only mount")


def unprivileged_prefix(folder: Path) -> tuple[list[str] | None, str]:
    """``([], "")`` for a non-root caller; for root, a prefix under which ``chmod`` keeps ``folder`` unwritable."""
    if os.geteuid() != 0:
        return [], ""
    if shutil.which("unshare") is None:
        return None, "root ignores mode bits and there is no unshare to drop that: no chmod case here"
    return _unwritable(_UNPRIVILEGED, folder, "a process without root's override of mode bits")


def _unwritable(prefix: list[str], folder: Path, what: str) -> tuple[list[str] | None, str]:
    """``prefix`` when a command run under it cannot create a file in ``folder``, else ``None`` and why."""
    probe = folder / ".probe"
    try:
        out = subprocess.run(
            [*prefix, "sh", "-c", f'! touch "{probe}" 2>/dev/null'], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"unshare failed ({exc}): no {what} here"
    if probe.exists():
        probe.unlink()
    if out.returncode != 0:
        why = out.stderr.strip().splitlines()[-1:] or ["the folder stayed writable"]
        return None, f"user namespaces are not allowed here ({why[0]}): no {what}"
    return prefix, ""
