"""``verifyless task new``: a task folder from one CSV (``verifyless.byod``)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import typer

from verifyless._cli.common import console
from verifyless.byod import new_task
from verifyless.errors import ConfigError
from verifyless.sandbox.local import LocalSandbox
from verifyless.task.tabular.prepare import Request

app = typer.Typer(no_args_is_help=True, help="Make task folders.")

KINDS = ("binary", "multiclass", "regression")


@app.command("new")
def new_command(
    folder: Path = typer.Argument(..., help="the task folder to write (must not exist, or be empty)"),
    data: Path = typer.Option(..., "--data", help="CSV file with the labelled rows"),
    target: str = typer.Option(..., "--target", help="the column to predict"),
    metric: str | None = typer.Option(
        None,
        "--metric",
        help="auc, logloss, accuracy, f1, qwk, rmse, rmsle, mae, r2, gini, ap, mcc, balanced_accuracy, micro_f1, "
        "mse, medae, mape, smape, pearson, spearman (default: auc, logloss or rmse, from the target)",
    ),
    id_column: str | None = typer.Option(None, "--id", help="column that identifies a row (default: row numbers)"),
    test: Path | None = typer.Option(
        None, "--test", help="labelled CSV to use as the hidden test (default: hold out 20% of --data)"
    ),
    group: str | None = typer.Option(None, "--group", help="hold out whole groups of this column"),
    time: str | None = typer.Option(None, "--time", help="hold out the latest rows by this column"),
    seed: int = typer.Option(0, "--seed", help="seed of the random splits"),
    kind: str | None = typer.Option(None, "--kind", help="binary, multiclass or regression (default: inferred)"),
    selection: float = typer.Option(
        0.2,
        "--selection",
        min=0.0,
        max=0.6,
        help="share of the public rows held out, apart from validation, to choose the final node on rows search "
        "never optimised (0: none)",
    ),
) -> None:
    """Make a task from a CSV: splits, hidden labels, scorer, baseline and anchors; then `verify` and `run` it."""
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"--kind {kind!r} is not known; use one of {list(KINDS)}")
    if group is not None and time is not None:
        raise ConfigError("--group and --time both given; hold out by one of them")
    problem: Literal["binary", "multiclass", "regression"] | None = kind  # type: ignore[assignment]
    request = Request(data, target, metric, id_column, test, group, time, seed, problem, selection=selection)
    made = new_task(folder, request, LocalSandbox())
    p, a, v = made.prepared, made.anchors, made.baseline
    console.print(
        f"wrote {folder}: {p.problem} task, metric {p.metric} ({made.task.metric.direction}), "
        f"{p.train_rows} public rows (20% of them held out for validation{_selection_note(selection)}), "
        f"{p.test_rows} hidden test rows",
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"baseline {made.task.metric.name} {v.score:.4g} (hidden test {v.test_score:.4g}); trivial predictor "
        f"{a.floor:.4g}; best possible {a.bound:g}",
        highlight=False,
        soft_wrap=True,
    )
    if a.reference is None:
        console.print(
            "note: the baseline does not beat the trivial predictor, so it is not written as the reference anchor "
            "(normalised scores run from the trivial predictor, 0, to the best possible, 1)",
            highlight=False,
            soft_wrap=True,
        )
    console.print(f"next: verifyless verify {folder}   verifyless run {folder}", highlight=False, soft_wrap=True)


def _selection_note(share: float) -> str:
    return f", {share:.0%} for choosing the final node" if share else ""
