"""Replays at matched evaluator seconds on two-fidelity pool worlds: pilots against the other screeners.

``replay_seconds`` is ``offline.replay.replay_run``'s greedy search (the
same pools for the same seed: same rng stream, same ``draw_pool``) with the
budget in evaluator seconds instead of verifications. Every arm pays the
world's full-fidelity seconds for each point it verifies (the baseline
first); a pilot arm also pays, for each candidate it pilots, its
low-fidelity cost (``LevelWorld.cost``: measured seconds at the level in the
world's seconds, or a hypothetical ``r`` x the point's full seconds). A
program piloted once is not paid again (the engine reads pilots back by
program hash). Simulated critics and the oracle spend no evaluator seconds
(a critic spends tokens: not on this axis).

Arms (``ARMS``): ``random``, ``iid``, the simulated critics of
``offline.simulated.PRESETS`` (chance, prompted 46.6, trained 63.3 Dir-3),
``oracle`` (best-of-N on the known full fitness), ``pilot`` (every candidate
of the pool at the level, the best there verified: successive halving over
one level with one survivor) and ``critic-X->pilot`` (the critic's top ``m``
by mean label, seeded tie order, then piloted; ``screen/cascade.py``'s
``then: pilot``).

A run's curve is (evaluator seconds spent, best full fitness) after each
verification; ``best_at(b)`` reads it at budget ``b`` (verifications that
ended past ``b`` do not count), ``reach(target)`` is the seconds at which
the best first reached ``target``. An expansion starts while seconds are
left, so the last may end past the budget: ``best_at`` ignores it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass

from verifyless.node import Candidate, Screening
from verifyless.offline.fidelity import LevelWorld
from verifyless.offline.replay import (
    IIDArm,
    OracleArm,
    RandomArm,
    Step,
    greedy_steps,
    pick_screening,
    point_index,
    run_sync,
)
from verifyless.offline.simulated import PRESETS, SimulatedCritic
from verifyless.screen.base import ScreenContext, Screener

__all__ = ["ARMS", "PilotArm", "SecondsRun", "arm_factory", "replay_seconds"]

ARMS: tuple[str, ...] = (
    "random",
    "iid",
    "critic-chance",
    "critic-46.6",
    "critic-63.3",
    "pilot",
    "critic-46.6->pilot",
    "critic-63.3->pilot",
    "oracle",
)
_CRITICS = {"critic-chance": "chance", "critic-46.6": "prompted", "critic-63.3": "trained"}


@dataclass(frozen=True)
class SecondsRun:
    """One replayed search: cumulative evaluator seconds and best full fitness after each verification."""

    arm: str
    seed: int
    seconds: tuple[float, ...]
    best: tuple[float, ...]
    pilots: int = 0  # pilots paid

    def best_at(self, budget: float) -> float:
        """The best full fitness among verifications that ended within ``budget`` seconds (-inf if none)."""
        found = [b for s, b in zip(self.seconds, self.best, strict=True) if s <= budget + 1e-9]
        return found[-1] if found else -math.inf

    def verifications_at(self, budget: float) -> int:
        return sum(1 for s in self.seconds if s <= budget + 1e-9)

    def reach(self, target: float) -> float | None:
        """Evaluator seconds at which the best first reached ``target``; None if it never did."""
        for s, b in zip(self.seconds, self.best, strict=True):
            if b >= target - 1e-12:
                return s
        return None


class PilotArm:
    """A ``Screener`` that pilots the pool (or a critic's top ``m`` of it) at the level and verifies the best there.

    It pays no seconds itself: after each screening ``paid`` holds what that screening piloted, as (pilot
    seconds in the world's seconds via ``cost``, pilots run), and ``replay_seconds`` charges it. A program
    piloted before is not paid again.
    """

    def __init__(self, low: LevelWorld, cost: Callable[[int], float], prefilter: SimulatedCritic | None, m: int = 3):
        self.low, self.cost, self.prefilter, self.m = low, cost, prefilter, m
        self.name = "pilot" if prefilter is None else f"{prefilter.name}->pilot"
        self.piloted: set[int] = set()
        self.paid: tuple[float, int] = (0.0, 0)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        index = [point_index(c.id) for c in candidates]
        kept = list(range(len(candidates)))
        if self.prefilter is not None:
            values = self.prefilter.scores(ctx, candidates)
            ctx.rng.shuffle(kept)
            kept = sorted(kept, key=lambda j: -values[j])[: self.m]
        new = [index[j] for j in kept if index[j] not in self.piloted]
        self.piloted.update(new)
        fits = [self.low.fitness(index[j]) for j in kept]
        best = max(range(len(kept)), key=lambda t: (fits[t] is not None, fits[t] if fits[t] is not None else 0.0, -t))
        self.paid = (sum(self.cost(i) for i in new), len(new))
        return pick_screening(self.name, candidates, kept[best], ctx, started)


def arm_factory(name: str, low: LevelWorld, cost: Callable[[int], float], seed: int) -> Screener:
    """A fresh arm ``name`` (one of ``ARMS``) for one replay."""
    world = low.world
    if name == "random":
        return RandomArm()
    if name == "iid":
        return IIDArm()
    if name == "oracle":
        return OracleArm(world)
    if name in _CRITICS:
        return SimulatedCritic(PRESETS[_CRITICS[name]], world, seed)
    if name == "pilot":
        return PilotArm(low, cost, None)
    if name.endswith("->pilot") and name[: -len("->pilot")] in _CRITICS:
        return PilotArm(low, cost, SimulatedCritic(PRESETS[_CRITICS[name[: -len("->pilot")]]], world, seed))
    raise ValueError(f"unknown arm {name!r}; arms: {list(ARMS)}")


def replay_seconds(
    low: LevelWorld,
    arm: Screener,
    *,
    budget_s: float,
    n_candidates: int = 8,
    seed: int,
    locality: float = 1.0,
) -> SecondsRun:
    """``replay_run``'s greedy search under an evaluator-seconds budget (see the module docstring)."""
    return run_sync(_replay_seconds(low, arm, budget_s, n_candidates, seed, locality))


async def _replay_seconds(
    low: LevelWorld, arm: Screener, budget_s: float, n: int, seed: int, locality: float
) -> SecondsRun:
    world = low.world
    base = world.baseline_index
    spent, pilots = world.points[base].seconds, 0
    seconds, curve = [spent], [Step.baseline(world).best]
    async with aclosing(greedy_steps(world, arm, n, seed, locality)) as steps:
        while spent < budget_s and (step := await anext(steps, None)) is not None:
            if isinstance(arm, PilotArm):
                spent, pilots = spent + arm.paid[0], pilots + arm.paid[1]
            spent += world.points[step.index].seconds
            seconds.append(spent)
            curve.append(step.best)
    return SecondsRun(arm.name, seed, tuple(seconds), tuple(curve), pilots)
