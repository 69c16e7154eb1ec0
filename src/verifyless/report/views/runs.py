"""The run-level data every report and dashboard view is drawn from: pure functions of a (read-only) run store.

This module holds the runs list, a run's summary and budget, and the events no view draws
(``other_events``); its siblings in ``verifyless.report.views`` hold the rest, one job each (see the package
docstring); ``verifyless.report.text`` formats and redacts.

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
  API keys, are replaced by ``REDACTED`` (``text.redact``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from verifyless.events import BriefLogged, Finalised, ReplyParsed, ScreenerLearned, Verified
from verifyless.node import Status
from verifyless.report.text import dump, iso, num, redact
from verifyless.screen.base import FallbackCount
from verifyless.screen.ttl import run_adapters
from verifyless.store.protocol import RunStoreProtocol
from verifyless.task import load_task
from verifyless.task.home import task_home

VERIFIED = frozenset(s.value for s in Status if s.verified)  # statuses of paid verifications, as stored
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
        "data_report",  # its own section (views/data_report.py)
    }
)


# ---------------------------------------------------------------------- task and direction


def direction_of(store: RunStoreProtocol, run_id: str) -> str:
    """``maximize`` / ``minimize`` from a stored ok verification (fitness = +-score), else ``maximize``."""
    for ev in store.events(run_id, Verified):
        score, fit = num(ev.record.verification.score), num(ev.record.fitness)
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


def run_task_meta(store: RunStoreProtocol, run_id: str) -> dict[str, Any]:
    """``task_meta`` of a run's task, loaded from where the run was made (``task.home``), with the metric name and
    direction the run stored, which label its scores even when the task cannot be loaded here."""
    home = task_home(store, run_id)
    meta = dict(task_meta(home.reference))
    if home.metric is not None:
        meta.update(metric=home.metric, direction=home.direction or meta.get("direction"))
    return meta


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


def best_node(store: RunStoreProtocol, run_id: str) -> Any:
    """The node with the highest validation fitness (``RunStore.nodes`` re-reads only changed rows)."""
    ok = [(n.fitness, i, n) for i, n in enumerate(store.nodes(run_id)) if n.fitness is not None]
    return max(ok, key=lambda t: (t[0], -t[1]))[2] if ok else None  # the first of equal fitnesses, as max() did


def run_row(store: RunStoreProtocol, run_id: str) -> RunRow:
    info = store.run(run_id)
    cfg = info.config or {}
    best = best_node(store, run_id)
    return RunRow(
        run_id=info.run_id,
        task=info.task,
        status=info.status,
        created=iso(info.created),
        updated=iso(info.updated),
        strategy=str((cfg.get("strategy") or {}).get("name", "")),
        screener=str((cfg.get("screener") or {}).get("name", "")),
        seed=int(info.seed),
        verifications=int(store.budget(run_id).verifications),
        cap=(cfg.get("budget") or {}).get("verifications"),
        best_score=num(best.score) if best else None,
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
    parsed: Mapping[str, int] = field(default_factory=dict)  # outcome -> replies (`reply_parsing`)

    @property
    def parse_line(self) -> str:
        """``first/after reminder/never`` counts, or '' when the role noted none (older runs, offline roles)."""
        if not self.parsed:
            return ""
        return "/".join(str(self.parsed.get(k, 0)) for k in PARSE_OUTCOMES)


PARSE_OUTCOMES = ("first", "reminder", "never")


def reply_parsing(store: RunStoreProtocol, run_id: str) -> dict[tuple[str, str], dict[str, int]]:
    """``{(role, model): {outcome: replies}}`` from the run's ``reply_parsed`` events: how often each role read
    its reply on the first try, after a format reminder, or never. Empty for runs stored before it existed."""
    out: dict[tuple[str, str], dict[str, int]] = {}
    for ev in store.events(run_id, ReplyParsed):
        counts = out.setdefault((ev.record.role, ev.record.model), dict.fromkeys(PARSE_OUTCOMES, 0))
        counts[ev.record.outcome] = counts.get(ev.record.outcome, 0) + 1
    return out


@dataclass(frozen=True)
class BudgetView:
    total: Mapping[str, float]
    caps: Mapping[str, Any]
    by_kind: tuple[BudgetRow, ...]
    by_role: tuple[RoleUsage, ...]


def gpu_seconds(store: RunStoreProtocol, run_id: str) -> float:
    """GPU seconds the run's verifications spent: each one's charged seconds times the GPUs it held."""
    return sum(
        ev.charge.evaluator_seconds * int(ev.record.verification.gpus or 0)
        for ev in store.events(run_id, Verified)
        if ev.charge is not None
    )


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
    parsing = reply_parsing(store, run_id)
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
            parsing.get((str(u["role"]), str(u["model"])), {}),
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
        "gpu_seconds": gpu_seconds(store, run_id),
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
    brief = BriefLogged("")
    stopped, last = "", 0
    learned: list[Mapping[str, Any]] = []
    fallbacks = FallbackCount()
    for ev in store.events(run_id):
        counts[ev.kind] = counts.get(ev.kind, 0) + 1
        last = ev.seq
        record = ev.record
        fallbacks.feed(record)
        if isinstance(record, ScreenerLearned):
            learned.append(record.payload())
        elif isinstance(record, BriefLogged):
            brief = record
        elif isinstance(record, Finalised):
            stopped = str(record.stopped or "")
    meta = run_task_meta(store, run_id)
    return RunSummary(
        row=run_row(store, run_id),
        config_json=json.dumps(redact(info.config), indent=2, default=str),
        brief_understanding=str(brief.understanding or ""),
        brief_criteria=tuple(str(c) for c in brief.criteria or ()),
        metric=str(meta.get("metric", "score")),
        direction=str(meta.get("direction") or direction_of(store, run_id)),
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
    for ev in store.events(run_id):
        if ev.kind in known:
            continue
        out.append(GenericEvent(ev.seq, ev.kind, ev.node_id or "", iso(ev.ts), dump(ev.record.payload(), 2000)))
        if len(out) >= limit:
            break
    return out
