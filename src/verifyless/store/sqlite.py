"""``RunStore``: the durable, append-only record of every run (stdlib sqlite3, WAL).

Contract:
- ``append`` returns an event's ``seq`` only after its transaction has
  COMMITted with ``synchronous=FULL``: the event, its effect on the ``nodes``
  view, any blob it carried and its ledger charge are on disk together or not
  at all (see docs/design/store-schema.md for what this does not cover).
- Events are never updated or deleted (SQL triggers abort such statements).
- One ``RunStore`` may be shared by the threads of one process: a re-entrant
  lock serialises use of its single connection. Other processes may open the
  same file (WAL readers do not block the writer; writers wait up to
  ``busy_timeout``).
Every SQLite failure surfaces as ``StoreError`` with the SQLite message and a hint.
"""

from __future__ import annotations

import difflib
import json
import secrets
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from verifyless.errors import StoreError
from verifyless.node import Candidate, Node, Verification, content_hash
from verifyless.store import schema, view
from verifyless.store.records import Budget, Charge, Event, Item, RebuildReport, RunInfo

_PAGE = 2000  # events are read in pages so the lock is never held while a caller iterates


class RunStore:
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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder for the run store {self.path}: {exc}") from exc
        try:
            conn = sqlite3.connect(
                str(self.path), isolation_level=None, check_same_thread=False, timeout=busy_timeout
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the run store {self.path}: {exc}. Check the path and its permissions.") from exc
        try:
            schema.prepare(conn, self.path)
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"{self.path}: SQLite refused WAL mode (got {mode!r}); the store needs a local "
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
                f"{self.path} is not a usable verifyless run store (SQLite says: {exc}). "
                "Move the file aside or choose another store path."
            ) from exc
        except StoreError:
            conn.close()
            raise
        self._conn: sqlite3.Connection | None = conn

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the connection; later calls raise StoreError. Idempotent."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "RunStore":
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
        return StoreError(f"run store {self.path}: {text}. {hint}")

    # ------------------------------------------------------------------ runs

    def create_run(self, task: str, config: Mapping[str, Any], *, run_id: str | None = None, seed: int = 0) -> str:
        """Register a run and write its ``config`` event (the run's first event); returns the run id."""
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
            self._insert(conn, run_id, "config", {"task": task, "seed": int(seed), "config": dict(config)}, None, None)
        self._known_runs.add(run_id)
        return run_id

    def runs(self) -> list[RunInfo]:
        """All runs, oldest first."""
        rows = self._read(
            "SELECT r.run_id, r.task, r.created, r.status, r.seed, r.config, r.updated, "
            "(SELECT COUNT(*) FROM nodes n WHERE n.run_id = r.run_id) FROM runs r ORDER BY r.created, r.run_id"
        )
        return [self._run_info(r) for r in rows]

    def run(self, run_id: str) -> RunInfo:
        """One run's metadata; StoreError naming close matches if ``run_id`` is unknown."""
        rows = self._read(
            "SELECT r.run_id, r.task, r.created, r.status, r.seed, r.config, r.updated, "
            "(SELECT COUNT(*) FROM nodes n WHERE n.run_id = r.run_id) FROM runs r WHERE r.run_id = ?",
            (run_id,),
        )
        if not rows:
            raise self._unknown_run(run_id)
        return self._run_info(rows[0])

    def resolve_run(self, prefix: str) -> str:
        """The unique run id that equals or starts with ``prefix``."""
        ids = [r[0] for r in self._read("SELECT run_id FROM runs ORDER BY run_id")]
        if prefix in ids:
            return prefix
        hits = [i for i in ids if i.startswith(prefix)]
        if len(hits) == 1:
            return hits[0]
        if hits:
            raise StoreError(f"run prefix {prefix!r} is ambiguous: {', '.join(hits[:10])}; give more characters")
        raise self._unknown_run(prefix, ids)

    def set_status(self, run_id: str, status: str) -> int:
        """Set the run's status (e.g. running, finished, failed, interrupted); logged as a ``run_status`` event."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            seq = self._insert(conn, run_id, "run_status", {"status": str(status)}, None, None)
            conn.execute("UPDATE runs SET status = ?, updated = ? WHERE run_id = ?", (str(status), time.time(), run_id))
        return seq

    def _run_info(self, r: tuple) -> RunInfo:
        return RunInfo(run_id=r[0], task=r[1], created=r[2], status=r[3], seed=r[4],
                       config=json.loads(r[5]), updated=r[6], n_nodes=r[7])

    def _unknown_run(self, run_id: str, ids: list[str] | None = None) -> StoreError:
        if ids is None:
            ids = [r[0] for r in self._read("SELECT run_id FROM runs")]
        close = difflib.get_close_matches(run_id, ids, n=5, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else (
            f" Known runs: {', '.join(sorted(ids)[-5:])}." if ids else " The store has no runs yet.")
        return StoreError(f"unknown run {run_id!r} in {self.path}.{hint}")

    def _require_run(self, conn: sqlite3.Connection, run_id: str) -> None:
        if run_id in self._known_runs:
            return
        if conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is None:
            ids = [r[0] for r in conn.execute("SELECT run_id FROM runs")]
            raise self._unknown_run(run_id, ids)
        self._known_runs.add(run_id)

    # ------------------------------------------------------------------ events

    def append(self, run_id: str, kind: str, payload: Mapping[str, Any], *, node_id: str | None = None,
               charge: Charge | bool | None = None) -> int:
        """Append one event (and its view update, blob, ledger charge) in one transaction; returns its seq after COMMIT.

        ``charge=True`` derives the charge from the payload for ``verification``
        (1 verification + its seconds), ``llm_call`` (tokens, cost) and ``pilot``
        (``seconds``) events. A ``node`` payload may carry ``program`` text: it
        is stored as a blob and left out of the logged payload.
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            return self._insert(conn, run_id, kind, payload, node_id, charge)

    def append_many(self, run_id: str, items: Iterable[Item | tuple]) -> list[int]:
        """Append several events in ONE transaction (all or none); returns their seqs in order."""
        with self._write() as conn:
            self._require_run(conn, run_id)
            return [self._insert(conn, run_id, *(it if isinstance(it, Item) else Item(*it))) for it in items]

    def add_candidate(self, run_id: str, candidate: Candidate, *, status: str | None = None) -> int:
        """Log a ``node`` event for ``candidate`` (program stored as a blob); returns seq."""
        payload = candidate.to_dict()
        if status is not None:
            payload["status"] = str(getattr(status, "value", status))
        return self.append(run_id, view.NODE, payload, node_id=candidate.id)

    def add_verification(self, run_id: str, node_id: str, verification: Verification, fitness: float | None,
                         *, charge: bool = True) -> int:
        """Log a finished verification with its oriented ``fitness``; charges 1 verification + seconds by default."""
        payload = verification.to_dict() | {"fitness": fitness}
        return self.append(run_id, view.VERIFICATION, payload, node_id=node_id, charge=charge)

    def events(self, run_id: str, kinds: Iterable[str] | None = None, after: int = 0,
               *, node_id: str | None = None) -> Iterator[Event]:
        """Committed events of a run with ``seq > after`` in seq order, optionally filtered by kind and node."""
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
                f"ORDER BY seq LIMIT {_PAGE}", (run_id, last, *extra))
            for seq, rid, ts, kind, nid, payload, charge in rows:
                yield Event(seq, rid, ts, kind, nid, json.loads(payload),
                            Charge.from_dict(json.loads(charge)) if charge else None)
            if len(rows) < _PAGE:
                return
            last = rows[-1][0]

    def _insert(self, conn: sqlite3.Connection, run_id: str, kind: str, payload: Mapping[str, Any],
                node_id: str | None, charge: Charge | bool | None) -> int:
        if not isinstance(kind, str) or not kind:
            raise StoreError(f"event kind must be a non-empty string, got {kind!r}")
        if hasattr(payload, "to_dict"):
            payload = payload.to_dict()  # type: ignore[union-attr]
        payload = dict(payload)
        if kind == view.NODE:
            pid = payload.get("id")
            if node_id is None:
                node_id = pid
            if not node_id or (pid is not None and pid != node_id):
                raise StoreError(f"node event needs a node id (payload id {pid!r}, node_id {node_id!r}); they must agree")
            payload["id"] = node_id
            if "program" in payload:
                program = payload.pop("program")
                digest = self._put_blob(conn, program)
                if payload.get("program_hash") and payload["program_hash"] != digest:
                    raise StoreError(
                        f"node {node_id!r}: program_hash {payload['program_hash'][:12]} does not match the "
                        f"program text (sha256 {digest[:12]}); compute it with verifyless.node.content_hash")
                payload["program_hash"] = digest
        elif kind in view.VIEW_KINDS and not node_id:
            raise StoreError(f"a {kind!r} event needs node_id=...")
        text = self._dumps(payload, f"{kind} payload")
        decoded = json.loads(text)  # the view folds exactly what the log holds
        cost = view.resolve_charge(kind, decoded, charge)
        seq = conn.execute(
            "INSERT INTO events (run_id, ts, kind, node_id, payload, charge) VALUES (?,?,?,?,?,?)",
            (run_id, time.time(), kind, node_id, text, view.dumps(cost.to_dict()) if cost else None),
        ).lastrowid
        if kind in view.VIEW_KINDS:
            self._apply(conn, run_id, kind, node_id, decoded, seq)  # type: ignore[arg-type]
        if cost:
            conn.execute(
                f"INSERT INTO ledger (seq, run_id, kind, node_id, {', '.join(view.LEDGER_COLUMNS)}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                (seq, run_id, kind, node_id, *(getattr(cost, c) for c in view.LEDGER_COLUMNS)),
            )
        return int(seq)  # type: ignore[arg-type]

    def _apply(self, conn: sqlite3.Connection, run_id: str, kind: str, node_id: str,
               payload: dict[str, Any], seq: int) -> None:
        if kind == view.NODE:
            new = view.node_row(run_id, node_id, payload, seq)
            cur = conn.execute(f"SELECT {', '.join(view.COLUMNS)} FROM nodes WHERE run_id = ? AND node_id = ?",
                               (run_id, node_id))
            old = cur.fetchone()
            if old is None:
                conn.execute(f"INSERT INTO nodes ({', '.join(view.COLUMNS)}) VALUES ({','.join('?' * len(view.COLUMNS))})",
                             tuple(new[c] for c in view.COLUMNS))
                return
            row = view.merge_node(dict(zip(view.COLUMNS, old)), new, payload)
            update = {c: row[c] for c in view.COLUMNS[2:]}
        else:
            update = view.changes(kind, payload, seq, node_id)
        cur = conn.execute(f"UPDATE nodes SET {', '.join(f'{c} = ?' for c in update)} WHERE run_id = ? AND node_id = ?",
                           (*update.values(), run_id, node_id))
        if cur.rowcount == 0:
            raise StoreError(f"{kind} event for unknown node {node_id!r} in run {run_id}; append its 'node' event first")

    @staticmethod
    def _dumps(value: Any, what: str) -> str:
        try:
            return view.dumps(value)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{what} is not JSON-serialisable ({exc}); convert records with .to_dict()") from exc

    # ------------------------------------------------------------------ blobs

    def put_blob(self, data: str | bytes) -> str:
        """Store bytes (str as UTF-8) once under their sha256; returns the hash."""
        with self._write() as conn:
            return self._put_blob(conn, data)

    def _put_blob(self, conn: sqlite3.Connection, data: str | bytes) -> str:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        digest = content_hash(raw)
        if conn.execute("SELECT 1 FROM blobs WHERE hash = ?", (digest,)).fetchone() is None:
            stored, codec = raw, "raw"
            if len(raw) >= self.compress_min:
                packed = zlib.compress(raw, 6)
                if len(packed) < len(raw):
                    stored, codec = packed, "zlib"
            conn.execute("INSERT OR IGNORE INTO blobs (hash, data, size, codec) VALUES (?,?,?,?)",
                         (digest, stored, len(raw), codec))
        return digest

    def get_blob(self, digest: str) -> bytes:
        """The bytes stored under ``digest``; StoreError if missing or if they no longer match the hash."""
        rows = self._read("SELECT data, codec FROM blobs WHERE hash = ?", (digest,))
        if not rows:
            raise StoreError(f"no blob {digest[:16]}... in {self.path}; was it stored in another run store?")
        data, codec = rows[0]
        raw = zlib.decompress(data) if codec == "zlib" else bytes(data)
        if content_hash(raw) != digest:
            raise StoreError(f"blob {digest[:16]}... in {self.path} is damaged (hash mismatch); run PRAGMA integrity_check")
        return raw

    def get_text(self, digest: str) -> str:
        return self.get_blob(digest).decode("utf-8")

    def has_blob(self, digest: str) -> bool:
        return bool(self._read("SELECT 1 FROM blobs WHERE hash = ?", (digest,)))

    # ------------------------------------------------------------------ views

    def nodes(self, run_id: str) -> list[Node]:
        """The run's nodes as search sees them (validation only, no test scores), in creation order.

        The first call per run reads every row; later calls read only rows
        whose ``updated_seq`` passed the last one seen (seqs commit in order,
        because writers hold the database write lock from insert to COMMIT),
        so polling a large run each round stays cheap.
        """
        with self._lock:
            self._require_run(self._db(), run_id)
            seen, cached = self._node_cache.get(run_id, (0, {}))
            # Two plans on purpose: a full read walks the creation index; a delta read uses the update index.
            where = "run_id = ? AND updated_seq > ?" if seen else "run_id = ? AND ? = 0"
            rows = self._read(
                f"SELECT {view.NODE_SELECT}, updated_seq FROM nodes WHERE {where} ORDER BY created_seq", (run_id, seen))
            if rows:
                fresh, last = view.to_nodes(rows)
                # Existing keys keep their (creation-order) position; new nodes were created after all cached ones.
                cached.update((n.id, n) for n in fresh)
                self._node_cache[run_id] = (max(seen, last), cached)
            return list(cached.values())

    def node_rows(self, run_id: str) -> list[dict[str, Any]]:
        """Every column of the nodes view (incl. test_score, test_metrics, summary, seqs) for reports."""
        with self._lock:
            self._require_run(self._db(), run_id)
            rows = self._read(f"SELECT {', '.join(view.COLUMNS)} FROM nodes WHERE run_id = ? ORDER BY created_seq",
                              (run_id,))
        return [view.decode_row(dict(zip(view.COLUMNS, r))) for r in rows]

    def candidate(self, run_id: str, node_id: str) -> Candidate:
        """Rebuild the latest logged ``Candidate`` for ``node_id``, program text included."""
        rows = self._read("SELECT payload FROM events WHERE run_id = ? AND node_id = ? AND kind = ? "
                          "ORDER BY seq DESC LIMIT 1", (run_id, node_id, view.NODE))
        if not rows:
            raise StoreError(f"no node {node_id!r} in run {run_id!r}")
        payload = json.loads(rows[0][0])
        program = self.get_text(payload["program_hash"]) if payload.get("program_hash") else ""
        return Candidate.from_dict(payload | {"program": program})

    def verified_hashes(self, run_id: str) -> set[str]:
        """Program hashes of nodes with a finished verification (for dedup before paying again)."""
        rows = self._read("SELECT DISTINCT program_hash FROM nodes WHERE run_id = ? AND verified_seq IS NOT NULL "
                          "AND program_hash != ''", (run_id,))
        return {r[0] for r in rows}

    def pending_verifications(self, run_id: str) -> list[str]:
        """Node ids with a ``verification_started`` event and no later ``verification`` (in start order).

        On resume these were never charged: they may be verified again.
        """
        pending: dict[str, int] = {}
        for seq, kind, node_id in self._read(
                "SELECT seq, kind, node_id FROM events WHERE run_id = ? AND kind IN ('verification_started', "
                "'verification') ORDER BY seq", (run_id,)):
            if kind == "verification_started":
                pending[node_id] = seq
            else:
                pending.pop(node_id, None)
        return sorted(pending, key=pending.__getitem__)

    def budget(self, run_id: str) -> Budget:
        """Totals of everything charged to the run."""
        row = self._read(
            f"SELECT {', '.join(f'COALESCE(SUM({c}), 0)' for c in view.LEDGER_COLUMNS)} FROM ledger WHERE run_id = ?",
            (run_id,))[0]
        return Budget(*row)

    def llm_usage(self, run_id: str) -> list[dict[str, Any]]:
        """``llm_call`` events aggregated per (role, model): calls, cached calls, tokens, cost, latency (s).

        Latency is read from ``latency_s`` (what the engine's recorder writes) or ``latency``.
        """
        rows = self._read(
            "SELECT json_extract(payload, '$.role'), json_extract(payload, '$.model'), COUNT(*), "
            "SUM(COALESCE(json_extract(payload, '$.cached'), 0)), "
            "SUM(COALESCE(json_extract(payload, '$.prompt_tokens'), 0)), "
            "SUM(COALESCE(json_extract(payload, '$.completion_tokens'), 0)), "
            "SUM(COALESCE(json_extract(payload, '$.cost'), 0.0)), SUM(COALESCE(json_extract(payload, '$.latency_s'), json_extract(payload, '$.latency'), 0.0)) "
            "FROM events WHERE run_id = ? AND kind = 'llm_call' GROUP BY 1, 2 ORDER BY 1, 2", (run_id,))
        keys = ("role", "model", "calls", "cached", "prompt_tokens", "completion_tokens", "cost", "latency")
        return [dict(zip(keys, r)) for r in rows]

    def rebuild_views(self, run_id: str) -> RebuildReport:
        """Recompute the run's nodes view and ledger by replaying its events; report rows that differed.

        For recovery and tests: a consistent store reports zero changed rows.
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            rows, ledger, n_events = view.replay(run_id, conn.execute(
                "SELECT seq, kind, node_id, payload, charge FROM events WHERE run_id = ? ORDER BY seq", (run_id,)))
            cols = ", ".join(view.COLUMNS)
            stored = {r[1]: dict(zip(view.COLUMNS, r))
                      for r in conn.execute(f"SELECT {cols} FROM nodes WHERE run_id = ?", (run_id,))}
            stored_ledger = {r[0]: tuple(r[1:]) for r in conn.execute(
                f"SELECT seq, run_id, kind, node_id, {', '.join(view.LEDGER_COLUMNS)} FROM ledger WHERE run_id = ?",
                (run_id,))}
            nodes_changed = sum(stored.get(k) != rows.get(k) for k in stored.keys() | rows.keys())
            ledger_changed = sum(stored_ledger.get(k) != ledger.get(k) for k in stored_ledger.keys() | ledger.keys())
            conn.execute("DELETE FROM nodes WHERE run_id = ?", (run_id,))
            conn.executemany(f"INSERT INTO nodes ({cols}) VALUES ({','.join('?' * len(view.COLUMNS))})",
                             (tuple(r[c] for c in view.COLUMNS) for r in rows.values()))
            conn.execute("DELETE FROM ledger WHERE run_id = ?", (run_id,))
            conn.executemany(f"INSERT INTO ledger (seq, run_id, kind, node_id, {', '.join(view.LEDGER_COLUMNS)}) "
                             "VALUES (?,?,?,?,?,?,?,?,?,?)", ((s, *v) for s, v in ledger.items()))
        self._node_cache.pop(run_id, None)
        return RebuildReport(events=n_events, nodes=len(rows), nodes_changed=nodes_changed,
                             ledger_changed=ledger_changed)

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` result ('ok' when the file is sound)."""
        return "; ".join(r[0] for r in self._read("PRAGMA integrity_check"))

