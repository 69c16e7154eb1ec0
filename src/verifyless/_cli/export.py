"""``verifyless export RUN``: the run's trace as JSONL or Parquet (docs/design/trace-export.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from verifyless._cli.common import RUN_ID, console, out_file, read_store
from verifyless.config import DEFAULT_STORE
from verifyless.errors import ConfigError
from verifyless.report.export import export_run


def export_command(
    run_id: str = RUN_ID,
    out: Path = typer.Option(
        ..., "--out", callback=out_file, help="node trace file; the LLM calls go beside it as NAME.calls.EXT"
    ),
    fmt: str = typer.Option("jsonl", "--format", help="jsonl or parquet"),
    include_test: bool = typer.Option(False, "--include-test", help="also write hidden test scores and metrics"),
    inline_calls: bool = typer.Option(False, "--inline-calls", help="write each call's request and replies inline"),
    store: Path = typer.Option(DEFAULT_STORE, "--store", help="run store (opened read-only)"),
) -> None:
    """Export every node of RUN (lineage, idea, summary, band, diff, screening, metrics, costs)."""

    if fmt not in ("jsonl", "parquet"):
        raise ConfigError(f"--format {fmt!r}: choose jsonl or parquet")
    with read_store(store) as st:
        rid = st.resolve_run(run_id)
        done = export_run(st, rid, out, fmt, include_test=include_test, inline_calls=inline_calls)  # type: ignore[arg-type]
    hidden = "with hidden test scores" if include_test else "no hidden test scores"
    console.print(
        f"trace: [bold]{done.nodes}[/] ({hidden}); calls: {done.calls}; run card: {done.card}", highlight=False
    )
