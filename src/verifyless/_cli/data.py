"""``verifyless data ...``: collect outcome data, harvest runs, synthesise teacher critiques.

Mount with ``main_app.add_typer(app, name="data")``. The critic benchmark is
``verifyless bench critic --dataset DIR`` (``verifyless.offline.benchmark``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from verifyless._cli.common import console, out_folder
from verifyless.config import DEFAULT_STORE
from verifyless.critic_data.build import build_from_runs, synthesize_dataset
from verifyless.critic_data.collect import CollectSettings
from verifyless.critic_data.dataset import load_critic_dataset, read_card
from verifyless.critic_data.pipeline import CollectWiring, run_collection
from verifyless.critic_data.synthesize import SynthesisSettings
from verifyless.errors import ConfigError, StoreError
from verifyless.ledger import BudgetConfig
from verifyless.model import build_model
from verifyless.model.cache import ResponseCache
from verifyless.offline import tables
from verifyless.offline.benchmark import run_critic_bench, write_report
from verifyless.store import RunStore

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Critic data: collect verified parent -> child outcomes, label them, add teacher critiques.",
)

_STORE = typer.Option(Path("runs/data.db"), "--store", help="run store the collection is recorded in")


@contextlib.contextmanager
def _bars() -> Iterator[Any]:
    """A progress callback for the collector that draws one rich bar per stage."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        ids: dict[str, Any] = {}

        def progress(kind: str, data: dict[str, Any]) -> None:
            if kind == "stage":
                ids[data["stage"]] = bar.add_task(data["stage"], total=data["total"])
            elif kind == "advance" and data["stage"] in ids:
                bar.advance(ids[data["stage"]], data["n"])

        yield progress


def _print_card(card: dict[str, Any], out: Path) -> None:
    table = Table(title=f"dataset {out}", title_justify="left")
    for h in ("split", "rows", "parents", "improve", "tie", "lose", "5-level", "sampled", "revised", "guided"):
        table.add_column(h)
    for name, s in card["splits"].items():
        five = s["rows"] - s["label5"]["none"]
        table.add_row(
            name,
            str(s["rows"]),
            str(s["parents"]),
            *(str(s["label3"][c]) for c in ("improve", "tie", "lose")),
            str(five),
            *(str(s["strata"][c]) for c in ("sampled", "revised", "guided")),
        )
    console.print(table)
    if card.get("grpo_balance"):
        b = card["grpo_balance"]
        console.print(f"grpo balance: before {b['before']} -> after {b['after']}")
    if card.get("synthesis"):
        syn = card["synthesis"]
        console.print(
            f"strata: {syn['counts']} shares % {syn['shares_percent']} "
            f"(paper {syn['paper_shares_percent']}); paid tokens "
            f"{syn['prompt_tokens_paid'] + syn['completion_tokens_paid']}, cost {syn['cost_paid']:.4f}"
        )
    console.print(f"wrote {out} (card: {out / 'README.md'})")


@app.command("collect")
def collect(
    task: str = typer.Argument("diabetes", help="built-in task name or task folder"),
    parents: int = typer.Option(
        10, "--parents", help="sft: parents kept (baseline + evolution steps); grpo: steps = parents x children"
    ),
    children: int = typer.Option(20, "--children", help="sft: children drawn and verified per parent"),
    mode: str = typer.Option("sft", "--mode", help="sft (two-stage) or grpo (improvement-driven, balanced)"),
    store: Path = _STORE,
    out: Path | None = typer.Option(
        None, "--out", callback=out_folder, help="dataset folder (default: runs/datasets/<task>-<run id>)"
    ),
    resume: str | None = typer.Option(None, "--resume", help="continue this collection run"),
    seed: int = typer.Option(0, "--seed", help="seed of the collection run and of the bench split"),
    roles: str | None = typer.Option(None, "--roles", help="space (offline idea-space roles) or llm"),
    model: list[str] = typer.Option([], "--model", help="model spec for LLM roles, or ROLE=SPEC; repeatable"),
    config: Path | None = typer.Option(None, "--config", help="run config YAML for roles/models/executor"),
    executor: str | None = typer.Option(None, "--executor", help="local or ray"),
    workers: int | None = typer.Option(None, "--workers", help="verifications at once"),
    smoke: str | None = typer.Option(
        None, "--smoke", help="smoke-run children at this fidelity level first, or off (default: cheapest, LLM roles)"
    ),
    max_verifications: int | None = typer.Option(None, "--budget-verifications", help="cap on paid verifications"),
    max_tokens: int | None = typer.Option(None, "--budget-tokens", help="cap on LLM tokens"),
    max_cost: float | None = typer.Option(None, "--budget-cost", help="cap on LLM cost (US dollars)"),
    max_wall: float | None = typer.Option(None, "--budget-wall", help="seconds (this process)"),
    bench_fraction: float = typer.Option(0.12, "--bench-fraction", help="share of sft-mode rows held out as bench"),
    tolerance: float = typer.Option(0.0, "--tie-tolerance", help="|Delta| <= this counts as a tie (3-way)"),
) -> None:
    """Collect verified parent -> child outcomes (two-stage or improvement-driven) and write a dataset."""

    try:
        settings = CollectSettings(parents=parents, children=children, mode=mode, seed=seed)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    caps = BudgetConfig(verifications=max_verifications, tokens=max_tokens, cost=max_cost, wall_seconds=max_wall)
    with _bars() as progress:
        wiring = CollectWiring(
            config=config, roles=roles, models=model, executor=executor, workers=workers, smoke=smoke
        )
        result = run_collection(task, store, settings, caps, wiring, resume=resume, progress=progress)
    console.print(
        f"run {result.run_id}: {len(result.parents)} parents, {result.children} children made, "
        f"{result.verified} verified ({result.reused} reused from the log); {result.stopped}"
    )
    with RunStore(store) as st:
        target = out or Path("runs") / "datasets" / f"{st.run(result.run_id).task}-{result.run_id}"
        card = build_from_runs(
            st, [result.run_id], target, seed=seed, bench_fraction=bench_fraction, tolerance=tolerance
        )
    _print_card(card, target)


@app.command("from-runs")
def from_runs(
    runs: list[str] = typer.Argument(..., help="run ids (or unique prefixes)"),
    store: Path = typer.Option(DEFAULT_STORE, "--store", help="run store holding the runs"),
    out: Path = typer.Option(..., "--out", callback=out_folder, help="dataset folder to write"),
    seed: int = typer.Option(0, "--seed", help="seed of the bench split"),
    bench_fraction: float = typer.Option(0.12, "--bench-fraction", help="share of sft-mode rows held out as bench"),
    split_by: str = typer.Option("parent", "--split-by", help="parent, or task (no task in two splits)"),
    tolerance: float | None = typer.Option(
        None, "--tie-tolerance", help="|Delta| <= this ties (3-way); default: each run's own tie_tolerance (0 if none)"
    ),
    min_improving: int = typer.Option(
        3, "--min-improving", help="improving children a parent needs for 5-level labels"
    ),
) -> None:
    """Turn every verified parent -> child pair of stored runs into critic examples."""

    if not store.exists():
        raise StoreError(f"no run store at {store}; pass --store PATH")
    with RunStore(store) as st:
        card = build_from_runs(
            st,
            runs,
            out,
            seed=seed,
            bench_fraction=bench_fraction,
            by=split_by,
            tolerance=tolerance,
            min_improving=min_improving,
        )
    _print_card(card, out)


@app.command("synthesize")
def synthesize(
    dataset: Path = typer.Argument(..., help="dataset folder (from data collect / from-runs)"),
    teacher: str = typer.Option(..., "--teacher", help="teacher model spec (e.g. scripted:FILE or openai:MODEL)"),
    out: Path | None = typer.Option(
        None, "--out", callback=out_folder, help="output folder (default: DATASET-critiques)"
    ),
    samples: int = typer.Option(8, "--samples", help="critiques per stage"),
    temperature: float = typer.Option(0.7, "--temperature", help="the teacher's sampling temperature"),
    seed: int = typer.Option(0, "--seed", help="seed of the teacher's sampling"),
    split: list[str] = typer.Option(["sft", "bench"], "--split", help="splits to add critiques to; repeatable"),
    concurrency: int = typer.Option(4, "--concurrency", help="teacher calls in flight at once"),
) -> None:
    """Teacher critiques by rejection sampling: sampled, revised (hint), guided (label revealed)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    target = out or dataset.with_name(dataset.name + "-critiques")
    card = read_card(dataset)
    total = sum(card["splits"].get(s, {}).get("rows", 0) for s in split)
    target.mkdir(parents=True, exist_ok=True)
    with ResponseCache(target / "teacher_cache.db") as cache:
        model = build_model(teacher, cache=cache)
        settings = SynthesisSettings(samples=samples, temperature=temperature, seed=seed, concurrency=concurrency)
        with Progress(TextColumn("teacher critiques"), BarColumn(), MofNCompleteColumn(), console=console) as bar:
            tid = bar.add_task("synthesis", total=total)
            new = synthesize_dataset(
                dataset,
                target,
                model,
                teacher=teacher,
                settings=settings,
                splits=split,
                progress=lambda _r: bar.advance(tid),
            )
    _print_card(new, target)


__all__ = ["app"]


def bench_dataset(
    dataset: Path, screener: Any, *, split: str = "bench", seed: int = 0, repeats: int = 5, out: Path | None = None
) -> None:
    """``verifyless bench critic --dataset``: screen a split offline and print/write the report."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    dd = load_critic_dataset(dataset)
    if split not in dd:
        raise ConfigError(f"{dataset} has no split {split!r}; it has {sorted(dd)}")
    rows = [dict(r) for r in dd[split]]
    if not rows:
        raise ConfigError(f"the {split} split of {dataset} is empty; collect more parents or raise --bench-fraction")
    with Progress(TextColumn(f"screening {split}"), BarColumn(), MofNCompleteColumn(), console=console) as bar:
        tid = bar.add_task("bench", total=len(rows))
        rep = run_critic_bench(
            rows, screener, split=split, seed=seed, repeats=repeats, progress=lambda: bar.advance(tid)
        )
    table = Table(title=f"{rep.screener} on {dataset} [{split}] (%)", title_justify="left")
    for h in tables.CRITIC_HEADERS:
        table.add_column(h)
    for row in tables.critic_rows(rep.groups):
        table.add_row(*row)
    console.print(table)
    console.print(f"{len(rep.records)} of {rep.rows} examples got a verdict ({rep.no_verdict} without)")
    if out is not None:
        for path in write_report(rep, out):
            console.print(f"wrote {path}")
