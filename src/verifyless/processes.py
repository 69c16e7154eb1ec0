"""Is a process still there? One answer for the run lease (``store/lease.py``) and the workspace sweep
(``verify.py``), which both must tell a live owner from one a ``kill -9`` took."""

from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """True when a process ``pid`` runs on this host (another user's included; a zombie counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True
