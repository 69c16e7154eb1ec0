"""``make demo``: the main job on a headroom task, against an unscreened run and the oracle ceiling.

Part 1, real runs (the main job): two engine runs on the same built-in task,
seed, verification budget and N candidates per expansion, with the offline
idea-space roles (no API key, no network), greedy search, the local sandbox
and the SQLite store:

* **screened**: the surrogate screener (fitness mode: a Gaussian process on
  the options of each design, learnt from paid outcomes) picks which of the N
  candidates per expansion is verified;
* **unscreened**: a uniform random pick (the unguided agent).

Part 2, replays (the evidence): one run per arm is an anecdote, so the same
comparison is replayed on the task's pool world (``verifyless/builtin/worlds/TASK.jsonl``:
configurations verified once, see ``verifyless.offline.worlds``) for many seeds,
adding the best-of-N oracle, which verifies the best of each pool: the
ceiling any screener could reach. Both parts report verifications-to-reach
the random arm's final score; when the screened arm does not beat random the
demo says so.

Part 1 also runs **adaptive** screening (``screener: adaptive`` around the same
surrogate, ``screen/adaptive.py``) on the same budget, then prints the screened
run's audited accuracy (``screen/audit.py``), what adaptive screening decided
and why (its stored ``screener_learn`` records), and its matched-budget result
against random, "no win" included.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.table import Table

from verifyless.builtin import worlds_dir
from verifyless.config import load_config
from verifyless.offline.breakeven import compare_arms, oracle_factory, random_factory, summarize, surrogate_factory
from verifyless.offline.compare import curve_from_store, reach_final
from verifyless.offline.worlds import load_worlds, normalizer
from verifyless.report.text import number
from verifyless.screen.audit import audit_from_store, audit_line
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.wiring import build_engine

ARMS = (
    ("screened (surrogate)", "surrogate"),
    ("unscreened (random)", "random"),
    ("adaptive (surrogate)", "adaptive"),
)


def default_worlds_dir() -> Path:
    """The committed pool worlds, shipped as package data."""
    return worlds_dir()


async def run_demo(
    *,
    task: str,
    budget: int,
    store_path: Path,
    console: Any,
    seed: int = 0,
    candidates: int = 8,
    replay_seeds: int = 30,
    worlds: Path | None = None,
) -> dict[str, Any]:
    store_path.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    with RunStore(store_path) as store:
        for arm, screener in ARMS:
            values: dict[str, Any] = {
                "task": task,
                "seed": seed,
                "screener.name": screener,
                "strategy.name": "greedy",
                "budget.verifications": budget,
                "engine.candidates": candidates,
                "engine.memory": False,
                "store": store_path,
            }
            if screener == "surrogate":
                values["screener.options.rank_by"] = "fitness"
            if screener == "adaptive":
                values.update({"screener.options.screener": "surrogate", "screener.options.options.rank_by": "fitness"})
            cfg = load_config(values=values)
            console.print(f"[bold]{arm}[/]: {task}, {budget} verifications, {candidates} candidates per expansion")
            engine = build_engine(cfg, store, progress=_Dots(console))
            try:
                results[arm] = await engine.run()
            finally:
                engine.executor.close()
            console.print()
    metric = engine.task.metric
    console.print(_runs_table(store_path, results, metric, task, budget))
    _audit_part(console, store_path, results, budget, metric)
    verdict = _replay_part(console, task, budget, candidates, replay_seeds, worlds or default_worlds_dir())
    console.print(
        f"metric: {metric.name} ({metric.direction}); store: {store_path}; "
        f"inspect with `verifyless show RUN --store {store_path}`"
    )
    results["verdict"] = verdict
    return results


def _runs_table(store_path: Path, results: dict[str, Any], metric: Any, task: str, budget: int) -> Table:
    table = Table(title=f"part 1: one real run per arm on {task}, budget {budget}", header_style="bold")
    for col in (
        "arm",
        "run",
        "baseline (val)",
        "best (val)",
        "best (hidden test)",
        "verifications",
        "verifications to reach random's final",
    ):
        table.add_column(col, justify="left" if col == "arm" else "right")
    with RunStore(store_path) as store:
        curves = {arm: curve_from_store(store, r.run_id) for arm, r in results.items()}
    reference = curves[ARMS[1][0]]
    for arm, r in results.items():
        hit = reach_final(curves[arm], reference).verifications
        table.add_row(
            arm,
            r.run_id,
            number(r.baseline_score),
            number(r.best_score),
            number(r.best_test_score),
            str(r.verifications),
            "not reached" if hit is None else str(hit),
        )
    return table


def _audit_part(console: Any, store_path: Path, results: dict[str, Any], budget: int, metric: Any) -> None:
    """The screened run's audited accuracy, what adaptive screening decided and why, and its matched result."""

    screened, unscreened, adaptive = (results[arm] for arm, _ in ARMS)
    with RunStore(store_path) as store:
        audit = audit_from_store(store, screened.run_id)
        learned = [e.payload.get("adaptive") or {} for e in store.events(adaptive.run_id, kinds=["screener_learn"])]
    console.print(f"screened run, {audit_line(audit)}", highlight=False)
    none_yet = "no paid outcome has reached the screener yet"
    last = learned[-1] if learned else {"state": "trial", "reason": none_yet}
    decisions = [m["decision"] for m in learned if "decision" in m]
    how = "; ".join(f"verification {d['verifications']}: {d['state']}" for d in decisions) or "no decision yet"
    console.print(f"adaptive screening: ended {last['state']} ({how}); {last['reason']}", highlight=False)
    line = _matched(adaptive.best_score, unscreened.best_score, budget, adaptive.verifications, metric)
    console.print(line, highlight=False)


def _matched(adaptive: float | None, unscreened: float | None, budget: int, spent: int, metric: Any) -> str:
    """The matched-budget line: adaptive's best validation score against random's, win or no win."""
    head = f"matched budget ({spent} of {budget} verifications each): adaptive {number(adaptive)} vs random {number(unscreened)}"
    if adaptive is None or unscreened is None or adaptive == unscreened:
        return head + ": no win"
    if metric.orient(adaptive) > metric.orient(unscreened):
        return head + ": adaptive wins"
    return head + ": no win (random is better)"


def _replay_part(console: Any, task: str, budget: int, candidates: int, seeds: int, worlds: Path) -> str:
    """Replays on the pool world; prints the table and the plain verdict, returns the verdict."""

    paths = sorted(worlds.glob(f"{task}.jsonl")) + sorted(worlds.glob(f"{task}.*.jsonl"))
    path = worlds / f"{task}.jsonl"
    if not paths:
        console.print(
            f"(no pool world at {path}: the replay comparison and the oracle ceiling are skipped; "
            f"collect one with `python bench/pools.py {task}`)"
        )
        return "no world"
    world, spec = load_worlds(paths)[task], load_task(task)
    arms = {
        "unscreened (random)": random_factory,
        "screened (surrogate)": surrogate_factory(None),
        "oracle ceiling (best of N)": oracle_factory,
    }
    runs = compare_arms(world, arms, budget=budget, n_candidates=candidates, seeds=range(seeds), task=spec)
    renamed = {
        "random": runs["unscreened (random)"],
        "surrogate": runs["screened (surrogate)"],
        "oracle": runs["oracle ceiling (best of N)"],
    }
    rows = {r.arm: r for r in summarize({task: renamed}, {task: normalizer(world, spec)}, budget=budget)}
    table = Table(
        title=f"part 2: {seeds} replays per arm on the pool world of {task} ({len(world)} configurations "
        f"verified once), budget {budget}, N={candidates}",
        header_style="bold",
    )
    for col in (
        "arm",
        "normalised final score",
        "P(beats random)",
        "verifications to reach random's final / budget",
        "reached",
    ):
        table.add_column(col, justify="left" if col == "arm" else "right")
    for label, key in (
        ("unscreened (random)", "random"),
        ("screened (surrogate)", "surrogate"),
        ("oracle ceiling (best of N)", "oracle"),
    ):
        r = rows[key]
        table.add_row(
            label,
            str(r.score),
            "-" if r.p_improve is None else str(r.p_improve),
            "-" if r.reach is None else str(r.reach),
            f"{r.reached}/{r.pairs}",
        )
    console.print(table)
    verdict = _verdict(rows["surrogate"], rows["oracle"], budget)
    console.print(verdict)
    return verdict


def _verdict(screened: Any, oracle: Any, budget: int) -> str:
    p = screened.p_improve
    reach = screened.reach.value * budget if screened.reach is not None else math.nan
    base = (
        f"screened reached random's final score in {reach:.1f} of {budget} verifications on average "
        f"(oracle ceiling {oracle.reach.value * budget:.1f}); P(screened beats random) = {p}."
    )
    if p is not None and p.low is not None and p.low > 0.5:
        return "[bold green]Screening wins here:[/] " + base
    if p is not None and p.high is not None and p.high < 0.5:
        return "[bold red]Screening LOSES to random here:[/] " + base
    return "[bold yellow]No clear win for screening here[/] (the interval includes 0.5): " + base


class _Dots:
    def __init__(self, console: Any) -> None:
        self.console = console

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "verification":
            mark = "." if data["status"] == "ok" else "x"
            self.console.print(mark, end="")
