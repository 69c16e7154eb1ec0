"""``make demo``: the loop a user runs -- earlier runs of a task, then a run that warm-starts from them -- against
an unscreened run, then the evidence over many seeds with the oracle ceiling.

Part 1, real runs (no API key, no network: the offline idea-space roles, greedy search, the local sandbox and
the SQLite store), all on the same built-in task, budget and N candidates per expansion:

* **two earlier runs** with the default screener (``verifyless run TASK`` twice: adaptive screening around
  ``critic-rm``; the first starts cold, the second warm-starts from the first);
* **warm-started**: a third run with the default screener, which fits critic-rm on the two earlier runs at its
  start (``train/warm.py``; the line it prints says from what and with which held-out verdict), refits on its own
  paid outcomes, and is screened under the adaptive safety net;
* **unscreened (random)**: the same seed and budget with a uniform random pick (the unguided agent).

Then the warm-started run's audited accuracy (``screen/audit.py``), what adaptive screening decided and why, and
its matched-budget result against random on its one seed, named as the anecdote it is.

Part 2, the evidence (``demo_comparison``): one run per arm is an anecdote, so the same comparison runs on the
task's pool world (``verifyless/builtin/worlds/TASK.jsonl``: configurations verified once) through the real engine
(``train/learned_worlds.py``): two earlier world runs, the product's warm start on them, then for many seeds the
warm-started adaptive critic-rm, random, and the best-of-N oracle (the ceiling any screener could reach). The
verdict (``learned_worlds.verdict_line``) says what was won and what was not, each with its interval over seeds:
the verifications to reach random's final score and the final score's margin; reaching random's final sooner
with a final no higher beyond noise is "faster, not better". The table's caption explains its columns.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.table import Table

from verifyless.builtin import worlds_dir
from verifyless.config import load_config
from verifyless.events import ScreenerLearned, Verified, WarmStarted
from verifyless.offline.compare import curve_from_store, reach_final
from verifyless.offline.worlds import World, load_worlds
from verifyless.report.text import number
from verifyless.screen.audit import audit_from_store, audit_line
from verifyless.screen.features import make_text_encoder
from verifyless.screen.reward import resolve_encoder
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.task.base import Task
from verifyless.train.learned_worlds import (
    ArmSummary,
    CachedEncoder,
    critic_arm,
    earlier_store,
    oracle_arm,
    random_arm,
    run_arms,
    summarize,
    verdict_line,
    warm_from,
)
from verifyless.wiring import build_engine

EARLIER = ("earlier run 1", "earlier run 2")
WARM, RANDOM = "warm-started (adaptive critic-rm)", "unscreened (random)"
# (arm, screener: None = the default one, seed offset): the earlier runs use other seeds than the compared pair
ARMS = ((EARLIER[0], None, 100), (EARLIER[1], None, 101), (WARM, None, 0), (RANDOM, "random", 0))


def default_worlds_dir() -> Path:
    """The committed pool worlds, shipped as package data."""
    return worlds_dir()


def world_tasks() -> list[str]:
    """The built-in tasks that have a pool world (``verifyless/builtin/worlds/TASK.jsonl``), which part 2 replays."""
    return sorted(p.stem for p in worlds_dir().glob("*.jsonl") if "." not in p.stem)


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
    if store_path.exists():  # the earlier runs must be this demo's own: a store of other runs would warm it too
        store_path.unlink()
    with RunStore(store_path) as store:
        for arm, screener, offset in ARMS:
            values: dict[str, Any] = {
                "task": task,
                "seed": seed + offset,
                "strategy.name": "greedy",
                "budget.verifications": budget,
                "engine.candidates": candidates,
                "engine.memory": False,
                "store": store_path,
            }
            if screener is not None:
                values["screener.name"] = screener
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
    verdict = await _evidence_part(console, task, budget, candidates, replay_seeds, worlds or default_worlds_dir())
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
    reference = curves[RANDOM]
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
    """The warm-started run's audited accuracy, what adaptive screening decided and why, and its matched result."""

    adaptive, unscreened = results[WARM], results[RANDOM]
    with RunStore(store_path) as store:
        audit = audit_from_store(store, adaptive.run_id)
        learned = [e.record.adaptive or {} for e in store.events(adaptive.run_id, ScreenerLearned)]
        warm = [e.record.line for e in store.events(adaptive.run_id, WarmStarted)]
    console.print(warm[0] if warm else "warm start: none (the earlier runs held too few pairs)", highlight=False)
    console.print(f"warm-started run, {audit_line(audit)}", highlight=False)
    none_yet = "no paid outcome has reached the screener yet"
    last = learned[-1] if learned else {"state": "trial", "reason": none_yet}
    decisions = [m["decision"] for m in learned if "decision" in m]
    how = "; ".join(f"verification {d['verifications']}: {d['state']}" for d in decisions) or "no decision yet"
    console.print(f"adaptive screening: ended {last['state']} ({how}); {last['reason']}", highlight=False)
    line = _matched(adaptive.best_score, unscreened.best_score, budget, adaptive.verifications, metric)
    console.print(line, highlight=False, soft_wrap=True)


def _matched(adaptive: float | None, unscreened: float | None, budget: int, spent: int, metric: Any) -> str:
    """The matched-budget line of part 1: adaptive's best validation score against random's on the one seed each
    arm ran, named as the anecdote it is (part 2 weighs many seeds)."""
    head = (
        f"one seed per arm, an anecdote (part 2 below weighs many): at the matched budget ({spent} of {budget} "
        f"verifications each) adaptive reached {number(adaptive)}, random {number(unscreened)}"
    )
    if adaptive is None or unscreened is None or adaptive == unscreened:
        return head + ": a tie on this seed"
    if metric.orient(adaptive) > metric.orient(unscreened):
        return head + ": adaptive ended higher on this seed"
    return head + ": random ended higher on this seed"


@dataclass(frozen=True)
class Comparison:
    """Part 2's numbers: per arm at the budget (``learned_worlds.ArmSummary``), the warm start's line, the verdict."""

    rows: dict[str, ArmSummary]
    warm_line: str
    verdict: str


PART2_CAPTION = (
    "[95 %]: bootstrap intervals over seeds, each seed paired with random's run. P(beats random): the share of seeds "
    "whose final score beats random's, a tie counting as half. adaptive: off / on: the share of seeds in which "
    "adaptive screening's safety net had switched the critic off (its picks replaced by random ones) / confirmed it "
    "on by the end of the budget; the other seeds were still on trial."
)
WORLD_ARMS = ("unscreened (random)", "warm-started (adaptive critic-rm)", "oracle ceiling (best of N)")


def demo_comparison(
    world: World, task: Task, *, budget: int, candidates: int, seeds: int, earlier: int = 2, encoder: str = "auto"
) -> Comparison:
    """Part 2 on ``world``: ``earlier`` earlier world runs, the product's warm start on them, then random, the
    warm-started adaptive critic-rm and the oracle on ``seeds`` seeds; the verdict is computed from the result."""
    text = CachedEncoder(make_text_encoder(resolve_encoder(encoder)))  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory(prefix="verifyless-demo-") as tmp:
        path = earlier_store(world, task, Path(tmp) / "earlier.db", earlier, budget=budget, n=candidates)
        warm, line = warm_from(path, task, text)
    arms = dict(zip(WORLD_ARMS, (random_arm, critic_arm(warm, text, adaptive=True), oracle_arm), strict=True))
    runs = run_arms(world, task, arms, range(seeds), budget=budget, n=candidates)
    rows = summarize(world, task, runs, budget, reference=WORLD_ARMS[0])
    random, warmed, oracle = (rows[a] for a in WORLD_ARMS)
    return Comparison(rows, line, verdict_line(warmed, random, oracle))


async def _evidence_part(console: Any, task: str, budget: int, candidates: int, seeds: int, worlds: Path) -> str:
    """Part 2 on the task's pool world; prints the table and the computed verdict, returns the verdict."""

    path = worlds / f"{task}.jsonl"
    if not path.is_file():
        console.print(
            f"(no pool world at {path}: the evidence over many seeds and the oracle ceiling are skipped; "
            f"collect one with `python bench/pools.py {task}`)"
        )
        return "no world"
    world, spec = load_worlds([path])[task], load_task(task)
    console.print(f"part 2: {seeds} seeds per arm on the pool world of {task} (the engine path) ...")
    # the engine runs of part 2 start their own event loops: off this one
    result = await asyncio.to_thread(demo_comparison, world, spec, budget=budget, candidates=candidates, seeds=seeds)
    console.print(f"on the world, {result.warm_line}", highlight=False, soft_wrap=True)
    table = Table(
        title=f"part 2: {seeds} engine runs per arm on the pool world of {task} ({len(world)} configurations "
        f"verified once), budget {budget}, N={candidates}",
        caption=PART2_CAPTION,
        caption_justify="left",
        header_style="bold",
    )
    for col in (
        "arm",
        "normalised final score",
        "P(beats random) [95 %]",
        "verifications to reach random's final",
        "adaptive: off / on",
    ):
        table.add_column(col, justify="left" if col == "arm" else "right")
    for arm in WORLD_ARMS:
        r = result.rows[arm]
        p = "-" if r.p_beat is None else f"{r.p_beat[0]:.2f} [{r.p_beat[1]:.2f}, {r.p_beat[2]:.2f}]"
        state = "-" if r.off is None or r.on is None else f"{100 * r.off:.0f}% / {100 * r.on:.0f}%"
        reach = f"{r.reach:.1f}" + (f" [{r.reach_ci[0]:.1f}, {r.reach_ci[1]:.1f}]" if r.reach_ci else "")
        table.add_row(arm, f"{r.final:.3f}", p, f"{reach} of {budget}", state)
    console.print(table)
    head, _, rest = result.verdict.partition(".")
    colour = (
        "green" if head.startswith("Screening wins") else "red" if "LOSES" in head or "slower" in head else "yellow"
    )
    console.print(f"[bold {colour}]{head}.[/]{rest}", highlight=False, soft_wrap=True)
    return result.verdict


class _Dots:
    def __init__(self, console: Any) -> None:
        self.console = console

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == Verified.KIND:  # the ledger's progress tag for a verification
            mark = "." if data["status"] == "ok" else "x"
            self.console.print(mark, end="")
