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
from verifyless.node import Node, Operator, Status
from verifyless.store.records import Charge

# Event kinds that change the nodes view; every other kind is only logged.
NODE = "node"
STATUS = "status"
VERIFICATION = "verification"
VIEW_KINDS = (NODE, STATUS, VERIFICATION)
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


def _status(raw: Any, where: str) -> str:
    try:
        return Status(raw).value
    except ValueError:
        raise StoreError(f"{where}: unknown status {raw!r}; use one of {[s.value for s in Status]}") from None


def node_row(run_id: str, node_id: str, payload: Mapping[str, Any], seq: int) -> dict[str, Any]:
    """A full nodes row for a ``node`` event (payload = Candidate.to_dict() without the program, + optional status)."""
    where = f"node event for {node_id!r}"
    try:
        operator = Operator(payload.get("operator", Operator.DRAFT.value)).value
    except ValueError:
        raise StoreError(f"{where}: unknown operator {payload.get('operator')!r}") from None
    idea = payload.get("idea") or {}
    if isinstance(idea, str):
        idea = {"text": idea}
    program_hash = str(payload.get("program_hash") or "")
    default_status = Status.IMPLEMENTED if program_hash else Status.PROPOSED
    tags = payload.get("tags", idea.get("tags", ()))
    return {
        "run_id": run_id,
        "node_id": node_id,
        "parent_id": payload.get("parent_id"),
        "operator": operator,
        "status": _status(payload.get("status", default_status.value), where),
        "score": None,
        "fitness": None,
        "test_score": None,
        "round": int(payload.get("round", 0)),
        "island": int(payload.get("island", 0)),
        "idea": str(idea.get("text", "")),
        "summary": str(payload.get("summary", "")),
        "program_hash": program_hash,
        "reference_ids": dumps(list(payload.get("reference_ids", ()))),
        "tags": dumps(list(tags)),
        "metrics": "{}",
        "test_metrics": "{}",
        "reason": str(payload.get("reason", "")),
        "verified_seq": None,
        "created_seq": seq,
        "updated_seq": seq,
    }


def merge_node(old: Mapping[str, Any], new: Mapping[str, Any], payload: Mapping[str, Any]) -> dict[str, Any]:
    """A repeated ``node`` event: replace the candidate fields, keep outcome fields and created_seq."""
    row = dict(old)
    for name in _CANDIDATE_COLUMNS:
        row[name] = new[name]
    if "status" in payload:
        row["status"] = new["status"]
    if "reason" in payload:
        row["reason"] = new["reason"]
    row["updated_seq"] = new["updated_seq"]
    return row


def changes(kind: str, payload: Mapping[str, Any], seq: int, node_id: str) -> dict[str, Any]:
    """Column updates that a ``status`` or ``verification`` event makes to an existing row."""
    where = f"{kind} event for {node_id!r}"
    if kind == STATUS:
        if "status" not in payload:
            raise StoreError(f"{where}: payload needs a 'status' key (and optionally 'reason')")
        return {
            "status": _status(payload["status"], where),
            "reason": str(payload.get("reason", "")),
            "updated_seq": seq,
        }
    if kind == VERIFICATION:
        status = _status(payload.get("status"), where)
        ok = status == Status.OK.value
        update: dict[str, Any] = {
            "status": status,
            "reason": str(payload.get("reason", "")),
            "score": _num(payload.get("score")),
            # Fitness is meaningful only for a usable score (see Node.fitness).
            "fitness": _num(payload.get("fitness")) if ok else None,
            "test_score": _num(payload.get("test_score")),
            "metrics": dumps(dict(payload.get("metrics") or {})),
            "test_metrics": dumps(dict(payload.get("test_metrics") or {})),
            "verified_seq": seq,
            "updated_seq": seq,
        }
        if payload.get("program_hash"):
            update["program_hash"] = str(payload["program_hash"])
        return update
    raise StoreError(f"internal error: {kind!r} does not change the nodes view")


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


def resolve_charge(kind: str, payload: Mapping[str, Any], charge: Charge | bool | None) -> Charge | None:
    """The ledger charge of one event: ``True`` derives it from the payload (see RunStore.append)."""
    if charge is None or charge is False:
        return None
    if isinstance(charge, Charge):
        return None if charge.empty else charge
    if charge is not True:
        raise StoreError(f"charge must be a Charge, True or None, got {charge!r}")
    if kind == VERIFICATION:
        seconds = sum(float(payload.get(k) or 0.0) for k in ("run_seconds", "score_seconds", "overhead_seconds"))
        return Charge(verifications=1, evaluator_seconds=seconds)
    if kind == "llm_call":
        return Charge(
            tokens_in=int(payload.get("prompt_tokens") or 0),
            tokens_out=int(payload.get("completion_tokens") or 0),
            cost=float(payload.get("cost") or 0.0),
        )
    if kind == "pilot":
        return Charge(pilot_seconds=float(payload.get("seconds") or 0.0))
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
        if kind == NODE:
            payload = json.loads(text)
            new = node_row(run_id, node_id, payload, seq)
            rows[node_id] = merge_node(rows[node_id], new, payload) if node_id in rows else new
        elif kind in VIEW_KINDS and node_id in rows:
            rows[node_id].update(changes(kind, json.loads(text), seq, node_id))
        if charge:
            cost = Charge.from_dict(json.loads(charge))
            ledger[seq] = (run_id, kind, node_id, *(getattr(cost, c) for c in LEDGER_COLUMNS))
    return rows, ledger, n_events
