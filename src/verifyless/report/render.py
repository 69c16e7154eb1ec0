"""Rendering: the Jinja environment shared with the dashboard, and the self-contained HTML report.

``write_report(store, run_id, out_dir)`` writes ``report.html`` (one file:
styles inlined, no script, a Content-Security-Policy that forbids every
outside load, node pages as ``#node-ID`` sections) and the figures as PNGs
under ``figures/`` (matplotlib, the ``plot`` extra; skipped with a note when
it is missing). Autoescape is on for every template: model- and
candidate-produced text is always escaped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from verifyless.release import release
from verifyless.report import figures as drawing  # matplotlib itself is imported only when drawing
from verifyless.report import peers, svg, text, views
from verifyless.report.views.data_report import data_report_view
from verifyless.store.protocol import RunStoreProtocol


@lru_cache(maxsize=1)
def environment() -> Any:
    """The Jinja environment (package templates, autoescape on for everything)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("verifyless.report", "templates"),
        autoescape=True,
        undefined=jinja2.ChainableUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["fmt"] = text.number
    env.filters["tojson_pretty"] = lambda v: json.dumps(text.redact(v), indent=1, default=str, ensure_ascii=False)
    return env


def version() -> str:
    return release()


def _learned_line(store: RunStoreProtocol, run_id: str) -> str | None:
    data = views.learned.learned_critic_data(store, run_id)
    return views.learned.learned_critic_line(data) if data else None


def run_views(store: RunStoreProtocol, run_id: str, href: Callable[[str], str]) -> dict[str, Any]:
    """Everything the run page (report or dashboard) renders, as template variables."""
    f = views.final.final_view(store, run_id)
    curve = views.curves.best_curve(store, run_id)
    g = views.nodes.graph_view(store, run_id, final_id=f.node_id)
    return {
        "s": views.runs.run_summary(store, run_id),
        "b": views.runs.budget_view(store, run_id),
        "lofi": views.pilots.low_fidelity_view(store, run_id),
        "f": f,
        "curve": curve,
        "curve_svg": svg.curves_svg([curve]),
        "g": g,
        "graph_svg": svg.graph_svg(g, href),
        "rounds": views.nodes.rounds_view(store, run_id),
        "cv": views.critic.critic_view(store, run_id),
        "audit": views.critic.screener_audit_view(store, run_id),
        "others": views.runs.other_events(store, run_id),
        "peers": peers.peers_lines(peers.novelty_rates(store, run_id), peers.model_shares(store, run_id)),
        "datarep": data_report_view(store, run_id),
        "schedule": views.series.schedule_series(store, run_id, most=25),
        "card": views.card.run_card(store, run_id),
        "learned": _learned_line(store, run_id),
        "href": href,
    }


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    figures: tuple[Path, ...]
    note: str = ""  # why figures are missing, if they are


def report_html(store: RunStoreProtocol, run_id: str, *, figures_dir: str, page: dict[str, Any] | None = None) -> str:
    """The report page of one run as one HTML string (``write_report`` and the dashboard's /report serve it)."""
    return (
        environment()
        .get_template("report.html")
        .render(
            **(page if page is not None else run_views(store, run_id, lambda nid: f"#node-{nid}")),
            nodes=views.nodes.node_details(store, run_id),
            generated=time.strftime("%Y-%m-%d %H:%M:%S"),
            version=version(),
            figures_dir=figures_dir,
        )
    )


def write_report(store: RunStoreProtocol, run_id: str, out_dir: str | Path, *, figures: bool = True) -> ReportFiles:
    """Write ``out_dir/report.html`` and (``figures``) ``out_dir/figures/*.png`` for one run (see module docstring)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    page = run_views(store, run_id, lambda nid: f"#node-{nid}")
    html = report_html(store, run_id, figures_dir="figures/", page=page)
    path = out / "report.html"
    path.write_text(html, encoding="utf-8")
    if not figures:
        return ReportFiles(path, (), "PNG figures not requested")
    try:
        pngs = drawing.write_figures(page, out / "figures")
    except ImportError as exc:
        return ReportFiles(path, (), f"PNG figures skipped: {exc}; install verifyless[plot]")
    return ReportFiles(path, tuple(pngs))
