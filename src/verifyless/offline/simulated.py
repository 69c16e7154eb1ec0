"""Simulated critics of known quality, for replays on pool worlds.

A real pointwise critic (the critic paper's design) reads a parent and a
child idea, samples ``k`` critiques, each ending in one of five labels
``BigWin > MediumWin > SmallWin > Tie > Lose``, and the screener ranks
candidates by their average label. ``SimulatedCritic`` produces such labels
from the *known* outcome of each candidate in a world, corrupted in three
controlled ways:

* **a 3-way confusion matrix** ``P(predicted direction | true direction)``
  over ``(improve, tie, lose)``. ``confusion_for(dir3)`` builds one whose
  accuracy is ``dir3`` for every true class (so the balanced Dir-3 equals
  ``dir3`` whatever the class mix), with the errors split evenly; a full
  matrix can be given instead;
* **per-pair correlated error** ``rho``: each (parent, child) pair has one
  persistent verdict drawn from the confusion matrix; each of the ``k``
  samples repeats that verdict with probability ``rho`` and otherwise draws
  afresh. Every sample still has accuracy ``dir3``, but samples of the same
  pair agree more than chance, as real samples of one model do: a model that
  misreads an idea tends to misread it every time;
* **tier noise** ``tier_noise``: a sample that says "improve" names the true
  magnitude tier of the change with probability ``1 - tier_noise``, else a
  uniformly random tier. True tiers use the world's spread ``sigma`` (the
  standard deviation of verified fitness): ``delta >= 0.5 sigma`` is BigWin,
  ``>= 0.15 sigma`` MediumWin, smaller gains SmallWin. When the true class is
  not "improve" the tier of a false "improve" is uniform.

Why correlation matters (stated in docs/benchmarks.md with numbers): with
independent errors, a majority of ``k`` samples is right far more often than
one sample (``k = 5`` samples at 60 % per-sample accuracy over three classes
give a majority accuracy near 75 %), so ``k``-sample voting would look like a
free upgrade. Samples of one model on one idea share most of their errors
(the same misreading of the idea), and then voting buys little: at ``rho =
1`` the vote is exactly as good as one sample. ``rho`` defaults to 0.7.

Presets (``PRESETS``): ``prompted`` = Dir-3 0.466 (the paper's zero-shot
frontier model), ``trained`` = 0.633 and ``trained_small`` = 0.607 (its
GRPO-trained critics), ``perfect`` = 1.0, ``chance`` = 1/3, and two harmful
ones, ``inverted`` and ``inverted_perfect`` (``inverted_for``: a true
improvement read as a loss and back with probability 0.633 and 1.0; the
critic a user cannot know they have).

Ground truth: ``improve`` when the child's fitness exceeds the parent's by
more than ``tie_tol``, ``lose`` when below by more than ``tie_tol`` or the
verification failed, else ``tie`` (the paper's labels compare the two scores;
``tie_tol = 0`` by default, so only equal scores tie).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from verifyless.node import Candidate, Screening
from verifyless.offline.replay import ArmFactory, pick_screening, point_index
from verifyless.offline.worlds import World
from verifyless.screen.base import ScreenContext

DIRECTIONS: tuple[str, str, str] = ("improve", "tie", "lose")
LADDER: dict[str, int] = {"BigWin": 4, "MediumWin": 3, "SmallWin": 2, "Tie": 1, "Lose": 0}
TIERS: tuple[str, str, str] = ("SmallWin", "MediumWin", "BigWin")


def inverted_for(accuracy: float) -> tuple[tuple[float, ...], ...]:
    """A harmful critic's 3x3 matrix: a true improvement read as a loss (and back) with ``accuracy``, a tie as a
    tie; the rest split evenly. Its Dir-3 against the truth is ``(1 - accuracy) / 2`` on improve and lose."""
    off = (1.0 - accuracy) / 2.0
    return ((off, off, accuracy), (off, accuracy, off), (accuracy, off, off))


def confusion_for(dir3: float) -> np.ndarray:
    """A 3x3 row-stochastic matrix with ``dir3`` on the diagonal and the rest split evenly."""
    if not 0.0 <= dir3 <= 1.0:
        raise ValueError(f"dir3 must lie in [0, 1], got {dir3}")
    off = (1.0 - dir3) / 2.0
    return np.full((3, 3), off) + np.eye(3) * (dir3 - off)


@dataclass(frozen=True)
class CriticSpec:
    """Parameters of a simulated pointwise critic (see module docstring)."""

    name: str
    dir3: float
    k: int = 3
    rho: float = 0.7
    tier_noise: float = 0.5
    tie_tol: float = 0.0
    confusion: tuple[tuple[float, ...], ...] | None = None

    def matrix(self) -> np.ndarray:
        if self.confusion is None:
            return confusion_for(self.dir3)
        m = np.asarray(self.confusion, dtype=float)
        if m.shape != (3, 3) or np.any(m < 0) or not np.allclose(m.sum(axis=1), 1.0):
            raise ValueError("confusion must be a 3x3 row-stochastic matrix over (improve, tie, lose)")
        return m

    def with_(self, **changes: object) -> CriticSpec:
        return replace(self, **changes)  # type: ignore[arg-type]


PRESETS: dict[str, CriticSpec] = {
    "chance": CriticSpec("critic-chance", 1 / 3, tier_noise=1.0),
    "prompted": CriticSpec("critic-46.6", 0.466),
    "trained_small": CriticSpec("critic-60.7", 0.607),
    "trained": CriticSpec("critic-63.3", 0.633),
    "perfect": CriticSpec("critic-perfect", 1.0, rho=0.0, tier_noise=0.0),
    "inverted": CriticSpec("critic-inverted-63.3", 0.633, confusion=inverted_for(0.633)),
    "inverted_perfect": CriticSpec("critic-inverted-100", 1.0, rho=0.0, tier_noise=0.0, confusion=inverted_for(1.0)),
}


def true_direction(delta: float | None, tie_tol: float) -> int:
    """0 improve, 1 tie, 2 lose (a failed child, ``delta`` None, loses)."""
    if delta is None:
        return 2
    if delta > tie_tol:
        return 0
    if delta < -tie_tol:
        return 2
    return 1


def true_tier(delta: float, sigma: float) -> str:
    if delta >= 0.5 * sigma:
        return "BigWin"
    if delta >= 0.15 * sigma:
        return "MediumWin"
    return "SmallWin"


def world_sigma(world: World) -> float:
    fits = [f for f in (world.fitness(i) for i in range(len(world))) if f is not None]
    return float(np.std(fits)) if len(fits) > 1 else 1.0


class SimulatedCritic:
    """A pointwise critic of known quality: ``k`` five-way labels per candidate, ranked by mean ladder value.

    A ``Screener`` for replays on ``world`` (candidates of ``offline.replay.pool_candidates``): it reads the
    world's fitness of the parent and the candidates, which is what makes it simulated. Ties in the mean label
    are broken by the run's rng (``ctx.rng``; the paper's plain average-rank rule has no finer signal).
    """

    def __init__(self, spec: CriticSpec, world: World, seed: int = 0) -> None:
        self.spec = spec
        self.world = world
        self.name = spec.name
        self.matrix = spec.matrix()
        self.sigma = world_sigma(world)
        self.rng = random.Random(f"critic:{spec.name}:{seed}")

    def labels(self, delta: float | None) -> list[str]:
        """The ``k`` sampled labels for one pair whose true change is ``delta``."""
        truth = true_direction(delta, self.spec.tie_tol)
        row = self.matrix[truth]
        persistent = _sample(row, self.rng)
        out = []
        for _ in range(self.spec.k):
            d = persistent if self.rng.random() < self.spec.rho else _sample(row, self.rng)
            out.append(self._label(d, truth, delta))
        return out

    def _label(self, direction: int, truth: int, delta: float | None) -> str:
        if direction == 1:
            return "Tie"
        if direction == 2:
            return "Lose"
        if truth == 0 and delta is not None and self.rng.random() >= self.spec.tier_noise:
            return true_tier(delta, self.sigma)
        return self.rng.choice(TIERS)

    def point(self, ident: str, program: str) -> int:
        """The world point of a parent or candidate: from its replay id ``w{index}`` (the engine path reads the
        program instead, ``offline/world_engine.WorldCritic``)."""
        return point_index(ident)

    def scores(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> list[float]:
        """Mean ladder value per candidate of the pool (parent ``ctx.parent``, both read from the world)."""
        parent_fitness = self.world.fitness(self.point(str(ctx.parent.id), ctx.parent.program))
        out = []
        for c in candidates:
            f = self.world.fitness(self.point(c.id, c.program))
            delta = None if f is None or parent_fitness is None else f - parent_fitness
            if f is not None and parent_fitness is None:
                delta = math.inf
            out.append(float(np.mean([LADDER[label] for label in self.labels(delta)])))
        return out

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        values = self.scores(ctx, candidates)
        top = max(values)
        tied = [j for j, v in enumerate(values) if v == top]
        j = tied[ctx.rng.randrange(len(tied))] if len(tied) > 1 else tied[0]
        return pick_screening(self.name, candidates, j, ctx, started, values)


def critic_factory(spec: CriticSpec) -> ArmFactory:
    """An ``ArmFactory`` building a fresh ``SimulatedCritic`` per replayed run."""
    return lambda world, seed: SimulatedCritic(spec, world, seed)


def majority_accuracy(dir3: float, k: int, rho: float, *, trials: int = 20000, seed: int = 0) -> float:
    """Monte-Carlo accuracy of the plurality vote of ``k`` samples (ties broken at random), balanced classes.

    With ``rho = 0`` (independent errors) this rises quickly with ``k``; with
    ``rho = 1`` it equals ``dir3``: the number that shows why independent
    per-sample errors make k-vote screening unrealistically good.
    """
    rng = random.Random(seed)
    m = confusion_for(dir3)
    right = 0
    for t in range(trials):
        truth = t % 3
        persistent = _sample(m[truth], rng)
        votes = [persistent if rng.random() < rho else _sample(m[truth], rng) for _ in range(k)]
        counts = [votes.count(c) for c in range(3)]
        best = max(counts)
        winners = [c for c in range(3) if counts[c] == best]
        right += rng.choice(winners) == truth
    return right / trials


def _sample(row: Sequence[float] | np.ndarray, rng: random.Random) -> int:
    """An index drawn from the probabilities ``row`` (the last one when they sum to less than the draw)."""
    u, acc = rng.random(), 0.0
    for j, p in enumerate(row):
        acc += p
        if u < acc:
            return j
    return len(row) - 1


def measured_dir3(spec: CriticSpec, deltas: Sequence[float | None], *, seed: int = 0) -> float:
    """Balanced per-sample three-way accuracy of ``spec`` on these true changes (a self-check)."""
    critic = SimulatedCritic(
        spec, World(task="flat", direction="maximize", dimensions={}, baseline={}, points=()), seed
    )
    hits: dict[int, list[int]] = {0: [], 1: [], 2: []}
    back = {"Tie": 1, "Lose": 2}
    for d in deltas:
        truth = true_direction(d, spec.tie_tol)
        for label in critic.labels(d):
            hits[truth].append(int(back.get(label, 0) == truth))
    rates = [float(np.mean(v)) for v in hits.values() if v]
    return float(np.mean(rates)) if rates else math.nan


# ---------------------------------------------------------------------- pairwise judges and the cascade (issue 16)


class SimulatedJudge:
    """A pairwise judge of known accuracy: names the truly better of two candidates with probability ``accuracy``.

    Equal fitness (or two failures) is a coin flip; a failed candidate is worse than any working one. Each match
    is an independent draw (a tournament asks about each pair once).
    """

    def __init__(self, accuracy: float, seed: int = 0) -> None:
        if not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"judge accuracy must lie in [0, 1], got {accuracy}")
        self.accuracy = accuracy
        self.rng = random.Random(f"judge:{accuracy}:{seed}")

    def better(self, world: World, a: int, b: int) -> int:
        fa, fb = world.fitness(a), world.fitness(b)
        va = -math.inf if fa is None else fa
        vb = -math.inf if fb is None else fb
        if va == vb:
            return a if self.rng.random() < 0.5 else b
        truth, other = (a, b) if va > vb else (b, a)
        return truth if self.rng.random() < self.accuracy else other

    def knockout(self, world: World, entrants: Sequence[int], rng: random.Random) -> int:
        """Single-elimination tournament in a random bracket; returns the winner (``len - 1`` matches)."""
        field = list(entrants)
        rng.shuffle(field)
        while len(field) > 1:
            nxt = [self.better(world, field[i], field[i + 1]) for i in range(0, len(field) - 1, 2)]
            field = nxt + ([field[-1]] if len(field) % 2 else [])
        return field[0]


class TournamentScreener:
    """The pairwise tournament alone (RPM-style): the knockout winner of the whole pool (bracket from ``ctx.rng``)."""

    def __init__(self, judge: SimulatedJudge, world: World, name: str = "tournament") -> None:
        self.judge, self.world, self.name = judge, world, name

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        entrants = [point_index(c.id) for c in candidates]
        j = entrants.index(self.judge.knockout(self.world, entrants, ctx.rng))
        return pick_screening(self.name, candidates, j, ctx, started)


class TieBrokenCritic(SimulatedCritic):
    """The pointwise critic whose best-average-rank ties are settled by a pairwise knockout among the tied."""

    def __init__(self, spec: CriticSpec, world: World, judge: SimulatedJudge, seed: int = 0) -> None:
        super().__init__(spec, world, seed)
        self.judge = judge
        self.name = spec.name + "+tiebreak"

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        values = self.scores(ctx, candidates)
        entrants = [point_index(c.id) for c in candidates]
        tied = [entrants[j] for j, v in enumerate(values) if v == max(values)]
        j = entrants.index(self.judge.knockout(self.world, tied, ctx.rng))
        return pick_screening(self.name, candidates, j, ctx, started, values)


class CascadeScreener(SimulatedCritic):
    """Critic keeps the top ``m`` by average rank (seeded tie order), then the tournament picks among them."""

    def __init__(self, spec: CriticSpec, world: World, judge: SimulatedJudge, m: int = 3, seed: int = 0) -> None:
        super().__init__(spec, world, seed)
        self.judge, self.m = judge, m
        self.name = f"cascade-m{m}"

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        values = self.scores(ctx, candidates)
        entrants = [point_index(c.id) for c in candidates]
        order = list(range(len(values)))
        ctx.rng.shuffle(order)
        order.sort(key=lambda j: -values[j])
        finalists = [entrants[j] for j in order[: self.m]]
        j = entrants.index(self.judge.knockout(self.world, finalists, ctx.rng))
        return pick_screening(self.name, candidates, j, ctx, started, values)


__all__ = [
    "CascadeScreener",
    "CriticSpec",
    "DIRECTIONS",
    "LADDER",
    "PRESETS",
    "SimulatedCritic",
    "SimulatedJudge",
    "TieBrokenCritic",
    "TournamentScreener",
    "confusion_for",
    "critic_factory",
    "majority_accuracy",
    "measured_dir3",
    "true_direction",
    "true_tier",
    "world_sigma",
]
