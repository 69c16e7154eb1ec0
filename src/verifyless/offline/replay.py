"""Replays of pool worlds: a greedy search over a world, any ``Screener`` choosing what to verify.

A replay is the search the engine would run, with the world's known outcomes
standing in for verification: each expansion draws ``N`` unverified points
near the parent (``draw_pool``), the screener ranks them as ``Candidate``s
(``pool_candidates``, worded from the task's idea space) in a
``ScreenContext`` (``pool_context``), its pick is charged as one
verification, and a screener that learns from outcomes is told it (``tell``).
The arms that need no model (``RandomArm``, ``IIDArm``, ``OracleArm``) are
Screeners too, so every arm goes through the same loop. The worlds
themselves (records, files, collection) are ``verifyless.offline.worlds``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncGenerator, Callable, Coroutine, Iterable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from verifyless.node import Candidate, Evidence, Idea, Operator, Screening, Status, Verification
from verifyless.offline.worlds import World
from verifyless.outcome import outcome_of
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import OutcomeObserver, ScreenContext, Screener, choose_top
from verifyless.task.base import Task

_T = TypeVar("_T")


ArmFactory = Callable[[World, int], Screener]
"""A fresh screener for one replay: ``factory(world, seed)``."""


def point_index(candidate_id: str) -> int:
    """The world point index of a replayed candidate or parent id (``w{index}``, as ``pool_candidates`` names them)."""
    return int(candidate_id[1:])


class RandomArm:
    """The unguided agent: one uniform pick ``ctx.rng.randrange(len(candidates))``, the rest in pool order.

    Not ``screen.baselines.RandomScreener``: that one shuffles the whole pool,
    which draws differently from the rng (the replays' numbers stay as they were).
    """

    name = "random"

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        j = ctx.rng.randrange(len(candidates))
        return pick_screening(self.name, candidates, j, ctx, started)


class IIDArm(RandomArm):
    """No evolution (Gideoni et al. 2026): every pool is drawn around the seed program, the pick is uniform.

    The baseline reviewers ask for: independent samples from the seed, the best verified one returned.
    The marker ``from_seed = True`` on the screener tells ``replay_run`` to keep the baseline as the parent
    of every expansion (any screener may carry it).
    """

    name = "iid"
    from_seed = True


class OracleArm:
    """Best-of-N: the candidate with the best known validation fitness (failed last, ties to the first).

    It reads ``world.fitness`` of the candidates (their index from the id ``w{index}``): that is what makes
    it an oracle. Not ``screen.baselines.OracleScreener``, which verifies every candidate.
    """

    name = "oracle"

    def __init__(self, world: World) -> None:
        self.world = world

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        fits = [self.world.fitness(point_index(c.id)) for c in candidates]
        j = max(range(len(fits)), key=lambda t: (fits[t] is not None, fits[t] if fits[t] is not None else 0.0, -t))
        return pick_screening(self.name, candidates, j, ctx, started)


def pick_screening(
    name: str,
    candidates: Sequence[Candidate],
    j: int,
    ctx: ScreenContext,
    started: float,
    values: Sequence[float] | None = None,
) -> Screening:
    """The screening that verifies candidate ``j``; the ranking is ``j`` then the others in pool order.

    ``values`` (one per candidate, e.g. a critic's mean labels) become the evidence's ``rank_value``; without
    them the screening records no evidence (a uniform or oracle pick has none to give, and a replay makes
    thousands of these).
    """
    ids = [c.id for c in candidates]
    ranking = [ids[j], *ids[:j], *ids[j + 1 :]]
    evidence = (
        {} if values is None else {cid: Evidence(cid, rank_value=float(v)) for cid, v in zip(ids, values, strict=True)}
    )
    return choose_top(name, ranking, evidence, 1, ctx, started)


class BestCurve:
    """What is read off a best-so-far fitness curve ``best`` (one entry per verification, baseline first;
    -inf before any usable score): a replayed search's (``ReplayRun``) and an engine run's on a world
    (``world_engine.WorldRun``)."""

    best: tuple[float, ...]

    @property
    def final(self) -> float:
        """The best fitness at the end (-inf for an empty curve)."""
        return self.best[-1] if self.best else -math.inf

    def reach(self, target: float) -> int | None:
        """Verifications (1-based, baseline included) needed to first reach ``target``; None if never."""
        return next((i + 1 for i, b in enumerate(self.best) if b >= target - 1e-12), None)

    def at(self, budget: int) -> float:
        """The best fitness after ``budget`` verifications (the final one if the run was shorter)."""
        return self.best[min(budget, len(self.best)) - 1] if self.best else -math.inf


@dataclass(frozen=True)
class ReplayRun(BestCurve):
    """One replayed search: the best-so-far validation fitness after each verification (baseline first)."""

    arm: str
    seed: int
    best: tuple[float, ...]
    incumbent: int
    verified: tuple[int, ...]


def hamming(world: World, a: int, b: int) -> int:
    """How many dimensions two points of ``world`` differ in."""
    codes = option_codes(world)
    return int((codes[a] != codes[b]).sum())


_CODES: dict[int, Any] = {}


def option_codes(world: World) -> Any:
    """An (n_points, n_dims) integer array of option positions (cached per world object)."""
    import numpy as np

    key = id(world)
    if key not in _CODES or _CODES[key][0] is not world:
        rows = [[world.dimensions[d].index(p.assignment[d]) for d in world.dimensions] for p in world.points]
        _CODES[key] = (world, np.asarray(rows, dtype=np.int16).reshape(len(world.points), len(world.dimensions)))
    return _CODES[key][1]


_EXPONENTS: dict[tuple[int, int, float], tuple[World, Any]] = {}


def _exponents(world: World, parent: int, locality: float) -> Any:
    """``1 / exp(-locality * hamming(parent, point))`` for every point (cached per world object, parent, locality:
    the incumbent parent repeats across expansions)."""
    import numpy as np

    key = (id(world), parent, locality)
    hit = _EXPONENTS.get(key)
    if hit is None or hit[0] is not world:
        codes = option_codes(world)
        dist = (codes != codes[parent]).sum(axis=1)
        weights = np.exp(-locality * dist) if locality else np.ones(len(world))
        hit = _EXPONENTS[key] = (world, 1.0 / weights)
    return hit[1]


def draw_pool(
    world: World, parent: int, exclude: set[int], n: int, locality: float, rng: random.Random
) -> tuple[int, ...]:
    """``n`` distinct unverified points, weighted by ``exp(-locality * hamming(parent, point))``.

    ``locality = 0`` proposes uniformly from the whole world (global random
    proposals); larger values favour configurations close to the parent, as a
    proposer that edits the parent's program would. Weighted sampling without
    replacement uses exponential keys (Efraimidis-Spirakis): exact, one pass.
    """
    import numpy as np

    gen = np.random.default_rng(rng.randrange(2**32))
    keys = gen.random(len(world)) ** _exponents(world, parent, locality)
    if exclude:
        keys[list(exclude)] = -1.0
    order = np.argsort(-keys, kind="stable")[:n]
    return tuple(int(i) for i in order if keys[i] >= 0.0)


def replay_run(
    world: World,
    screener: Screener,
    *,
    budget: int,
    n_candidates: int,
    seed: int,
    locality: float = 1.0,
    task: Task | None = None,
) -> ReplayRun:
    """Greedy search replayed on ``world``: the incumbent best is the parent of every expansion.

    The baseline is verification 1. Each expansion draws ``n_candidates``
    unverified points (``draw_pool``), ``pool_candidates`` makes them
    candidates, ``screener.screen`` picks one (``chosen[0]``, else
    ``ranking[0]``; context from ``pool_context``), its known outcome is
    charged as one verification and, if the screener is an
    ``OutcomeObserver``, shown to its ``observe``. A failed verification
    counts and never becomes the parent. Stops at ``budget`` verifications or
    when the world has no unverified point left. A screener with ``from_seed =
    True`` (``IIDArm``) expands the baseline every time instead: the search
    returns its best verified point all the same. ``task`` (optional) goes
    into the context, and its idea space words the candidates. One event loop
    per call (``run_sync``).
    """
    return run_sync(_replay(world, screener, budget, n_candidates, seed, locality, task))


@dataclass(frozen=True)
class Step:
    """One replayed expansion: the point it verified and the incumbent best after it (fitness None: none yet)."""

    index: int
    best_index: int
    best_fitness: float | None

    @classmethod
    def baseline(cls, world: World) -> Step:
        """The state before the first step: the baseline verified and the incumbent."""
        base = world.baseline_index
        return cls(base, base, world.fitness(base))

    @property
    def best(self) -> float:
        """The incumbent's fitness for a best-so-far curve (-inf before any usable score)."""
        return self.best_fitness if self.best_fitness is not None else -math.inf


async def greedy_steps(
    world: World, screener: Screener, n: int, seed: int, locality: float = 1.0, task: Task | None = None
) -> AsyncGenerator[Step, None]:
    """The greedy replay's expansions in order (``replay_run``), until every point is verified.

    The baseline is verified before the first step and starts as the incumbent. Each step draws ``n``
    unverified points around the incumbent (the baseline when the screener has ``from_seed``), lets
    ``screener`` pick one, shows an ``OutcomeObserver`` its known outcome and verifies it. The caller owns
    the budget: it stops iterating when its budget (verifications, seconds) is spent, and reads what the
    step cost from the screener (a ``PilotArm``'s ``paid``) before asking for the next.
    """
    rng = random.Random(f"replay:{world.task}:{seed}")
    from_seed = bool(getattr(screener, "from_seed", False))
    observer = screener if isinstance(screener, OutcomeObserver) else None
    space = task.idea_space if task is not None else None
    base = world.baseline_index
    done = {base}
    best_i, best_f = base, world.fitness(base)
    step = 0
    while len(done) < len(world):
        step += 1
        parent, parent_f = (base, world.fitness(base)) if from_seed else (best_i, best_f)
        cands = pool_candidates(world, parent, draw_pool(world, parent, done, n, locality, rng), space=space)
        cand = await pick(screener, pool_context(parent, step, rng, task=task), cands)
        if observer is not None:
            tell(observer, world, parent_f, cand)
        i = point_index(cand.id)
        fit = world.fitness(i)
        done.add(i)
        if fit is not None and (best_f is None or fit > best_f):
            best_i, best_f = i, fit
        yield Step(i, best_i, best_f)


async def _replay(
    world: World, screener: Screener, budget: int, n: int, seed: int, locality: float, task: Task | None
) -> ReplayRun:
    last = Step.baseline(world)
    verified, curve = [last.index], [last.best]
    async with aclosing(greedy_steps(world, screener, n, seed, locality, task)) as steps:
        while len(verified) < budget and (step := await anext(steps, None)) is not None:
            verified.append(step.index)
            curve.append(step.best)
            last = step
    return ReplayRun(screener.name, seed, tuple(curve), last.best_index, tuple(verified))


def replay_many(
    world: World,
    factory: ArmFactory,
    *,
    seeds: Iterable[int],
    budget: int,
    n_candidates: int,
    locality: float = 1.0,
    task: Task | None = None,
) -> list[ReplayRun]:
    """One replay per seed, each with a fresh screener from ``factory(world, seed)`` (one event loop for all)."""

    async def runs() -> list[ReplayRun]:
        return [await _replay(world, factory(world, s), budget, n_candidates, s, locality, task) for s in seeds]

    return run_sync(runs())


def pool_context(parent: int, step: int, rng: random.Random, *, task: Task | None = None) -> ScreenContext:
    """What a screener sees of one replayed expansion: the parent ``w{parent}`` (no program, no score: the
    replay knows only indices), the replay's ``rng``, ``round = step``, one verification, ``task`` if given
    (None otherwise: screeners that read the task cannot run on a bare world)."""
    return ScreenContext(
        task=task,  # type: ignore[arg-type]
        parent=ParentInfo(id=f"w{parent}", program="", score=None, summary=""),
        rng=rng,
        n_verify=1,
        round=step,
    )


async def pick(screener: Screener, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Candidate:
    """The candidate ``screener`` verifies of this pool: its screening's ``chosen[0]``, else ``ranking[0]``."""
    screening = await screener.screen(ctx, candidates)
    cid = screening.chosen[0] if screening.chosen else screening.ranking[0]
    return next(c for c in candidates if c.id == cid)


def tell(screener: OutcomeObserver, world: World, parent_fitness: float | None, candidate: Candidate) -> None:
    """Show a learning screener the known outcome of the candidate it picked (as the engine's tell would)."""
    point = world.points[point_index(candidate.id)]
    v = Verification(
        status=Status.OK if point.status == "ok" else Status.FAILED,
        reason=point.reason,
        score=point.score,
        test_score=point.test_score,
    )
    screener.observe(outcome_of(parent_fitness, candidate, v, higher_is_better=world.direction == "maximize"))


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run a coroutine to completion, also when called from inside a running event loop (then in a thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


@dataclass
class _Wording:
    """What ``pool_candidates`` has made for one world and idea space: candidates by (parent, child), child
    summaries, and each option's words."""

    world: World
    space: Any
    candidates: dict[tuple[int, int], Candidate] = field(default_factory=dict)
    summaries: dict[int, str] = field(default_factory=dict)
    words: dict[tuple[str, str], str] = field(default_factory=dict)

    def word(self, dim: str, opt: str) -> str:
        """The option as the idea text names it: with its description when the space has one."""
        if self.space is None:
            return opt
        key = (dim, opt)
        if key not in self.words:
            self.words[key] = _describe(self.space, dim, opt)
        return self.words[key]

    def candidate(self, parent: int, child: int) -> Candidate:
        points = self.world.points
        pa, ca = points[parent].assignment, points[child].assignment
        changed = [d for d in self.world.dimensions if pa[d] != ca[d]]
        text = "; and ".join([f"change {d} from '{pa[d]}' to {self.word(d, ca[d])}" for d in changed])
        summary = self.summaries.get(child)
        if summary is None:
            summary = self.summaries[child] = " ".join([f"{d}: {self.word(d, ca[d])}." for d in self.world.dimensions])
        return Candidate(
            f"w{child}",
            f"w{parent}",
            Operator.IMPROVE,
            Idea(
                text or "keep the design",
                {"assignment": dict(ca), "changed": changed, "parent_assignment": dict(pa)},
                tuple(changed),
            ),
            "",
            points[child].program_hash or f"w{child}",
            summary,
        )


_WORDING: dict[tuple[int, int], _Wording] = {}


def pool_candidates(world: World, parent: int, indices: Iterable[int], *, space: Any = None) -> tuple[Candidate, ...]:
    """World points ``indices`` as the candidates an expansion of ``parent`` proposes (cached per world and space).

    Each is made as the offline idea-space roles would make it: id ``w{index}``
    (``point_index`` reads it back), parent id ``w{parent}``,
    ``Idea.params = {"assignment", "changed", "parent_assignment"}``, the idea
    text names the changed options (with their descriptions when the idea
    ``space`` is given) and the summary lists every option. No program: a
    screener that reads code or needs an LLM cannot run here (use a simulated critic).
    """
    key = (id(world), id(space))
    wording = _WORDING.get(key)
    if wording is None or wording.world is not world or wording.space is not space:
        wording = _WORDING[key] = _Wording(world, space)
    cache = wording.candidates
    out = []
    for child in indices:
        c = cache.get((parent, child))
        if c is None:
            c = cache[(parent, child)] = wording.candidate(parent, child)
        out.append(c)
    return tuple(out)


def _describe(space: Any, dim: str, opt: str) -> str:
    if space is None:
        return opt
    for o in space.dimensions.get(dim, ()):
        if o.name == opt:
            return f"{opt} ({o.description.strip().rstrip('.')})"
    return opt
