"""How events fold into the ``nodes`` view and the ``ledger``: pure functions, no I/O.

Both the incremental path (``RunStore.append``, inside the event's own
transaction) and ``RunStore.rebuild_views`` (a full replay) use these
functions, so the stored view is by construction a replay of the log; the
crash test checks that no committed event is missing from it.

Row values are kept in their stored form (JSON text for list/dict columns)
so that stored and replayed rows compare with ``==``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from verifyless.errors import StoreError
from verifyless.events import (
    EventRecord,
    LlmCalled,
    NodeRecorded,
    PilotRan,
    StatusChanged,
    Verified,
    kind_of,
    parse_event,
)
from verifyless.node import Node, Operator, Status
from verifyless.store.records import Charge

# Records that change the nodes view; every other kind is only logged.
VIEW_RECORDS: tuple[type[EventRecord], ...] = (NodeRecorded, StatusChanged, Verified)
VIEW_KINDS = tuple(t.KIND for t in VIEW_RECORDS)
CHARGED_KINDS = (Verified.KIND, LlmCalled.KIND, PilotRan.KIND)  # what ``charge=True`` can derive a charge from
LEDGER_COLUMNS = ("verifications", "evaluator_seconds", "tokens_in", "tokens_out", "cost", "pilot_seconds")

COLUMNS = (
    "run_id",
    "node_id",
    "parent_id",
    "operator",
    "status",
    "score",
    "fitness",
    "test_score",
    "round",
    "island",
    "idea",
    "summary",
    "program_hash",
    "reference_ids",
    "tags",
    "metrics",
    "test_metrics",
    "reason",
    "verified_seq",
    "created_seq",
    "updated_seq",
)
# Fields a repeated `node` event replaces; the outcome of a verification and created_seq stay.
_CANDIDATE_COLUMNS = (
    "parent_id",
    "operator",
    "idea",
    "summary",
    "program_hash",
    "reference_ids",
    "tags",
    "round",
    "island",
)


def dumps(value: Any) -> str:
    """Compact JSON; NaN/inf are allowed because validation metrics may legitimately carry them."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def parsed(kind: str, payload: Mapping[str, Any], node_id: str | None) -> EventRecord:
    """The record of an event being stored or replayed; a payload that does not parse is a ``StoreError``."""
    try:
        return parse_event(kind, payload)
    except (ValueError, TypeError, KeyError) as exc:
        raise StoreError(f"{kind} event for {node_id!r}: {exc}") from None


def node_row(run_id: str, node_id: str, record: NodeRecorded, seq: int) -> dict[str, Any]:
    """A full nodes row for a ``node`` event."""
    cand = record.candidate
    return {
        "run_id": run_id,
        "node_id": node_id,
        "parent_id": cand.parent_id,
        "operator": cand.operator.value,
        "status": record.default_status.value,
        "score": None,
        "fitness": None,
        "test_score": None,
        "round": int(cand.round),
        "island": int(cand.island),
        "idea": str(cand.idea.text),
        "summary": str(cand.summary),
        "program_hash": cand.program_hash,
        "reference_ids": dumps(list(cand.reference_ids)),
        "tags": dumps(list(record.node_tags)),
        "metrics": "{}",
        "test_metrics": "{}",
        "reason": record.reason or "",
        "verified_seq": None,
        "created_seq": seq,
        "updated_seq": seq,
    }


def merge_node(old: Mapping[str, Any], new: Mapping[str, Any], record: NodeRecorded) -> dict[str, Any]:
    """A repeated ``node`` event: replace the candidate fields, keep outcome fields and created_seq."""
    row = dict(old)
    for name in _CANDIDATE_COLUMNS:
        row[name] = new[name]
    if record.status is not None:
        row["status"] = new["status"]
    if record.reason is not None:
        row["reason"] = new["reason"]
    row["updated_seq"] = new["updated_seq"]
    return row


def changes(record: EventRecord, seq: int, node_id: str) -> dict[str, Any]:
    """Column updates that a ``status`` or ``verification`` event makes to an existing row."""
    if isinstance(record, StatusChanged):
        return {"status": record.status.value, "reason": str(record.reason), "updated_seq": seq}
    if isinstance(record, Verified):
        v = record.verification
        update: dict[str, Any] = {
            "status": v.status.value,
            "reason": str(v.reason),
            "score": _num(v.score),
            # Fitness is meaningful only for a usable score (see Node.fitness).
            "fitness": _num(record.fitness) if v.status is Status.OK else None,
            "test_score": _num(v.test_score),
            "metrics": dumps(dict(v.metrics or {})),
            "test_metrics": dumps(dict(v.test_metrics or {})),
            "verified_seq": seq,
            "updated_seq": seq,
        }
        if v.program_hash:
            update["program_hash"] = str(v.program_hash)
        return update
    raise StoreError(f"internal error: {kind_of(record)!r} does not change the nodes view")


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _json(text: str, empty: Any) -> Any:
    # Most rows carry empty lists/dicts; skipping json.loads for them keeps 100k-row reads fast.
    return empty if text in ("[]", "{}") else json.loads(text)


_STATUS = {s.value: s for s in Status}
_OPERATOR = {o.value: o for o in Operator}


def to_nodes(rows: list[tuple]) -> tuple[list[Node], int]:
    """Build validation-only ``Node`` records from rows selected with ``NODE_SELECT, updated_seq``.

    Returns the nodes and the largest ``updated_seq`` among the rows.

    Hot path for resume (100k nodes): enum members come from dicts and the
    decoded (immutable) id/tag tuples are shared between rows with equal text.
    """
    tuples: dict[str, tuple] = {"[]": ()}
    out: list[Any] = []
    append = out.append
    last = 0
    for (
        node_id,
        parent_id,
        operator,
        status,
        fitness,
        score,
        idea,
        program_hash,
        reference_ids,
        round_,
        island,
        tags,
        metrics,
        reason,
        updated_seq,
    ) in rows:
        if updated_seq > last:
            last = updated_seq
        refs = tuples.get(reference_ids)
        if refs is None:
            refs = tuples[reference_ids] = tuple(json.loads(reference_ids))
        tag_tuple = tuples.get(tags)
        if tag_tuple is None:
            tag_tuple = tuples[tags] = tuple(json.loads(tags))
        append(
            Node(
                node_id,
                parent_id,
                _OPERATOR[operator],
                _STATUS[status],
                fitness,
                score,
                idea,
                program_hash,
                refs,
                round_,
                island,
                tag_tuple,
                {} if metrics == "{}" else json.loads(metrics),
                reason,
            )
        )
    return out, last


NODE_SELECT = (
    "node_id, parent_id, operator, status, fitness, score, idea, program_hash, "
    "reference_ids, round, island, tags, metrics, reason"
)


def decode_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A stored nodes row with JSON columns decoded (for reports)."""
    out = dict(row)
    for name, empty in (("reference_ids", []), ("tags", []), ("metrics", {}), ("test_metrics", {})):
        out[name] = _json(out[name], empty)
    return out


def resolve_charge(kind: str, record: EventRecord | None, charge: Charge | bool | None) -> Charge | None:
    """The ledger charge of one event: ``True`` derives it from the record (see RunStore.append)."""
    if charge is None or charge is False:
        return None
    if isinstance(charge, Charge):
        return None if charge.empty else charge
    if charge is not True:
        raise StoreError(f"charge must be a Charge, True or None, got {charge!r}")
    if isinstance(record, Verified):
        return Charge(verifications=1, evaluator_seconds=record.verification.seconds)
    if isinstance(record, LlmCalled):
        return Charge(
            tokens_in=int(record.prompt_tokens or 0),
            tokens_out=int(record.completion_tokens or 0),
            cost=float(record.cost or 0.0),
        )
    if isinstance(record, PilotRan):
        return Charge(pilot_seconds=float(record.seconds or 0.0))
    raise StoreError(f"charge=True cannot derive a charge for a {kind!r} event; pass Charge(...) explicitly")


def replay(run_id: str, events: Iterable[tuple]) -> tuple[dict[str, dict[str, Any]], dict[int, tuple], int]:
    """Fold ``(seq, kind, node_id, payload_json, charge_json)`` rows, in seq order, into views.

    Returns nodes rows by node id, ledger rows by seq (``run_id, kind, node_id, *LEDGER_COLUMNS``)
    and the number of events read.
    """
    rows: dict[str, dict[str, Any]] = {}
    ledger: dict[int, tuple] = {}
    n_events = 0
    for seq, kind, node_id, text, charge in events:
        n_events += 1
        if kind == NodeRecorded.KIND:
            record = parsed(kind, json.loads(text), node_id)
            assert isinstance(record, NodeRecorded)
            new = node_row(run_id, node_id, record, seq)
            rows[node_id] = merge_node(rows[node_id], new, record) if node_id in rows else new
        elif kind in VIEW_KINDS and node_id in rows:
            rows[node_id].update(changes(parsed(kind, json.loads(text), node_id), seq, node_id))
        if charge:
            cost = Charge.from_dict(json.loads(charge))
            ledger[seq] = (run_id, kind, node_id, *(getattr(cost, c) for c in LEDGER_COLUMNS))
    return rows, ledger, n_events
