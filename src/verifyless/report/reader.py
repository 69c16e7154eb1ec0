"""A read-only view of a run store, for the report and the dashboard.

``open_readonly(path)`` opens the SQLite file with the URI flag ``mode=ro``:
no migration, no write, no journal-mode change. Every read method of
``RunStore`` (``runs``, ``run``, ``resolve_run``, ``events``, ``node_rows``,
``budget``, ``llm_usage``, ``get_text``, ...) works on it; any write raises
``StoreError`` (SQLite refuses it). A run that is being written by another
process is read safely: WAL readers see each committed transaction whole and
never block the writer.

Limits: the file must exist; a store written by a newer verifyless (higher
``user_version``) is refused with a clear message, as ``RunStore`` does.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from verifyless.errors import StoreError
from verifyless.store import RunStore
from verifyless.store.schema import inspect_store


class ReadOnlyStore(RunStore):
    """``RunStore``'s read API over a connection that SQLite opened read-only."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 5.0) -> None:  # noqa: D107 - see class docstring
        self.path = Path(path)
        self.compress_min = 512
        self._lock = threading.RLock()
        self._known_runs: set[str] = set()
        self._node_cache = {}
        if not self.path.is_file():
            raise StoreError(f"no run store at {self.path}: start a run with `verifyless run TASK`, or pass --store")
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the run store {self.path} read-only (SQLite says: {exc})") from exc
        try:
            _, tables = inspect_store(conn, self.path)
        except StoreError:
            conn.close()
            raise
        if not {"runs", "events", "nodes", "ledger", "blobs"} <= tables:
            conn.close()
            raise StoreError(f"{self.path} is not a verifyless run store (no runs/events tables); pass another --store")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        self._conn = conn


def open_readonly(path: str | Path) -> ReadOnlyStore:
    """Open ``path`` read-only (see module docstring)."""
    return ReadOnlyStore(path)


__all__ = ["ReadOnlyStore", "open_readonly"]
