"""Adaptive screening on the pool worlds: does it know when screening helps?

Usage::

    python bench/adaptive.py [--seeds 20] [--first-seed 0] [--budgets 12 24 48] [--candidates 6]
                             [--rule verdicts|pairs] [--set KEY=VALUE ...] [--quick]

Setup: the shipped pool worlds (``verifyless.builtin.worlds_dir()``), the
greedy replay of ``offline/replay.py`` (the incumbent is the parent of every
expansion, N candidates drawn near it), simulated critics
(``offline/simulated.py``, k = 3 samples, rho = 0.7) from chance (Dir-3 1/3)
through the paper's prompted (46.6) and trained (63.3) critics to 80 and
100 (perfect, rho 0). Arms per critic level:

* ``random``: a uniform pick (the unguided agent);
* ``fixed``: the simulated critic's pick every expansion (fixed screening);
* ``adaptive``: ``screen/adaptive.AdaptiveRule`` (``--rule``, default
  options unless ``--set`` changes them, e.g. ``--set explore=0.5 trial=6``
  for the first rule's defaults) around the same critic: its pick draws
  exactly what the fixed arm's would (its scores, then the same tie-break),
  every verified candidate's critic score and improved-or-not are the
  verdict units, an audited expansion verifies the critic's pick *and* a
  random other (two verifications, a pair), and the test switches screening
  off (uniform picks from then on) or keeps it on; a shadow trial
  (``trial_picks=random``) picks with the random arm's draw while the critic
  only scores;
* ``iid``: uniform picks, every pool drawn around the seed (no evolution);
* ``oracle``: the best-of-N validation oracle.

Reported per level and budget: final normalised score (mean over worlds and
seeds), verifications to reach the paired random run's final (same world and
seed; a run that never reaches it counts as the budget), P(improve) = share of
paired runs whose final beats random's (a tie counts one half), the share of
adaptive runs that ended with screening off, and the target check: adaptive
within 1 verification of the better of random and fixed on reach and within
0.02 on P(improve); at the trained level (63.3) adaptive keeps >= 80 % of fixed
screening's headroom over random ((adaptive - random) / (fixed - random) on
the mean final score). The adaptive row's note also gives its audits
(verifications spent on audits per run, the cost of safety) and its regret:
the better of random's and fixed's mean final score minus adaptive's.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from verifyless.builtin import worlds_dir
from verifyless.offline.replay import (
    IIDArm,
    OracleArm,
    RandomArm,
    ReplayRun,
    draw_pool,
    point_index,
    pool_candidates,
    pool_context,
    replay_run,
    run_sync,
)
from verifyless.offline.simulated import CriticSpec, SimulatedCritic
from verifyless.offline.worlds import World, load_worlds, normalizer, world_paths
from verifyless.screen.adaptive import AdaptiveOptions, AdaptiveRule

LEVELS: dict[str, CriticSpec] = {
    "chance 33.3": CriticSpec("chance", 1 / 3, tier_noise=1.0),
    "prompted 46.6": CriticSpec("prompted", 0.466),
    "trained 63.3": CriticSpec("trained", 0.633),
    "strong 80.0": CriticSpec("strong", 0.80),
    "perfect 100": CriticSpec("perfect", 1.0, rho=0.0, tier_noise=0.0),
}
ARMS = ("random", "fixed", "adaptive", "iid", "oracle")


@dataclass(frozen=True)
class AdaptiveRun:
    """One adaptive replay: the curve and where the rule ended."""

    run: ReplayRun
    state: str
    audits: int


def replay_adaptive(
    world: World, critic: SimulatedCritic, options: AdaptiveOptions, *, budget: int, n: int, seed: int
) -> AdaptiveRun:
    """``replay_run``'s greedy search with the adaptive rule choosing (module docstring)."""
    return run_sync(_replay_adaptive(world, critic, options, budget, n, seed))


async def _replay_adaptive(
    world: World, critic: SimulatedCritic, options: AdaptiveOptions, budget: int, n: int, seed: int
) -> AdaptiveRun:
    rng = random.Random(f"replay:{world.task}:{seed}")  # the same pool draws as the other arms
    draws = random.Random(f"adaptive:{world.task}:{seed}")  # audit draws, apart from the pools
    rule = AdaptiveRule(options)
    base = world.baseline_index
    best_i, best_f = base, world.fitness(base)
    verified = [base]
    done, curve, step, audits = {base}, [_or_inf(best_f)], 0, 0
    while len(verified) < budget and len(done) < len(world):
        step += 1
        parent_f = best_f
        cands = pool_candidates(world, best_i, draw_pool(world, best_i, done, n, 1.0, rng))
        ctx = pool_context(best_i, step, rng)
        index = [point_index(c.id) for c in cands]
        scores: list[float] = []
        if rule.shadow:  # the critic scores the pool, the pick is the random arm's draw
            scores = critic.scores(ctx, cands)
            picks = [rng.randrange(len(cands))]
        elif rule.screens:  # the critic screens: its scores, then its tie-break (the fixed arm's draws)
            screening = await critic.screen(ctx, cands)
            scores = [screening.evidence[c.id].rank_value for c in cands]
            picks = [[c.id for c in cands].index(screening.chosen[0])]
            rest = [j for j in range(len(cands)) if j != picks[0]]
            if rest and len(verified) + 2 <= budget and rule.audits(draws.random()):
                picks.append(draws.choice(rest))
                audits += 1
        else:
            picks = [rng.randrange(len(cands))]
        won = [_improves(world.fitness(index[j]), parent_f) for j in picks]
        for j in picks:
            fit = world.fitness(index[j])
            verified.append(index[j])
            done.add(index[j])
            if fit is not None and (best_f is None or fit > best_f):
                best_i, best_f = index[j], fit
            curve.append(_or_inf(best_f))
        for j, w in zip(picks, won, strict=True):
            if scores:
                rule.add_verdict(scores[j], w, pick=j == picks[0])
        if len(picks) == 2:
            rule.add_pair(*won)
        rule.decide(step)
    run = ReplayRun("adaptive", seed, tuple(curve), best_i, tuple(verified))
    return AdaptiveRun(run, rule.state, audits)


def _improves(f: float | None, parent: float | None) -> bool:
    return f is not None and (parent is None or f > parent)


def _or_inf(f: float | None) -> float:
    return -math.inf if f is None else f


def level_runs(
    worlds: Sequence[World],
    spec: CriticSpec,
    options: AdaptiveOptions,
    *,
    budget: int,
    n: int,
    seeds: Sequence[int],
) -> dict[str, list[tuple[float, ReplayRun, ReplayRun]]]:
    """Per arm, (normalised final, run, paired random run) for every world and seed.

    Two extra rows: ``_off`` (1.0 where the adaptive run ended with screening off) and ``_audits`` (its audits).
    """
    out: dict[str, list[tuple[float, ReplayRun, ReplayRun]]] = {a: [] for a in ARMS}
    off: list[bool] = []
    audits: list[int] = []
    for w in worlds:
        norm = normalizer(w)
        for s in seeds:
            kw = {"budget": budget, "n_candidates": n, "seed": s}
            rand = replay_run(w, RandomArm(), **kw)
            runs = {
                "random": rand,
                "fixed": replay_run(w, SimulatedCritic(spec, w, s), **kw),
                "iid": replay_run(w, IIDArm(), **kw),
                "oracle": replay_run(w, OracleArm(w), **kw),
            }
            ad = replay_adaptive(w, SimulatedCritic(spec, w, s), options, budget=budget, n=n, seed=s)
            runs["adaptive"] = ad.run
            off.append(ad.state == "off")
            audits.append(ad.audits)
            for arm, run in runs.items():
                out[arm].append((norm(run.final), run, rand))
    out["_off"] = [(float(o), rand, rand) for o in off]  # share of adaptive runs ending with screening off
    out["_audits"] = [(float(a), rand, rand) for a in audits]  # audit verifications per adaptive run
    return out


def summary(rows: list[tuple[float, ReplayRun, ReplayRun]], budget: int) -> tuple[float, float, float]:
    """(mean final normalised score, mean verifications to reach random's final, P(improve over random))."""
    finals = [f for f, _, _ in rows]
    reach = [r.reach(rand.final) or budget for _, r, rand in rows]
    wins = [
        1.0 if r.final > rand.final + 1e-12 else 0.5 if abs(r.final - rand.final) <= 1e-12 else 0.0
        for _, r, rand in rows
    ]
    return float(np.mean(finals)), float(np.mean(reach)), float(np.mean(wins))


def report(
    worlds: Sequence[World],
    *,
    budgets: Sequence[int],
    n: int,
    seeds: Sequence[int],
    say: Callable[[str], None],
    options: AdaptiveOptions | None = None,
) -> list[dict[str, object]]:
    """Print one markdown table per budget; return the target checks, one per level and budget."""
    checks: list[dict[str, object]] = []
    for budget in budgets:
        say(f"\nBudget {budget} ({len(worlds)} worlds x {len(seeds)} seeds, N = {n}):\n")
        say("| critic (Dir-3) | arm | final score | verif. to reach random's final | P(improve) | note |")
        say("|---|---|---|---|---|---|")
        for label, spec in LEVELS.items():
            runs = level_runs(worlds, spec, options or AdaptiveOptions(), budget=budget, n=n, seeds=seeds)
            stats = {a: summary(runs[a], budget) for a in ARMS}
            off = float(np.mean([o for o, _, _ in runs["_off"]]))
            audits = float(np.mean([a for a, _, _ in runs["_audits"]]))
            regret = max(stats["random"][0], stats["fixed"][0]) - stats["adaptive"][0]
            better = min(("random", "fixed"), key=lambda a: stats[a][1])
            reach_ok = stats["adaptive"][1] <= stats[better][1] + 1.0
            best_poi = max(stats["random"][2], stats["fixed"][2])
            poi_ok = stats["adaptive"][2] >= best_poi - 0.02
            gap = stats["fixed"][0] - stats["random"][0]
            kept = (stats["adaptive"][0] - stats["random"][0]) / gap if gap > 0 else None
            checks.append(
                {
                    "budget": budget,
                    "level": label,
                    "reach_ok": reach_ok,
                    "poi_ok": poi_ok,
                    "headroom_kept": kept,
                    "audits": audits,
                    "regret": regret,
                    "reach_gap": stats["adaptive"][1] - stats[better][1],
                    "poi_gap": stats["adaptive"][2] - best_poi,
                }
            )
            for arm in ARMS:
                final, reach, poi = stats[arm]
                note = ""
                if arm == "adaptive":
                    keep = "" if kept is None else f"; headroom kept {kept:.2f}"
                    note = (
                        f"off in {100 * off:.0f}% of runs; audits {audits:.1f}; regret {regret:+.4f}; "
                        f"reach {'ok' if reach_ok else 'MISSED'} vs {better}; "
                        f"P(improve) {'ok' if poi_ok else 'MISSED'}{keep}"
                    )
                say(f"| {label} | {arm} | {final:.3f} | {reach:.1f} | {poi:.2f} | {note} |")
    return checks


def main(argv: Sequence[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budgets", type=int, nargs="+", default=[12, 24, 48])
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--rule", choices=["verdicts", "pairs"], default="verdicts", help="the adaptive rule")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="other AdaptiveOptions")
    ap.add_argument("--quick", action="store_true", help="one world, 3 seeds, budget 12")
    args = ap.parse_args(argv)
    worlds = list(load_worlds(world_paths(worlds_dir())).values())
    seeds, budgets = range(args.first_seed, args.first_seed + args.seeds), args.budgets
    options = AdaptiveOptions(rule=args.rule, **dict(kv.split("=", 1) for kv in args.set))
    print(f"adaptive options: {options.model_dump(exclude={'screener', 'options'})}")
    if args.quick:
        worlds, seeds, budgets = worlds[:1], range(3), [12]
    started = time.monotonic()
    checks = report(worlds, budgets=budgets, n=args.candidates, seeds=seeds, say=print, options=options)
    met = sum(bool(c["reach_ok"]) and bool(c["poi_ok"]) for c in checks)
    print(f"\ntarget (reach and P(improve)) met at {met} of {len(checks)} level x budget cells")
    trained = [c for c in checks if str(c["level"]).startswith("trained")]
    for c in trained:
        kept = c["headroom_kept"]
        print(f"trained level, budget {c['budget']}: headroom kept {'-' if kept is None else f'{kept:.2f}'}")
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return checks


if __name__ == "__main__":
    main()
