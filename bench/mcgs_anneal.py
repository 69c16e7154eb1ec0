"""Progressive MCGS before and after issue 47: schedules over 100 fixed steps vs over the run's budget.

Usage: ``python bench/mcgs_anneal.py [--seeds 20] [--budget 30] [--candidates 8] [--screener surrogate]
[--worlds NAME ...] [--quick]``.

Each run is a real ``Engine`` run with the ``mcgs`` strategy on a shipped pool world
(``offline/world_engine.py``: the world's proposer draws N unverified points near the parent, the world
answers each verification from its stored outcome). Two arms, identical but for the anneal:

* ``fixed-100``: ``strategy.options.horizon=100``, the default before issue 47 (a 30-verification run ends
  at c = 1.03 and w = 0.77);
* ``paced``: the default after it (``horizon`` None: the engine paces the strategy by the budget left, so
  c and w reach c_min and w_min at the run's last ask).

Same world, seed, screener and budget per pair. Reported per world and overall (mean over worlds and
seeds): the final node's normalised validation and hidden test score (``offline.worlds.normalizer``), the
paired difference paced - fixed with a seeded bootstrap 95% interval over seeds, the share of elite-guided
selections, and the effective branch count exp(H) at the middle logged round and the last.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from verifyless.builtin import worlds_dir
from verifyless.config import load_config
from verifyless.engine import Engine
from verifyless.events import RoundStarted
from verifyless.metrics.bootstrap import bootstrap
from verifyless.offline.world_engine import WorldBook, WorldExecutor, WorldProposer
from verifyless.offline.worlds import World, load_worlds, normalizer, world_paths
from verifyless.roles.space import space_roles
from verifyless.screen.registry import build_screener
from verifyless.search.registry import build_strategy
from verifyless.store import RunStore
from verifyless.task.loader import load_task

ARMS = {"fixed-100": ["strategy.options.horizon=100"], "paced": []}


@dataclass(frozen=True)
class Outcome:
    val: float  # normalised validation score of the final node
    test: float  # normalised hidden test score of the final node
    elite_share: float
    branches_mid: float
    branches_last: float
    c_last: float
    w_last: float


async def _one(world: World, arm: str, seed: int, args: argparse.Namespace, path: Path) -> Outcome:
    task = load_task(world.task)
    book = WorldBook(world, task)
    settings = [
        "strategy.name=mcgs",
        f"budget.verifications={args.budget}",
        f"engine.candidates={args.candidates}",
        f"seed={seed}",
        *ARMS[arm],
    ]
    cfg = load_config(overrides=settings)
    with RunStore(path) as st:
        engine = Engine(
            task=task,
            roles=replace(space_roles(task, seed), proposer=WorldProposer(book, seed=seed)),
            screener=build_screener(args.screener, models={}, seed=seed),
            strategy=build_strategy("mcgs", cfg.strategy.options, random.Random(cfg.seed)),
            executor=WorldExecutor(book),
            store=st,
            config=cfg,
        )
        result = await engine.run()
        rounds = [ev.record for ev in st.events(result.run_id, RoundStarted)]
    notes = [e.get("note", "") for r in rounds for e in r.expansions]
    picks = [n for n in notes if n.startswith(("uct", "elite"))]
    elite = sum(n.startswith("elite") for n in picks) / max(1, len(picks))
    schedules = [r.schedule for r in rounds if r.schedule and r.schedule["branches"] > 0]
    norm = normalizer(world, task)
    val, test = (
        0.0 if score is None else norm(world.orient(score))  # type: ignore[arg-type]
        for score in (result.best_score, result.best_test_score)
    )
    return Outcome(
        val,
        test,
        elite,
        schedules[len(schedules) // 2]["branches"] if schedules else 0.0,
        schedules[-1]["branches"] if schedules else 0.0,
        rounds[-1].schedule["c"],
        rounds[-1].schedule["w"],
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=30)
    ap.add_argument("--candidates", type=int, default=8)
    ap.add_argument("--screener", default="surrogate")
    ap.add_argument("--worlds", nargs="*")
    ap.add_argument("--quick", action="store_true", help="2 seeds, budget 12")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.budget = 2, 12
    worlds = load_worlds(world_paths(worlds_dir()))
    names = args.worlds or sorted(worlds)
    started = time.time()
    table: dict[tuple[str, str], list[Outcome]] = {}
    with tempfile.TemporaryDirectory(prefix="verifyless-mcgs-") as tmp:
        for name in names:
            for arm in ARMS:
                for seed in range(args.seeds):
                    path = Path(tmp) / f"{name}-{arm}-{seed}.db"
                    table.setdefault((name, arm), []).append(asyncio.run(_one(worlds[name], arm, seed, args, path)))
    print(
        f"# MCGS anneal: budget {args.budget}, N {args.candidates}, screener {args.screener}, "
        f"seeds 0-{args.seeds - 1}, {time.time() - started:.0f} s"
    )
    print("| world | arm | final val | final test | elite picks | exp(H) mid-run -> last | c, w at last ask |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name in names:
        for arm in ARMS:
            rows = table[(name, arm)]
            print(
                f"| {name} | {arm} | {np.mean([r.val for r in rows]):.3f} | {np.mean([r.test for r in rows]):.3f} | "
                f"{np.mean([r.elite_share for r in rows]):.0%} | {np.mean([r.branches_mid for r in rows]):.2f} -> "
                f"{np.mean([r.branches_last for r in rows]):.2f} | {np.mean([r.c_last for r in rows]):.2f}, "
                f"{np.mean([r.w_last for r in rows]):.2f} |"
            )
    print()
    print("| world | paced - fixed, val (95% CI) | paced - fixed, test (95% CI) |")
    print("| --- | --- | --- |")
    for name in [*names, "all"]:
        keys = names if name == "all" else [name]
        cells = []
        for field in ("val", "test"):
            d = np.array(
                [getattr(p, field) - getattr(f, field) for k in keys for p, f in zip(*_pair(table, k), strict=True)]
            )
            est = bootstrap(d)  # the 95% percentile bootstrap of the mean, 2000 resamples, seed 0
            cells.append(
                f"{d.mean():+.4f} [{est.low:+.4f}, {est.high:+.4f}]" if est.low is not None else f"{d.mean():+.4f}"
            )
        print(f"| {name} | {cells[0]} | {cells[1]} |")
    return 0


def _pair(table: dict[tuple[str, str], list[Outcome]], name: str) -> tuple[list[Outcome], list[Outcome]]:
    return table[(name, "paced")], table[(name, "fixed-100")]


if __name__ == "__main__":
    sys.exit(main())
