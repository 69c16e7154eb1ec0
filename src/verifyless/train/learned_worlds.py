"""critic-rm as a user meets it, measured on a pool world through the real engine (issue 45).

Used by ``make demo`` (part 2) and ``bench/learned_critic.py``; everything runs on ``offline/world_engine.py``
(``verifyless``'s own ``Engine``, a real SQLite store, the world answering each verification):

1. **Earlier runs** (``earlier_store``): ``runs`` greedy runs with the random pick (seeds 1000 +), each stored in one
   run store, as a user's earlier runs of the task would be.
2. **Warm start** (``train.warm.warm_head``): the product's own fit on that store, with its held-out verdict.
3. **Arms** (``critic_arm``, ``random_arm``, ``oracle_arm``): per seed a fresh screener -- ``critic-rm`` starting
   from the warm head or cold, refitting on the run's paid outcomes, bare or under ``adaptive`` (default options);
   the random pick; the best-of-N oracle (``BestOfPool``: the pool's best world score, the ceiling).
4. **Summary** (``summarize``): per arm and budget, the mean normalised final, the verifications to reach the
   paired random run's final (a run that never does counts as the budget), and against random, paired by seed,
   each with a 95 % bootstrap interval: P(beat random) (a tie is a half; the share of ties is kept), the final's
   margin and the verifications saved; adaptive's decisions, and the refits' CPU seconds against the seconds the
   world's verifications took when they were collected (``WorldPoint.seconds``: what a real run would wait).
5. **Verdict** (``verdict_line``): what was won and what was not, computed from the intervals, never written in
   advance; reaching random's final sooner with a final no higher beyond noise is "faster, not better".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verifyless.node import Candidate, Evidence, Screening
from verifyless.offline.compare import bootstrap_ci
from verifyless.offline.world_engine import WorldBook, WorldRun, world_run
from verifyless.offline.worlds import World, normalizer
from verifyless.screen.adaptive import AdaptiveOptions, AdaptiveScreener
from verifyless.screen.base import ScreenContext, choose_top
from verifyless.screen.baselines import RandomScreener
from verifyless.screen.features import TextEncoder
from verifyless.screen.reward import RewardModelCritic, RewardModelOptions, WarmHead, learned_critic
from verifyless.store import RunStore
from verifyless.task.base import Task
from verifyless.train.warm import warm_head

Factory = Callable[[WorldBook, int], Any]  # (the run's book, seed) -> a fresh screener


class CachedEncoder:
    """A text encoder that remembers every text it encoded, shared by the many runs of a comparison (speed only:
    the same text gives the same row either way)."""

    def __init__(self, inner: TextEncoder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.rows: dict[str, np.ndarray] = {}

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.rows]
        if new:
            self.rows.update(zip(new, self.inner.encode(new), strict=True))
        return np.array([self.rows[t] for t in texts]).reshape(len(texts), self.dim)


class BestOfPool:
    """The best-of-N oracle on a world: verifies the candidate whose point scores best (a failed point last)."""

    name = "oracle"

    def __init__(self, book: WorldBook) -> None:
        self.book = book

    def value(self, program: str) -> float:
        i = self.book.locate(program)
        fit = None if i is None else self.book.world.fitness(i)
        return -math.inf if fit is None else fit

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        values = {c.id: self.value(c.program) for c in candidates}
        ranking = sorted(values, key=lambda cid: -values[cid])
        evidence = {cid: Evidence(cid, values[cid] if math.isfinite(values[cid]) else -1e300) for cid in ranking}
        return choose_top(self.name, ranking, evidence, None, ctx, started)


def earlier_store(
    world: World, task: Task, path: Path, runs: int, *, budget: int, n: int, first_seed: int = 1000
) -> Path:
    """``runs`` greedy random-pick engine runs of ``task`` on ``world``, stored in ``path`` (a user's earlier runs)."""
    for i in range(runs):
        book = WorldBook(world, task)
        world_run(world, task, RandomScreener(), book=book, budget=budget, n=n, seed=first_seed + i, store=path)
    return path


def warm_from(path: Path, task: Task, encoder: TextEncoder) -> tuple[WarmHead | None, str]:
    """The product's warm start (``train.warm.warm_head``) on the earlier runs stored in ``path``."""
    with RunStore(path) as store:
        return warm_head(store, task, encoder=encoder.name, text_encoder=encoder)


def critic_arm(
    warm: WarmHead | None,
    encoder: TextEncoder,
    *,
    adaptive: bool,
    gate: str | None = "evidence",
    sizing: str | None = "evidence",
    margin: float | None = None,
) -> Factory:
    """critic-rm from ``warm`` (None: cold), refitting in the run, bare or under adaptive, with the options a new
    run records (``gate`` and ``sizing: evidence``; None: as runs stored before them); ``margin``: adaptive's
    (None: its default)."""
    net = {"sizing": sizing, **({"margin": margin} if margin is not None else {})}

    def make(book: WorldBook, seed: int) -> Any:
        options = RewardModelOptions(encoder=encoder.name, gate=gate)  # type: ignore[arg-type]  # its own kinds
        critic = RewardModelCritic(options, warm=warm, text_encoder=encoder)
        return AdaptiveScreener(critic, AdaptiveOptions(**net)) if adaptive else critic  # type: ignore[arg-type]

    return make


def random_arm(book: WorldBook, seed: int) -> Any:
    return RandomScreener()


def oracle_arm(book: WorldBook, seed: int) -> Any:
    return BestOfPool(book)


@dataclass(frozen=True)
class ArmRun:
    """One engine run of one arm: its curve (and adaptive's state), refit CPU seconds and the world seconds of what
    it verified."""

    run: WorldRun
    refit_s: float = 0.0
    verify_s: float = 0.0


def run_arms(
    world: World, task: Task, arms: Mapping[str, Factory], seeds: Sequence[int], *, budget: int, n: int
) -> dict[str, list[ArmRun]]:
    """Every arm on every seed, ``budget`` verifications, N = ``n`` (module docstring)."""
    out: dict[str, list[ArmRun]] = {name: [] for name in arms}
    for seed in seeds:
        for name, make in arms.items():
            book = WorldBook(world, task)
            screener = make(book, seed)
            run = world_run(world, task, screener, book=book, budget=budget, n=n, seed=seed)
            critic = learned_critic(screener)
            seconds = sum(world.points[i].seconds for i in book.verified)
            out[name].append(ArmRun(run, critic.refit_seconds if critic else 0.0, seconds))
    return out


Interval = tuple[float, float, float]  # (mean, low, high): a 95 % bootstrap interval over seeds


@dataclass(frozen=True)
class ArmSummary:
    """One arm at one budget (module docstring): normalised final, reach, P(beat random) [95 %], decisions.

    Against the reference arm (None for the reference itself), paired by seed, each a 95 % bootstrap interval:
    ``p_beat`` (a tie is half a win; ``ties``: the share of seeds that tied), ``margin`` (this arm's normalised final
    less the reference's) and ``saved`` (the verifications the reference took to reach its own final less this
    arm's: positive is faster). ``reach_ci``: the interval of ``reach``.
    """

    arm: str
    budget: int
    runs: int
    final: float
    reach: float
    p_beat: Interval | None
    off_by_24: float | None = None
    off: float | None = None
    on: float | None = None
    refit_share: float = 0.0
    refit_s: float = 0.0
    reach_ci: tuple[float, float] | None = None
    margin: Interval | None = None
    saved: Interval | None = None
    ties: float | None = None
    share: Interval | None = None  # of the oracle's reach saving (``oracle_share``); None without an oracle arm


def _win(a: float, b: float) -> float:
    return 1.0 if a > b + 1e-12 else 0.5 if abs(a - b) <= 1e-12 else 0.0


def _interval(values: Sequence[float]) -> Interval:
    """The mean of ``values`` with its 95 % bootstrap interval (the mean itself at both ends when it has none)."""
    est = bootstrap_ci(list(values))
    mean = float(est.value if est.value is not None else np.mean(values))
    low = est.low if est.low is not None else mean
    high = est.high if est.high is not None else mean
    return (mean, float(low), float(high))


def oracle_share(reach: Sequence[float], base: Sequence[float], oracle: Sequence[float]) -> Interval | None:
    """The share of the oracle's reach saving an arm captures, (random's reach - the arm's) / (random's - the
    oracle's), on the means over seeds, with a 95 % percentile bootstrap interval over seeds (resampled together,
    paired; a resample where the oracle saves nothing has no share and is left out); None when the oracle saves
    nothing on average."""
    arm, rnd, best = (np.asarray(v, dtype=float) for v in (reach, base, oracle))
    gap = rnd.mean() - best.mean()
    if gap <= 0:
        return None
    point = float((rnd.mean() - arm.mean()) / gap)
    rows = np.random.default_rng(0).integers(0, len(arm), size=(2000, len(arm)))
    gaps = rnd[rows].mean(axis=1) - best[rows].mean(axis=1)
    ok = gaps > 0
    shares = (rnd[rows].mean(axis=1) - arm[rows].mean(axis=1))[ok] / gaps[ok]
    if shares.size == 0:
        return (point, point, point)
    low, high = np.percentile(shares, [2.5, 97.5])
    return (point, float(low), float(high))


def summarize(
    world: World, task: Task | None, runs: Mapping[str, list[ArmRun]], budget: int, *, reference: str = "random"
) -> dict[str, ArmSummary]:
    """Per arm at ``budget`` (runs paired with ``reference`` by position, i.e. by seed); with an ``oracle`` arm,
    each arm's ``oracle_share``."""
    norm = normalizer(world, task)
    base = [r.run for r in runs[reference]]
    base_finals = [norm(b.at(budget)) for b in base]
    base_reach = [min(b.reach(b.at(budget)) or budget, budget) for b in base]

    def reach_of(rs: Sequence[ArmRun]) -> list[float]:
        return [min(r.run.reach(b.at(budget)) or budget, budget) for r, b in zip(rs, base, strict=True)]

    oracle = reach_of(runs["oracle"]) if "oracle" in runs else None
    out = {}
    for arm, rs in runs.items():
        finals = [norm(r.run.at(budget)) for r in rs]
        reach = reach_of(rs)
        paired = arm != reference
        wins = [_win(r.run.at(budget), b.at(budget)) for r, b in zip(rs, base, strict=True)]
        states = [r.run for r in rs if r.run.state is not None]
        decided = [(s.state, s.decided_at or 0) for s in states]
        refit, verify = sum(r.refit_s for r in rs), sum(r.verify_s for r in rs)
        reach_ci = _interval(reach)
        out[arm] = ArmSummary(
            arm,
            budget,
            len(rs),
            float(np.mean(finals)),
            float(np.mean(reach)),
            _interval(wins) if paired else None,
            float(np.mean([st == "off" and at <= 24 for st, at in decided])) if decided else None,
            float(np.mean([st == "off" and at <= budget for st, at in decided])) if decided else None,
            float(np.mean([st == "on" and at <= budget for st, at in decided])) if decided else None,
            refit / (refit + verify) if refit + verify > 0 else 0.0,
            refit / max(1, len(rs)),
            reach_ci[1:],
            _interval([f - b for f, b in zip(finals, base_finals, strict=True)]) if paired else None,
            _interval([b - r for r, b in zip(reach, base_reach, strict=True)]) if paired else None,
            float(np.mean([w == 0.5 for w in wins])) if paired else None,
            oracle_share(reach, base_reach, oracle) if oracle is not None else None,
        )
    return out


def verdict_line(arm: ArmSummary, random: ArmSummary, oracle: ArmSummary | None = None) -> str:
    """The plain verdict on ``arm`` against random, computed from its intervals (never written in advance).

    It says what was won and what was not, each with its interval: the verifications to reach random's final score
    (``saved``) and the final score itself (``margin``). The head: a final score higher beyond noise is a win, lower
    a loss; with neither, reaching random's final sooner is "faster, not better" (speed alone is no win), later is
    "slower, and no better"; else no clear win. P(beats random) follows, with the share of ties it counts as half.
    """
    if arm.p_beat is None or arm.margin is None or arm.saved is None:
        return f"{arm.arm}: no comparison with random"
    speed, final = _speed_text(arm, random, oracle), _final_text(arm, random, oracle)
    faster, slower = arm.saved[1] > 0, arm.saved[2] < 0
    higher, lower = arm.margin[1] > 0, arm.margin[2] < 0
    head = (
        "Screening LOSES to random here"
        if lower
        else "Screening wins here"
        if higher
        else "Screening is faster here, not better"
        if faster
        else "Screening is slower here, and no better"
        if slower
        else "No clear win for screening here"
    )
    won = [text for text, ok in ((speed, faster), (final, higher)) if ok]
    lost = [text for text, ok in ((speed, faster), (final, higher)) if not ok]
    p, lo, hi = arm.p_beat
    ties = f", the {arm.ties:.0%} of seeds that tied counted as half a win" if arm.ties else ""
    return (
        f"{head}. Won: {'; '.join(won) or 'nothing beyond noise'}. Not won: {'; '.join(lost) or 'nothing'}. "
        f"P({arm.arm} beats random at the budget) = {p:.2f} [{lo:.2f}, {hi:.2f}] over {arm.runs} seeds{ties}."
    )


def _speed_text(arm: ArmSummary, random: ArmSummary, oracle: ArmSummary | None) -> str:
    s, lo, hi = arm.saved or (0.0, 0.0, 0.0)
    reach = f"{arm.reach:.1f}" + (f" [{arm.reach_ci[0]:.1f}, {arm.reach_ci[1]:.1f}]" if arm.reach_ci else "")
    ceiling = f"; the oracle ceiling {oracle.reach:.1f}" if oracle is not None else ""
    return (
        f"verifications to reach random's final score: {reach} of {arm.budget} against random's {random.reach:.1f}"
        f"{ceiling} ({s:+.1f} [{lo:+.1f}, {hi:+.1f}] saved)"
    )


def _final_text(arm: ArmSummary, random: ArmSummary, oracle: ArmSummary | None) -> str:
    m, lo, hi = arm.margin or (0.0, 0.0, 0.0)
    ceiling = f"; the oracle ceiling {oracle.final:.3f}" if oracle is not None else ""
    return (
        f"the final normalised score: {arm.final:.3f} against random's {random.final:.3f}{ceiling} "
        f"(margin {m:+.3f} [{lo:+.3f}, {hi:+.3f}])"
    )


__all__ = [
    "ArmRun",
    "ArmSummary",
    "BestOfPool",
    "CachedEncoder",
    "critic_arm",
    "earlier_store",
    "oracle_arm",
    "random_arm",
    "run_arms",
    "summarize",
    "verdict_line",
    "warm_from",
]
