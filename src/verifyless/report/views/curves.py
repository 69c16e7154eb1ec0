"""Best-so-far curves of runs: validation score against paid verifications, with the baseline and a ceiling.

Pure reads of a run store (same rules as ``verifyless.report.views.runs``). The ceiling is the best final score of a
comparable ``peek``-oracle run in the same store (``oracle_ceiling``), else the task's ``bound`` anchor.
Validation only: the hidden test score never enters a curve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from verifyless.events import ScreenerLearned, Verified
from verifyless.metrics.curve import best_so_far
from verifyless.report.text import num
from verifyless.report.views.runs import best_node, direction_of, run_task_meta
from verifyless.screen.audit import state_changes
from verifyless.store.protocol import RunStoreProtocol

__all__ = ["CEILING_MATCH", "CurvePoint", "CurveView", "best_curve", "compare_curves", "oracle_ceiling", "y_extent"]


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
    markers: tuple[tuple[int, str], ...] = ()  # (verifications so far, label): the safety net's state changes

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


_READ = (ScreenerLearned.KIND, Verified.KIND)


def best_curve(store: RunStoreProtocol, run_id: str, label: str | None = None) -> CurveView:
    """One point per ``verification`` event in commit order (``verifyless.metrics.curve.best_so_far``); the ceiling
    is the task's ``bound`` anchor if any."""
    info = store.run(run_id)
    meta = run_task_meta(store, run_id)
    compute, baseline = 0.0, None
    verified: list[tuple[str | None, Verified, float | None]] = []
    computes: list[float] = []  # every charged evaluator second up to each verification
    markers: list[tuple[int, str]] = []
    for ev in store.events(run_id):  # every event: pilots and smoke runs are charged evaluator seconds too
        compute += ev.charge.evaluator_seconds if ev.charge else 0.0
        if ev.kind not in _READ:  # parse only what is read
            continue
        match ev.record:
            case ScreenerLearned() as learned:
                markers += [(len(verified), f"safety net {d['state']}") for d in state_changes(learned.learned)]
            case Verified() as record:
                verified.append((ev.node_id, record, ev.charge.evaluator_seconds if ev.charge else None))
                computes.append(compute)
                if ev.node_id == "root" and baseline is None:
                    baseline = num(record.verification.score)
    points = [
        CurvePoint(
            step.x,
            str(step.node_id),
            step.verification.verification.status.value,
            num(step.verification.verification.score),
            num(step.best.verification.score) if step.best is not None else None,
            step.best_node,
            round(step.seconds, 6),
            round(spent, 6),
        )
        for step, spent in zip(best_so_far(verified), computes, strict=True)
    ]
    ceiling, ceiling_label = oracle_ceiling(store, info)
    if ceiling is None and num(meta.get("bound")) is not None:
        ceiling, ceiling_label = num(meta.get("bound")), "task bound (best achievable)"
    name = label or f"{run_id} ({(info.config.get('screener') or {}).get('name', '?')})"
    return CurveView(
        run_id,
        name,
        str(meta.get("metric", "score")),
        str(meta.get("direction") or direction_of(store, run_id)),
        tuple(points),
        baseline,
        ceiling,
        ceiling_label,
        markers=tuple(markers),
    )


CEILING_MATCH = ("roles", "budget")  # config blocks an oracle run must share with a run to be its ceiling


def oracle_ceiling(store: RunStoreProtocol, info: Any) -> tuple[float | None, str]:
    """The best final validation score of the store's ``peek``-oracle runs comparable with ``info``, if any.

    The peek oracle runs all N candidates of an expansion off the books and has only the best validation pick
    verified and charged (the RPM paper's oracle), so its run is what perfect screening reaches with the same
    proposals and charged budget, at compute no budget counted. The ``oracle`` screener, which verifies and
    charges all N, reaches about budget / N expansions and is no ceiling. Comparable: the same task and seed,
    and equal ``roles`` (models) and ``budget`` config blocks. The label says which run it is and what it spent.
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
            or (cfg.get("screener") or {}).get("name") != "peek"
            or any(cfg.get(key) != mine.get(key) for key in CEILING_MATCH)
        ):
            continue
        node = best_node(store, other.run_id)
        if node is not None and (best is None or node.fitness > best.fitness):
            best, source = node, other.run_id
    if best is None:
        return None, ""
    return num(best.score), (
        f"ceiling: peek-oracle run {source} (ran all N candidates of each expansion, charged only its pick: "
        "compute beyond the budget; same task, seed, roles and budget)"
    )


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
