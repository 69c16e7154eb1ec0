"""``make demo``: the main job on embedded defaults, against an unscreened run.

Two arms on the same built-in task, seed and verification budget, with the
offline idea-space roles (no API key, no network), MCGS search, the local
sandbox and the SQLite store:

* **screened**: the surrogate critic learns from paid outcomes and picks which
  of the N candidates per expansion to verify;
* **unscreened**: a random pick (the unguided agent).

It prints the best program's validation and hidden-test score against the
baseline for each arm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from verifyless.config import load_config
from verifyless.store import RunStore
from verifyless.wiring import build_engine


async def run_demo(*, task: str, budget: int, store_path: Path, console: Any, seed: int = 0,
                   candidates: int = 8) -> dict[str, Any]:
    store_path.parent.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    with RunStore(store_path) as store:
        for arm, screener in (("screened (surrogate)", "surrogate"), ("unscreened (random)", "random")):
            cfg = load_config(overrides=[f"task={task}", f"seed={seed}", f"screener.name={screener}",
                                         f"budget.verifications={budget}", f"engine.candidates={candidates}",
                                         f"store={store_path}", "strategy.name=mcgs"])
            console.print(f"[bold]{arm}[/]: {task}, {budget} verifications, {candidates} candidates per expansion")
            engine = build_engine(cfg, store, progress=_Dots(console))
            try:
                results[arm] = await engine.run()
            finally:
                engine.executor.close()
            console.print()
    table = Table(title=f"verifyless demo: {task}, budget {budget} verifications", header_style="bold")
    for col in ("arm", "run", "baseline (val)", "best (val)", "best (hidden test)", "verifications"):
        table.add_column(col, justify="right" if col != "arm" else "left")
    for arm, r in results.items():
        table.add_row(arm, r.run_id, _f(r.baseline_score), _f(r.best_score), _f(r.best_test_score), str(r.verifications))
    console.print(table)
    direction = engine.task.metric.direction
    console.print(f"metric: {engine.task.metric.name} ({direction}); store: {store_path}; "
                  f"inspect with `verifyless show RUN --store {store_path}`")
    return results


class _Dots:
    def __init__(self, console: Any) -> None:
        self.console = console

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "verification":
            mark = "." if data["status"] == "ok" else "x"
            self.console.print(mark, end="")


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.5g}"
