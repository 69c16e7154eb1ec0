"""Where pilots pay: rank correlation and cost of each fidelity level, and replays at matched evaluator seconds.

Usage::

    python bench/pilots.py [--tasks diabetes affairs_gbm] [--points 12] [--seed 0] [--trials 400] [--budget 8] [--smoke]
    python bench/pilots.py --collect quarter_data | --calibrate quarter_data [--tasks ...]
    python bench/pilots.py --replay quarter_data [--tasks ...] [--seeds 20] [--budgets 8 16 32] [--ratio 0.1]

For each task with fidelity levels and a committed pool world (package data,
``verifyless.builtin.worlds_dir()``; a task without one, ``sunspots``, gets
``--points`` sampled idea-space points run at full fidelity too, and no
replay), ``--points`` points of the world are
sampled (stratified over the world's full-fidelity scores, seeded) and each
is run once at every level with the real verifier in the local sandbox; the
full-fidelity score is the world's (verification is deterministic), the full
cost is measured again on two of the points (the world's seconds came from
another machine). Printed per task and level: Spearman's rank correlation
with full fidelity over the sample and within its best quarter (n/a under
three points), and the cost ratio (mean seconds at the level / mean seconds
at full fidelity, measured here).

Replays at matched evaluator seconds, on the sampled points only: pools of 4
drawn from the sample until ``--budget`` full verifications' worth of
evaluator seconds is spent; ``random`` verifies a random member, ``oracle``
the best, ``pilot`` runs successive halving (eta 2, every level, one
survivor: ``screen/pilot.survivors``) on the measured low-fidelity scores and
costs and verifies the survivor, paying both. Printed: the mean best
full-fidelity score found, normalised to the sample (0 = its worst, 1 = its
best), over ``--trials`` seeded replays. Critic, iid and critic -> pilot
replays over whole worlds: ``--replay`` below.

Matched-seconds replays (``--replay LEVEL``) on the two-fidelity worlds
(``offline/pilot_replay.py``): every arm of ``ARMS`` over ``--seeds`` seeds,
pools of 8, budgets ``--budgets`` full verifications' worth of evaluator
seconds; per arm the normalised best at each budget, verifications and
pilots paid, the median seconds (in full verifications; a seed that never
reached it within the largest budget counts as beyond it) to reach the
world's 97.5th percentile and how many seeds did. Scores: 0 = the baseline,
1 = the world's best (share of the world's headroom). Twice: pilots charged their
measured cost, and at a hypothetical cost ratio ``--ratio`` (0.1).

Level worlds (``--collect LEVEL``): every point of each ``--tasks`` world
verified once at ``LEVEL`` into package data
(``worlds/fidelity/TASK.LEVEL.jsonl``, ``offline/fidelity.py``); resumable.
``--calibrate LEVEL`` then runs six of its points at full fidelity and at the
level back to back (the machine factor and cost ratio of the replays).

Smoke runs on the LLM path (``--smoke``): two engine runs on ``diabetes``
with the scripted model (examples/scripted/diabetes.yaml), every third
implementer reply made to crash (``raise RuntimeError`` at the top of
``fit``; repairs are the script's own, which do not crash), the random
screener, the same seed and verification budget: one with ``engine.smoke=off``,
one with the default (smoke runs at the cheapest level). Printed per run:
full verifications paid, evaluator seconds, smoke runs and stops.

The machine this ran on is shared: seconds are noisy. Small samples: say so
when quoting the numbers.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from _scripted import rewritten, run_timed
from verifyless.builtin import worlds_dir
from verifyless.metrics.bootstrap import bootstrap
from verifyless.offline.worlds import World, load_world, make_program
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.pilot import survivors
from verifyless.task.base import Task
from verifyless.task.loader import builtin_tasks_dir, load_task
from verifyless.verify import verify


@dataclass(frozen=True)
class Measured:
    """One sampled world point: its full-fidelity fitness (from the world) and, per level, fitness and seconds."""

    full: float
    low: dict[str, tuple[float | None, float]]


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); None under three pairs or with a constant side."""
    if len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sx = sum((a - mx) ** 2 for a in rx) ** 0.5
    sy = sum((b - my) ** 2 for b in ry) ** 0.5
    if sx == 0 or sy == 0:
        return None
    return sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True)) / (sx * sy)


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def sample_points(world: World, n: int, rng: random.Random) -> list[int]:
    """``n`` ok points stratified over the world's full-fidelity fitness (one per equal-count stratum)."""
    ok = sorted((i for i in range(len(world)) if world.fitness(i) is not None), key=lambda i: world.fitness(i) or 0.0)
    if n >= len(ok):
        return ok
    edges = [round(k * len(ok) / n) for k in range(n + 1)]
    return [ok[rng.randrange(edges[k], max(edges[k] + 1, edges[k + 1]))] for k in range(n)]


def measure(task: Task, world: World, idx: list[int]) -> tuple[list[Measured], float]:
    """Each sampled point at every level (real runs), and the mean full-fidelity seconds of two of them."""
    sandbox, levels = LocalSandbox(), [lv.name for lv in task.fidelity.levels]
    out = []
    for i in idx:
        program = make_program(task, world.points[i].assignment)
        low = {}
        for level in levels:
            v = verify(task, program, sandbox, level=level)
            low[level] = (world.orient(v.score) if v.status.value == "ok" else None, v.seconds)
        out.append(Measured(float(world.fitness(i) or 0.0), low))
    full = [verify(task, make_program(task, world.points[i].assignment), sandbox).seconds for i in idx[:2]]
    return out, statistics.fmean(full)


def measure_space(task: Task, n: int, rng: random.Random) -> tuple[list[Measured], float]:
    """For a task without a world: ``n`` sampled idea-space points, each run at full fidelity and every level."""
    from verifyless.offline.worlds import sample_assignments

    space, sandbox = task.idea_space, LocalSandbox()
    assert space is not None
    dims = {d: [o.name for o in opts] for d, opts in space.dimensions.items()}
    sign, out, full_s = (1.0 if task.metric.direction == "maximize" else -1.0), [], []
    for a in sample_assignments(dims, space.baseline, n, rng):
        program = make_program(task, a)
        full = verify(task, program, sandbox)
        if full.status.value != "ok" or full.score is None:
            continue
        full_s.append(full.seconds)
        low = {}
        for level in (lv.name for lv in task.fidelity.levels):
            v = verify(task, program, sandbox, level=level)
            low[level] = (sign * v.score if v.status.value == "ok" and v.score is not None else None, v.seconds)
        out.append(Measured(sign * full.score, low))
    return out, statistics.fmean(full_s)


def _print_levels(
    name: str, levels: list[str], points: list[Measured], full_s: float, started: float, what: str
) -> None:
    print(f"\n{name}: {len(points)} {what}, {time.monotonic() - started:.0f} s of runs")
    print(f"  {'level':<16} {'rho (all)':>10} {'rho (top 1/4)':>14} {'cost ratio':>11}")
    for level in levels:
        rho, top = correlations(points, level)
        ratio = statistics.fmean(p.low[level][1] for p in points) / full_s
        print(f"  {level:<16} {_fmt(rho):>10} {_fmt(top):>14} {ratio:>11.2f}")
    print(f"  {'full':<16} {'1.00':>10} {'1.00':>14} {1.0:>11.2f}   (full: {full_s:.2f} s a run)")


def correlations(points: list[Measured], level: str) -> tuple[float | None, float | None]:
    """(rho over the sample, rho within its best quarter by full fitness); failed low runs are left out."""
    pairs = [(p.full, p.low[level][0]) for p in points if p.low[level][0] is not None]
    pairs.sort(reverse=True)
    top = pairs[: max(1, len(pairs) // 4)]
    rho = spearman([a for a, _ in pairs], [b for _, b in pairs])  # type: ignore[misc]
    return rho, spearman([a for a, _ in top], [b for _, b in top])  # type: ignore[misc]


def replay(points: list[Measured], levels: list[str], full_s: float, budget: float, rng: random.Random) -> dict:
    """One replay per selector at ``budget`` full verifications' seconds; the best normalised fitness each found."""
    lo, hi = min(p.full for p in points), max(p.full for p in points)
    norm = (lambda f: (f - lo) / (hi - lo)) if hi > lo else (lambda f: 1.0)
    found = {}
    for name in ("random", "pilot", "oracle"):
        spent, best, picks = 0.0, None, 0
        while True:
            pool = rng.sample(points, min(4, len(points)))
            pick, cost = _choose(name, pool, levels, rng)
            if spent + cost + full_s > budget * full_s:
                break
            spent, picks = spent + cost + full_s, picks + 1
            best = pick.full if best is None else max(best, pick.full)
        found[name] = (None if best is None else norm(best), picks)
    return found


def _choose(name: str, pool: list[Measured], levels: list[str], rng: random.Random) -> tuple[Measured, float]:
    if name == "random":
        return rng.choice(pool), 0.0
    if name == "oracle":
        return max(pool, key=lambda p: p.full), 0.0
    alive, cost = list(pool), 0.0
    for level in levels:
        cost += sum(p.low[level][1] for p in alive)
        alive.sort(key=lambda p: -(p.low[level][0] if p.low[level][0] is not None else float("-inf")))
        alive = alive[: survivors(len(alive), 2, 1)]
    return alive[0], cost


def crashing_script(out: str, every: int = 3) -> str:
    """examples/scripted/diabetes.yaml with every ``every``-th implementer reply crashing in ``fit``; its path."""
    crash = "def fit(x, y):\n    raise RuntimeError('scripted crash')\n"
    return str(
        rewritten(
            Path(out),
            lambda replies: [
                r.replace("def fit(x, y):\n", crash, 1) if k % every == 0 else r for k, r in enumerate(replies)
            ],
        )
    )


def smoke_savings(budget: int, seed: int) -> None:
    """Two scripted LLM runs on diabetes, smoke runs off and on (see the module docstring)."""
    import tempfile

    from verifyless.config import load_config
    from verifyless.events import SmokeRan
    from verifyless.node import Status
    from verifyless.store import RunStore
    from verifyless.testing import verification_events

    with tempfile.TemporaryDirectory() as tmp:
        script = crashing_script(f"{tmp}/crashing.yaml")
        print(f"\nsmoke runs, LLM path (diabetes, scripted, every third implementation crashes), budget {budget}:")
        for smoke in ("off", None):
            db = f"{tmp}/{smoke or 'auto'}.db"
            overrides = [
                "task=diabetes",
                "screener.name=random",
                f"budget.verifications={budget}",
                "engine.candidates=3",
                f"seed={seed}",
                f"store={db}",
                "roles.kind=llm",
                f"roles.models.default=scripted:{script}",
                *([f"engine.smoke={smoke}"] if smoke else []),
            ]
            with RunStore(db) as store:
                result, _ = run_timed(load_config(overrides=overrides), store)
                smokes = list(store.events(result.run_id, SmokeRan))
                verified = [e.record.verification for e in verification_events(store, result.run_id)]
                b = store.budget(result.run_id)
            stops = sum(e.record.verification.status not in (Status.OK, Status.TIMEOUT) for e in smokes)
            failed = sum(v.status is Status.FAILED for v in verified)
            print(
                f"  smoke {smoke or 'auto (cheapest level)':<22} full verifications {b.verifications:>2} "
                f"(failed {failed}), evaluator s {b.evaluator_seconds:6.1f}, smoke runs {len(smokes)} "
                f"({stops} stopped, {sum(e.charge.evaluator_seconds for e in smokes if e.charge):.1f} s), "
                f"best {result.best_score}"
            )


def collect(tasks: list[str], level: str) -> None:
    """Every point of each task's committed world verified at ``level`` (``offline/fidelity.collect_level``)."""
    from verifyless.offline.fidelity import collect_level, level_path

    for name in tasks:
        task, world = load_task(builtin_tasks_dir() / name), load_world(worlds_dir() / f"{name}.jsonl")
        started = time.monotonic()
        n = collect_level(
            task, world, level, level_path(name, level), progress=lambda m, t=name: print(f"{t} {m}", flush=True)
        )
        print(f"{name} at {level}: {n} of {len(world)} points stored, {time.monotonic() - started:.0f} s", flush=True)


def calibrate(tasks: list[str], level: str) -> None:
    """A few points of each level world run at full fidelity and at ``level`` back to back (``calibrate_level``)."""
    from verifyless.offline.fidelity import calibrate_level, level_path

    for name in tasks:
        task, world = load_task(builtin_tasks_dir() / name), load_world(worlds_dir() / f"{name}.jsonl")
        n = calibrate_level(task, world, level, level_path(name, level))
        print(f"{name} at {level}: {n} calibration points", flush=True)


def replays(name: str, level: str, budgets: list[float], seeds: int, ratio: float) -> None:
    """Matched-seconds replays of every arm on one task's two-fidelity world (``offline/pilot_replay.py``)."""
    from verifyless.offline.fidelity import attach, level_path
    from verifyless.offline.pilot_replay import ARMS, arm_factory, replay_seconds

    world = load_world(worlds_dir() / f"{name}.jsonl")
    low = attach(world, level_path(name, level))
    unit = statistics.fmean(p.seconds for p in world.points)
    fits = sorted(f for f in (world.fitness(i) for i in range(len(world))) if f is not None)
    target = fits[int(0.975 * (len(fits) - 1))]
    base, top = world.fitness(world.baseline_index) or fits[0], fits[-1]
    norm = (lambda f: (f - base) / (top - base)) if top > base else (lambda f: 1.0)
    rho = spearman(
        *zip(
            *[(world.fitness(i), low.fitness(i)) for i in range(len(world)) if low.fitness(i) is not None], strict=False
        )
    )
    print(
        f"\n{name} at {level}: {len(world)} points, rho {_fmt(rho)} with full fidelity, cost ratio "
        f"{_fmt(low.cost_ratio)} measured ({len(low.calibration)} calibration points), machine factor "
        f"{low.machine_factor:.2f}, full verification {unit:.1f} s (world), target = the world's 97.5th percentile"
    )
    for label, cost in ((f"measured (r = {_fmt(low.cost_ratio)})", low.cost), (f"hypothetical r = {ratio:g}", None)):
        charge = cost or (lambda i: ratio * world.points[i].seconds)
        print(f"  pilot cost {label}; best found (0 baseline, 1 world best), mean [95% CI] over {seeds} seeds:")
        heads = "".join(f"{f'@{b:g}':>22}" for b in budgets)
        print(f"    {'arm':<20}{heads}{'verif. @max':>12}{'pilots':>8}{'to target':>11}{'reached':>9}")
        for arm in ARMS:
            runs = [
                replay_seconds(low, arm_factory(arm, low, charge, s), budget_s=max(budgets) * unit, seed=s)
                for s in range(seeds)
            ]
            cells = "".join(f"{bootstrap([norm(r.best_at(b * unit)) for r in runs])!s:>22}" for b in budgets)
            verifs = statistics.fmean(r.verifications_at(max(budgets) * unit) for r in runs)
            pilots = statistics.fmean(r.pilots for r in runs)
            cap = max(budgets) * unit
            reach = [t / unit if (t := r.reach(target)) is not None and t <= cap else math.inf for r in runs]
            mid = statistics.median(reach)
            median = f"{mid:.1f}" if math.isfinite(mid) else f">{max(budgets):g}"
            reach = [t for t in reach if math.isfinite(t)]
            print(f"    {arm:<20}{cells}{verifs:>12.1f}{pilots:>8.1f}{median:>11}{len(reach):>6}/{seeds}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", nargs="+", default=["diabetes", "affairs_gbm"])
    ap.add_argument("--points", type=int, default=12, help="world points sampled per task (each runs at every level)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=400)
    ap.add_argument("--budget", type=float, default=8.0, help="replay budget, in full verifications' seconds")
    ap.add_argument("--smoke", action="store_true", help="only the smoke-run comparison on the LLM path")
    ap.add_argument("--smoke-budget", type=int, default=6, help="verifications per smoke comparison run")
    ap.add_argument("--collect", metavar="LEVEL", help="only collect the level worlds of --tasks at LEVEL")
    ap.add_argument("--calibrate", metavar="LEVEL", help="only add calibration runs to the level worlds at LEVEL")
    ap.add_argument("--replay", metavar="LEVEL", help="only the matched-seconds replays on the level worlds at LEVEL")
    ap.add_argument("--seeds", type=int, default=20, help="replays per arm (--replay)")
    ap.add_argument("--budgets", type=float, nargs="+", default=[8, 16, 32], help="in full verifications' seconds")
    ap.add_argument("--ratio", type=float, default=0.1, help="the hypothetical cost ratio of the second table")
    args = ap.parse_args(argv)
    if args.smoke:
        smoke_savings(args.smoke_budget, args.seed)
        return
    if args.collect:
        collect(args.tasks, args.collect)
        return
    if args.calibrate:
        calibrate(args.tasks, args.calibrate)
        return
    if args.replay:
        for name in args.tasks:
            replays(name, args.replay, args.budgets, args.seeds, args.ratio)
        return
    for name in args.tasks:
        task = load_task(builtin_tasks_dir() / name)
        levels = [lv.name for lv in task.fidelity.levels]
        if not levels:
            print(f"{name}: no fidelity levels; skipped")
            continue
        started = time.monotonic()
        if not (worlds_dir() / f"{name}.jsonl").is_file():
            points, full_s = measure_space(task, args.points, random.Random(args.seed))
            _print_levels(name, levels, points, full_s, started, "sampled idea-space points (no world)")
            continue
        world = load_world(worlds_dir() / f"{name}.jsonl")
        points, full_s = measure(task, world, sample_points(world, args.points, random.Random(args.seed)))
        _print_levels(name, levels, points, full_s, started, f"of {len(world)} world points")
        rng = random.Random(args.seed)
        runs = [replay(points, levels, full_s, args.budget, rng) for _ in range(args.trials)]
        print(f"  replay at {args.budget:g} full verifications' seconds, {args.trials} trials (pools of 4):")
        for sel in ("random", "pilot", "oracle"):
            vals = [r[sel][0] for r in runs if r[sel][0] is not None]
            picks = statistics.fmean(r[sel][1] for r in runs)
            mean = statistics.fmean(vals) if vals else float("nan")
            print(f"    {sel:<8} best found {mean:.3f}, {picks:.1f} full verifications ({len(vals)} runs)")
    sys.stdout.flush()


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    main()
