"""Selection statistics: how much better a selector's pick is than a random pick (SPEC section 7).

Scores here are oriented so that higher is better (``Node.fitness``, or a
hidden test score passed through ``Metric.orient``). A pool is one parent's
candidates with known outcomes; a failed candidate's score is None and, by
default, is filled with the pool's worst working score before any statistic
(a crash is no better than the worst child that ran; ``fill="drop"`` removes
it instead). Pools in which nothing worked are skipped.

* selection advantage = score(chosen) - mean(pool); a random pick scores 0
  in expectation.
* normalised advantage = (score(chosen) - mean) / (max - mean): random = 0,
  oracle = 1. When max == mean every candidate scores the same, no selector
  can do better or worse than random, and the value is defined as 0; such
  pools are counted as ``degenerate`` and left out of the normalised mean.
* regret = max - score(chosen); top-1 hit = the chosen one has the pool's
  best score (any of several tied best counts).
* pairwise accuracy on sibling pairs (label a pool's candidates by their own
  validation or test score, or, as the RPM paper does, by the best test score
  in each candidate's subtree: ``pools_from_store(target="subtree")``): for every pair in a pool whose scores
  differ by at least ``min_gap`` (default 0.01) of the pool's score range
  (max - min; pools with zero range contribute no pairs), the selector is
  right when its preference (rank value, higher = preferred) has the same
  sign as the score difference; an equal rank value counts half.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from verifyless.events import Screened

MIN_GAP = 0.01


def selection_advantage(chosen: float, pool: Sequence[float]) -> float:
    """score(chosen) - mean score of the pool."""
    return float(chosen) - float(np.mean(pool))


def normalized_advantage(chosen: float, pool: Sequence[float]) -> float:
    """(chosen - mean) / (max - mean); random = 0, oracle = 1; 0 when max == mean (all equal)."""
    mean, top = float(np.mean(pool)), float(np.max(pool))
    return 0.0 if top - mean <= 0 else (float(chosen) - mean) / (top - mean)


def fill_failures(scores: Mapping[str, float | None], fill: Literal["min", "drop"] = "min") -> dict[str, float]:
    """Replace failed (None/NaN) scores by the pool's worst working score, or drop them."""
    ok = {k: float(v) for k, v in scores.items() if v is not None and math.isfinite(v)}
    if fill == "drop" or not ok:
        return ok
    worst = min(ok.values())
    return {k: ok.get(k, worst) for k in scores}


@dataclass(frozen=True)
class Pool:
    """One parent's candidates: oriented ``scores`` (None = failed) and a selector's verdict.

    ``chosen`` is the selector's pick (None if it picked nothing);
    ``rank_values`` its preference per candidate (higher = preferred), used
    for pairwise accuracy.
    """

    pool_id: str
    scores: Mapping[str, float | None]
    chosen: str | None = None
    rank_values: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class PoolStats:
    pool_id: str
    n: int
    chosen: str | None
    advantage: float
    normalized: float
    regret: float
    hit: bool
    degenerate: bool


def pool_stats(pool: Pool, fill: Literal["min", "drop"] = "min") -> PoolStats | None:
    """Statistics of one pool; None when no candidate worked or the chosen one is not in the pool."""
    scores = fill_failures(pool.scores, fill)
    if not scores or pool.chosen not in scores:
        return None
    values = list(scores.values())
    chosen = scores[pool.chosen]
    top = max(values)
    return PoolStats(
        pool.pool_id,
        len(values),
        pool.chosen,
        selection_advantage(chosen, values),
        normalized_advantage(chosen, values),
        top - chosen,
        chosen >= top,
        top - float(np.mean(values)) <= 0,
    )


@dataclass(frozen=True)
class Pairwise:
    """Pairwise accuracy on sibling pairs (None when no pair survived the near-tie filter)."""

    accuracy: float | None
    n_pairs: int
    n_dropped: int


def pairwise_accuracy(
    pools: Iterable[Pool], min_gap: float = MIN_GAP, fill: Literal["min", "drop"] = "min"
) -> Pairwise:
    """Share of sibling pairs the selector orders like the scores (see module docstring)."""
    right, n, dropped = 0.0, 0, 0
    for pool in pools:
        scores = {k: v for k, v in fill_failures(pool.scores, fill).items() if k in pool.rank_values}
        ids = sorted(scores)
        if len(ids) < 2:
            continue
        span = max(scores.values()) - min(scores.values())
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                gap = scores[a] - scores[b]
                if span <= 0 or abs(gap) / span < min_gap:
                    dropped += 1
                    continue
                ra, rb = pool.rank_values[a], pool.rank_values[b]
                # Compare instead of subtracting: rank values may be +-inf (oracles, unparsed critiques).
                right += float((ra > rb) == (gap > 0)) if ra != rb else 0.5
                n += 1
    return Pairwise(right / n if n else None, n, dropped)


@dataclass(frozen=True)
class SelectionSummary:
    """Means over pools; ``normalized`` excludes degenerate pools (all scores equal)."""

    n_pools: int
    n_degenerate: int
    advantage: float | None
    normalized: float | None
    regret: float | None
    top1: float | None
    pairwise: Pairwise
    pools: tuple[PoolStats, ...] = ()


def summarize_selection(
    pools: Sequence[Pool], *, min_gap: float = MIN_GAP, fill: Literal["min", "drop"] = "min"
) -> SelectionSummary:
    stats = [s for s in (pool_stats(p, fill) for p in pools) if s is not None]
    informative = [s for s in stats if not s.degenerate]

    def mean(values: list[float]) -> float | None:
        return float(np.mean(values)) if values else None

    return SelectionSummary(
        n_pools=len(stats),
        n_degenerate=len(stats) - len(informative),
        advantage=mean([s.advantage for s in stats]),
        normalized=mean([s.normalized for s in informative]),
        regret=mean([s.regret for s in stats]),
        top1=mean([float(s.hit) for s in stats]),
        pairwise=pairwise_accuracy(pools, min_gap, fill),
        pools=tuple(stats),
    )


@dataclass(frozen=True)
class Correlation:
    """Pearson and Spearman coefficients with two-sided p-values (None below 3 points or for constant input)."""

    n: int
    pearson: float | None
    pearson_p: float | None
    spearman: float | None
    spearman_p: float | None


def correlation(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """Correlation between, e.g., each run's mean selection advantage and its final score."""
    from scipy import stats

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"x and y differ in length ({a.shape} vs {b.shape})")
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return Correlation(len(a), None, None, None, None)
    p = stats.pearsonr(a, b)
    s = stats.spearmanr(a, b)
    return Correlation(len(a), float(p.statistic), float(p.pvalue), float(s.statistic), float(s.pvalue))


MIN_VERIFIED = 2  # a pool says something about selection only with this many verified candidates
NO_POOLS_HINT = (
    f"no screening had {MIN_VERIFIED} or more verified candidates, so there is no pool to measure selection on; "
    "verify more of each pool: screener oracle, a higher engine.verify_per_expansion, or engine.audit_rate > 0"
)


Target = Literal["validation", "test", "subtree"]


def pools_from_store(store, run_id: str, *, target: Target = "validation") -> list[Pool]:
    """Pools from a run's ``screening`` events, keeping candidates with a finished verification.

    Only candidates the engine verified have scores, so a pool here holds the
    verified part of what the screener saw (all of it for the oracle
    screener or with ``verify_uncertain``). ``chosen`` is the screener's top
    ranked candidate; pools with fewer than two verified candidates are left
    out (they say nothing about selection). With ``target="test"`` the hidden
    test scores are oriented like the validation scores (the sign relating a
    node's fitness to its raw score is the metric's direction). With
    ``target="subtree"`` a candidate's label is the best oriented test score
    in its subtree (itself and every node below it along primary edges), the
    RPM paper's offline label (its Section 4.2): it credits a candidate for what
    the search later built on it, not only for its own score.
    """
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    sign = fitness_sign(rows.values())
    below = subtree_best(rows, sign) if target == "subtree" else {}
    pools = []
    for event in store.events(run_id, Screened):
        screening = event.record.screening
        ranking = list(screening.ranking)
        evidence = screening.evidence
        scores: dict[str, float | None] = {}
        for cid in ranking:
            row = rows.get(cid)
            if row is None or row.get("verified_seq") is None:
                continue
            scores[cid] = below.get(cid) if target == "subtree" else _oriented(row, target, sign)
        if len(scores) < MIN_VERIFIED or not ranking:
            continue
        values = {
            cid: float(evidence[cid].rank_value if cid in evidence else len(ranking) - i)
            for i, cid in enumerate(ranking)
            if cid in scores
        }
        pools.append(
            Pool(f"r{event.record.round}:{event.seq}", scores, ranking[0] if ranking[0] in scores else None, values)
        )
    return pools


def subtree_best(rows: Mapping[str, Mapping], sign: float) -> dict[str, float]:
    """node id -> the best oriented test score among it and its primary descendants (absent: none has one)."""
    children: dict[str, list[str]] = {}
    for nid, row in rows.items():
        parent = row.get("parent_id")
        if parent in rows:
            children.setdefault(str(parent), []).append(nid)
    best: dict[str, float] = {}
    for root in [n for n, r in rows.items() if r.get("parent_id") not in rows]:
        order, stack = [], [root]
        while stack:  # iterative depth-first walk; parents before children in ``order``
            nid = stack.pop()
            order.append(nid)
            stack.extend(children.get(nid, ()))
        for nid in reversed(order):  # children first, so each node sees its finished subtrees
            own = _oriented(rows[nid], "test", sign)
            values = [v for v in (own, *(best.get(c) for c in children.get(nid, ()))) if v is not None]
            if values:
                best[nid] = max(values)
    return best


def fitness_sign(rows: Iterable[Mapping]) -> float:
    """+1 when fitness = score (maximise), -1 when fitness = -score (minimise); +1 if no row tells."""
    for row in rows:
        score, fit = row.get("score"), row.get("fitness")
        if score is not None and fit is not None and score != 0:
            return 1.0 if fit == score else -1.0
    return 1.0


def _oriented(row: Mapping, target: str, sign: float) -> float | None:
    if target == "validation":
        return row.get("fitness")
    test = row.get("test_score")
    return None if test is None or row.get("fitness") is None else sign * float(test)


__all__ = [
    "MIN_GAP",
    "MIN_VERIFIED",
    "NO_POOLS_HINT",
    "Correlation",
    "Pairwise",
    "Pool",
    "PoolStats",
    "SelectionSummary",
    "Target",
    "correlation",
    "fill_failures",
    "fitness_sign",
    "normalized_advantage",
    "pairwise_accuracy",
    "pool_stats",
    "pools_from_store",
    "selection_advantage",
    "subtree_best",
    "summarize_selection",
]
