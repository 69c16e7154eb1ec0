"""Schema of the run store: versioned DDL, migrations and the checks made on open.

The schema version lives in ``PRAGMA user_version``. ``MIGRATIONS[v]`` upgrades
a database from version ``v - 1`` to ``v``; a fresh file is version 0 and runs
every migration in order, each in its own transaction together with the
``user_version`` bump, so a crash mid-migration leaves the previous version.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from verifyless.errors import StoreError

_V1 = """
CREATE TABLE runs (
    run_id   TEXT PRIMARY KEY,
    task     TEXT NOT NULL,
    created  REAL NOT NULL,
    status   TEXT NOT NULL,
    config   TEXT NOT NULL,          -- json
    seed     INTEGER NOT NULL,
    updated  REAL NOT NULL
);

CREATE TABLE events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id   TEXT NOT NULL REFERENCES runs(run_id),
    ts       REAL NOT NULL,
    kind     TEXT NOT NULL,
    node_id  TEXT,
    payload  TEXT NOT NULL,          -- json
    charge   TEXT                    -- json of a Charge, NULL when nothing was charged
);
CREATE INDEX events_run_kind ON events(run_id, kind);
CREATE INDEX events_run_node ON events(run_id, node_id);

-- The event log is the source of truth: it is never rewritten.
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE is not allowed'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE is not allowed'); END;

CREATE TABLE nodes (
    run_id        TEXT NOT NULL,
    node_id       TEXT NOT NULL,
    parent_id     TEXT,
    operator      TEXT NOT NULL,
    status        TEXT NOT NULL,
    score         REAL,
    fitness       REAL,
    test_score    REAL,
    round         INTEGER NOT NULL,
    island        INTEGER NOT NULL,
    idea          TEXT NOT NULL,
    summary       TEXT NOT NULL,
    program_hash  TEXT NOT NULL,
    reference_ids TEXT NOT NULL,     -- json list
    tags          TEXT NOT NULL,     -- json list
    metrics       TEXT NOT NULL,     -- json object (validation)
    test_metrics  TEXT NOT NULL,     -- json object (hidden test; reports only)
    reason        TEXT NOT NULL,
    verified_seq  INTEGER,           -- seq of the latest finished verification
    created_seq   INTEGER NOT NULL,
    updated_seq   INTEGER NOT NULL,
    PRIMARY KEY (run_id, node_id)
) WITHOUT ROWID;
CREATE INDEX nodes_run_created ON nodes(run_id, created_seq);
CREATE INDEX nodes_run_updated ON nodes(run_id, updated_seq);

CREATE TABLE blobs (
    hash   TEXT PRIMARY KEY,         -- sha256 of the uncompressed bytes
    data   BLOB NOT NULL,
    size   INTEGER NOT NULL,         -- uncompressed size
    codec  TEXT NOT NULL             -- 'raw' or 'zlib'
);

CREATE TABLE ledger (
    seq                INTEGER PRIMARY KEY REFERENCES events(seq),
    run_id             TEXT NOT NULL,
    kind               TEXT NOT NULL,
    node_id            TEXT,
    verifications      INTEGER NOT NULL,
    evaluator_seconds  REAL NOT NULL,
    tokens_in          INTEGER NOT NULL,
    tokens_out         INTEGER NOT NULL,
    cost               REAL NOT NULL,
    pilot_seconds      REAL NOT NULL
);
CREATE INDEX ledger_run ON ledger(run_id);
"""


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    """Execute a multi-statement script inside the caller's transaction.

    ``Connection.executescript`` commits first, which would split a migration
    from its ``user_version`` bump; so statements are split with
    ``sqlite3.complete_statement`` and executed one by one.
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            buffer = ""
            if statement:
                conn.execute(statement)
    if buffer.strip() and not buffer.strip().startswith("--"):
        raise StoreError(f"internal error: incomplete statement in schema script: {buffer.strip()[:80]}")


_V2 = """
-- The latest snapshot of each run's derived engine state (a cache: the events stay the record).
CREATE TABLE snapshots (
    run_id   TEXT PRIMARY KEY REFERENCES runs(run_id),
    upto_seq INTEGER NOT NULL,
    created  REAL NOT NULL,
    header   TEXT NOT NULL,
    data     BLOB NOT NULL
);
"""

_V3 = """
-- Who pays for a run now: one live process at a time (store/lease.py). A row is state, not a fact: it is
-- replaced when a gone holder's run is taken and deleted when its holder lets go.
CREATE TABLE leases (
    run_id   TEXT PRIMARY KEY REFERENCES runs(run_id),
    pid      INTEGER NOT NULL,
    host     TEXT NOT NULL,
    started  TEXT NOT NULL,          -- the holder's process start time ('' where unknown)
    since    REAL NOT NULL,
    token    TEXT NOT NULL
);
"""

MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: lambda conn: _run_script(conn, _V1),
    2: lambda conn: _run_script(conn, _V2),
    3: lambda conn: _run_script(conn, _V3),
}
SCHEMA_VERSION = max(MIGRATIONS)


def inspect_store(conn: sqlite3.Connection, path: Path) -> tuple[int, set[str]]:
    """The store schema version and the table names of ``conn`` (read-only; the writer's and the reader's check).

    Raises StoreError for a file that SQLite cannot read (not SQLite, or corrupt) and for a store written by a
    newer verifyless.
    """
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as exc:
        unwritable = read_only_reason(path)
        if unwritable and ("readonly" in str(exc) or "unable to open" in str(exc)):
            raise StoreError(
                f"run store {path} is read-only here ({unwritable}), and this command writes to it (SQLite says: "
                f"{exc}): make the file and its folder writable, or copy the store to a place you can write and "
                "pass --store (runs, show, report and export read it where it is)"
            ) from exc
        raise StoreError(
            f"{path} is not a readable verifyless run store (SQLite says: {exc}). "
            "If it is another file, choose a different store path; if it is a damaged store, "
            f"move it aside and try `sqlite3 {path} .recover | sqlite3 recovered.db`."
        ) from exc
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} has store schema version {version}, but this verifyless understands versions up to "
            f"{SCHEMA_VERSION}. It was written by a newer verifyless: upgrade verifyless "
            "(pip install -U verifyless) or open a different store."
        )
    return version, tables


def read_only_reason(path: Path) -> str:
    """Why this process cannot write the store at ``path`` and create files beside it (its ``-wal`` and ``-shm``);
    '' when it can. ``os.access`` answers for the real user and counts a read-only mount (EROFS) as not writable.
    SQLite fails to open a WAL store whose -wal/-shm it cannot make with a message that reads like damage."""
    path = Path(path)
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is not writable"
    folder = path.resolve().parent
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"its folder {folder} is not writable"
    return ""


def prepare(conn: sqlite3.Connection, path: Path) -> None:
    """Check that ``conn`` is a verifyless store we can use and migrate it to ``SCHEMA_VERSION``.

    Raises StoreError for a file that is not SQLite (or is corrupt), an SQLite
    database that belongs to something else, and a store written by a newer
    verifyless. ``conn`` must be in autocommit mode (``isolation_level=None``).
    """
    version, tables = inspect_store(conn, path)
    if version == 0 and tables - {"sqlite_sequence"}:
        raise StoreError(
            f"{path} is an SQLite database but not a verifyless run store (it has tables "
            f"{sorted(tables)[:5]} and no store schema version). Choose a different store path."
        )
    for target in range(version + 1, SCHEMA_VERSION + 1):
        try:
            conn.execute("BEGIN IMMEDIATE")
            # Re-read inside the write lock: another process may have migrated meanwhile.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current >= target:
                conn.execute("COMMIT")
                continue
            MIGRATIONS[target](conn)
            conn.execute(f"PRAGMA user_version = {int(target)}")
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StoreError(
                f"could not migrate {path} to store schema version {target} (SQLite says: {exc}). "
                "Check that the file and its folder are writable and the disk is not full."
            ) from exc
