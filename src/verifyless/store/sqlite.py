"""``RunStore``: the durable, append-only record of every run (stdlib sqlite3, WAL).

Contract:
- ``append`` returns an event's ``seq`` only after its transaction has
  COMMITted with ``synchronous=FULL``: the event, its effect on the ``nodes``
  view, any blob it carried and its ledger charge are on disk together or not
  at all (see docs/design/store-schema.md for what this does not cover).
- Events are never updated or deleted (SQL triggers abort such statements).
- A run is paid for by one live process at a time: ``holding(run_id)`` takes the run's lease for a block
  (``RunHeld`` when another live process holds it; ``store/lease.py``), and while this store holds it every
  write to the run first checks that the lease is still its own.
- One ``RunStore`` may be shared by the threads of one process: a re-entrant
  lock serialises use of its single connection. Other processes may open the
  same file (WAL readers do not block the writer; writers wait up to
  ``busy_timeout``).
Every SQLite failure surfaces as ``StoreError`` with the SQLite message and a hint.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from verifyless.errors import StoreError
from verifyless.events import (
    EventRecord,
    NodeRecorded,
    RunCreated,
    RunStatusChanged,
    Verified,
    kind_of,
    status_of,
    store_program,
)
from verifyless.node import Candidate, Node, Status, Verification
from verifyless.release import release
from verifyless.store import fold, schema
from verifyless.store.blobs import BlobStore
from verifyless.store.lease import Holder, Leases
from verifyless.store.reads import StoreReads
from verifyless.store.records import Charge, Event, Item

_PAGE = 2000  # events are read in pages so the lock is never held while a caller iterates


class RunStore(StoreReads, BlobStore, Leases):
    """Append-only event log + materialised views for runs, on one SQLite file.

    ``path``: the database file (created with its folder if missing).
    ``busy_timeout``: seconds a writer waits for another process's write lock.
    ``compress_min``: blobs of at least this many bytes are zlib-compressed when that saves space.
    """

    def __init__(self, path: str | Path, *, busy_timeout: float = 30.0, compress_min: int = 512) -> None:
        self.path = Path(path)
        self.compress_min = compress_min
        self._lock = threading.RLock()
        self._known_runs: set[str] = set()
        self._node_cache: dict[str, tuple[int, dict[str, Node]]] = {}  # run_id -> (max updated_seq seen, nodes)
        self._held: dict[str, Holder] = {}  # the runs whose lease this store holds
        conn = _connect(self.path, busy_timeout)
        self._conn: sqlite3.Connection | None = conn

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Let go of every lease this store holds and close the connection; later calls raise StoreError.
        Idempotent."""
        with self._lock:
            self.release_all()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"the run store {self.path} is closed; open a new RunStore")
        return self._conn

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction; COMMIT on success, ROLLBACK (nothing half-written) on any error."""
        with self._lock:
            conn = self._db()
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # the original error is the one worth reporting
                if isinstance(exc, sqlite3.Error):
                    raise self._error(exc) from exc
                raise

    def _read(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db().execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc) from exc

    def _error(self, exc: sqlite3.Error) -> StoreError:
        return store_error(self.path, exc)

    # ------------------------------------------------------------------ runs

    def create_run(
        self,
        task: str,
        config: Mapping[str, Any],
        *,
        run_id: str | None = None,
        seed: int = 0,
        fingerprint: Mapping[str, Any] | None = None,
        task_root: str | None = None,
        task_metric: Mapping[str, Any] | None = None,
    ) -> str:
        """Register a run and write its ``config`` event (the run's first event); returns the run id.

        ``fingerprint`` (``Fingerprint.to_dict()`` of the task, ``verifyless.task.fingerprint``) is kept in that
        event as ``task_fingerprint``, so a resume or a replay can tell whether the task changed since;
        ``task_root`` (the task folder's absolute path) and ``task_metric`` (``{name, direction}``) say where the
        task lives and what its scores are (``task.identity.task_home``).
        """
        run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
        now = time.time()
        config_json = self._dumps(config, "config")
        with self._write() as conn:
            if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                raise StoreError(f"run {run_id!r} already exists in {self.path}; pick another run id")
            conn.execute(
                "INSERT INTO runs (run_id, task, created, status, config, seed, updated) VALUES (?,?,?,?,?,?,?)",
                (run_id, task, now, "created", config_json, int(seed), now),
            )
            head = RunCreated(
                task,
                int(seed),
                dict(config),
                None if fingerprint is None else dict(fingerprint),
                task_root,
                None if task_metric is None else dict(task_metric),
            )
            self._insert(conn, run_id, head, None, None, None)
        self._known_runs.add(run_id)
        return run_id

    def set_status(self, run_id: str, status: str, *, reason: str | None = None) -> int:
        """Set the run's status (e.g. running, finished, failed, interrupted); logged as a ``run_status`` event.

        The event holds the writer's pid and host (a reader then shows a dead writer's ``running`` run as
        ``interrupted``) and ``reason`` when given (why a ``failed`` run stopped, for ``show``).
        """
        record = _status_record(status, reason)
        with self._write() as conn:
            self._writable(conn, run_id)
            seq = self._insert(conn, run_id, record, None, None, None)
            conn.execute("UPDATE runs SET status = ?, updated = ? WHERE run_id = ?", (str(status), time.time(), run_id))
        return seq

    def _require_run(self, conn: sqlite3.Connection, run_id: str) -> None:
        if run_id in self._known_runs:
            return
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            ids = [r[0] for r in conn.execute("SELECT run_id FROM runs")]
            raise self._unknown_run(run_id, ids)
        self._known_runs.add(run_id)

    # ------------------------------------------------------------------ events

    def append(
        self,
        run_id: str,
        record: EventRecord | str,
        payload: Mapping[str, Any] | None = None,
        *,
        node_id: str | None = None,
        charge: Charge | bool | None = None,
    ) -> int:
        """Append one event (and its view update, blob, ledger charge) in one transaction; returns its seq after COMMIT.

        ``record`` is a ``verifyless.events`` record; a raw ``(kind, payload)`` (a kind string and its JSON
        object) is accepted too, for importers and tests that write what older code wrote.
        ``charge=True`` derives the charge from the record for ``verification``
        (1 verification + its seconds), ``llm_call`` (tokens, cost) and ``pilot``
        (``seconds``) events. A ``node`` payload may carry ``program`` text: it
        is stored as a blob and left out of the logged payload.
        """
        with self._write() as conn:
            self._writable(conn, run_id)
            return self._insert(conn, run_id, record, payload, node_id, charge)

    def append_many(self, run_id: str, items: Iterable[Item | tuple]) -> list[int]:
        """Append several events in ONE transaction (all or none); returns their seqs in order."""
        with self._write() as conn:
            self._writable(conn, run_id)
            return [self._insert(conn, run_id, *(it if isinstance(it, Item) else Item(*it))) for it in items]

    def add_candidate(self, run_id: str, candidate: Candidate, *, status: Status | str | None = None) -> int:
        """Log a ``node`` event for ``candidate`` (program stored as a blob); returns seq."""
        try:
            stated = None if status is None else status_of(status)
        except ValueError as exc:
            raise StoreError(f"node event for {candidate.id!r}: {exc}") from None
        return self.append(run_id, NodeRecorded(candidate, status=stated), node_id=candidate.id)

    def add_verification(
        self, run_id: str, node_id: str, verification: Verification, fitness: float | None, *, charge: bool = True
    ) -> int:
        """Log a finished verification with its oriented ``fitness``; charges 1 verification + seconds by default."""
        return self.append(run_id, Verified(verification, fitness), node_id=node_id, charge=charge)

    def events(
        self,
        run_id: str,
        *types: type[EventRecord],
        kinds: Iterable[str] | None = None,
        after: int = 0,
        node_id: str | None = None,
    ) -> Iterator[Event[Any]]:
        """Committed events of a run with ``seq > after`` in seq order, optionally of the record classes ``types``
        (each event's ``record`` is then one of them) and of one node. ``kinds`` filters by kind string instead,
        for tools that read raw kinds (tests, exports). ``RunStoreProtocol.events`` states the typed overloads."""
        parsers = {t.KIND: t for t in types}
        if types:
            kinds = list(parsers)
        kinds = [kinds] if isinstance(kinds, str) else (list(kinds) if kinds is not None else None)
        where = "run_id = ? AND seq > ?"
        extra: list[Any] = []
        if kinds is not None:
            if not kinds:
                return
            where += f" AND kind IN ({','.join('?' * len(kinds))})"
            extra += kinds
        if node_id is not None:
            where += " AND node_id = ?"
            extra.append(node_id)
        last = after
        while True:
            rows = self._read(
                f"SELECT seq, run_id, ts, kind, node_id, payload, charge FROM events WHERE {where} "
                f"ORDER BY seq LIMIT {_PAGE}",
                (run_id, last, *extra),
            )
            for seq, rid, ts, kind, nid, payload, charge in rows:
                yield Event(
                    seq,
                    rid,
                    ts,
                    kind,
                    nid,
                    json.loads(payload),
                    Charge.from_dict(json.loads(charge)) if charge else None,
                    parsers.get(kind),
                )
            if len(rows) < _PAGE:
                return
            last = rows[-1][0]

    def _insert(
        self,
        conn: sqlite3.Connection,
        run_id: str,
        record: EventRecord | str,
        payload: Mapping[str, Any] | None,
        node_id: str | None,
        charge: Charge | bool | None,
    ) -> int:
        if isinstance(record, EventRecord):
            kind, payload = kind_of(record), record.payload()
        else:
            kind = record
        if not isinstance(kind, str) or not kind:
            raise StoreError(f"event kind must be a non-empty string, got {kind!r}")
        if payload is not None and hasattr(payload, "to_dict"):
            payload = payload.to_dict()
        payload = dict(payload or {})
        if kind == NodeRecorded.KIND:
            node_id = store_program(payload, node_id, lambda program: self._put_blob(conn, program))
        elif kind in fold.VIEW_KINDS and not node_id:
            raise StoreError(f"a {kind!r} event needs node_id=...")
        text = self._dumps(payload, f"{kind} payload")
        decoded = json.loads(text)  # the view folds exactly what the log holds
        derive = charge is True and kind in fold.CHARGED_KINDS
        parsed = fold.parsed(kind, decoded, node_id) if kind in fold.VIEW_KINDS or derive else None
        cost = fold.resolve_charge(kind, parsed, charge)
        seq = conn.execute(
            "INSERT INTO events (run_id, ts, kind, node_id, payload, charge) VALUES (?,?,?,?,?,?)",
            (run_id, time.time(), kind, node_id, text, fold.dumps(cost.to_dict()) if cost else None),
        ).lastrowid
        if parsed is not None and kind in fold.VIEW_KINDS:
            self._apply(conn, run_id, parsed, node_id, seq)  # type: ignore[arg-type]
        if cost:
            conn.execute(
                f"INSERT INTO ledger (seq, run_id, kind, node_id, {', '.join(fold.LEDGER_COLUMNS)}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                (seq, run_id, kind, node_id, *(getattr(cost, c) for c in fold.LEDGER_COLUMNS)),
            )
        return int(seq)  # type: ignore[arg-type]

    def _apply(self, conn: sqlite3.Connection, run_id: str, record: EventRecord, node_id: str, seq: int) -> None:
        if isinstance(record, NodeRecorded):
            new = fold.node_row(run_id, node_id, record, seq)
            cur = conn.execute(
                f"SELECT {', '.join(fold.COLUMNS)} FROM nodes WHERE run_id = ? AND node_id = ?", (run_id, node_id)
            )
            old = cur.fetchone()
            if old is None:
                conn.execute(
                    f"INSERT INTO nodes ({', '.join(fold.COLUMNS)}) VALUES ({','.join('?' * len(fold.COLUMNS))})",
                    tuple(new[c] for c in fold.COLUMNS),
                )
                return
            row = fold.merge_node(dict(zip(fold.COLUMNS, old, strict=False)), new, record)
            update = {c: row[c] for c in fold.COLUMNS[2:]}
        else:
            update = fold.changes(record, seq, node_id)
        cur = conn.execute(
            f"UPDATE nodes SET {', '.join(f'{c} = ?' for c in update)} WHERE run_id = ? AND node_id = ?",
            (*update.values(), run_id, node_id),
        )
        if cur.rowcount == 0:
            raise StoreError(
                f"{kind_of(record)} event for unknown node {node_id!r} in run {run_id}; append its 'node' event first"
            )

    @staticmethod
    def _dumps(value: Any, what: str) -> str:
        try:
            return fold.dumps(value)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{what} is not JSON-serialisable ({exc}); convert records with .to_dict()") from exc


def _connect(path: Path, busy_timeout: float) -> sqlite3.Connection:
    """Open (or create) the store at ``path``: schema checked or made, WAL, full sync, a busy timeout; one-line
    ``StoreError``s naming the fix for a folder that cannot be made, a file that is no store, or no WAL."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder for the run store {path}: {exc}") from exc
    try:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open the run store {path}: {exc}. Check the path and its permissions.") from exc
    try:
        schema.prepare(conn, path)
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(
                f"{path}: SQLite refused WAL mode (got {mode!r}); the store needs a local "
                "filesystem that supports shared memory (not NFS)."
            )
        # FULL: the WAL is fsynced at every commit, so a paid result survives power loss,
        # not only a killed process (NORMAL in WAL mode only survives the latter).
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA foreign_keys = ON")
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise StoreError(
            f"{path} is not a usable verifyless run store (SQLite says: {exc}). "
            "Move the file aside or choose another store path."
        ) from exc
    except StoreError:
        conn.close()
        raise
    return conn


def store_error(path: Path, exc: sqlite3.Error) -> StoreError:
    """A ``StoreError`` with SQLite's message and what to do about it."""
    text = str(exc)
    hint = "Nothing of the failed transaction was written."
    if "full" in text:
        hint += " Free disk space, then resume the run."
    elif "locked" in text or "busy" in text:
        hint += " Another process holds the write lock; stop it or raise busy_timeout."
    elif "append-only" in text:
        hint = "The event log cannot be changed; append a new event instead."
    elif "readonly" in text:
        hint += " Make the store file and its folder writable."
    return StoreError(f"run store {path}: {text}. {hint}")


def _status_record(status: str, reason: str | None) -> RunStatusChanged:
    """A ``run_status`` record: the status, the writer's pid and host, the reason when there is one, and for
    ``running`` this machine (``machine``)."""
    return RunStatusChanged(
        str(status),
        pid=os.getpid(),
        host=socket.gethostname(),
        reason=reason[:4000] if reason else None,
        machine=machine() if status == "running" else None,
    )


def machine() -> dict[str, Any]:
    """This machine as a run card names it: platform, Python, CPU count, memory, verifyless's version."""
    try:
        memory_gb: float | None = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):  # not POSIX
        memory_gb = None
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_gb": memory_gb,
        "verifyless": release(),
    }
