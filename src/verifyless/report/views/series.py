"""Per-verification series for the dashboard: LLM usage so far and every candidate's score (with its metrics).

Pure reads of a run store, frozen records of plain values. Validation only:
the hidden ``test_metrics`` of a verification are never read here (the
dashboard shows hidden test scores only in the final box and node pages).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verifyless.events import LlmCalled, RoundStarted, Verified
from verifyless.report.text import num


@dataclass(frozen=True)
class UsagePoint:
    """LLM usage charged up to the ``x``-th verification (its own commit included); ``x = 0`` is before any."""

    x: int
    node_id: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float


@dataclass(frozen=True)
class UsageSeries:
    points: tuple[UsagePoint, ...]
    total: UsagePoint  # everything charged in the run, calls after the last verification included


def usage_series(store: Any, run_id: str) -> UsageSeries:
    """Cumulative calls, tokens and cost at each ``verification`` event, in commit order.

    Tokens and cost are the ledger charges of the ``llm_call`` events (a cache
    hit charges nothing, so it adds a call but no tokens); ``calls`` counts
    every call, hits and failures included.
    """
    calls = tokens_in = tokens_out = 0
    cost = 0.0
    points = [UsagePoint(0, "", 0, 0, 0, 0.0)]
    for ev in store.events(run_id, LlmCalled, Verified):
        if ev.kind == LlmCalled.KIND:  # counted from its charge: the record is not read
            calls += 1
            if ev.charge is not None:
                tokens_in += int(ev.charge.tokens_in or 0)
                tokens_out += int(ev.charge.tokens_out or 0)
                cost += float(ev.charge.cost or 0.0)
            continue
        points.append(UsagePoint(len(points), str(ev.node_id), calls, tokens_in, tokens_out, round(cost, 8)))
    total = UsagePoint(len(points) - 1, "", calls, tokens_in, tokens_out, round(cost, 8))
    return UsageSeries(tuple(points), total)


@dataclass(frozen=True)
class ScorePoint:
    """The ``x``-th verification: its node, status, task score and numeric validation metrics."""

    x: int
    node_id: str
    status: str
    score: float | None
    metrics: dict[str, float]


@dataclass(frozen=True)
class ScoreScatter:
    points: tuple[ScorePoint, ...]
    metrics: tuple[str, ...]  # every numeric validation metric name seen, sorted


def score_scatter(store: Any, run_id: str) -> ScoreScatter:
    """One point per ``verification`` event (failed ones with ``score=None``); metrics from ``metrics`` only."""
    points: list[ScorePoint] = []
    names: set[str] = set()
    for ev in store.events(run_id, Verified):
        v = ev.record.verification
        metrics = {str(k): x for k, x in ((k, num(x)) for k, x in (v.metrics or {}).items()) if x is not None}
        names.update(metrics)
        points.append(ScorePoint(len(points) + 1, str(ev.node_id), v.status.value, num(v.score), metrics))
    return ScoreScatter(tuple(points), tuple(sorted(names)))


@dataclass(frozen=True)
class SchedulePoint:
    """Where an annealing strategy (MCGS) stood at one round's ask: c(t), w(t) and the effective branches."""

    round: int
    t: int
    progress: float
    c: float
    w: float
    branches: float


def schedule_series(store: Any, run_id: str, most: int = 0) -> tuple[SchedulePoint, ...]:
    """The ``schedule`` of every ``round`` event that has one (MCGS runs; empty otherwise).

    ``branches`` is exp(H) over the strategy's last selections (``search/mcgs.py``). ``most`` > 0 keeps at
    most that many rounds, evenly spaced, the first and the last always included.
    """
    points = []
    for ev in store.events(run_id, RoundStarted):
        s = ev.record.schedule
        if not isinstance(s, Mapping):
            continue
        values = [num(s.get(k)) for k in ("progress", "c", "w", "branches")]
        if any(v is None for v in values):
            continue
        progress, c, w, branches = (float(v) for v in values)  # type: ignore[arg-type]
        points.append(SchedulePoint(int(ev.record.round), int(s.get("t", 0)), progress, c, w, branches))
    if most <= 0 or len(points) <= most:
        return tuple(points)
    step = (len(points) - 1) / (most - 1)
    return tuple(points[round(i * step)] for i in range(most))
