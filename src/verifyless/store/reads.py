"""The read side of the run store: node views, budget totals, LLM usage, snapshots, view rebuilds.

A base class of ``RunStore`` (kept apart so each class holds one idea); it uses
the store's connection, lock and transaction helpers.
"""

from __future__ import annotations

import difflib
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager as ContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifyless.errors import StoreError
from verifyless.events import (
    ConfigResolved,
    ConfigUpdated,
    NodeRecorded,
    RunStatusChanged,
    VerificationStarted,
    Verified,
    parse_event,
)
from verifyless.node import Candidate, Node
from verifyless.store import fold
from verifyless.store.records import Budget, RebuildReport, RunInfo


class StoreReads:
    """Queries over one run's materialised views and its snapshot (see ``RunStore`` for the contract)."""

    path: Path
    _lock: threading.RLock
    _node_cache: dict[str, tuple[int, dict[str, Node]]]

    if TYPE_CHECKING:  # provided by RunStore

        def _db(self) -> sqlite3.Connection: ...
        def _read(self, sql: str, args: tuple = ()) -> list[tuple]: ...
        def _write(self) -> ContextManager[sqlite3.Connection]: ...
        def _require_run(self, conn: sqlite3.Connection, run_id: str) -> None: ...
        def _writable(self, conn: sqlite3.Connection, run_id: str) -> None: ...
        def _dumps(self, value: Any, what: str) -> str: ...
        def get_text(self, digest: str) -> str: ...

    # ------------------------------------------------------------------ runs

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

    def _run_info(self, r: tuple) -> RunInfo:
        """One run's row, its config with what was resolved at its start and every ``config_update`` applied, and a
        dead writer's run interrupted.

        ``config`` is the configuration in force (the pinned endpoints and a budget raised on resume included), not
        the one given.
        A ``running`` run whose writer process (pid and host stored with the status) no longer exists on
        this host is reported ``interrupted`` (killed with -9, or the machine restarted); a writer on
        another host, or a store written before pids were stored, keeps ``running``.
        """
        config, status = json.loads(r[5]), r[3]
        last: RunStatusChanged | None = None
        for kind, payload in self._read(
            "SELECT kind, payload FROM events WHERE run_id = ? AND kind IN (?, ?, ?) ORDER BY seq",
            (r[0], ConfigResolved.KIND, ConfigUpdated.KIND, RunStatusChanged.KIND),
        ):
            record = parse_event(kind, json.loads(payload))
            if isinstance(record, ConfigResolved | ConfigUpdated):
                record.apply_to(config)
            elif isinstance(record, RunStatusChanged):
                last = record
        if status == "running" and last is not None and _writer_gone(last):
            status = "interrupted"
        return RunInfo(
            run_id=r[0],
            task=r[1],
            created=r[2],
            status=status,
            seed=r[4],
            config=config,
            updated=r[6],
            n_nodes=r[7],
        )

    def _unknown_run(self, run_id: str, ids: list[str] | None = None) -> StoreError:
        if ids is None:
            ids = [r[0] for r in self._read("SELECT run_id FROM runs")]
        close = difflib.get_close_matches(run_id, ids, n=5, cutoff=0.5)
        hint = (
            f" Did you mean: {', '.join(close)}?"
            if close
            else (f" Known runs: {', '.join(sorted(ids)[-5:])}." if ids else " The store has no runs yet.")
        )
        return StoreError(f"unknown run {run_id!r} in {self.path}.{hint}")

    # ------------------------------------------------------------------ snapshots

    def put_snapshot(self, run_id: str, upto_seq: int, header: Mapping[str, Any], data: bytes) -> None:
        """Store the run's latest engine snapshot (state after event ``upto_seq``), replacing the previous one.

        Snapshots are a cache derived from the events; they are the one thing
        in the store that is overwritten.
        """
        header_json = self._dumps(dict(header), "snapshot header")
        with self._write() as conn:
            self._writable(conn, run_id)
            conn.execute(
                "INSERT OR REPLACE INTO snapshots (run_id, upto_seq, created, header, data) VALUES (?,?,?,?,?)",
                (run_id, int(upto_seq), time.time(), header_json, bytes(data)),
            )

    def latest_snapshot(self, run_id: str) -> tuple[int, dict[str, Any], bytes] | None:
        """``(upto_seq, header, data)`` of the run's snapshot, or None."""
        rows = self._read("SELECT upto_seq, header, data FROM snapshots WHERE run_id = ?", (run_id,))
        if not rows:
            return None
        return int(rows[0][0]), json.loads(rows[0][1]), bytes(rows[0][2])

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
                f"SELECT {fold.NODE_SELECT}, updated_seq FROM nodes WHERE {where} ORDER BY created_seq", (run_id, seen)
            )
            if rows:
                fresh, last = fold.to_nodes(rows)
                # Existing keys keep their (creation-order) position; new nodes were created after all cached ones.
                cached.update((n.id, n) for n in fresh)
                self._node_cache[run_id] = (max(seen, last), cached)
            return list(cached.values())

    def node_rows(self, run_id: str) -> list[dict[str, Any]]:
        """Every column of the nodes view (incl. test_score, test_metrics, summary, seqs) for reports."""
        with self._lock:
            self._require_run(self._db(), run_id)
            rows = self._read(
                f"SELECT {', '.join(fold.COLUMNS)} FROM nodes WHERE run_id = ? ORDER BY created_seq", (run_id,)
            )
        return [fold.decode_row(dict(zip(fold.COLUMNS, r, strict=False))) for r in rows]

    def candidate(self, run_id: str, node_id: str) -> Candidate:
        """Rebuild the latest logged ``Candidate`` for ``node_id``, program text included."""
        rows = self._read(
            "SELECT payload FROM events WHERE run_id = ? AND node_id = ? AND kind = ? ORDER BY seq DESC LIMIT 1",
            (run_id, node_id, NodeRecorded.KIND),
        )
        if not rows:
            raise StoreError(f"no node {node_id!r} in run {run_id!r}")
        cand = NodeRecorded.parse(json.loads(rows[0][0])).candidate
        return cand.replace(program=self.get_text(cand.program_hash) if cand.program_hash else "")

    def verified_hashes(self, run_id: str) -> set[str]:
        """Program hashes of nodes with a finished verification (for dedup before paying again)."""
        rows = self._read(
            "SELECT DISTINCT program_hash FROM nodes WHERE run_id = ? AND verified_seq IS NOT NULL "
            "AND program_hash != ''",
            (run_id,),
        )
        return {r[0] for r in rows}

    def pending_verifications(self, run_id: str) -> list[str]:
        """Node ids with a ``verification_started`` event and no later ``verification`` (in start order).

        On resume these were never charged: they may be verified again.
        """
        pending: dict[str, int] = {}
        for seq, kind, node_id in self._read(
            "SELECT seq, kind, node_id FROM events WHERE run_id = ? AND kind IN (?, ?) ORDER BY seq",
            (run_id, VerificationStarted.KIND, Verified.KIND),
        ):
            if kind == VerificationStarted.KIND:
                pending[node_id] = seq
            else:
                pending.pop(node_id, None)
        return sorted(pending, key=pending.__getitem__)

    def budget(self, run_id: str) -> Budget:
        """Totals of everything charged to the run."""
        row = self._read(
            f"SELECT {', '.join(f'COALESCE(SUM({c}), 0)' for c in fold.LEDGER_COLUMNS)} FROM ledger WHERE run_id = ?",
            (run_id,),
        )[0]
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
            "SUM(COALESCE(json_extract(payload, '$.cost'), 0.0)), "
            "SUM(COALESCE(json_extract(payload, '$.latency_s'), json_extract(payload, '$.latency'), 0.0)) "
            "FROM events WHERE run_id = ? AND kind = 'llm_call' GROUP BY 1, 2 ORDER BY 1, 2",
            (run_id,),
        )
        keys = ("role", "model", "calls", "cached", "prompt_tokens", "completion_tokens", "cost", "latency")
        return [dict(zip(keys, r, strict=False)) for r in rows]

    def rebuild_views(self, run_id: str) -> RebuildReport:
        """Recompute the run's nodes view and ledger by replaying its events; report rows that differed.

        For recovery and tests: a consistent store reports zero changed rows.
        """
        with self._write() as conn:
            self._require_run(conn, run_id)
            rows, ledger, n_events = fold.replay(
                run_id,
                conn.execute(
                    "SELECT seq, kind, node_id, payload, charge FROM events WHERE run_id = ? ORDER BY seq", (run_id,)
                ),
            )
            cols = ", ".join(fold.COLUMNS)
            stored = {
                r[1]: dict(zip(fold.COLUMNS, r, strict=False))
                for r in conn.execute(f"SELECT {cols} FROM nodes WHERE run_id = ?", (run_id,))
            }
            stored_ledger = {
                r[0]: tuple(r[1:])
                for r in conn.execute(
                    f"SELECT seq, run_id, kind, node_id, {', '.join(fold.LEDGER_COLUMNS)} FROM ledger WHERE run_id = ?",
                    (run_id,),
                )
            }
            nodes_changed = sum(stored.get(k) != rows.get(k) for k in stored.keys() | rows.keys())
            ledger_changed = sum(stored_ledger.get(k) != ledger.get(k) for k in stored_ledger.keys() | ledger.keys())
            conn.execute("DELETE FROM nodes WHERE run_id = ?", (run_id,))
            conn.executemany(
                f"INSERT INTO nodes ({cols}) VALUES ({','.join('?' * len(fold.COLUMNS))})",
                (tuple(r[c] for c in fold.COLUMNS) for r in rows.values()),
            )
            conn.execute("DELETE FROM ledger WHERE run_id = ?", (run_id,))
            conn.executemany(
                f"INSERT INTO ledger (seq, run_id, kind, node_id, {', '.join(fold.LEDGER_COLUMNS)}) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                ((s, *v) for s, v in ledger.items()),
            )
        self._node_cache.pop(run_id, None)
        return RebuildReport(
            events=n_events, nodes=len(rows), nodes_changed=nodes_changed, ledger_changed=ledger_changed
        )

    def integrity_check(self) -> str:
        """SQLite's ``PRAGMA integrity_check`` result ('ok' when the file is sound)."""
        return "; ".join(r[0] for r in self._read("PRAGMA integrity_check"))


def _writer_gone(status: RunStatusChanged) -> bool:
    """Whether the process that stored this ``running`` status is known to be dead (same host, pid gone)."""
    pid, host = status.pid, status.host
    if not isinstance(pid, int) or host != socket.gethostname():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, someone else's
        return False
    return False
