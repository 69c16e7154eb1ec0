"""Matched-budget replays on pool worlds, and when screening pays for itself.

``compare_arms`` replays every arm (an ``ArmFactory``: a fresh ``Screener`` per run) for the same seeds,
budget and pool size on one world; ``summarize`` turns runs of several tasks
into the efficiency table: final normalised score (task-stratified bootstrap
CI), headroom captured ``(arm - random) / (oracle - random)``, probability of
improvement over random (task-stratified CI) and verifications-to-reach: how
many verifications the arm needed to reach the paired random run's final
best (same task and seed), as a share of the budget; a run that never
reaches it counts as the whole budget (``reached`` says how many did).

``breakeven_grid`` sweeps simulated critics over Dir-3, N (candidates per
expansion) and k (samples per candidate) and applies ``CostModel``: the
screened arm pays ``N x k x tokens_per_sample`` critic tokens per
verification it makes. Verifications saved are measured against a *null*
screener, a chance-level critic (Dir-3 1/3, no tier information) with the same
N and k: ``saved = v_reach(null) - v_reach(critic)`` (never reached counts as
the budget). Against ``budget - v_reach`` alone even a coin looks useful,
because any run often matches random's final before the last verification
(random's own best usually stops improving before its budget ends). Screening pays for itself
when a verification costs more than ``screening cost / verifications saved``;
``breakeven_seconds`` states that threshold as seconds of verification at
``price_per_hour``. Proposal costs are the same in both arms and excluded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifyless.offline.compare import Estimate, arm_score, bootstrap_ci, probability_of_improvement
from verifyless.offline.replay import ArmFactory, IIDArm, OracleArm, RandomArm, ReplayRun, replay_many
from verifyless.offline.simulated import PRESETS, CriticSpec, critic_factory
from verifyless.offline.worlds import World, normalizer
from verifyless.screen.surrogate import SurrogateOptions, SurrogateScreener

N_BOOT = 2000


def random_factory(world: World, seed: int) -> RandomArm:
    return RandomArm()


def iid_factory(world: World, seed: int) -> IIDArm:
    return IIDArm()


def oracle_factory(world: World, seed: int) -> OracleArm:
    return OracleArm(world)


def surrogate_factory(world: World | None, *, rank_by: str = "fitness", explore: float = 1.0) -> ArmFactory:
    """The real ``SurrogateScreener`` (fresh per run, seeded by the run), replayed as it is (it is a Screener)."""
    options = SurrogateOptions(rank_by=rank_by, explore=explore)  # type: ignore[arg-type]  # checked by pydantic
    return lambda w, s: SurrogateScreener(options, seed=s)


def standard_arms(world: World, *, legacy_surrogate: bool = False) -> dict[str, ArmFactory]:
    """iid (no evolution), random, surrogate, simulated critics at the paper's Dir-3 (46.6, 63.3), best-of-N oracle.

    The task (its idea space words the candidates) is a replay argument: ``compare_arms(..., task=)``.
    """
    arms: dict[str, ArmFactory] = {
        "iid": iid_factory,
        "random": random_factory,
        "surrogate": surrogate_factory(world),
    }
    if legacy_surrogate:
        arms["surrogate-delta"] = surrogate_factory(world, rank_by="delta")
    arms["critic-46.6"] = critic_factory(PRESETS["prompted"])
    arms["critic-63.3"] = critic_factory(PRESETS["trained"])
    arms["oracle"] = oracle_factory
    return arms


def compare_arms(
    world: World,
    arms: Mapping[str, ArmFactory],
    *,
    budget: int,
    n_candidates: int,
    seeds: Sequence[int],
    locality: float = 1.0,
    task: Any = None,
) -> dict[str, list[ReplayRun]]:
    """Every arm replayed with the same seeds (so pools of equal seeds start alike); ``task`` as in ``replay_run``."""
    return {
        name: replay_many(world, f, seeds=seeds, budget=budget, n_candidates=n_candidates, locality=locality, task=task)
        for name, f in arms.items()
    }


@dataclass(frozen=True)
class ArmRow:
    """One arm's line of the efficiency table."""

    arm: str
    score: Estimate
    headroom: Estimate | None
    p_improve: Estimate | None
    reach: Estimate | None
    reached: int
    pairs: int
    per_task: Mapping[str, Estimate] = field(default_factory=dict)


def reach_ratios(runs: Sequence[ReplayRun], random_runs: Sequence[ReplayRun], budget: int) -> tuple[list[float], int]:
    """Per seed: verifications to reach the paired random run's final / budget (1.0 when never reached)."""
    base = {r.seed: r for r in random_runs}
    ratios, reached = [], 0
    for r in runs:
        b = base.get(r.seed)
        if b is None or not math.isfinite(b.final):
            continue
        v = r.reach(b.final)
        reached += v is not None
        ratios.append((v if v is not None else budget) / budget)
    return ratios, reached


def summarize(
    results: Mapping[str, Mapping[str, Sequence[ReplayRun]]],
    norms: Mapping[str, Callable[[float], float]],
    *,
    budget: int,
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> list[ArmRow]:
    """The efficiency table over tasks (``results[task][arm]``); see module docstring."""
    tasks = sorted(results)
    arms = list(next(iter(results.values()))) if results else []
    scores = {a: {t: [norms[t](r.final) for r in results[t][a]] for t in tasks} for a in arms}
    rows = []
    for a in arms:
        ratios, reached, pairs = [], 0, 0
        for t in tasks:
            rr, hit = reach_ratios(results[t][a], results[t].get("random", ()), budget)
            ratios += rr
            reached += hit
            pairs += len(rr)
        rows.append(
            ArmRow(
                arm=a,
                score=arm_score(scores[a], n_boot=n_boot, seed=seed),
                headroom=headroom(scores, a, tasks, seed, n_boot),
                p_improve=None
                if a == "random" or "random" not in scores
                else probability_of_improvement(scores[a], scores["random"], n_boot=n_boot, seed=seed),
                reach=bootstrap_ci(ratios, n_boot=n_boot, seed=seed) if ratios else None,
                reached=reached,
                pairs=pairs,
                per_task={t: bootstrap_ci(scores[a][t], n_boot=n_boot, seed=seed) for t in tasks},
            )
        )
    return rows


def headroom(
    scores: Mapping[str, Mapping[str, Sequence[float]]],
    arm: str,
    tasks: Sequence[str],
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> Estimate | None:
    """How much of the gap from random to oracle ``arm`` closes: (arm - random) / (oracle - random) on the
    task-averaged means of ``scores[arm][task]`` (one score per run), with a task-stratified bootstrap interval.

    None for the random and oracle arms themselves, when either is missing, or when oracle does not beat random
    (the ratio is undefined); the interval is None when it cannot vary (every arm has one run per task) or when
    fewer than half the resamples give a defined ratio.
    """
    if arm in ("random", "oracle") or "random" not in scores or "oracle" not in scores:
        return None
    groups = {k: scores[k] for k in (arm, "random", "oracle")}

    def ratio(means: dict[str, float]) -> float:
        gap = means["oracle"] - means["random"]
        return (means[arm] - means["random"]) / gap if gap > 1e-12 else math.nan

    point = ratio({k: float(np.mean([np.mean(g[t]) for t in tasks])) for k, g in groups.items()})
    if not math.isfinite(point):
        return None
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        means = {
            k: float(np.mean([np.mean(rng.choice(np.asarray(g[t]), size=len(g[t]))) for t in tasks]))
            for k, g in groups.items()
        }
        boots.append(ratio(means))
    b = np.asarray(boots)
    b = b[np.isfinite(b)]
    if b.size < n_boot // 2 or all(len(g[t]) == 1 for g in groups.values() for t in tasks):
        return Estimate(point, None, None, len(tasks))
    lo, hi = np.quantile(b, [0.025, 0.975])
    return Estimate(point, float(lo), float(hi), len(tasks))


# ---------------------------------------------------------------------- cost model


@dataclass(frozen=True)
class CostModel:
    """Prices: critic tokens per sample (prompt + reply), $ per million tokens, $ per hour of verification."""

    tokens_per_sample: float = 2500.0
    usd_per_million_tokens: float = 3.0
    usd_per_verification_hour: float = 2.0

    def screening_usd(self, n_candidates: int, k: int) -> float:
        """Critic cost of screening one pool (N candidates, k samples each)."""
        return n_candidates * k * self.tokens_per_sample * self.usd_per_million_tokens / 1e6

    def breakeven_seconds(
        self, *, n_candidates: int, k: int, screened_verifications: float, saved_verifications: float
    ) -> float:
        """Verification length (s) above which screening costs less than the verifications it saves (inf: never)."""
        if saved_verifications <= 0:
            return math.inf
        usd = self.screening_usd(n_candidates, k) * screened_verifications / saved_verifications
        return usd / self.usd_per_verification_hour * 3600.0


@dataclass(frozen=True)
class BreakevenRow:
    task: str
    dir3: float
    n_candidates: int
    k: int
    headroom: float
    reach: float  # mean verifications-to-reach random's final / budget (never reached = 1)
    reached: int
    pairs: int
    saved: float  # mean verifications saved per run against a chance-level critic (same N, k)
    breakeven_s: float  # seconds per verification above which screening pays


def breakeven_grid(
    worlds: Mapping[str, World],
    *,
    dir3s: Sequence[float],
    ns: Sequence[int],
    ks: Sequence[int],
    budget: int,
    seeds: Sequence[int],
    rho: float = 0.7,
    tier_noise: float = 0.5,
    locality: float = 1.0,
    cost: CostModel | None = None,
) -> list[BreakevenRow]:
    """Sweep simulated critics (Dir-3 x N x k) against random and the oracle on each world."""
    cost = cost or CostModel()
    rows = []
    for task, world in sorted(worlds.items()):
        norm = normalizer(world)
        for n in ns:
            base = compare_arms(
                world,
                {"random": random_factory, "oracle": oracle_factory},
                budget=budget,
                n_candidates=n,
                seeds=seeds,
                locality=locality,
            )
            r_mean = float(np.mean([norm(r.final) for r in base["random"]]))
            o_mean = float(np.mean([norm(r.final) for r in base["oracle"]]))
            for k in ks:
                null = CriticSpec(f"null-k{k}", 1 / 3, k=k, rho=rho, tier_noise=1.0)
                null_runs = replay_many(
                    world, critic_factory(null), seeds=seeds, budget=budget, n_candidates=n, locality=locality
                )
                null_ratios, _ = reach_ratios(null_runs, base["random"], budget)
                null_used = float(np.mean(null_ratios)) * budget if null_ratios else float(budget)
                for d in dir3s:
                    spec = CriticSpec(f"critic-{d:.3f}-k{k}", d, k=k, rho=rho, tier_noise=tier_noise)
                    runs = replay_many(
                        world, critic_factory(spec), seeds=seeds, budget=budget, n_candidates=n, locality=locality
                    )
                    rows.append(
                        _breakeven_row(
                            task, d, n, k, runs, base["random"], r_mean, o_mean, norm, budget, cost, null_used
                        )
                    )
    rows.sort(key=lambda r: (r.task, r.n_candidates, r.dir3, r.k))
    return rows


def _breakeven_row(
    task: str,
    d: float,
    n: int,
    k: int,
    runs: Sequence[ReplayRun],
    random_runs: Sequence[ReplayRun],
    r_mean: float,
    o_mean: float,
    norm: Callable[[float], float],
    budget: int,
    cost: CostModel,
    null_used: float,
) -> BreakevenRow:
    mean = float(np.mean([norm(r.final) for r in runs]))
    ratios, reached = reach_ratios(runs, random_runs, budget)
    used = float(np.mean(ratios)) * budget if ratios else float(budget)
    saved = null_used - used
    gap = o_mean - r_mean
    return BreakevenRow(
        task,
        d,
        n,
        k,
        (mean - r_mean) / gap if gap > 1e-12 else math.nan,
        float(np.mean(ratios)) if ratios else math.nan,
        reached,
        len(ratios),
        saved,
        cost.breakeven_seconds(n_candidates=n, k=k, screened_verifications=used, saved_verifications=saved),
    )


__all__ = [
    "ArmRow",
    "BreakevenRow",
    "CostModel",
    "breakeven_grid",
    "compare_arms",
    "headroom",
    "iid_factory",
    "oracle_factory",
    "random_factory",
    "reach_ratios",
    "standard_arms",
    "summarize",
    "surrogate_factory",
]
