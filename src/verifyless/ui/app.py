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

Structure: each route is a module-level handler ``handler(dash, request)`` that takes the ``Dashboard`` (the
store, the templates and the per-run memos) explicitly, so it can be called alone; ``create_app`` only
registers them. Starlette is imported when a response is made, not when this module is imported (the
``ui`` extra is optional; ``verifyless ui`` says how to install it).
"""

from __future__ import annotations

import contextlib
import functools
import math
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from verifyless.errors import StoreError
from verifyless.report import svg, text, views
from verifyless.report.render import environment, report_html, run_views
from verifyless.store.readonly import open_readonly
from verifyless.ui.highlight import python_spans
from verifyless.ui.lineage import lineage_view

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response


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


class Dashboard:
    """What the handlers share: the store (opened read-only on first use), the templates and per-run memos.

    The memos (the last progress of each run, each run's per-node usage) are guarded by the holder's lock,
    so concurrent requests of one run read each event once.
    """

    def __init__(self, store_path: str | Path) -> None:
        self.holder = StoreHolder(Path(store_path))
        self.env = _environment()
        self.last_progress: dict[str, views.progress.Progress] = {}
        self.node_usage_memo: dict[str, tuple[int, dict[str, Any]]] = {}

    def page(self, name: str, status_code: int = 200, **context: Any) -> Response:
        """Template ``name`` rendered with a fresh nonce that its CSP allows for scripts and styles."""
        from starlette.responses import HTMLResponse

        nonce = secrets.token_urlsafe(16)
        html = self.env.get_template(name).render(nonce=nonce, store_path=str(self.holder.path), **context)
        return HTMLResponse(html, status_code=status_code, headers=_headers(nonce))

    def store_or_error(self) -> tuple[Any, str]:
        """The store, or (None, why) when it cannot be opened (not there yet)."""
        try:
            return self.holder.get(), ""
        except StoreError as exc:
            return None, str(exc)

    def run_of(self, request: Request) -> tuple[Any, str]:
        """The store and the full run id that the ``run_id`` path parameter names (StoreError when none)."""
        st = self.holder.get()
        return st, st.resolve_run(request.path_params["run_id"])

    def node_usage(self, st: Any, rid: str) -> dict[str, Any]:
        """Calls, tokens and cost per node; recomputed only when the run has a new event (it reads every call's text)."""
        with self.holder.lock:
            seq = views.calls.last_seq(st, rid)
            if rid not in self.node_usage_memo or self.node_usage_memo[rid][0] != seq:
                usage = {
                    nid: {
                        "calls": len(nc.calls),
                        "prompt_tokens": nc.prompt_tokens,
                        "completion_tokens": nc.completion_tokens,
                        "cost": nc.cost,
                    }
                    for nid, nc in views.calls.calls_by_node(st, rid).items()
                }
                self.node_usage_memo[rid] = (seq, usage)
            return self.node_usage_memo[rid][1]


def _json(value: Any, status_code: int = 200) -> Response:
    from starlette.responses import JSONResponse

    return JSONResponse(value, status_code=status_code, headers=_headers())


def node_href(run_id: str) -> Callable[[str], str]:
    """The node page URL of a node of ``run_id``."""
    return lambda nid: f"/runs/{quote(run_id, safe='')}/nodes/{quote(nid, safe='')}"


# ---------------------------------------------------------------------- pages


def runs_page(dash: Dashboard, request: Request) -> Response:
    st, error = dash.store_or_error()
    return dash.page("runs.html", runs=views.runs.runs_list(st) if st else [], error=error)


def run_page(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    return dash.page("run.html", **run_views(st, rid, node_href(rid)), eta=views.progress.progress(st, rid).eta_s)


def fragment(dash: Dashboard, request: Request) -> Response:
    """The run page's views alone, which the page swaps in when a new event was committed."""
    from starlette.responses import HTMLResponse

    st, rid = dash.run_of(request)
    html = dash.env.get_template("fragment.html").render(**run_views(st, rid, node_href(rid)))
    return HTMLResponse(html, headers=_headers())


def report_page(dash: Dashboard, request: Request) -> Response:
    """The self-contained HTML report under its own CSP (inline styles, data: images, no script)."""
    from starlette.responses import HTMLResponse

    st, rid = dash.run_of(request)
    html = report_html(st, rid, figures_dir="(run `verifyless report` for the PNG files)")
    headers = {
        **_headers(),
        "Content-Security-Policy": REPORT_CSP,
        "Content-Disposition": f'inline; filename="{rid}.html"',
    }
    return HTMLResponse(html, headers=headers)


def node_page(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    detail = views.nodes.node_detail(st, rid, request.path_params["node_id"])
    return dash.page(
        "node.html",
        d=detail,
        run_id=rid,
        href=node_href(rid),
        calls=views.calls.node_calls(st, rid, detail.id),
        calls_href=node_href(rid)(detail.id) + "/calls",
        spans=python_spans(detail.program),
        node_ids=[r["node_id"] for r in st.node_rows(rid)],
    )


def calls_page(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    node_id = request.path_params["node_id"]
    if node_id not in {r["node_id"] for r in st.node_rows(rid)}:
        raise StoreError(f"no node {node_id!r} in run {rid}")
    nc = views.calls.node_calls(st, rid, node_id)
    return dash.page("calls.html", nc=nc, run_id=rid, node_href=node_href(rid)(node_id))


def diff_page(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    rows = {r["node_id"]: r for r in st.node_rows(rid)}
    a, b = (request.query_params.get(k, "") for k in ("a", "b"))
    for nid in (a, b):
        if nid not in rows:
            raise StoreError(f"no node {nid!r} in run {rid}; pass two node ids as ?a=NODE&b=NODE")
    program_a, program_b = (views.nodes.program_text(st, rows[n]) for n in (a, b))
    return dash.page(
        "diff.html",
        run_id=rid,
        a=a,
        b=b,
        lines=text.diff_lines(program_a, program_b, a, b),
        spans_a=python_spans(program_a),
        spans_b=python_spans(program_b),
        node_ids=list(rows),
    )


def compare_page(dash: Dashboard, request: Request) -> Response:
    st, error = dash.store_or_error()
    if st is None:
        return dash.page("error.html", 404, message=error)
    ids = [st.resolve_run(r) for r in request.query_params.getlist("run")][:10]
    curves = views.curves.compare_curves(st, ids)
    overlay = svg.curves_svg(curves, width=900, height=380, title="best validation score so far") if curves else ""
    side = [(c, svg.curves_svg([c], width=440, height=260, title=c.label)) for c in curves]
    return dash.page("compare.html", curves=curves, overlay=overlay, side_by_side=side)


def no_content(dash: Dashboard, request: Request) -> Response:
    """An empty answer (the favicon)."""
    from starlette.responses import Response

    return Response(status_code=204)


# ---------------------------------------------------------------------- JSON


def runs_api(dash: Dashboard, request: Request) -> Response:
    st, _ = dash.store_or_error()
    return _json([asdict(r) for r in views.runs.runs_list(st)] if st else [])


def progress_api(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    with dash.holder.lock:  # incremental: each poll reads only the events committed since the previous one
        p = dash.last_progress[rid] = views.progress.progress(st, rid, since=dash.last_progress.get(rid))
    return _json(asdict(p))


def curve_api(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    return _json(_plain(asdict(views.curves.best_curve(st, rid))))


def lineage_api(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    return _json(_plain(asdict(lineage_view(st, rid))))


def series_api(dash: Dashboard, request: Request) -> Response:
    st, rid = dash.run_of(request)
    scatter = asdict(views.series.score_scatter(st, rid)) | {"final_id": views.final.final_view(st, rid).node_id}
    body = {"usage": asdict(views.series.usage_series(st, rid)), "scatter": scatter, "nodes": dash.node_usage(st, rid)}
    return _json(_plain(body))


def node_api(dash: Dashboard, request: Request) -> Response:
    from starlette.responses import Response

    st, rid = dash.run_of(request)
    detail = views.nodes.node_detail(st, rid, request.path_params["node_id"])
    return Response(views.nodes.node_json(detail), media_type="application/json", headers=_headers())


async def not_found(dash: Dashboard, request: Request, exc: Exception) -> Response:
    """404 with the reason: JSON under ``/api/``, an error page elsewhere."""
    message = str(exc) if isinstance(exc, StoreError) else "no such page"
    if request.url.path.startswith("/api/"):
        return _json({"error": message}, status_code=404)
    return dash.page("error.html", 404, message=message)


ROUTES: tuple[tuple[str, Callable[[Dashboard, Any], Response]], ...] = (
    ("/", runs_page),
    ("/favicon.ico", no_content),
    ("/api/runs", runs_api),
    ("/compare", compare_page),
    ("/runs/{run_id}", run_page),
    ("/runs/{run_id}/fragment", fragment),
    ("/runs/{run_id}/report", report_page),
    ("/runs/{run_id}/nodes/{node_id}", node_page),
    ("/runs/{run_id}/nodes/{node_id}/calls", calls_page),
    ("/runs/{run_id}/diff", diff_page),
    ("/api/runs/{run_id}/lineage", lineage_api),
    ("/api/runs/{run_id}/series", series_api),
    ("/api/runs/{run_id}/progress", progress_api),
    ("/api/runs/{run_id}/curve", curve_api),
    ("/api/runs/{run_id}/nodes/{node_id}", node_api),
)


@contextlib.asynccontextmanager
async def _lifespan(dash: Dashboard, app: Any) -> AsyncIterator[None]:
    yield
    dash.holder.close()


def create_app(store_path: str | Path) -> Any:
    """The Starlette application serving ``store_path`` read-only: ``ROUTES``, each bound to one ``Dashboard``."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    dash = Dashboard(store_path)
    routes = [Route(path, functools.partial(handler, dash)) for path, handler in ROUTES]
    handler = functools.partial(not_found, dash)
    app = Starlette(
        routes=routes,
        exception_handlers={StoreError: handler, 404: handler},
        lifespan=functools.partial(_lifespan, dash),
    )
    app.state.store = dash.holder
    app.state.dashboard = dash
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

    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
