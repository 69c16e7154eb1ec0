"""The ``pilot`` screener: successive halving over the pool at the task's cheaper fidelity levels.

Level by level (``levels``, cheapest first; default: every level the task
declares), each surviving candidate is run once at that level through
``ScreenContext.pilot`` -- the engine's ledger pays and records each run as a
``pilot_run`` event (ledger/pilots.py) -- and the best ``survivors(n)`` of
the n go up to the next level::

    survivors(n) = min(n, max(min_survivors, ceil(n / eta)))

``min_survivors`` defaults to the engine's ``n_verify``. A failed pilot
ranks below every pilot that ran, ties keep pool order. Ranking: the
survivors of the last level in their last-level order, then each earlier
level's dropped candidates (later levels first) in that level's order.
``chosen`` is the first ``n_verify`` of the ranking; the engine verifies them
at full fidelity.

Evidence per candidate: ``rank_value`` is the level reached (then the
oriented score there); ``detail`` holds ``pilot_runs`` (one record per level it
ran at: level, status, score, seconds; not ``pilots``, the agentic screener's), ``level_reached`` and, on the first
candidate, ``rounds`` (per level: how many ran and how many went up).
A pilot result is low-fidelity evidence, never a full outcome (no
verification event is written for it).

Budget: once the pilots of this screening have spent ``ctx.budget_left_s``
(the run's evaluator seconds left when it began), the remaining levels are
skipped (recorded as ``skipped: budget``) and the pool is ranked by the
levels already run; a level once begun runs to its end, so a screening may
pass the cap by at most one level's pilots.

Without ``ctx.pilot`` (no sandbox) or without levels the pool keeps its
order (``detail.reason`` says why); the screener never raises for that.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.node import Candidate, Evidence, Screening, Status, Verification
from verifyless.screen.base import ScreenContext
from verifyless.screen.options import BaseOptions
from verifyless.task.base import Task

__all__ = ["PilotOptions", "PilotScreener", "check_levels", "survivors"]


class PilotOptions(BaseOptions):
    """Options of screener ``pilot`` (``screener.options``)."""

    eta: int = Field(2, ge=2, description="successive halving keeps ceil(n / eta) of n candidates at each level")
    levels: tuple[str, ...] | None = Field(
        None, description="fidelity levels to pilot at, cheapest first (default: every level the task declares)"
    )
    min_survivors: int | None = Field(
        None, ge=1, description="at least this many go up each level (default: the engine's verify_per_expansion)"
    )


def check_levels(task: Task, levels: Sequence[str] | None) -> None:
    """A ``ConfigError`` when ``task`` has none of the fidelity levels the pilot screener would pilot at
    (``levels``; None: every level the task declares). Without one it could only pick the first candidate."""
    declared = tuple(level.name for level in task.fidelity.levels)
    if not declared:
        raise ConfigError(
            f"screener 'pilot' pilots candidates at a task's cheaper fidelity levels, and task {task.name!r} declares "
            "no fidelity levels: add a `fidelity:` block to its task.yaml (e.g. a data_fraction level; "
            "docs/design/task-format.md), or choose another screener (e.g. -c surrogate)"
        )
    unknown = [name for name in levels or () if name not in declared]
    if unknown:
        raise ConfigError(
            f"screener.options.levels: {', '.join(map(repr, unknown))} not a fidelity level of task {task.name!r}; "
            f"it declares {', '.join(declared)}"
        )


def survivors(n: int, eta: int, min_survivors: int) -> int:
    """How many of ``n`` piloted candidates go up a level (see the module docstring)."""
    return min(n, max(min_survivors, math.ceil(n / eta)))


class PilotScreener:
    """Successive halving over the pool at cheaper fidelity levels (see the module docstring)."""

    def __init__(self, options: PilotOptions | None = None) -> None:
        self.options = options or PilotOptions()
        self.name = self.options.name or "pilot"

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        n_verify = self.options.n_verify if self.options.n_verify is not None else ctx.n_verify
        levels = self.options.levels or tuple(lv.name for lv in ctx.task.fidelity.levels)
        ids = [c.id for c in candidates]
        reason = _no_pilots(ctx, levels, len(candidates))
        if reason:
            evidence = {cid: Evidence(cid, float(-k), detail={"reason": reason}) for k, cid in enumerate(ids)}
            return Screening(self.name, tuple(ids), tuple(ids[:n_verify]), evidence, time.monotonic() - started)
        floor = self.options.min_survivors if self.options.min_survivors is not None else max(1, n_verify)
        alive = list(candidates)
        dropped: list[list[str]] = []
        results: dict[str, list[dict[str, Any]]] = {cid: [] for cid in ids}
        rounds: list[dict[str, Any]] = []
        pilot, spent = ctx.pilot, 0.0
        assert pilot is not None  # _no_pilots checked it
        for level in levels:
            if ctx.budget_left_s is not None and spent >= ctx.budget_left_s:
                rounds.append({"level": level, "piloted": 0, "survivors": len(alive), "skipped": "budget"})
                continue
            scored = [(c, await pilot(c, level)) for c in alive]  # one at a time: a fixed event order
            spent += sum(v.seconds for _, v in scored)
            for c, v in scored:
                results[c.id].append(_record(level, v))
            order = sorted(range(len(scored)), key=lambda k: (-_value(ctx, scored[k][1]), k))
            keep = survivors(len(alive), self.options.eta, floor)
            rounds.append({"level": level, "piloted": len(alive), "survivors": keep})
            dropped.append([scored[k][0].id for k in order[keep:]])
            alive = [scored[k][0] for k in order[:keep]]
        ranking = [c.id for c in alive] + [cid for level_out in reversed(dropped) for cid in level_out]
        evidence = {cid: _evidence(ctx, cid, results[cid], levels) for cid in ranking}
        first = ranking[0]
        evidence[first] = evidence[first].replace(detail={**evidence[first].detail, "rounds": rounds})
        return Screening(self.name, tuple(ranking), tuple(ranking[:n_verify]), evidence, time.monotonic() - started)


def _no_pilots(ctx: ScreenContext, levels: Sequence[str], n: int) -> str:
    """Why this screening runs no pilot ('' when it does)."""
    if ctx.pilot is None:
        return "no sandbox for pilots"
    if not levels:
        return "no fidelity levels"
    if ctx.budget_left_s is not None and ctx.budget_left_s <= 0:
        return "no evaluator seconds left"
    return "a single candidate" if n <= 1 else ""


def _value(ctx: ScreenContext, v: Verification) -> float:
    """Oriented score at a level (higher is better); a failed pilot is -inf."""
    if v.status is not Status.OK or v.score is None:
        return -math.inf
    return ctx.task.metric.orient(v.score)


def _record(level: str, v: Verification) -> dict[str, Any]:
    return {"level": level, "status": v.status.value, "score": v.score, "seconds": round(v.seconds, 3)}


def _evidence(ctx: ScreenContext, cid: str, pilots: list[dict[str, Any]], levels: Sequence[str]) -> Evidence:
    last = pilots[-1]
    ok = last["status"] == Status.OK.value and last["score"] is not None
    value = len(pilots) + (math.tanh(ctx.task.metric.orient(last["score"])) / 2 if ok else -0.5)
    reached = levels[len(pilots) - 1]
    return Evidence(cid, value, detail={"pilot_runs": pilots, "level_reached": reached, "fidelity": "low"})
