"""The dashboard: a small read-only Starlette app over one run store.

Routes (all GET; nothing writes):

* ``/`` runs list (refreshes itself by polling ``/api/runs``);
* ``/runs/{id}`` the report's views for one run, plus a live progress box
  that polls ``/api/runs/{id}/progress`` every second and redraws the views
  from ``/runs/{id}/fragment`` when a new event was committed;
* ``/runs/{id}/report`` the self-contained HTML report (without the PNG files);
* ``/runs/{id}/nodes/{node}`` a node page (with its highlighted program and a
  diff picker); ``/runs/{id}/nodes/{node}/calls`` the LLM calls that made the
  node (prompts and replies from the response cache);
  ``/runs/{id}/diff?a=X&b=Y`` the diff between any two nodes;
  ``/compare?run=A&run=B`` curves of several runs overlaid and side by side;
* ``/api/runs``, ``/api/runs/{id}/progress``, ``/api/runs/{id}/curve``,
  ``/api/runs/{id}/nodes/{node}``: the same data as JSON; the run page's
  lineage graph, score scatter and usage chart are drawn by its script from
  ``/api/runs/{id}/lineage`` and ``/api/runs/{id}/series``.

Safety: the store is opened read-only (SQLite ``mode=ro``); every page is a
Jinja template with autoescape on; pages carry a Content-Security-Policy
whose script and style sources are a per-response nonce, so markup that a
candidate wrote into its idea or logs can neither run nor load anything even
if it reached the page unescaped. Configuration is shown redacted and the
app never reads environment variables, so no API key can be shown.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

from verifyless.errors import StoreError
from verifyless.report import (
    data,
    data_calls,
    data_curves,
    data_final,
    data_nodes,
    data_progress,
    data_series,
    svg,
    text,
)
from verifyless.report.reader import open_readonly
from verifyless.report.render import environment, report_html, run_views
from verifyless.ui.highlight import python_spans
from verifyless.ui.lineage import lineage_view


class StoreHolder:
    """Opens the store read-only on first use (it may not exist yet when the dashboard starts)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._store: Any = None
        self.lock = threading.RLock()

    def get(self) -> Any:
        with self.lock:
            if self._store is None:
                self._store = open_readonly(self.path)
            return self._store

    def close(self) -> None:
        with self.lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def _environment() -> Any:
    import jinja2

    base = environment()
    env = base.overlay(loader=jinja2.ChoiceLoader([jinja2.PackageLoader("verifyless.ui", "templates"), base.loader]))
    env.filters["fmt"] = text.number
    env.filters["duration"] = text.duration
    return env


def create_app(store_path: str | Path) -> Any:
    """The Starlette application serving ``store_path`` read-only."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    holder = StoreHolder(Path(store_path))
    env = _environment()

    def page(name: str, status_code: int = 200, **context: Any) -> Response:
        nonce = secrets.token_urlsafe(16)
        html = env.get_template(name).render(nonce=nonce, store_path=str(holder.path), **context)
        return HTMLResponse(html, status_code=status_code, headers=_headers(nonce))

    def store_or_error() -> tuple[Any, str]:
        try:
            return holder.get(), ""
        except StoreError as exc:
            return None, str(exc)

    def run_id_of(request: Request) -> tuple[Any, str]:
        st = holder.get()
        return st, st.resolve_run(request.path_params["run_id"])

    def runs_page(request: Request) -> Response:
        st, error = store_or_error()
        return page("runs.html", runs=data.runs_list(st) if st else [], error=error)

    def runs_api(request: Request) -> Response:
        st, _ = store_or_error()
        return JSONResponse([asdict(r) for r in data.runs_list(st)] if st else [], headers=_headers())

    def node_href(run_id: str) -> Any:
        return lambda nid: f"/runs/{quote(run_id, safe='')}/nodes/{quote(nid, safe='')}"

    def run_page(request: Request) -> Response:
        st, rid = run_id_of(request)
        return page("run.html", **run_views(st, rid, node_href(rid)), eta=data_progress.progress(st, rid).eta_s)

    def fragment(request: Request) -> Response:
        st, rid = run_id_of(request)
        html = env.get_template("fragment.html").render(**run_views(st, rid, node_href(rid)))
        return HTMLResponse(html, headers=_headers())

    last_progress: dict[str, data_progress.Progress] = {}

    def progress_api(request: Request) -> Response:
        st, rid = run_id_of(request)
        with holder.lock:  # incremental: each poll reads only the events committed since the previous one
            p = last_progress[rid] = data_progress.progress(st, rid, since=last_progress.get(rid))
        return JSONResponse(asdict(p), headers=_headers())

    def report_page(request: Request) -> Response:
        st, rid = run_id_of(request)
        html = report_html(st, rid, figures_dir="(run `verifyless report` for the PNG files)")
        headers = {
            **_headers(),
            "Content-Security-Policy": REPORT_CSP,
            "Content-Disposition": f'inline; filename="{rid}.html"',
        }
        return HTMLResponse(html, headers=headers)

    def curve_api(request: Request) -> Response:
        st, rid = run_id_of(request)
        return JSONResponse(_plain(asdict(data_curves.best_curve(st, rid))), headers=_headers())

    def node_page(request: Request) -> Response:
        st, rid = run_id_of(request)
        detail = data_nodes.node_detail(st, rid, request.path_params["node_id"])
        return page(
            "node.html",
            d=detail,
            run_id=rid,
            href=node_href(rid),
            calls=data_calls.node_calls(st, rid, detail.id),
            calls_href=node_href(rid)(detail.id) + "/calls",
            spans=python_spans(detail.program),
            node_ids=[r["node_id"] for r in st.node_rows(rid)],
        )

    def calls_page(request: Request) -> Response:
        st, rid = run_id_of(request)
        node_id = request.path_params["node_id"]
        if node_id not in {r["node_id"] for r in st.node_rows(rid)}:
            raise StoreError(f"no node {node_id!r} in run {rid}")
        nc = data_calls.node_calls(st, rid, node_id)
        return page("calls.html", nc=nc, run_id=rid, node_href=node_href(rid)(node_id))

    def diff_page(request: Request) -> Response:
        st, rid = run_id_of(request)
        rows = {r["node_id"]: r for r in st.node_rows(rid)}
        a, b = (request.query_params.get(k, "") for k in ("a", "b"))
        for nid in (a, b):
            if nid not in rows:
                raise StoreError(f"no node {nid!r} in run {rid}; pass two node ids as ?a=NODE&b=NODE")
        program_a, program_b = (data_nodes.program_text(st, rows[n]) for n in (a, b))
        return page(
            "diff.html",
            run_id=rid,
            a=a,
            b=b,
            lines=text.diff_lines(program_a, program_b, a, b),
            spans_a=python_spans(program_a),
            spans_b=python_spans(program_b),
            node_ids=list(rows),
        )

    def lineage_api(request: Request) -> Response:
        st, rid = run_id_of(request)
        return JSONResponse(_plain(asdict(lineage_view(st, rid))), headers=_headers())

    node_usage_memo: dict[str, tuple[int, dict[str, Any]]] = {}

    def node_usage(st: Any, rid: str) -> dict[str, Any]:
        """Calls, tokens and cost per node; recomputed only when the run has a new event (it reads every call's text)."""
        with holder.lock:
            seq = data_calls.last_seq(st, rid)
            if rid not in node_usage_memo or node_usage_memo[rid][0] != seq:
                usage = {
                    nid: {
                        "calls": len(nc.calls),
                        "prompt_tokens": nc.prompt_tokens,
                        "completion_tokens": nc.completion_tokens,
                        "cost": nc.cost,
                    }
                    for nid, nc in data_calls.calls_by_node(st, rid).items()
                }
                node_usage_memo[rid] = (seq, usage)
            return node_usage_memo[rid][1]

    def series_api(request: Request) -> Response:
        st, rid = run_id_of(request)
        scatter = asdict(data_series.score_scatter(st, rid)) | {"final_id": data_final.final_view(st, rid).node_id}
        body = {"usage": asdict(data_series.usage_series(st, rid)), "scatter": scatter, "nodes": node_usage(st, rid)}
        return JSONResponse(_plain(body), headers=_headers())

    def node_api(request: Request) -> Response:
        st, rid = run_id_of(request)
        detail = data_nodes.node_detail(st, rid, request.path_params["node_id"])
        return Response(data_nodes.node_json(detail), media_type="application/json", headers=_headers())

    def compare_page(request: Request) -> Response:
        st, error = store_or_error()
        if st is None:
            return page("error.html", 404, message=error)
        ids = [st.resolve_run(r) for r in request.query_params.getlist("run")][:10]
        curves = data_curves.compare_curves(st, ids)
        overlay = svg.curves_svg(curves, width=900, height=380, title="best validation score so far") if curves else ""
        side = [(c, svg.curves_svg([c], width=440, height=260, title=c.label)) for c in curves]
        return page("compare.html", curves=curves, overlay=overlay, side_by_side=side)

    async def not_found(request: Request, exc: Exception) -> Response:
        message = str(exc) if isinstance(exc, StoreError) else "no such page"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message}, status_code=404, headers=_headers())
        return page("error.html", 404, message=message)

    routes = [
        Route("/", runs_page),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Route("/api/runs", runs_api),
        Route("/compare", compare_page),
        Route("/runs/{run_id}", run_page),
        Route("/runs/{run_id}/fragment", fragment),
        Route("/runs/{run_id}/report", report_page),
        Route("/runs/{run_id}/nodes/{node_id}", node_page),
        Route("/runs/{run_id}/nodes/{node_id}/calls", calls_page),
        Route("/runs/{run_id}/diff", diff_page),
        Route("/api/runs/{run_id}/lineage", lineage_api),
        Route("/api/runs/{run_id}/series", series_api),
        Route("/api/runs/{run_id}/progress", progress_api),
        Route("/api/runs/{run_id}/curve", curve_api),
        Route("/api/runs/{run_id}/nodes/{node_id}", node_api),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        yield
        holder.close()

    app = Starlette(routes=routes, exception_handlers={StoreError: not_found, 404: not_found}, lifespan=lifespan)
    app.state.store = holder
    return app


REPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; frame-ancestors 'none'"


def _headers(nonce: str | None = None) -> dict[str, str]:
    policy = (
        "default-src 'none'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )
    if nonce:
        policy += f"; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'"
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def _plain(value: Any) -> Any:
    """NaN/inf to None so the JSON is valid for browsers."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
