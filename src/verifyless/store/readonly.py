"""A read-only view of a run store, for the report, the dashboard and the reading commands.

``open_readonly(path)`` opens the SQLite file with the URI flag ``mode=ro``:
no migration, no write, no journal-mode change. Every read method of
``RunStore`` (``runs``, ``run``, ``resolve_run``, ``events``, ``node_rows``,
``budget``, ``llm_usage``, ``get_text``, ...) works on it; any write raises
``StoreError`` (SQLite refuses it). A run that is being written by another
process is read safely: WAL readers see each committed transaction whole and
never block the writer.

Read-only media: a WAL-mode store needs its ``-shm`` file beside it, even to
read. When the store file or its folder cannot be written (a read-only mount,
an archive, a folder of another user) and SQLite cannot open it with
``mode=ro``, the store is opened with ``immutable=1``: SQLite then reads the
main file only, takes no locks and keeps no shared memory. Caveat: immutable
assumes nobody writes the file meanwhile (a concurrent writer gives wrong
reads), and a ``-wal`` file left beside the store (a copy made while a run
was writing, or a writer that died) is not read: its last commits are missing
until someone who can write opens the store once. ``ReadOnlyStore.notice``
says, in one line, when the store could not be written and how it was opened
(``None`` when it is writable); the CLI prints it on stderr.

Limits: the file must exist; a store written by a newer verifyless (higher
``user_version``) is refused with a clear message, as ``RunStore`` does.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from verifyless.errors import StoreError
from verifyless.store.schema import inspect_store, read_only_reason
from verifyless.store.sqlite import RunStore


class ReadOnlyStore(RunStore):
    """``RunStore``'s read API over a connection that SQLite opened read-only (immutable on read-only media)."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 5.0) -> None:  # noqa: D107 - see class docstring
        self.path = Path(path)
        self.compress_min = 512
        self._lock = threading.RLock()
        self._known_runs: set[str] = set()
        self._node_cache = {}
        self._held = {}  # a reader holds no lease
        self.notice: str | None = None
        if not self.path.is_file():
            raise StoreError(f"no run store at {self.path}: start a run with `verifyless run TASK`, or pass --store")
        conn = self._connect(busy_timeout)
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

    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        """``mode=ro``; where this process cannot write the store and SQLite cannot open it so, ``immutable=1``."""
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        writable = store_writable(self.path)
        try:
            conn = _probe(uri, busy_timeout)
        except sqlite3.OperationalError as exc:  # cannot open (no -shm possible) or cannot read
            if writable:
                raise StoreError(f"cannot open the run store {self.path} read-only (SQLite says: {exc})") from exc
        except sqlite3.DatabaseError:  # not SQLite, or damaged: inspect_store says so and how to recover
            return sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        else:
            if not writable:
                self.notice = f"note: the run store {self.path} cannot be written here: opened read-only"
            return conn
        try:
            conn = _probe(f"{uri}&immutable=1", busy_timeout)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the run store {self.path} read-only (SQLite says: {exc})") from exc
        wal = Path(f"{self.path}-wal")
        unread = f"; {wal.name} beside it is not read" if wal.is_file() and wal.stat().st_size else ""
        self.notice = (
            f"note: the run store {self.path} cannot be written here (read-only media or folder): opened "
            f"immutable, which assumes nobody writes it meanwhile{unread}"
        )
        return conn


def _probe(uri: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection to ``uri`` once a first read worked (SQLite opens files lazily); raises ``sqlite3.Error``."""
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def store_writable(path: Path) -> bool:
    """Whether this process may write ``path`` and create files beside it (``store.schema.read_only_reason``)."""
    return not read_only_reason(path)


def open_readonly(path: str | Path) -> ReadOnlyStore:
    """Open ``path`` read-only (see module docstring)."""
    return ReadOnlyStore(path)


__all__ = ["ReadOnlyStore", "open_readonly", "store_writable"]
