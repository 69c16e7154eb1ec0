"""Adaptive screening on the real engine: does it switch off a critic that hurts, and keep one that helps?

Usage::

    python bench/adaptive.py [--seeds 20] [--first-seed 0] [--budgets 12 24 48] [--candidates 6]
                             [--set KEY=VALUE ...] [--levels NAME ...] [--worlds NAME ...] [--jobs 1] [--quick]

Setup: every run is ``verifyless``'s own ``Engine`` (greedy, N candidates per
expansion, a real SQLite store) on a built-in task whose verifier is a
shipped pool world (``offline/world_engine.py``: the world answers each
verification from its known outcome; the proposer draws unverified points
near the parent). The inner screener is a simulated critic
(``offline/simulated.py``, k = 3 samples, rho = 0.7) at seven levels, two of
them harmful: inverted 100 and inverted 63.3 (a true improvement read as a
loss and back), chance (Dir-3 1/3), the paper's prompted (46.6) and trained
(63.3) critics, strong (80) and perfect (100). Arms per level, same world
and seed:

* ``random``: ``screen.baselines.RandomScreener`` (the unguided agent);
* ``fixed``: the simulated critic screening every expansion;
* ``adaptive``: ``screen/adaptive.AdaptiveScreener`` around the same critic
  (default options unless ``--set`` changes them).

Each run spends the largest budget; the smaller budgets are read off its
curve (the engine's choices before verification b do not depend on the
budget, except that an audit needs two free slots). Reported per level and
budget: the final normalised score (mean over worlds and seeds),
verifications to reach the paired random run's final (a run that never
reaches it counts as the budget), P(beat random) (ties one half) with a
bootstrap 95 % interval, and for adaptive: the share of runs switched off by
verification 24 and by the budget, the share on, headroom kept ((adaptive -
random) / (fixed - random)), and the cost of safety: audited siblings
(verifications) and canaries (screener calls of two candidates) per run.
The target check follows issue 31: inverted levels off in >= 90 % by
verification 24 and, at the largest budget, within 0.01 of random's final
and 2 verifications of its reach; chance off in >= 50 % by the largest
budget and within 1 verification of random's reach; trained 63.3 and better
falsely off in <= 10 % and keeping >= 90 % of fixed screening's headroom.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from verifyless.builtin import worlds_dir
from verifyless.offline.simulated import PRESETS, CriticSpec
from verifyless.offline.world_engine import WorldBook, WorldCritic, WorldRun, world_run
from verifyless.offline.worlds import World, load_worlds, normalizer, world_paths
from verifyless.screen.adaptive import AdaptiveOptions, AdaptiveScreener
from verifyless.screen.baselines import RandomScreener
from verifyless.task.loader import load_task

LEVELS: dict[str, CriticSpec] = {
    "inverted 100": PRESETS["inverted_perfect"],
    "inverted 63.3": PRESETS["inverted"],
    "chance 33.3": PRESETS["chance"],
    "prompted 46.6": PRESETS["prompted"],
    "trained 63.3": PRESETS["trained"],
    "strong 80.0": CriticSpec("critic-80", 0.80),
    "perfect 100": PRESETS["perfect"],
}
HARMFUL = ("inverted 100", "inverted 63.3")
HELPFUL = ("trained 63.3", "strong 80.0", "perfect 100")


@dataclass(frozen=True)
class Job:
    world: str
    level: str
    seed: int
    budget: int
    n: int
    options: dict[str, object]


def run_job(job: Job) -> tuple[Job, WorldRun, WorldRun]:
    """(job, fixed run, adaptive run) of one level on one world and seed (the engine path, module docstring)."""
    world, task = _world(job.world), load_task(_world(job.world).task)
    runs = []
    for adaptive in (False, True):
        book = WorldBook(world, task)
        critic = WorldCritic(LEVELS[job.level], book, job.seed)
        screener = AdaptiveScreener(critic, AdaptiveOptions(**job.options)) if adaptive else critic
        runs.append(world_run(world, task, screener, book=book, budget=job.budget, n=job.n, seed=job.seed))
    return job, runs[0], runs[1]


def random_job(job: Job) -> tuple[Job, WorldRun]:
    world, task = _world(job.world), load_task(_world(job.world).task)
    book = WorldBook(world, task)
    return job, world_run(world, task, RandomScreener(), book=book, budget=job.budget, n=job.n, seed=job.seed)


_WORLDS: dict[str, World] = {}


def _world(name: str) -> World:
    if not _WORLDS:
        _WORLDS.update(load_worlds(world_paths(worlds_dir())))
    return _WORLDS[name]


def _map(fn: Callable, jobs: Sequence[Job], n_jobs: int) -> list:
    if n_jobs <= 1:
        return [fn(j) for j in jobs]
    with ProcessPoolExecutor(n_jobs) as pool:
        return list(pool.map(fn, jobs, chunksize=1))


def poi(wins: Sequence[float], seed: int = 0) -> tuple[float, float, float]:
    """P(beat random) and a bootstrap 95 % interval over runs."""
    data = np.asarray(wins, float)
    rng = np.random.default_rng(seed)
    draws = [float(np.mean(data[rng.integers(0, len(data), len(data))])) for _ in range(1000)]
    return float(np.mean(data)), float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def _win(a: float, b: float) -> float:
    return 1.0 if a > b + 1e-12 else 0.5 if abs(a - b) <= 1e-12 else 0.0


def cell(level: str, budget: int, rows: list[tuple[World, WorldRun, WorldRun, WorldRun]]) -> dict[str, object]:
    """The numbers of one level and budget (module docstring) from (world, random, fixed, adaptive) runs."""
    out: dict[str, object] = {"level": level, "budget": budget}
    for arm, k in (("random", 1), ("fixed", 2), ("adaptive", 3)):
        finals = [normalizer(r[0])(r[k].at(budget)) for r in rows]
        reach = [r[k].reach(r[1].at(budget)) or budget for r in rows]
        reach = [min(x, budget) for x in reach]
        out[arm] = {
            "final": float(np.mean(finals)),
            "reach": float(np.mean(reach)),
            "poi": poi([_win(r[k].at(budget), r[1].at(budget)) for r in rows]),
        }
    ad = [r[3] for r in rows]
    off_by = lambda v: float(np.mean([a.state == "off" and (a.decided_at or 0) <= v for a in ad]))  # noqa: E731
    on_by = float(np.mean([a.state == "on" and (a.decided_at or 0) <= budget for a in ad]))
    gap = out["fixed"]["final"] - out["random"]["final"]  # type: ignore[index]
    kept = (out["adaptive"]["final"] - out["random"]["final"]) / gap if gap > 1e-9 else None  # type: ignore[index]
    out |= {
        "off24": off_by(24),
        "off": off_by(budget),
        "on": on_by,
        "kept": kept,
        "audits": float(np.mean([a.audits for a in ad])),
        "canaries": float(np.mean([a.canaries for a in ad])),
    }
    out["target"] = target(out, budget)
    return out


def target(c: dict, budget: int) -> str:
    """The issue's target for this cell: 'ok', 'MISSED (...)' or '' where the cell has none."""
    level, missed = c["level"], []
    ad, rnd = c["adaptive"], c["random"]
    if level in HARMFUL:
        if c["off24"] < 0.9:
            missed.append(f"off by 24 in {100 * c['off24']:.0f}% < 90%")
        if budget >= 48 and ad["final"] < rnd["final"] - 0.01:
            missed.append("final > 0.01 below random")
        if budget >= 48 and ad["reach"] > rnd["reach"] + 2:
            missed.append("reach > 2 behind random")
    elif level.startswith("chance"):
        if budget >= 48 and c["off"] < 0.5:
            missed.append(f"off in {100 * c['off']:.0f}% < 50%")
        if ad["reach"] > rnd["reach"] + 1:
            missed.append("reach > 1 behind random")
    elif level in HELPFUL:
        if c["off"] > 0.1:
            missed.append(f"falsely off in {100 * c['off']:.0f}% > 10%")
        if budget >= 48 and c["kept"] is not None and c["kept"] < 0.9:
            missed.append(f"headroom kept {c['kept']:.2f} < 0.90")
    else:
        return ""
    return "ok" if not missed else "MISSED (" + "; ".join(missed) + ")"


def report(
    worlds: Sequence[str],
    *,
    levels: Sequence[str],
    budgets: Sequence[int],
    n: int,
    seeds: Sequence[int],
    options: dict[str, object],
    say: Callable[[str], None],
    jobs: int = 1,
) -> list[dict[str, object]]:
    """Run everything, print one markdown table per budget, return the cells."""
    top = max(budgets)
    randoms = {
        (j.world, j.seed): r
        for j, r in _map(random_job, [Job(w, "", s, top, n, options) for w in worlds for s in seeds], jobs)
    }
    runs = _map(run_job, [Job(w, lv, s, top, n, options) for lv in levels for w in worlds for s in seeds], jobs)
    by_level: dict[str, list] = {lv: [] for lv in levels}
    for job, fixed, adaptive in runs:
        by_level[job.level].append((_world(job.world), randoms[(job.world, job.seed)], fixed, adaptive))
    cells = []
    for budget in budgets:
        say(f"\nBudget {budget} ({len(worlds)} worlds x {len(seeds)} seeds, N = {n}, the engine path):\n")
        say(
            "| critic (Dir-3) | random | fixed | adaptive | reach r / f / a | P(adaptive beats random) "
            "| off by 24 / by budget | on | headroom kept | audits / canaries per run | target |"
        )
        say("|---|---|---|---|---|---|---|---|---|---|---|")
        for lv in levels:
            c = cell(lv, budget, by_level[lv])
            cells.append(c)
            r, f, a = c["random"], c["fixed"], c["adaptive"]
            p = a["poi"]
            kept = "-" if c["kept"] is None else f"{c['kept']:.2f}"
            say(
                f"| {lv} | {r['final']:.3f} | {f['final']:.3f} | {a['final']:.3f} | "
                f"{r['reach']:.1f} / {f['reach']:.1f} / {a['reach']:.1f} | {p[0]:.2f} [{p[1]:.2f}, {p[2]:.2f}] | "
                f"{100 * c['off24']:.0f}% / {100 * c['off']:.0f}% | {100 * c['on']:.0f}% | {kept} | "
                f"{c['audits']:.1f} / {c['canaries']:.0f} | {c['target']} |"
            )
    return cells


def main(argv: Sequence[str] | None = None) -> list[dict[str, object]]:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + seeds - 1")
    ap.add_argument("--budgets", type=int, nargs="+", default=[12, 24, 48])
    ap.add_argument("--candidates", type=int, default=6)
    ap.add_argument("--levels", nargs="+", default=list(LEVELS), choices=list(LEVELS), metavar="LEVEL")
    ap.add_argument("--worlds", nargs="+", default=None, help="world names (default: every shipped world)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="AdaptiveOptions to change")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--quick", action="store_true", help="one world, 3 seeds, budget 24")
    args = ap.parse_args(argv)
    worlds = args.worlds or sorted(load_worlds(world_paths(worlds_dir())))
    seeds, budgets = list(range(args.first_seed, args.first_seed + args.seeds)), args.budgets
    options: dict[str, object] = dict(kv.split("=", 1) for kv in args.set)
    shown = AdaptiveOptions(**options).model_dump(exclude={"screener", "options", "name", "n_verify"})  # type: ignore[arg-type]
    print(f"adaptive options: {shown}")
    if args.quick:
        worlds, seeds, budgets = worlds[:1], [0, 1, 2], [24]
    started = time.monotonic()
    cells = report(
        worlds,
        levels=args.levels,
        budgets=budgets,
        n=args.candidates,
        seeds=seeds,
        options=options,
        say=print,
        jobs=args.jobs,
    )
    checked = [c for c in cells if c["target"]]
    print(f"\ntargets met in {sum(c['target'] == 'ok' for c in checked)} of {len(checked)} cells")
    print(f"({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return cells


if __name__ == "__main__":
    main()
