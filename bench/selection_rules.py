"""Selection rules from a perfect screener down to the papers' measured accuracies, replayed on pool worlds.

Four rules (``verifyless.offline.simulated``): the pointwise critic ranked by its plain average label, the same
critic with ties at the top broken by a pairwise knockout among the tied, the pairwise tournament alone, and the
critic-then-judge cascade (top m = 3 by average label, then a knockout). Quality levels pair a critic Dir-3 with a
judge pairwise accuracy: perfect (1.0 / 1.0), strong (0.8 / 0.8), trained critic and RPM arbiter (0.633 / 0.694),
prompted critic (0.466 / 0.6), chance (1/3 / 0.5). k = 3 samples, rho 0.7, tier noise 0.5.

Usage: ``python bench/selection_rules.py [--budget 24] [--seeds 20] [--candidates 8]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from verifyless.builtin import worlds_dir
from verifyless.offline.breakeven import compare_arms, oracle_factory, random_factory, summarize
from verifyless.offline.replay import ArmFactory
from verifyless.offline.simulated import (
    CascadeScreener,
    CriticSpec,
    SimulatedCritic,
    SimulatedJudge,
    TieBrokenCritic,
    TournamentScreener,
)
from verifyless.offline.worlds import load_worlds, normalizer, world_paths

LEVELS = (
    ("perfect", 1.0, 1.0),
    ("strong", 0.8, 0.8),
    ("trained 63.3 / arbiter 69.4", 0.633, 0.694),
    ("prompted 46.6 / judge 60", 0.466, 0.6),
    ("chance", 1 / 3, 0.5),
)


def arms_for(dir3: float, pair: float) -> dict[str, ArmFactory]:
    noise = 0.0 if dir3 == 1.0 else 1.0 if dir3 < 0.34 else 0.5  # a chance critic knows no tiers either
    spec = CriticSpec(f"critic-{dir3:.3f}", dir3, k=3, rho=0.7, tier_noise=noise)
    return {
        "critic (plain)": lambda w, s: SimulatedCritic(spec, w, s),
        "critic (tie-broken)": lambda w, s: TieBrokenCritic(spec, w, SimulatedJudge(pair, s), s),
        "tournament": lambda w, s: TournamentScreener(SimulatedJudge(pair, s), w),
        "cascade (m=3)": lambda w, s: CascadeScreener(spec, w, SimulatedJudge(pair, s), 3, s),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worlds", type=Path, default=worlds_dir())
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--candidates", type=int, default=8)
    args = ap.parse_args(argv)
    worlds = load_worlds(world_paths(args.worlds))
    norms = {t: normalizer(w) for t, w in worlds.items()}
    started = time.monotonic()
    print(
        f"Budget {args.budget}, N={args.candidates}, seeds 0..{args.seeds - 1}, worlds "
        + ", ".join(f"{t} ({len(w)})" for t, w in sorted(worlds.items()))
        + "\n"
    )
    print(
        "| level (critic Dir-3 / judge acc.) | rule | score | headroom captured | P(improve over random) "
        "| verif. to reach random / budget (reached) |\n|---|---|---|---|---|---|"
    )
    for label, dir3, pair in LEVELS:
        results = {}
        for t, w in worlds.items():
            arms = {"random": random_factory, **arms_for(dir3, pair), "oracle": oracle_factory}
            results[t] = compare_arms(
                w, arms, budget=args.budget, n_candidates=args.candidates, seeds=range(args.seeds)
            )
        for r in summarize(results, norms, budget=args.budget, n_boot=1000):
            if r.arm in ("random", "oracle") and label != LEVELS[0][0]:
                continue
            print(
                f"| {label} | {r.arm} | {r.score} | {r.headroom if r.headroom else '—'} | "
                f"{r.p_improve if r.p_improve else '—'} | {r.reach} ({r.reached}/{r.pairs}) |",
                flush=True,
            )
    print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
