"""The data every report and dashboard view is drawn from: pure functions of a (read-only) run store.

Each function reads the store through ``RunStore``'s read API (``runs``,
``run``, ``events``, ``node_rows``, ``budget``, ``llm_usage``, ``get_text``)
and returns frozen records of plain values; nothing here renders, writes or
imports a web framework. The HTML report (``verifyless.report.render``) and
the dashboard (``verifyless.ui``) both render these records, so the two show
the same numbers.

Contracts:

* Scores are the task metric's raw values (``score``); "best" follows the
  metric's direction, inferred from the stored oriented ``fitness`` (higher is
  better) so no task needs to be loaded.
* The final node's hidden test score is only in ``FinalView`` and node
  details, never in the curve, rounds or tree: search never saw it.
* Event kinds and payload keys that this module does not know are kept and
  shown generically (``other_events``, ``extra`` fields), never dropped and
  never an error: other parts of verifyless add event kinds over time.
* Configuration values under secret-looking keys, and strings that look like
  API keys, are replaced by ``REDACTED`` (``redact``).
"""

from __future__ import annotations

import difflib
import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from verifyless.metrics.critic import breakdown, calibration, critic_metrics, critic_records_from_store
from verifyless.outcome import FIVE, THREE
from verifyless.screen.audit import ScreenerAudit, audit_from_store
from verifyless.screen.base import FallbackCount
from verifyless.screen.ttl import run_adapters
from verifyless.store.protocol import RunStoreProtocol
from verifyless.task import load_task

REDACTED = "[redacted]"
_SECRET_KEY = re.compile(
    r"(api[_-]?key|secret|password|passwd|authorization|bearer|credential|access[_-]?token)", re.IGNORECASE
)
_SECRET_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{12,}|Bearer\s+[A-Za-z0-9._\-]{12,})")
VERIFIED = ("ok", "failed", "timeout", "oom", "contract-violation", "invalid-metric")
KNOWN_KINDS = frozenset(
    {
        "config",
        "node",
        "status",
        "verification_started",
        "verification",
        "llm_call",
        "run_status",
        "screening",
        "round",
        "tell",
        "final",
        "final_selection",
        "submission",
        "brief",
        "data_report",  # its own section (data_report_view.py)
    }
)


# ---------------------------------------------------------------------- small helpers


def redact(value: Any) -> Any:
    """A copy of ``value`` with secret-looking keys' values and API-key-looking strings replaced by REDACTED."""
    if isinstance(value, Mapping):
        return {
            str(k): (REDACTED if _SECRET_KEY.search(str(k)) and v not in (None, "") else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _SECRET_VALUE.sub(REDACTED, value)
    return value


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def _iso(ts: float | None) -> str:
    return "" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(ts)))


def _dump(value: Any, limit: int = 4000) -> str:
    text = json.dumps(redact(value), indent=1, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more characters)"


def direction_of(store: RunStoreProtocol, run_id: str) -> str:
    """``maximize`` / ``minimize`` from a stored ok verification (fitness = +-score), else ``maximize``."""
    for ev in store.events(run_id, kinds=["verification"]):
        score, fit = _num(ev.payload.get("score")), _num(ev.payload.get("fitness"))
        if score is not None and fit is not None and score != 0:
            return "minimize" if fit == -score and fit != score else "maximize"
    return "maximize"


@lru_cache(maxsize=64)
def task_meta(task: str) -> dict[str, Any]:
    """Metric name/direction and anchors of a task that can still be loaded; {} if it cannot (moved, custom)."""
    try:
        t = load_task(task)
    except Exception:  # noqa: BLE001 - a task folder that is gone only costs the labels
        return {}
    return {
        "metric": t.metric.name,
        "direction": t.metric.direction,
        "bound": t.anchors.bound,
        "reference": t.anchors.reference,
        "floor": t.anchors.floor,
        "description": t.description,
    }


# ---------------------------------------------------------------------- runs


@dataclass(frozen=True)
class RunRow:
    """One line of the runs list."""

    run_id: str
    task: str
    status: str
    created: str
    updated: str
    strategy: str
    screener: str
    seed: int
    verifications: int
    cap: int | None
    best_score: float | None
    best_node: str | None
    n_nodes: int


def _best(rows: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    ok = [r for r in rows if r.get("fitness") is not None]
    return max(ok, key=lambda r: r["fitness"]) if ok else None


def _best_node(store: RunStoreProtocol, run_id: str) -> Any:
    """The node with the highest validation fitness (``RunStore.nodes`` re-reads only changed rows)."""
    ok = [(n.fitness, i, n) for i, n in enumerate(store.nodes(run_id)) if n.fitness is not None]
    return max(ok, key=lambda t: (t[0], -t[1]))[2] if ok else None  # the first of equal fitnesses, as max() did


def run_row(store: RunStoreProtocol, run_id: str) -> RunRow:
    info = store.run(run_id)
    cfg = info.config or {}
    best = _best_node(store, run_id)
    return RunRow(
        run_id=info.run_id,
        task=info.task,
        status=info.status,
        created=_iso(info.created),
        updated=_iso(info.updated),
        strategy=str((cfg.get("strategy") or {}).get("name", "")),
        screener=str((cfg.get("screener") or {}).get("name", "")),
        seed=int(info.seed),
        verifications=int(store.budget(run_id).verifications),
        cap=(cfg.get("budget") or {}).get("verifications"),
        best_score=_num(best.score) if best else None,
        best_node=best.id if best else None,
        n_nodes=int(info.n_nodes),
    )


def runs_list(store: RunStoreProtocol) -> list[RunRow]:
    """Every run in the store, newest first."""
    return [run_row(store, info.run_id) for info in reversed(store.runs())]


# ---------------------------------------------------------------------- summary and budget


@dataclass(frozen=True)
class BudgetRow:
    """What the events of one kind charged to the ledger."""

    kind: str
    events: int
    verifications: int
    evaluator_seconds: float
    tokens_in: int
    tokens_out: int
    cost: float
    pilot_seconds: float


@dataclass(frozen=True)
class RoleUsage:
    """LLM usage of one (role, model) pair, from ``llm_call`` events."""

    role: str
    model: str
    calls: int
    cached: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    latency: float


@dataclass(frozen=True)
class BudgetView:
    total: Mapping[str, float]
    caps: Mapping[str, Any]
    by_kind: tuple[BudgetRow, ...]
    by_role: tuple[RoleUsage, ...]


def budget_view(store: RunStoreProtocol, run_id: str) -> BudgetView:
    """Totals, configured caps, charges grouped by event kind, and tokens/cost by role."""
    by_kind: dict[str, list[float]] = {}
    for ev in store.events(run_id):
        if ev.charge is None:
            continue
        c = ev.charge
        acc = by_kind.setdefault(ev.kind, [0, 0, 0.0, 0, 0, 0.0, 0.0])
        for i, v in enumerate(
            (1, c.verifications, c.evaluator_seconds, c.tokens_in, c.tokens_out, c.cost, c.pilot_seconds)
        ):
            acc[i] += v
    rows = tuple(
        BudgetRow(k, int(a[0]), int(a[1]), float(a[2]), int(a[3]), int(a[4]), float(a[5]), float(a[6]))
        for k, a in sorted(by_kind.items())
    )
    usage = tuple(
        RoleUsage(
            str(u["role"] or "?"),
            str(u["model"] or "?"),
            int(u["calls"]),
            int(u["cached"] or 0),
            int(u["prompt_tokens"] or 0),
            int(u["completion_tokens"] or 0),
            float(u["cost"] or 0.0),
            float(u["latency"] or 0.0),
        )
        for u in store.llm_usage(run_id)
    )
    b = store.budget(run_id)
    total = {
        "verifications": b.verifications,
        "evaluator_seconds": b.evaluator_seconds,
        "tokens_in": b.tokens_in,
        "tokens_out": b.tokens_out,
        "cost": b.cost,
        "pilot_seconds": b.pilot_seconds,
    }
    caps = dict((store.run(run_id).config or {}).get("budget") or {})
    return BudgetView(total, caps, rows, usage)


@dataclass(frozen=True)
class RunSummary:
    """Header of a run: its row, redacted configuration, task brief, metric and event counts."""

    row: RunRow
    config_json: str
    brief_understanding: str
    brief_criteria: tuple[str, ...]
    metric: str
    direction: str
    stopped: str
    event_counts: Mapping[str, int]
    last_seq: int
    adapters: tuple[str, ...] = ()  # the critic adapters screened with, by weights hash (screen.ttl.run_adapters)
    fallbacks: str = ""  # screenings that fell back to a random pick (screen.base.fallback_line; '' when none)


def run_summary(store: RunStoreProtocol, run_id: str) -> RunSummary:
    info = store.run(run_id)
    counts: dict[str, int] = {}
    brief: Mapping[str, Any] = {}
    stopped, last = "", 0
    learned: list[Mapping[str, Any]] = []
    fallbacks = FallbackCount()
    for ev in store.events(run_id, kinds=None):
        counts[ev.kind] = counts.get(ev.kind, 0) + 1
        last = ev.seq
        fallbacks.feed(ev.kind, ev.payload)
        if ev.kind == "screener_learn":
            learned.append(ev.payload)
        if ev.kind == "brief":
            brief = ev.payload
        elif ev.kind == "final":
            stopped = str(ev.payload.get("stopped", ""))
    meta = task_meta(info.task)
    return RunSummary(
        row=run_row(store, run_id),
        config_json=json.dumps(redact(info.config), indent=2, default=str),
        brief_understanding=str(brief.get("understanding", "")),
        brief_criteria=tuple(str(c) for c in brief.get("criteria", ()) or ()),
        metric=str(meta.get("metric", "score")),
        direction=direction_of(store, run_id),
        stopped=stopped,
        event_counts=dict(sorted(counts.items())),
        last_seq=last,
        adapters=tuple(
            f"{a['role']}: {a['folder']} ({a['tag'] or 'folder gone'})"
            if "folder" in a
            else f"{a['role']}: v{a['version']} from {a['origin'] or 'a fresh LoRA'}"
            for a in run_adapters(info.config, learned)
        ),
        fallbacks=fallbacks.line(),
    )


# ---------------------------------------------------------------------- curves


@dataclass(frozen=True)
class CurvePoint:
    """State after the ``x``-th paid verification (the baseline's included)."""

    x: int
    node_id: str
    status: str
    score: float | None
    best_score: float | None
    best_node: str | None
    seconds: float
    evaluator_seconds: float = 0.0  # every charged evaluator second so far: verifications, pilots, smoke runs


@dataclass(frozen=True)
class CurveView:
    """Best-so-far validation score against verifications, with the baseline and, when known, a ceiling."""

    run_id: str
    label: str
    metric: str
    direction: str
    points: tuple[CurvePoint, ...]
    baseline: float | None
    ceiling: float | None = None
    ceiling_label: str = ""
    y_range: tuple[float, float] | None = None  # set when several curves share one y axis (``compare_curves``)

    @property
    def final(self) -> float | None:
        return self.points[-1].best_score if self.points else None

    def compute_to_target(self) -> tuple[tuple[float, float, int], ...]:
        """(best score, evaluator seconds, verifications) each time the best improved: compute to reach it.

        Evaluator seconds count everything charged up to that verification (pilots and smoke runs too),
        so runs with and without pilots compare on the same axis.
        """
        out: list[tuple[float, float, int]] = []
        for p in self.points:
            if p.best_score is not None and (not out or p.best_score != out[-1][0]):
                out.append((p.best_score, p.evaluator_seconds, p.x))
        return tuple(out)

    @property
    def better(self) -> str:
        """'higher is better' or 'lower is better', for axis labels."""
        return "lower is better" if self.direction == "minimize" else "higher is better"


def y_extent(curves: Sequence[CurveView]) -> tuple[float, float] | None:
    """The scores a figure of ``curves`` must show: best-so-far, every verified score, baselines, and a ceiling
    when it lies near them (a far one, e.g. an MAE bound of 0, would flatten the curves: it is noted, not drawn).
    None when nothing was verified yet."""
    values = [p.best_score for c in curves for p in c.points if p.best_score is not None]
    values += [p.score for c in curves for p in c.points if p.score is not None and p.status == "ok"]
    values += [c.baseline for c in curves if c.baseline is not None]
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    span = (max(values) - min(values)) or abs(max(values)) or 1.0
    near = (min(values) - span, max(values) + span)
    values += [c.ceiling for c in curves if c.ceiling is not None and near[0] <= c.ceiling <= near[1]]
    return min(values), max(values)


def best_curve(store: RunStoreProtocol, run_id: str, label: str | None = None) -> CurveView:
    """One point per ``verification`` event in commit order; the ceiling is the task's ``bound`` anchor if any."""
    info = store.run(run_id)
    meta = task_meta(info.task)
    best_fit = -math.inf
    best: tuple[float | None, str | None] = (None, None)
    total, compute, baseline = 0.0, 0.0, None
    points: list[CurvePoint] = []
    for ev in store.events(run_id):
        compute += ev.charge.evaluator_seconds if ev.charge else 0.0
        if ev.kind != "verification":
            continue
        p = ev.payload
        total += (
            ev.charge.evaluator_seconds
            if ev.charge
            else sum(float(p.get(k) or 0.0) for k in ("run_seconds", "score_seconds", "overhead_seconds"))
        )
        fit, score = _num(p.get("fitness")), _num(p.get("score"))
        if ev.node_id == "root" and baseline is None:
            baseline = score
        if p.get("status") == "ok" and fit is not None and fit > best_fit:
            best_fit, best = fit, (score, ev.node_id)
        points.append(
            CurvePoint(
                len(points) + 1,
                str(ev.node_id),
                str(p.get("status", "")),
                score,
                best[0],
                best[1],
                round(total, 6),
                round(compute, 6),
            )
        )
    ceiling, ceiling_label = oracle_ceiling(store, info)
    if ceiling is None and _num(meta.get("bound")) is not None:
        ceiling, ceiling_label = _num(meta.get("bound")), "task bound (best achievable)"
    name = label or f"{run_id} ({(info.config.get('screener') or {}).get('name', '?')})"
    return CurveView(
        run_id,
        name,
        str(meta.get("metric", "score")),
        direction_of(store, run_id),
        tuple(points),
        baseline,
        ceiling,
        ceiling_label,
    )


CEILING_MATCH = ("roles", "budget")  # config blocks an oracle run must share with a run to be its ceiling


def oracle_ceiling(store: RunStoreProtocol, info: Any) -> tuple[float | None, str]:
    """The best final validation score of the store's ``oracle``-screened runs comparable with ``info``, if any.

    The oracle screener picks by true outcome, so its run is what perfect screening reaches with the same
    proposals and budget. Comparable: the same task and seed, and equal ``roles`` (models) and ``budget``
    config blocks; any other oracle run in the store is ignored. The label says which run it is.
    """
    mine = info.config or {}
    best: Any = None
    source = ""
    for other in store.runs():
        cfg = other.config or {}
        if (
            other.run_id == info.run_id
            or other.task != info.task
            or other.seed != info.seed
            or (cfg.get("screener") or {}).get("name") != "oracle"
            or any(cfg.get(key) != mine.get(key) for key in CEILING_MATCH)
        ):
            continue
        node = _best_node(store, other.run_id)
        if node is not None and (best is None or node.fitness > best.fitness):
            best, source = node, other.run_id
    if best is None:
        return None, ""
    return _num(best.score), f"ceiling: oracle-screened run {source} (same task, seed, roles and budget)"


def compare_curves(store: RunStoreProtocol, run_ids: Sequence[str]) -> list[CurveView]:
    """Curves of several runs (each labelled with its screener and strategy) for a side-by-side view.

    Every curve carries the same ``y_range`` (the ``y_extent`` of all of them), so separate panels share a y axis.
    """
    out = []
    for rid in run_ids:
        cfg = store.run(rid).config or {}
        label = (
            f"{rid[-6:]} {(cfg.get('screener') or {}).get('name', '?')}/"
            f"{(cfg.get('strategy') or {}).get('name', '?')} seed {cfg.get('seed', '?')}"
        )
        out.append(best_curve(store, rid, label))
    extent = y_extent(out)
    return [replace(c, y_range=extent) for c in out]


# ---------------------------------------------------------------------- live progress


@dataclass(frozen=True)
class Progress:
    """What a live view needs to know whether anything changed and what to print."""

    run_id: str
    status: str
    last_seq: int
    verifications: int
    cap: int | None
    best_score: float | None
    best_node: str | None
    rounds: int
    n_nodes: int
    recent: tuple[tuple[int, str, str, str], ...]  # (seq, kind, node id, short text), newest first
    verified_at: tuple[float, ...] = ()  # commit times of the last ETA_WINDOW paid verifications, oldest first
    eta_s: float | None = None  # seconds until the verification cap at the recent pace; None when unknown


ETA_WINDOW = 8


def eta_seconds(verified_at: Sequence[float], done: int, cap: int | None, status: str) -> float | None:
    """Seconds until ``cap`` verifications at the pace of the recent ones, or None when it cannot be told.

    The pace is the mean gap between the last ``ETA_WINDOW`` verification commits, so a resumed run is not
    slowed by the time it lay dead. Unknown (None) without a cap, before two verifications, or once the run
    is no longer running. A run also stops on other caps (rounds, evaluator seconds, tokens): the estimate
    is an upper bound for those.
    """
    if cap is None or status != "running" or len(verified_at) < 2:
        return None
    pace = (verified_at[-1] - verified_at[0]) / (len(verified_at) - 1)
    return max(0, cap - done) * max(0.0, pace)


def progress(store: RunStoreProtocol, run_id: str, recent: int = 8, since: Progress | None = None) -> Progress:
    """The run's live state; with ``since`` (an earlier result for the same run) only newer events are read."""
    row = run_row(store, run_id)
    last, rounds = (since.last_seq, since.rounds) if since else (0, 0)
    tail = list(reversed(since.recent)) if since else []
    verified_at = list(since.verified_at) if since else []
    for ev in store.events(run_id, kinds=None, after=last):
        last = ev.seq
        if ev.charge is not None and ev.charge.verifications > 0:  # paid ones only: a reuse is instant
            verified_at = [*verified_at, ev.ts][-ETA_WINDOW:]
        if ev.kind == "round":
            rounds = max(rounds, int(ev.payload.get("round", 0) or 0))
        if ev.kind not in ("llm_call", "tell"):
            tail.append((ev.seq, ev.kind, ev.node_id or "", _event_line(ev.kind, ev.payload)))
            tail = tail[-recent:]
    return Progress(
        run_id,
        row.status,
        last,
        row.verifications,
        row.cap,
        row.best_score,
        row.best_node,
        rounds,
        row.n_nodes,
        tuple(reversed(tail)),
        tuple(verified_at),
        eta_seconds(verified_at, row.verifications, row.cap, row.status),
    )


def _event_line(kind: str, p: Mapping[str, Any]) -> str:
    if kind == "verification":
        return f"{p.get('status', '')} {p.get('score') if p.get('score') is not None else ''}".strip()
    if kind == "screening":
        return f"{p.get('screener', '')} chose {', '.join(map(str, p.get('to_verify', p.get('chosen', []))))}"
    if kind in ("status", "run_status"):
        return str(p.get("status", ""))
    text = json.dumps(redact(p), default=str, ensure_ascii=False)
    return text if len(text) < 160 else text[:157] + "..."


# ---------------------------------------------------------------------- other events (generic)


@dataclass(frozen=True)
class GenericEvent:
    seq: int
    kind: str
    node_id: str
    time: str
    text: str


def other_events(
    store: RunStoreProtocol, run_id: str, known: frozenset[str] = KNOWN_KINDS, limit: int = 300
) -> list[GenericEvent]:
    """Events of kinds the views do not draw (e.g. pilot, learn, snapshot, memory), as redacted JSON text."""
    out = []
    for ev in store.events(run_id, kinds=None):
        if ev.kind in known:
            continue
        out.append(GenericEvent(ev.seq, ev.kind, ev.node_id or "", _iso(ev.ts), _dump(ev.payload, 2000)))
        if len(out) >= limit:
            break
    return out


# ---------------------------------------------------------------------- final node


@dataclass(frozen=True)
class SubmissionView:
    """The top-K ensemble submission (MCGS, ``submit_ensemble``) a run made after choosing its final node.

    ``members``: the nodes asked for, best first; ``combined``: those whose re-run worked and went into the
    combination (``combine``, e.g. mean); ``seconds``: the evaluator seconds it was charged; ``test_score``:
    hidden, reporting only.
    """

    members: tuple[str, ...]
    combined: tuple[str, ...]
    combine: str
    status: str
    reason: str
    score: float | None
    test_score: float | None
    seconds: float


def submission_view(payload: Mapping[str, Any]) -> SubmissionView:
    """A ``submission`` event's payload as a ``SubmissionView``."""
    return SubmissionView(
        tuple(str(m) for m in payload.get("members") or ()),
        tuple(str(m) for m in payload.get("combined") or ()),
        str(payload.get("combine", "")),
        str(payload.get("status", "")),
        str(payload.get("reason", "")),
        _num(payload.get("score")),
        _num(payload.get("test_score")),
        _num(payload.get("seconds")) or 0.0,
    )


@dataclass(frozen=True)
class FinalView:
    """The node the run returned, its validation outcome, and the hidden test score (reporting only)."""

    node_id: str | None
    stopped: str
    score: float | None
    metrics: Mapping[str, Any]
    test_score: float | None
    test_metrics: Mapping[str, Any]
    baseline_score: float | None
    baseline_test_score: float | None
    selection: Mapping[str, Any] | None = None
    submission: SubmissionView | None = None  # the ensemble submission, when the run made one


def final_view(store: RunStoreProtocol, run_id: str) -> FinalView:
    """From the ``final`` event (or, while running, the best validation node so far)."""
    final: Mapping[str, Any] = {}
    selection = None
    submission = None
    for ev in store.events(run_id, kinds=["final", "final_selection", "submission"]):
        if ev.kind == "final":
            final = ev.payload
        elif ev.kind == "submission":
            submission = submission_view(ev.payload)
        else:
            selection = {k: v for k, v in ev.payload.items() if k != "matches"} | {
                "matches": len(ev.payload.get("matches") or [])
            }
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    node_id = final.get("node_id") if final else (_best(rows.values()) or {}).get("node_id")
    row = rows.get(node_id or "", {})
    root = rows.get("root", {})
    return FinalView(
        node_id,
        str(final.get("stopped", "" if final else "(running: best so far)")),
        _num(row.get("score")),
        dict(row.get("metrics") or {}),
        _num(row.get("test_score")),
        dict(row.get("test_metrics") or {}),
        _num(root.get("score")),
        _num(root.get("test_score")),
        selection,
        submission,
    )


# ---------------------------------------------------------------------- critic calibration


@dataclass(frozen=True)
class AuditRow:
    candidate_id: str
    predicted: str | None
    truth: str
    votes: Mapping[str, float]


@dataclass(frozen=True)
class CriticView:
    """Critic predictions joined with execution outcomes (see ``verifyless.metrics.critic``)."""

    n: int
    metrics: Mapping[str, Any]
    by_screener: Mapping[str, Mapping[str, Any]]
    labels3: tuple[str, ...]
    confusion3: tuple[tuple[int, ...], ...]
    labels5: tuple[str, ...]
    confusion5: tuple[tuple[int, ...], ...] | None
    bins: tuple[tuple[float, float, int, float | None, float | None], ...]
    ece: float | None
    brier: float | None
    audits: tuple[AuditRow, ...] = field(default_factory=tuple)


def _matrix(m: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(x) for x in row) for row in m)


def critic_view(store: RunStoreProtocol, run_id: str) -> CriticView | None:
    """None when no screened-and-verified candidate has a critic verdict (e.g. random screening).

    Audits (candidates verified although the screener did not choose them) are listed apart: they are the
    unbiased sample of the critic's rejections.
    """
    records = critic_records_from_store(store, run_id)
    if not records:
        return None
    m = critic_metrics(records)
    cal = calibration(records)
    audited = {cid for ev in store.events(run_id, kinds=["screening"]) for cid in ev.payload.get("audited") or ()}
    audits = tuple(
        AuditRow(r.candidate_id, r.pred3, r.true3, dict(r.votes)) for r in records if r.candidate_id in audited
    )
    return CriticView(
        n=m.n,
        metrics=m.row(),
        by_screener={k: v.row() for k, v in breakdown(records).items()},
        labels3=THREE,
        confusion3=_matrix(m.confusion3),
        labels5=FIVE,
        confusion5=_matrix(m.confusion5) if m.confusion5 is not None else None,
        bins=tuple((b.low, b.high, b.count, b.mean_predicted, b.fraction_improve) for b in cal.bins),
        ece=cal.ece,
        brier=cal.brier,
        audits=audits,
    )


def screener_audit_view(store: RunStoreProtocol, run_id: str) -> ScreenerAudit | None:
    """The online audit of the run's screener (``screen/audit.py``); None before the first screening."""
    audit = audit_from_store(store, run_id)
    return audit if audit.screenings else None


# ---------------------------------------------------------------------- helpers shared with data_nodes


def short(text: str, n: int = 140) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def diff_lines(old: str, new: str, old_name: str = "parent", new_name: str = "node") -> list[tuple[str, str]]:
    """A unified diff as (css class, line) pairs: ``add``, ``del``, ``hunk``, ``file`` or ``ctx``."""
    out = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm="", n=3):
        if line.startswith(("+++", "---")):
            cls = "file"
        elif line.startswith("@@"):
            cls = "hunk"
        elif line.startswith("+"):
            cls = "add"
        elif line.startswith("-"):
            cls = "del"
        else:
            cls = "ctx"
        out.append((cls, line))
    return out
