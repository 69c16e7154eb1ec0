"""``verifyless tune screener``: tune a screener's prompt on a critic dataset (see ``verifyless.offline.tune``).

Mount with ``main_app.add_typer(app, name="tune")``. Writes the tuned prompt
(a template the screener loads with its ``prompt_file`` option) and, beside
it, ``<FILE>.json`` with the scores, the edits, every scored candidate and
what the search cost.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from verifyless._cli.common import console, key_values, out_file
from verifyless.critic_data.dataset import load_critic_dataset
from verifyless.errors import ConfigError
from verifyless.model import build_model
from verifyless.model.config import ENV_BASE_URL
from verifyless.offline.tune.evaluate import CountingModel, make_target
from verifyless.offline.tune.search import tune_prompt
from verifyless.prompts import template_text
from verifyless.report.text import percent

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Tune screener prompts on a critic dataset.")


@app.command("screener")
def screener_command(
    dataset: Path = typer.Option(..., "--dataset", help="critic dataset folder (verifyless data ...)"),
    screener: str = typer.Option("critic", "--screener", help="critic (scored by Dir-3) or tournament (pairwise)"),
    model: str | None = typer.Option(
        None,
        "--model",
        help="screener model: scripted:FILE | openai:M | env (default: env if VERIFYLESS_BASE_URL is set)",
    ),
    budget: int = typer.Option(
        40, "--budget", help="prompts scored on the dev slice, the baseline included (>= one neighbourhood)"
    ),
    out: Path | None = typer.Option(
        None, "--out", callback=out_file, help="tuned prompt file (default tuned-<screener>.md)"
    ),
    seed: int = typer.Option(0, "--seed", help="seeds the dev slice, the edit order and the screener"),
    dev: str | None = typer.Option(None, "--dev", help="a whole split as dev slice (default: carve sft+grpo)"),
    dev_fraction: float = typer.Option(0.25, "--dev-fraction", help="share of sft+grpo rows (whole parents) for dev"),
    option: list[str] = typer.Option([], "--option", help="screener option KEY=VALUE (e.g. k=4)"),
    max_pairs: int = typer.Option(200, "--max-pairs", help="tournament: sibling pairs scored per prompt at most"),
    writer: str | None = typer.Option(None, "--writer", help="model spec of an LLM prompt writer (optional)"),
    writer_n: int = typer.Option(2, "--writer-n", help="rewrites the writer proposes per tuned section"),
) -> None:
    """Search the screener's instructions (wording, section order) on a dev slice; report dev and bench."""

    if not dataset.exists():
        raise ConfigError(f"no dataset at {dataset}; build one with `verifyless data collect` or `data from-runs`")
    if model is None and os.environ.get(ENV_BASE_URL):
        model = "env"  # as the other commands: an endpoint in the environment is the default model
    if model is None:
        raise ConfigError(
            "tune screener needs --model SPEC (scripted:FILE, openai:MODEL, or env with VERIFYLESS_BASE_URL set)"
        )
    target = make_target(screener, build_model(model), key_values(option), seed=seed, max_pairs=max_pairs)
    dd = load_critic_dataset(dataset)
    out = out or Path(f"tuned-{screener}.md")
    with console.status(f"tuning the {screener} prompt on {dataset}"):
        rep = asyncio.run(
            tune_prompt(
                target,
                lambda name: [dict(r) for r in dd[name]],
                list(dd),
                budget=budget,
                seed=seed,
                dev=dev,
                dev_fraction=dev_fraction,
                writer=CountingModel(build_model(writer)) if writer else None,
                writer_n=writer_n,
            )
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(template_text(rep.template), encoding="utf-8")
    report = out.with_name(out.name + ".json")
    report.write_text(json.dumps({"dataset": str(dataset), **rep.to_json()}, indent=2, default=str), encoding="utf-8")
    _print(rep)
    console.print(f"wrote {out} (load it with screener option prompt_file: {out}) and {report}")


def _print(rep: Any) -> None:
    table = Table(title=f"{rep.screener} prompt, {rep.metric} (%)", title_justify="left")
    for head in ("prompt", f"dev ({rep.dev_items})", f"bench ({rep.bench_items})"):
        table.add_column(head)
    table.add_row("baseline", percent(rep.baseline_dev), percent(rep.baseline_bench))
    table.add_row("tuned", percent(rep.tuned_dev), percent(rep.tuned_bench))
    console.print(table)
    console.print(
        f"{len(rep.trials)} prompts scored of budget {rep.budget} ({rep.stopped}); {rep.variants} wordings; "
        f"search {rep.search_calls} calls / {rep.search_tokens} tokens, bench {rep.bench_calls} calls / "
        f"{rep.bench_tokens} tokens, writer {rep.writer_calls} calls / {rep.writer_tokens} tokens; {rep.seconds:.1f} s"
    )
    console.print("edits: " + ("; ".join(rep.edits) or "none (the baseline stayed best)"))
    if rep.baseline_bench is None:
        console.print("the bench split had nothing to score: no bench result")


__all__ = ["app"]
