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
    console.print(_progress_table(store_path, results, engine.task.metric, budget))
    direction = engine.task.metric.direction
    console.print(f"metric: {engine.task.metric.name} ({direction}); store: {store_path}; "
                  f"inspect with `verifyless show RUN --store {store_path}`")
    return results


def _progress_table(store_path: Path, results: dict[str, Any], metric: Any, budget: int) -> Table:
    """Best validation score so far after a quarter, half, ... of the budget, and verifications-to-match."""
    from verifyless.bench.compare import curve_from_store, reach_final

    marks = sorted({max(1, round(budget * q)) for q in (0.25, 0.5, 0.75, 1.0)})
    table = Table(title="best validation score after v verifications", header_style="bold")
    table.add_column("arm")
    for m in marks:
        table.add_column(f"v={m}", justify="right")
    table.add_column("verifications to match the unscreened final", justify="right")
    with RunStore(store_path) as store:
        curves = {arm: curve_from_store(store, r.run_id) for arm, r in results.items()}
    arms = list(curves)
    reference = curves[arms[-1]]
    for arm, curve in curves.items():
        cells = []
        for m in marks:
            fit = curve.best[min(m, len(curve.best)) - 1] if len(curve.best) else float("nan")
            cells.append(_f(metric.orient(float(fit))) if fit == fit else "-")  # orient is its own inverse
        hit = reach_final(curve, reference).verifications
        table.add_row(arm, *cells, "-" if hit is None else str(hit))
    return table


class _Dots:
    def __init__(self, console: Any) -> None:
        self.console = console

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "verification":
            mark = "." if data["status"] == "ok" else "x"
            self.console.print(mark, end="")


def _f(x: float | None) -> str:
    return "-" if x is None else f"{x:.5g}"
