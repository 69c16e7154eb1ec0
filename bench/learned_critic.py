"""critic-rm that learns as you go, on the real engine: cold, warm from 2 or 10 earlier runs, bare or adaptive.

Usage::

    python bench/learned_critic.py [--seeds 20] [--budgets 12 24 48] [--candidates 6] [--worlds NAME ...]
                                   [--earlier 2 10] [--earlier-budget 24] [--encoder minilm] [--quick]

Drives the product's own path (``train/learned_worlds.py``): every run is ``verifyless``'s ``Engine`` (greedy, N
candidates per expansion, a real SQLite store) on a built-in task whose verifier is its shipped pool world
(``offline/world_engine.py``). Per world: ``--earlier`` stores of earlier runs (greedy, random pick, seeds 1000 +,
``--earlier-budget`` verifications each), then the warm start the product fits on each (``train.warm.warm_head``,
its held-out verdict printed), then per seed (0 .. seeds - 1) the arms:

* ``random`` (the unguided agent) and ``oracle`` (best of N by the world's score: the ceiling);
* ``cold``: critic-rm with no earlier run, refitting on the run's own paid outcomes only;
* ``warm 2`` / ``warm 10``: critic-rm warm-started from 2 / 10 earlier runs, refitting in the run;
* each bare ("fixed": always screening) and under ``adaptive`` (default options: the product's default screener);
* ``surrogate``: the previous default screener (fitness mode), bare and under adaptive, for the choice of the
  default's inner screener;
* ``across``: a head fitted on the *other* worlds' 10 earlier runs, under adaptive (the harmful case a
  ``screener.options.force=true`` would allow; the warm start never picks it up).

Each run spends the largest budget; the smaller ones are read off its curve (greedy's choices before verification
b do not depend on the budget). Reported per arm and budget: mean normalised final, verifications to reach the
paired random run's final (never: the budget), P(beat random) over seeds with a 95 % bootstrap interval,
adaptive's share switched off by 24 / by the budget and on, and the refits' CPU seconds as a share of the world's
verification seconds plus those refits. Then the issue's targets, cell by cell.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from verifyless.builtin import worlds_dir
from verifyless.offline.worlds import load_worlds, world_paths
from verifyless.screen.features import make_text_encoder
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.screen.reward import HeadSettings, PairFeaturizer, WarmHead, arrays_tag, fit_head
from verifyless.store import RunStore
from verifyless.task.loader import load_task
from verifyless.train.learned_worlds import (
    ArmSummary,
    CachedEncoder,
    critic_arm,
    earlier_store,
    oracle_arm,
    random_arm,
    run_arms,
    summarize,
)
from verifyless.train.reward import pairs_from_runs
from verifyless.train.warm import earlier_runs, warm_head


def across_head(stores: dict[str, Path], world: str, encoder: CachedEncoder) -> WarmHead:
    """A head fitted on the other worlds' earlier runs (bench-only: the product refuses another task's runs)."""
    pairs = []
    for name, path in stores.items():
        if name != world:
            with RunStore(path) as store:
                pairs += pairs_from_runs(store, earlier_runs(store, load_task(name)))
    head = fit_head(PairFeaturizer(encoder, "sentence-diff"), pairs, HeadSettings(encoder=encoder.name))
    head = replace(head, tag=arrays_tag("across", head))
    labelled = tuple(pairs)  # TextPair has parent_text, child_text and label
    return WarmHead(head, labelled, "bench-across")  # type: ignore[arg-type]


def surrogate_arm(*, adaptive: bool):
    """The previous default screener, ``surrogate`` (fitness mode, as the registry builds it), bare or adaptive."""

    def make(book, seed):
        if adaptive:
            return build_screener(
                "adaptive", models={}, options=SCREENERS.validate("adaptive", {"screener": "surrogate"})
            )
        return build_screener("surrogate", models={}, seed=seed)

    return make


def target(arm: str, s: ArmSummary, random: ArmSummary) -> str:
    """The issue's target for this cell: 'ok', 'MISSED (...)' or '' (no target)."""
    missed = []
    p = s.p_beat
    if arm == "warm 2 adaptive" and s.budget == 24:
        if p is None or p[0] < 0.75:
            missed.append(f"P {p[0] if p else 0:.2f} < 0.75")
        if s.reach > 0.7 * random.reach:
            missed.append(f"reach {s.reach:.1f} > 0.7 x {random.reach:.1f}")
    elif arm.startswith("cold") and s.budget >= 24:
        if s.reach > random.reach + 1:
            missed.append(f"reach {s.reach:.1f} > random's {random.reach:.1f} + 1")
        if s.budget == 48 and (p is None or p[0] < 0.55):
            missed.append(f"P {p[0] if p else 0:.2f} < 0.55")
    elif arm == "across adaptive":
        if s.off_by_24 is not None and s.off_by_24 < 0.9:
            missed.append(f"off by 24 in {100 * s.off_by_24:.0f}% < 90%")
        if s.budget == 48 and s.final < random.final - 0.01:
            missed.append(f"final {s.final:.3f} > 0.01 below random's {random.final:.3f}")
    else:
        return ""
    return "ok" if not missed else "MISSED (" + "; ".join(missed) + ")"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budgets", type=int, nargs="+", default=[12, 24, 48])
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--worlds", nargs="+", default=None)
    ap.add_argument("--earlier", type=int, nargs="+", default=[2, 10])
    ap.add_argument("--earlier-budget", type=int, default=24)
    ap.add_argument("--encoder", default="minilm", choices=["minilm", "hashing"])
    ap.add_argument("--arms", nargs="+", default=None, help="only these arms (default: all)")
    ap.add_argument("--quick", action="store_true", help="one world, 2 seeds, budget 24, hashing")
    args = ap.parse_args(argv)
    every = sorted(n for n in load_worlds(world_paths(worlds_dir())) if "." not in n)
    worlds, seeds, budgets = args.worlds or every, list(range(args.seeds)), args.budgets
    if args.quick:
        worlds, seeds, budgets, args.encoder = every[:1], [0, 1], [24], "hashing"
    all_worlds = load_worlds(world_paths(worlds_dir()))
    encoder = CachedEncoder(make_text_encoder(args.encoder))  # type: ignore[arg-type]
    started, n, top = time.monotonic(), args.candidates, max(budgets)
    with tempfile.TemporaryDirectory(prefix="verifyless-learned-") as tmp:
        stores: dict[int, dict[str, Path]] = {k: {} for k in args.earlier}
        for name in every:  # every world's earlier runs (the across head reads the others')
            world, task = all_worlds[name], load_task(name)
            for k in args.earlier:
                stores[k][name] = earlier_store(
                    world, task, Path(tmp) / f"{name}-{k}.db", k, budget=args.earlier_budget, n=n
                )
        print(f"earlier runs stored ({time.monotonic() - started:.0f} s)", file=sys.stderr)
        for name in worlds:
            world, task = all_worlds[name], load_task(name)
            arms = {"random": random_arm, "oracle": oracle_arm}
            heads = {"cold": None}
            for k in args.earlier:
                with RunStore(stores[k][name]) as store:
                    head, line = warm_head(store, task, encoder=encoder.name, text_encoder=encoder)
                print(f"{name}, {k} earlier runs: {line}")
                heads[f"warm {k}"] = head
            for label, head in heads.items():
                arms[f"{label} fixed"] = critic_arm(head, encoder, adaptive=False)
                arms[f"{label} adaptive"] = critic_arm(head, encoder, adaptive=True)
            arms["surrogate fixed"] = surrogate_arm(adaptive=False)
            arms["surrogate adaptive"] = surrogate_arm(adaptive=True)
            arms["across adaptive"] = critic_arm(
                across_head(stores[max(args.earlier)], name, encoder), encoder, adaptive=True
            )
            if args.arms:
                arms = {a: f for a, f in arms.items() if a in {"random", *args.arms}}
            t = time.monotonic()
            runs = run_arms(world, task, arms, seeds, budget=top, n=n)
            print(f"{name}: {len(arms)} arms x {len(seeds)} seeds in {time.monotonic() - t:.0f} s", file=sys.stderr)
            for budget in budgets:
                table(name, budget, summarize(world, task, runs, budget), len(seeds), n)
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)


def table(world: str, budget: int, rows: dict[str, ArmSummary], seeds: int, n: int) -> None:
    rnd = rows["random"]
    print(f"\n{world}, budget {budget} ({seeds} seeds, N = {n}, the engine path):\n")
    print(
        "| arm | final | reach random's final | P(beat random) [95 %] | off by 24 / by budget | on | refit CPU s per run (share of run time) | target |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for arm, s in rows.items():
        p = "-" if s.p_beat is None else f"{s.p_beat[0]:.2f} [{s.p_beat[1]:.2f}, {s.p_beat[2]:.2f}]"
        off = "-" if s.off is None else f"{100 * (s.off_by_24 or 0):.0f}% / {100 * s.off:.0f}%"
        on = "-" if s.on is None else f"{100 * s.on:.0f}%"
        refit = "-" if not s.refit_s else f"{s.refit_s:.2f} ({100 * s.refit_share:.2f}%)"
        print(f"| {arm} | {s.final:.3f} | {s.reach:.1f} | {p} | {off} | {on} | {refit} | {target(arm, s, rnd)} |")


if __name__ == "__main__":
    main()
