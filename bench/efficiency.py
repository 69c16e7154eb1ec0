"""Verification efficiency: screening arms at a matched verification budget on the built-in tasks.

Every run is a real engine run built by ``verifyless.wiring.build_engine``:
offline idea-space roles, the local sandbox, the run store. Arms differ only
in the screener that picks which of the ``--candidates`` children of each
expansion is verified:

* ``random``: the unguided agent (uniform choice).
* ``iid``: no evolution: the ``iid`` strategy (every expansion improves the
  seed program, ``search/iid.py``) with random choice; the best verified
  child is returned. Against ``random`` it shows what evolution adds.
* ``surrogate``: the learned surrogate screener (cold start: random until it
  has seen enough outcomes).
* ``oracle``: best-of-N validation oracle. It executes every candidate of the
  pool off the books and picks the best validation score; only the chosen
  candidate's verification is charged (the protocol of the RPM paper's
  oracles). It is the reference ceiling for a screener under the same charged
  budget (not a strict bound: a worse pick can occasionally lead further).
* ``critic``: the pointwise LLM critic, added only when ``VERIFYLESS_BASE_URL``
  is set (model from the ``VERIFYLESS_*`` variables); ``adaptive`` wraps it
  (``screen/adaptive.py``: screening switched off when audited pairs show it
  does not help), added with it.

Tasks are deterministic (``stochastic: false``), so a verification result is
a function of the program text: results are cached by program hash for the
whole invocation and shared by all arms and seeds of a task. A cache hit
returns the stored Verification (the charge, including evaluator seconds, is
the same as a rerun's); it only saves wall time.

Reported (scores normalised with each task's anchors, ``bench.scores``;
validation score of the run's final node unless ``--target test``):

* final normalised score per task and arm (bootstrap CI over seeds) and
  overall (mean over tasks, task-stratified bootstrap CI);
* headroom captured = (arm - random) / (oracle - random) on the overall mean,
  with a task-stratified bootstrap CI (undefined when oracle <= random);
* probability of improvement over random (task-stratified bootstrap CI);
* verifications-to-baseline: verifications the arm needed to reach the random
  run's final best validation fitness (same task and seed) / budget; runs that
  never reached it are counted separately.

Replay mode (``--replay``): instead of real engine runs, every arm is
replayed on the pool worlds (``src/verifyless/builtin/worlds/*.jsonl``, see
``verifyless.offline.worlds``): the same greedy search, N candidates drawn near
the incumbent from configurations verified once; arms random, surrogate (the
real ``SurrogateScreener``, fitness mode), ``surrogate-delta`` (its previous
default), simulated critics at the critic paper's Dir-3 46.6 and 63.3
(``verifyless.offline.simulated``), and the exact best-of-N oracle; budgets 12
24 48, many seeds, seconds per task. ``python bench/efficiency.py --replay``.

Defaults (sized for ~25 minutes on 2 cores, 1-7 s per verification):
tasks diabetes, sunspots, moons_torch, circle_packing; seeds 2; budget 12;
candidates 6; strategy greedy; verify concurrency 2. ``--quick``: circle_packing,
1 seed, budget 4, 3 candidates.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from verifyless.builtin import worlds_dir
from verifyless.config import load_config
from verifyless.node import Evidence, Screening, Status, Verification, content_hash
from verifyless.offline import breakeven
from verifyless.offline.compare import (
    Estimate,
    arm_score,
    bootstrap_ci,
    curve_from_store,
    probability_of_improvement,
    reach,
)
from verifyless.offline.scores import best_scheme, normalize
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.wiring import build_engine

DEFAULT_TASKS = ("diabetes", "sunspots", "moons_torch", "circle_packing")
N_BOOT = 2000


class ResultCache:
    """Verification results by (task, program hash); only used for deterministic tasks."""

    def __init__(self) -> None:
        self.results: dict[tuple[str, str], Verification] = {}
        self.hits = 0
        self.misses = 0


class CachingExecutor:
    """Wraps the engine's executor: serves repeated programs of a deterministic task from ``cache``.

    ``peek`` runs a verification without the engine knowing (the oracle's
    uncharged look); ``verify`` is the engine's charged path. ``peeks`` counts
    the uncharged sandbox runs actually executed.
    """

    def __init__(self, inner: Any, cache: ResultCache, shared: bool) -> None:
        self.inner = inner
        self.cache = cache if shared else ResultCache()
        self.name = f"cached-{inner.name}"
        self.capacity = inner.capacity
        self.sandbox = getattr(inner, "sandbox", None)
        self.peeks = 0

    async def _get(self, task: Any, program: str) -> tuple[Verification, bool]:
        key = (task.name, content_hash(program))
        if key in self.cache.results:
            self.cache.hits += 1
            return self.cache.results[key], False
        self.cache.misses += 1
        v = await self.inner.verify(task, program)
        self.cache.results[key] = v
        return v, True

    async def verify(self, task: Any, program: str) -> Verification:
        return (await self._get(task, program))[0]

    async def peek(self, task: Any, program: str) -> Verification:
        v, ran = await self._get(task, program)
        self.peeks += ran
        return v

    def close(self) -> None:
        self.inner.close()


class PeekOracle:
    """Best-of-N validation oracle: executes the whole pool uncharged and chooses the best validation score."""

    name = "oracle"

    def __init__(self, executor: CachingExecutor, task: Any) -> None:
        self.executor = executor
        self.task = task

    async def screen(self, ctx: Any, candidates: Sequence[Any]) -> Screening:
        started = time.monotonic()
        results = await asyncio.gather(*(self.executor.peek(self.task, c.program) for c in candidates))

        def fitness(v: Verification) -> float:
            ok = v.status is Status.OK and v.score is not None and math.isfinite(v.score)
            return self.task.metric.orient(v.score) if ok else -math.inf

        fits = {c.id: fitness(v) for c, v in zip(candidates, results, strict=False)}
        ranking = tuple(sorted(fits, key=lambda cid: -fits[cid]))  # stable: ties keep pool order
        evidence = {
            cid: Evidence(
                cid,
                rank_value=fits[cid] if math.isfinite(fits[cid]) else -1e300,
                uncertainty=0.0,
                detail={"peeked": True},
            )
            for cid in ranking
        }
        return Screening(self.name, ranking, ranking[: max(0, ctx.n_verify)], evidence, time.monotonic() - started)


@dataclass
class RunRow:
    task: str
    arm: str
    seed: int
    run_id: str
    score: float  # normalised final score
    raw: float | None
    verifications: int
    wall_s: float
    peeks: int = 0
    curve: Any = field(default=None, repr=False)


def arms_available() -> list[str]:
    arms = ["random", "iid", "surrogate", "oracle"]
    if os.environ.get("VERIFYLESS_BASE_URL"):
        arms += ["critic", "adaptive"]
    return arms


async def one_run(
    task_name: str, arm: str, seed: int, args: argparse.Namespace, store: RunStore, cache: ResultCache
) -> RunRow:
    screener = "random" if arm in ("oracle", "iid") else arm
    overrides = [
        f"task={task_name}",
        f"seed={seed}",
        f"strategy.name={'iid' if arm == 'iid' else args.strategy}",
        f"screener.name={screener}",
        "roles.kind=space",
        f"budget.verifications={args.budget}",
        f"engine.candidates={args.candidates}",
        f"engine.verify_concurrency={args.concurrency}",
        "engine.memory=false",
        f"engine.max_rounds={4 * args.budget}",
        f"store={store.path}",
    ]
    if arm in ("critic", "adaptive"):
        overrides.append("roles.models.default=env")
    if arm == "surrogate":
        overrides += [f"screener.options.{kv}" for kv in args.surrogate_option]
    cfg = load_config(overrides=overrides)
    task = load_task(task_name)
    engine = build_engine(cfg, store, task=task)
    executor = CachingExecutor(engine.executor, cache, shared=not task.stochastic)
    engine.dispatch.executor = executor  # the one owner of the executor (engine/dispatch.py)
    if arm == "oracle":
        engine.screen.screener = PeekOracle(executor, task)
    started = time.monotonic()
    try:
        result = await engine.run()
    finally:
        executor.close()
    wall = time.monotonic() - started
    rows = {r["node_id"]: r for r in store.node_rows(result.run_id)}
    final = rows.get(result.best_id or "", {})
    raw = final.get("test_score" if args.target == "test" else "score")
    scheme = best_scheme(task.anchors)
    score = normalize(raw, task.metric, task.anchors, scheme)
    return RunRow(
        task_name,
        arm,
        seed,
        result.run_id,
        float(score),
        raw,
        result.verifications,
        wall,
        executor.peeks,
        curve_from_store(store, result.run_id),
    )


def by_task(rows: Sequence[RunRow], arm: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in rows:
        if r.arm == arm:
            out.setdefault(r.task, []).append(r.score)
    return out


def headroom(rows: Sequence[RunRow], arm: str, seed: int = 0, n_boot: int = N_BOOT) -> Estimate | None:
    """``offline.breakeven.headroom`` over the tasks every one of arm, random and oracle ran."""
    groups = {a: by_task(rows, a) for a in (arm, "random", "oracle")}
    tasks = sorted(set.intersection(*(set(g) for g in groups.values())))
    return breakeven.headroom(groups, arm, tasks, seed, n_boot) if tasks else None


def to_baseline(rows: Sequence[RunRow], arm: str, budget: int) -> tuple[float | None, int, int]:
    """Mean (verifications to reach the paired random run's final best) / budget, reached count, pairs."""
    random_runs = {(r.task, r.seed): r for r in rows if r.arm == "random"}
    ratios, pairs = [], 0
    for r in rows:
        base = random_runs.get((r.task, r.seed))
        if r.arm != arm or base is None or not len(base.curve.best) or not math.isfinite(base.curve.final):
            continue
        pairs += 1
        hit = reach(r.curve, base.curve.final)
        if hit.verifications is not None:
            ratios.append(hit.verifications / budget)
    return (float(np.mean(ratios)) if ratios else None), len(ratios), pairs


def _est(e: Estimate | None) -> str:
    return "—" if e is None else str(e)


def report(rows: Sequence[RunRow], arms: Sequence[str], budget: int) -> str:
    tasks = sorted({r.task for r in rows})
    lines = [
        "Final normalised score per task (mean over seeds [95% bootstrap CI]):",
        "",
        "| task | " + " | ".join(arms) + " |",
        "|---|" + "---|" * len(arms),
    ]
    for t in tasks:
        cells = []
        for a in arms:
            vals = [r.score for r in rows if r.task == t and r.arm == a]
            cells.append(str(bootstrap_ci(vals, n_boot=N_BOOT)) if vals else "—")
        lines.append(f"| {t} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Overall (mean over tasks, task-stratified bootstrap CIs):",
        "",
        "| arm | score | headroom captured | P(improve over random) | verif. to reach random's final / budget "
        "(reached/pairs) | uncharged peeks | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    rand = by_task(rows, "random")
    for a in arms:
        scores = by_task(rows, a)
        if not scores:
            continue
        score = arm_score(scores, n_boot=N_BOOT)
        room = headroom(rows, a) if a not in ("random", "oracle") else None
        room_cell = "0 (by definition)" if a == "random" else "1 (by definition)" if a == "oracle" else _est(room)
        poi = "—" if a == "random" else _est(probability_of_improvement(scores, rand, n_boot=N_BOOT))
        ratio, reached, pairs = to_baseline(rows, a, budget)
        ratio_cell = "—" if ratio is None else f"{ratio:.2f} ({reached}/{pairs})"
        peeks = sum(r.peeks for r in rows if r.arm == a)
        wall = sum(r.wall_s for r in rows if r.arm == a)
        lines.append(f"| {a} | {score} | {room_cell} | {poi} | {ratio_cell} | {peeks} | {wall:.0f} |")
    return "\n".join(lines) + "\n"


def replay_main(args: argparse.Namespace) -> None:
    """Replay mode: every arm on every world at every budget (see module docstring)."""
    from verifyless.offline.breakeven import compare_arms, standard_arms, summarize
    from verifyless.offline.worlds import load_worlds, normalizer, world_paths

    loaded = load_worlds(world_paths(args.worlds))
    worlds = [w for t, w in sorted(loaded.items()) if not args.tasks_given or t in args.tasks]
    print(
        "Replays on pool worlds: "
        + ", ".join(f"{w.task} ({len(w)} points)" for w in worlds)
        + f"; seeds 0..{args.seeds - 1}; {args.candidates} candidates per expansion; locality {args.locality}; "
        "greedy parent = incumbent best.\n"
    )
    for budget in args.budgets:
        started = time.monotonic()
        results, norms = {}, {}
        for w in worlds:
            task = load_task(w.task)
            arms = standard_arms(w, legacy_surrogate=args.legacy)
            if args.arms:
                arms = {a: f for a, f in arms.items() if a in args.arms or a in ("random", "oracle")}
            results[w.task] = compare_arms(
                w,
                arms,
                budget=budget,
                n_candidates=args.candidates,
                seeds=range(args.seeds),
                locality=args.locality,
                task=task,
            )
            norms[w.task] = normalizer(w, task)
        rows = summarize(results, norms, budget=budget)
        print(replay_report(rows, budget, time.monotonic() - started))


def replay_report(rows: Sequence[Any], budget: int, seconds: float) -> str:
    tasks = sorted(rows[0].per_task) if rows else []
    lines = [
        f"Budget {budget} verifications ({seconds:.0f} s of replay):",
        "",
        "| arm | " + " | ".join(tasks) + " | overall score | headroom captured | P(improve over random) "
        "| verif. to reach random's final / budget (reached/pairs) |",
        "|---|" + "---|" * (len(tasks) + 4),
    ]
    for r in rows:
        cells = [str(r.per_task[t]) for t in tasks]
        room = (
            "0 (by definition)" if r.arm == "random" else "1 (by definition)" if r.arm == "oracle" else _est(r.headroom)
        )
        poi = "—" if r.arm == "random" else _est(r.p_improve)
        reach = "—" if r.reach is None else f"{r.reach} ({r.reached}/{r.pairs})"
        lines.append(f"| {r.arm} | " + " | ".join(cells) + f" | {r.score} | {room} | {poi} | {reach} |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> list[RunRow]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    ap.add_argument("--seeds", type=int, default=2, help="seeds 0..S-1 per task and arm")
    ap.add_argument("--budget", type=int, default=12, help="charged verifications per run (baseline included)")
    ap.add_argument("--candidates", type=int, default=6, help="N children made per expansion")
    ap.add_argument("--strategy", default="greedy")
    ap.add_argument("--concurrency", type=int, default=2, help="verifications at once")
    ap.add_argument("--arms", nargs="+", default=None, help="subset of: random iid surrogate oracle critic adaptive")
    ap.add_argument(
        "--target",
        choices=["validation", "test"],
        default="validation",
        help="which score of the final node is normalised; a task without hidden test "
        "scores (circle_packing) then scores 0",
    )
    ap.add_argument("--store", type=Path, default=None, help="keep the runs in this store (default: a temp file)")
    ap.add_argument("--quick", action="store_true", help="smoke: circle_packing, 1 seed, budget 4, 3 candidates")
    ap.add_argument(
        "--surrogate-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="option of the surrogate arm, e.g. rank_by=fitness (repeat)",
    )
    ap.add_argument("--replay", action="store_true", help="replay arms on pool worlds instead of real runs")
    ap.add_argument("--worlds", type=Path, default=worlds_dir(), help="replay: world folder")
    ap.add_argument("--budgets", type=int, nargs="+", default=[12, 24, 48], help="replay: budgets")
    ap.add_argument("--locality", type=float, default=1.0, help="replay: proposal locality around the parent")
    ap.add_argument("--legacy", action="store_true", help="replay: also the surrogate's previous delta ranking")
    args = ap.parse_args(argv)
    if args.replay:
        args.tasks_given = "--tasks" in (argv or [])
        if not any("--seeds" in a for a in (argv or [])):
            args.seeds = 20
        if not any("--candidates" in a for a in (argv or [])):
            args.candidates = 8
        replay_main(args)
        return []
    if args.quick:
        args.tasks, args.seeds, args.budget, args.candidates = ["circle_packing"], 1, 4, 3
    arms = args.arms or arms_available()
    if "random" not in arms:
        arms = ["random", *arms]
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows: list[RunRow] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "efficiency.db"
        with RunStore(path) as store:
            cache = ResultCache()
            for t in args.tasks:
                for seed in range(args.seeds):
                    for a in arms:
                        row = asyncio.run(one_run(t, a, seed, args, store, cache))
                        rows.append(row)
                        print(
                            f"# {t} seed {seed} {a}: score {row.score:.3f} (raw {row.raw}), "
                            f"{row.verifications} verifications, {row.peeks} peeks, {row.wall_s:.0f} s",
                            file=sys.stderr,
                            flush=True,
                        )
            print(
                f"Setting: tasks {', '.join(args.tasks)}; seeds {args.seeds}; budget {args.budget}; "
                f"candidates {args.candidates}; strategy {args.strategy}; target {args.target}; "
                f"cache hits {cache.hits}, sandbox runs {cache.misses}.\n"
            )
            print(report(rows, arms, args.budget))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
