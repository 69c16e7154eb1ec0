"""``verifyless report RUN``: write the self-contained HTML report and its PNG figures."""

from __future__ import annotations

from pathlib import Path

import typer

from verifyless._cli.common import RUN_ID, STORE, console, out_folder, read_store
from verifyless.report.render import write_report

DEFAULT_OUT = Path("reports")


def default_out(run_id: str) -> Path:
    """Where ``verifyless report RUN`` writes when ``--out`` is not given."""
    return DEFAULT_OUT / run_id


def report_command(
    run_id: str = RUN_ID,
    out: Path | None = typer.Option(None, "--out", callback=out_folder, help="output folder (default: reports/RUN)"),
    store: Path = STORE,
) -> None:
    """Write RUN's report: one HTML file that opens offline, plus the figures as PNGs."""

    with read_store(store) as st:
        rid = st.resolve_run(run_id)
        files = write_report(st, rid, out or default_out(rid))
    console.print(f"report: [bold]{files.html}[/] (open it in a browser; it needs no network)", highlight=False)
    if files.figures:
        console.print(f"figures: {', '.join(str(p) for p in files.figures)}", highlight=False)
    if files.note:
        console.print(f"[yellow]{files.note}[/]")
