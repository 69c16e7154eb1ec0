"""Per-node data for the report and the dashboard: the search graph, screening rounds and node pages.

Same rules as ``verifyless.report.views.runs``: pure reads of a run store, frozen
records of plain values, unknown evidence/detail keys kept as generic text.
Hidden test scores appear only in ``NodeDetail`` (labelled apart from the
validation outcome), never in the graph or the rounds.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from verifyless.errors import StoreError
from verifyless.events import PilotRan, Screened, Verified
from verifyless.node import Evidence
from verifyless.report.text import diff_lines, dump, num, redact, short
from verifyless.report.views.runs import VERIFIED
from verifyless.screen.critic import finer_signal
from verifyless.store.protocol import RunStoreProtocol

# Evidence ``detail`` keys drawn by the rounds view; every other key is shown as generic text.
_DRAWN_DETAIL = frozenset({"critiques", "sample_labels", "matches", "findings", "pilots"})


# ---------------------------------------------------------------------- graph


@dataclass(frozen=True)
class GraphNode:
    id: str
    parent_id: str | None
    operator: str
    status: str
    score: float | None
    fitness: float | None
    round: int
    island: int
    idea: str
    depth: int
    x: float  # layout column (leaf order); parents sit over their children
    final: bool = False


@dataclass(frozen=True)
class GraphEdge:
    source: str
    target: str
    kind: str  # "primary" (credit-carrying parent) or "reference" (information only)


@dataclass(frozen=True)
class GraphView:
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]
    islands: tuple[int, ...]
    fitness_range: tuple[float, float] | None
    width: int  # leaf columns
    depth: int


def graph_view(store: RunStoreProtocol, run_id: str, final_id: str | None = None) -> GraphView:
    """Every node, its primary edge and its reference edges, laid out as a tidy tree (leaf order by creation)."""
    rows = store.node_rows(run_id)
    ids = {r["node_id"] for r in rows}
    children: dict[str | None, list[str]] = {}
    for r in rows:
        parent = r.get("parent_id") if r.get("parent_id") in ids else None
        children.setdefault(parent, []).append(r["node_id"])
    x: dict[str, float] = {}
    depth: dict[str, int] = {}
    _layout(children, x, depth)
    fits = [r["fitness"] for r in rows if r.get("fitness") is not None]
    nodes = tuple(
        GraphNode(
            r["node_id"],
            r.get("parent_id"),
            r["operator"],
            r["status"],
            num(r.get("score")),
            num(r.get("fitness")),
            int(r.get("round") or 0),
            int(r.get("island") or 0),
            short(r.get("idea") or "", 200),
            depth.get(r["node_id"], 0),
            x.get(r["node_id"], 0.0),
            r["node_id"] == final_id,
        )
        for r in rows
    )
    edges = [GraphEdge(r["parent_id"], r["node_id"], "primary") for r in rows if r.get("parent_id") in ids]
    edges += [
        GraphEdge(ref, r["node_id"], "reference") for r in rows for ref in r.get("reference_ids") or () if ref in ids
    ]
    return GraphView(
        nodes,
        tuple(edges),
        tuple(sorted({n.island for n in nodes})),
        (min(fits), max(fits)) if fits else None,
        int(max(x.values(), default=0) + 1),
        int(max(depth.values(), default=0)),
    )


def _layout(children: Mapping[str | None, list[str]], x: dict[str, float], depth: dict[str, int]) -> None:
    """Leaves take consecutive columns in creation order; a parent sits at the mean of its children (iterative)."""
    next_leaf = 0.0
    for root in children.get(None, []):
        stack: list[tuple[str, int, bool]] = [(root, 0, False)]
        while stack:
            node, d, done = stack.pop()
            kids = [k for k in children.get(node, []) if k not in depth]
            if done:
                placed = [x[k] for k in children.get(node, []) if k in x]
                x[node] = sum(placed) / len(placed) if placed else next_leaf
                if not placed:
                    next_leaf += 1
                continue
            depth[node] = d
            stack.append((node, d, True))
            stack.extend((k, d + 1, False) for k in reversed(kids))


# ---------------------------------------------------------------------- screening rounds


@dataclass(frozen=True)
class ScreenedCandidate:
    """One candidate of a screened pool with what the screener saw and what verification then said."""

    id: str
    position: int  # 1 = most promising
    idea: str
    rank_value: float | None
    votes: Mapping[str, float]
    uncertainty: float | None
    n_valid: int
    n_invalid: int
    labels: tuple[str, ...]
    chosen: bool
    audited: bool
    verified: bool
    status: str
    score: float | None
    critiques: tuple[str, ...]
    findings: tuple[str, ...]
    extra: str  # other evidence detail keys, as redacted JSON
    tie_break: str = ""  # when its rank value ties another's: the rule and the finer key that ordered them


@dataclass(frozen=True)
class RoundView:
    """One ``screening`` event: the pool, the bracket (tournaments), pilot findings (agentic) and the rest."""

    seq: int
    round: int
    screener: str
    parent_id: str | None
    seconds: float | None
    candidates: tuple[ScreenedCandidate, ...]
    bracket: tuple[Mapping[str, Any], ...]
    pilots: tuple[Mapping[str, Any], ...]
    findings: tuple[str, ...]
    extra: str  # payload keys this view does not draw


def _evidence(record: Screened) -> dict[str, Mapping[str, Any]]:
    """The screening's evidence per candidate, as the plain dicts it was stored as (``Evidence.to_dict``)."""
    return {str(cid): e.to_dict() for cid, e in (record.screening.evidence or {}).items()}


def rounds_view(store: RunStoreProtocol, run_id: str) -> list[RoundView]:
    """Every screening in commit order; ``pilot`` events of the same round are attached when the evidence has none."""
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    options = (store.run(run_id).config.get("screener") or {}).get("options") or {}
    tie_rule = str(options.get("tie_break", "auto"))
    pilot_events: dict[int, list[Mapping[str, Any]]] = {}
    for pilot in store.events(run_id, PilotRan):
        pilot_events.setdefault(pilot.record.round or -1, []).append(redact(pilot.record.payload()))
    out = []
    for screened in store.events(run_id, Screened):
        record, screening = screened.record, screened.record.screening
        ranking = [str(c) for c in screening.ranking]
        chosen, audited, to_verify = set(screening.chosen), set(record.audited), set(record.to_verify)
        evidence = _evidence(record)
        cands = tuple(
            _candidate(
                cid, i + 1, evidence.get(cid) or {}, rows.get(cid, {}), cid in chosen, cid in audited, cid in to_verify
            )
            for i, cid in enumerate(ranking)
        )
        cands = _with_tie_breaks(cands, evidence, tie_rule)
        bracket, pilots, findings = _bracket_and_pilots(evidence)
        r = int(record.round or 0)
        if not pilots:  # the engine's `pilot` events summarise the evidence's pilots: add them only when absent
            pilots += tuple(pilot_events.get(r, ()))
        parent = rows.get(ranking[0], {}).get("parent_id") if ranking else None
        extra = dict(record.extra)  # the payload keys the record does not know
        out.append(
            RoundView(
                screened.seq,
                r,
                str(screening.screener),
                parent,
                num(screening.seconds),
                cands,
                bracket,
                pilots,
                findings,
                dump(extra) if extra else "",
            )
        )
    return out


def _with_tie_breaks(
    cands: tuple[ScreenedCandidate, ...], evidence: Mapping[str, Any], rule: str
) -> tuple[ScreenedCandidate, ...]:
    """Critic-style candidates whose rank value ties another's get ``tie_break``: the rule and the key
    ``finer_signal`` ordered them by (higher first; empty key: a seeded random draw decided)."""
    counts = Counter(round(c.rank_value, 9) for c in cands if c.rank_value is not None)
    out = []
    for c in cands:
        ev = evidence.get(c.id) or {}
        if c.rank_value is None or counts[round(c.rank_value, 9)] < 2 or not (ev.get("labels") or c.n_invalid):
            out.append(c)
            continue
        key = finer_signal(Evidence.from_dict(ev), rule)
        shown = ", ".join(f"{x:.3g}" for x in key) if key else "random draw"
        out.append(replace(c, tie_break=f"{rule}: {shown}"))
    return tuple(out)


def _is_evidence(value: Any) -> bool:
    return isinstance(value, Mapping) and "candidate_id" in value and "rank_value" in value


def _details(ev: Mapping[str, Any], depth: int = 0) -> list[Mapping[str, Any]]:
    """The evidence's ``detail`` and those of evidence nested in it (cascade stages, ensemble members), outer first."""
    detail = ev.get("detail") or {}
    if not isinstance(detail, Mapping):
        return [{"detail": detail}]
    out = [detail]
    if depth < 3:
        for value in detail.values():
            for inner in value if isinstance(value, list) else [value]:
                if _is_evidence(inner):
                    out += _details(inner, depth + 1)
    return out


def _stage_summary(value: Any) -> Any:
    """Nested evidence shown by its numbers only (its critiques and matches are drawn with the outer ones)."""
    if _is_evidence(value):
        return {k: value.get(k) for k in ("rank_value", "votes", "uncertainty", "n_valid", "n_invalid", "labels")}
    if isinstance(value, list) and value and all(_is_evidence(v) for v in value):
        return [_stage_summary(v) for v in value]
    return value


def _candidate(
    cid: str, position: int, ev: Mapping[str, Any], row: Mapping[str, Any], chosen: bool, audited: bool, verified: bool
) -> ScreenedCandidate:
    details = _details(ev)
    extra = {k: _stage_summary(v) for k, v in details[0].items() if k not in _DRAWN_DETAIL}
    votes = {str(k): float(v) for k, v in (ev.get("votes") or {}).items() if num(v) is not None}
    status = str(row.get("status", ""))
    return ScreenedCandidate(
        id=cid,
        position=position,
        idea=short(row.get("idea") or "", 300),
        rank_value=num(ev.get("rank_value")),
        votes=votes,
        uncertainty=num(ev.get("uncertainty")),
        n_valid=int(ev.get("n_valid") or 0),
        n_invalid=int(ev.get("n_invalid") or 0),
        labels=tuple(str(x) for x in ev.get("labels") or ()),
        chosen=chosen,
        audited=audited,
        verified=verified and status in VERIFIED,
        status=status,
        score=num(row.get("score")) if status in VERIFIED else None,
        critiques=tuple(str(c) for d in details for c in d.get("critiques") or ()),
        findings=tuple(str(f) for d in details for f in d.get("findings") or ()),
        extra=dump(extra, 1500) if extra else "",
    )


def _bracket_and_pilots(evidence: Mapping[str, Any]) -> tuple[tuple, tuple, tuple]:
    """Tournament matches (deduplicated over candidates), agentic pilots and findings."""
    matches: dict[tuple, Mapping[str, Any]] = {}
    pilots: list[Mapping[str, Any]] = []
    findings: list[str] = []
    for detail in (d for ev in evidence.values() if isinstance(ev, Mapping) for d in _details(ev)):
        for m in detail.get("matches") or ():
            if isinstance(m, Mapping):
                key = (m.get("round"), tuple(m.get("pair") or ()))
                matches.setdefault(key, {k: m.get(k) for k in ("round", "pair", "votes", "winner", "decided_by")})
        pilots += [redact(dict(p)) for p in detail.get("pilots") or () if isinstance(p, Mapping)]
        findings += [str(f) for f in detail.get("findings") or ()]
    ordered = sorted(matches.values(), key=lambda m: (m.get("round") or 0, str(m.get("pair"))))
    return tuple(ordered), tuple(pilots), tuple(dict.fromkeys(findings))


# ---------------------------------------------------------------------- node pages


@dataclass(frozen=True)
class LogView:
    """One finished verification of the node (there can be several after repairs)."""

    seq: int
    status: str
    reason: str
    score: float | None
    seconds: float
    peak_memory_mb: float | None
    stdout_tail: str
    stderr_tail: str
    peak_gpu_memory_mb: float | None = None


@dataclass(frozen=True)
class NodeDetail:
    """Everything a node page shows."""

    id: str
    parent_id: str | None
    operator: str
    status: str
    reason: str
    round: int
    island: int
    tags: tuple[str, ...]
    reference_ids: tuple[str, ...]
    idea: str
    summary: str
    program: str
    diff: tuple[tuple[str, str], ...]
    score: float | None
    metrics: Mapping[str, Any]
    test_score: float | None
    test_metrics: Mapping[str, Any]
    critiques: tuple[str, ...]
    evidence: str  # the screening evidence for this node, redacted JSON
    screened_in: str  # "round 3 by critic: ranked 2 of 8, chosen"
    logs: tuple[LogView, ...]
    events: tuple[tuple[int, str, str], ...]  # (seq, kind, redacted JSON) of every event about the node
    children: tuple[str, ...]


def node_detail(store: RunStoreProtocol, run_id: str, node_id: str) -> NodeDetail:
    """The page of one node; ``StoreError`` if the run or node is unknown."""
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    if node_id not in rows:
        raise StoreError(f"no node {node_id!r} in run {run_id}")
    return _detail(store, run_id, node_id, rows, screenings_by_node(store, run_id, only=node_id))


def node_details(store: RunStoreProtocol, run_id: str) -> list[NodeDetail]:
    """Every node's page in creation order, reading the nodes view and the screenings once (for the report)."""
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    screenings = screenings_by_node(store, run_id)
    return [_detail(store, run_id, nid, rows, screenings) for nid in rows]


def screenings_by_node(store: RunStoreProtocol, run_id: str, only: str | None = None) -> dict[str, Screened]:
    """Node id -> the first ``screening`` whose ranking holds it."""
    out: dict[str, Screened] = {}
    for ev in store.events(run_id, Screened):
        for cid in ev.record.screening.ranking:
            if (only is None or cid == only) and cid not in out:
                out[str(cid)] = ev.record
        if only is not None and only in out:
            break
    return out


def _detail(
    store: RunStoreProtocol,
    run_id: str,
    node_id: str,
    rows: Mapping[str, Mapping[str, Any]],
    screenings: Mapping[str, Screened],
) -> NodeDetail:
    row = rows[node_id]
    program = _program(store, row)
    parent = rows.get(row.get("parent_id") or "")
    diff = (
        tuple(diff_lines(_program(store, parent), program, f"{parent['node_id']} (parent)", node_id))
        if parent is not None
        else ()
    )
    logs, events = [], []
    for ev in store.events(run_id, node_id=node_id):
        events.append((ev.seq, ev.kind, dump(_without_program(ev.record.payload()), 3000)))
        record = ev.record if ev.kind == Verified.KIND else None  # parse only what is read
        if isinstance(record, Verified):
            v = record.verification
            logs.append(
                LogView(
                    ev.seq,
                    v.status.value,
                    str(v.reason),
                    num(v.score),
                    float(v.seconds),
                    num(v.peak_memory_mb),
                    str(v.stdout_tail or ""),
                    str(v.stderr_tail or ""),
                    num(v.peak_gpu_memory_mb),
                )
            )
    critiques, evidence, screened = _screening_of(screenings.get(node_id), node_id)
    return NodeDetail(
        id=node_id,
        parent_id=row.get("parent_id"),
        operator=row["operator"],
        status=row["status"],
        reason=str(row.get("reason") or ""),
        round=int(row.get("round") or 0),
        island=int(row.get("island") or 0),
        tags=tuple(row.get("tags") or ()),
        reference_ids=tuple(row.get("reference_ids") or ()),
        idea=str(row.get("idea") or ""),
        summary=str(row.get("summary") or ""),
        program=program,
        diff=diff,
        score=num(row.get("score")),
        metrics=dict(row.get("metrics") or {}),
        test_score=num(row.get("test_score")),
        test_metrics=dict(row.get("test_metrics") or {}),
        critiques=critiques,
        evidence=evidence,
        screened_in=screened,
        logs=tuple(logs),
        events=tuple(events),
        children=tuple(r["node_id"] for r in rows.values() if r.get("parent_id") == node_id),
    )


def _program(store: RunStoreProtocol, row: Mapping[str, Any]) -> str:
    digest = row.get("program_hash") or ""
    if not digest:
        return ""
    try:
        return store.get_text(digest)
    except Exception:  # noqa: BLE001 - a missing blob shows as an empty program, the page still renders
        return ""


def _without_program(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    return {k: v for k, v in payload.items() if k != "program"}


def _screening_of(record: Screened | None, node_id: str) -> tuple[tuple[str, ...], str, str]:
    if record is None:
        return (), "", ""
    evidence = _evidence(record).get(node_id)
    ranking = list(record.screening.ranking)
    critiques = tuple(str(c) for d in _details(evidence or {}) for c in d.get("critiques") or ())
    chosen = node_id in (record.to_verify or record.screening.chosen)
    audited = node_id in record.audited
    where = (
        f"round {record.round} by {record.screening.screener}: ranked "
        f"{ranking.index(node_id) + 1} of {len(ranking)}, "
        f"{'audited' if audited else 'chosen' if chosen else 'not chosen'}"
    )
    return critiques, dump(evidence, 6000) if evidence else "", where


def node_json(detail: NodeDetail) -> str:
    """The node page's data as JSON (for the dashboard's API)."""

    return json.dumps(asdict(detail), default=str)


def program_text(store: Any, row: Mapping[str, Any]) -> str:
    """The program of one ``node_rows`` row ("" when it has none or its blob is missing)."""
    return _program(store, row)
