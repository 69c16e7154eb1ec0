"""Replays at matched evaluator seconds on two-fidelity pool worlds: pilots against the other screeners.

``replay_seconds`` is ``offline.worlds.replay_run``'s greedy search (the
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
import random
from collections.abc import Callable
from dataclasses import dataclass

from verifyless.offline.fidelity import LevelWorld
from verifyless.offline.simulated import PRESETS, SimulatedCritic
from verifyless.offline.worlds import IIDSelector, OracleSelector, PoolView, RandomSelector, Selector, draw_pool

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
    """Pilots the pool (or a critic's top ``m`` of it) at the level and verifies the best there."""

    def __init__(self, low: LevelWorld, cost: Callable[[int], float], prefilter: SimulatedCritic | None, m: int = 3):
        self.low, self.cost, self.prefilter, self.m = low, cost, prefilter, m
        self.name = "pilot" if prefilter is None else f"{prefilter.name}->pilot"
        self.piloted: set[int] = set()

    def choose(self, pool: PoolView) -> tuple[int, float, int]:
        """(position of the pick in the pool, pilot seconds paid, pilots paid)."""
        kept = list(range(len(pool.candidates)))
        if self.prefilter is not None:
            values = self.prefilter.scores(pool)
            pool.rng.shuffle(kept)
            kept = sorted(kept, key=lambda j: -values[j])[: self.m]
        new = [pool.candidates[j] for j in kept if pool.candidates[j] not in self.piloted]
        self.piloted.update(new)
        fits = [self.low.fitness(pool.candidates[j]) for j in kept]
        best = max(range(len(kept)), key=lambda t: (fits[t] is not None, fits[t] if fits[t] is not None else 0.0, -t))
        return kept[best], sum(self.cost(i) for i in new), len(new)


Chooser = Selector | PilotArm


def arm_factory(name: str, low: LevelWorld, cost: Callable[[int], float], seed: int) -> Chooser:
    """A fresh arm ``name`` (one of ``ARMS``) for one replay."""
    world = low.world
    if name == "random":
        return RandomSelector()
    if name == "iid":
        return IIDSelector()
    if name == "oracle":
        return OracleSelector()
    if name in _CRITICS:
        return SimulatedCritic(PRESETS[_CRITICS[name]], world, seed)
    if name == "pilot":
        return PilotArm(low, cost, None)
    if name.endswith("->pilot") and name[: -len("->pilot")] in _CRITICS:
        return PilotArm(low, cost, SimulatedCritic(PRESETS[_CRITICS[name[: -len("->pilot")]]], world, seed))
    raise ValueError(f"unknown arm {name!r}; arms: {list(ARMS)}")


def replay_seconds(
    low: LevelWorld,
    arm: Chooser,
    *,
    budget_s: float,
    n_candidates: int = 8,
    seed: int,
    locality: float = 1.0,
) -> SecondsRun:
    """``replay_run``'s greedy search under an evaluator-seconds budget (see the module docstring)."""
    world = low.world
    rng = random.Random(f"replay:{world.task}:{seed}")
    from_seed = bool(getattr(arm, "from_seed", False))
    base = world.baseline_index
    done, history = {base}, [(base, world.fitness(base))]
    best_i, best_f = base, world.fitness(base)
    spent, pilots = world.points[base].seconds, 0
    seconds, curve = [spent], [best_f if best_f is not None else -math.inf]
    step = 0
    while spent < budget_s and len(done) < len(world):
        step += 1
        parent, parent_f = (base, world.fitness(base)) if from_seed else (best_i, best_f)
        cands = draw_pool(world, parent, done, n_candidates, locality, rng)
        view = PoolView(world, parent, cands, parent_f, step, rng, tuple(history))
        if isinstance(arm, PilotArm):
            j, paid, n = arm.choose(view)
            spent, pilots = spent + paid, pilots + n
        else:
            j = arm.choose(view)
        pick = cands[j]
        fit = world.fitness(pick)
        if not isinstance(arm, PilotArm):
            arm.observe(view, j, fit)
        history.append((pick, fit))
        done.add(pick)
        spent += world.points[pick].seconds
        if fit is not None and (best_f is None or fit > best_f):
            best_i, best_f = pick, fit
        seconds.append(spent)
        curve.append(best_f if best_f is not None else -math.inf)
    return SecondsRun(getattr(arm, "name", type(arm).__name__), seed, tuple(seconds), tuple(curve), pilots)
