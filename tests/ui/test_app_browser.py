"""The dashboard and the HTML report in headless Chromium (Debian's /usr/bin/chromium driven by Playwright).

Fixture stores come from the real engine (``report_fixtures``); the dashboard
is the real Starlette app under uvicorn on a loopback port. Skipped, with the
reason, when Playwright or Chromium is missing (``.ci/run`` installs Chromium).
"""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest
from report_fixtures import PAYLOADS, SECRET, cached_build

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]
ROOT = Path(__file__).resolve().parents[2]

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="the playwright package is not installed (pip install -e '.[dev]')"
)
pytest.importorskip("uvicorn", reason="the ui extra is not installed (pip install -e '.[ui]')")
if not CHROMIUM.exists():
    pytest.skip(
        "Debian's chromium is missing at /usr/bin/chromium (apt-get install -y chromium; .ci/run does it)",
        allow_module_level=True,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    built = cached_build(tmp_path_factory)
    folder = tmp_path_factory.mktemp("ui-store")
    store = folder / "ui.db"
    # The live test adds a run: work on a copy (SQLite's backup API also copies what is still in the WAL).
    with closing(sqlite3.connect(built["store"])) as src, closing(sqlite3.connect(store)) as dst:
        src.backup(dst)
    return built | {"ui_store": store, "folder": folder}


@pytest.fixture(scope="module")
def server(fx):
    import uvicorn

    from verifyless.ui.app import create_app

    port = _free_port()
    srv = uvicorn.Server(uvicorn.Config(create_app(fx["ui_store"]), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture()
def page(browser):
    # bypass_csp: the pages' nonce-based CSP would also stop injected markup; the tests check the escaping alone.
    context = browser.new_context(bypass_csp=True)
    pg = context.new_page()
    pg.set_default_timeout(30_000)
    yield pg
    context.close()


def _watch(page):
    """Record every payload that executes (exposed binding) and every dialog."""
    fired: list[str] = []
    page.expose_function("__xss", lambda tag: fired.append(str(tag)))
    page.on("dialog", lambda d: (fired.append(f"dialog:{d.message}"), d.dismiss()))
    return fired


def test_dashboard_lists_the_runs_and_never_shows_the_key(server, fx, page):
    page.goto(server + "/")
    for rid in (fx["plain"], fx["hostile"], fx["secret"]):
        assert page.locator(f'#runs tr[data-run="{rid}"]').count() == 1
    for rid in (fx["plain"], fx["hostile"]):
        page.locator(f'#runs tr[data-run="{rid}"] input[name=run]').check()
    page.locator("#compare-form button").click()
    page.wait_for_url("**/compare?*")
    assert page.locator("svg.curve").count() == 3  # both runs overlaid, then side by side
    page.goto(f"{server}/runs/{fx['secret']}")
    page.locator("details summary", has_text="configuration").first.click()
    assert "[redacted]" in page.content() and SECRET not in page.content()
    assert SECRET not in page.request.get(server + "/api/runs").text()
    csp = page.request.get(server + "/").headers["content-security-policy"]
    assert "script-src 'nonce-" in csp and "default-src 'none'" in csp


def test_node_page_shows_the_diff_and_the_critiques(server, fx, page):
    page.goto(f"{server}/runs/{fx['plain']}")
    chosen = page.locator("tr.chosen a").first
    node_id = chosen.inner_text()
    chosen.click()
    page.wait_for_url(f"**/nodes/{node_id}")
    assert page.locator("pre.diff span.add").count() > 0 and page.locator("pre.diff span.del").count() > 0
    assert page.locator("pre.critique").count() == 4
    assert "[IMPROVEMENT]" in page.locator("pre.critique").first.inner_text()


def test_hostile_markup_is_shown_as_text_and_never_runs(server, fx, page, tmp_path):
    fired = _watch(page)
    rid = fx["hostile"]
    page.goto(f"{server}/runs/{rid}")
    node = page.locator("tr.chosen a").first.inner_text()
    page.goto(f"{server}/runs/{rid}/nodes/{node}")
    for selector in ("pre.idea", "pre.summary", "pre.stdout", "pre.stderr", "pre.critique"):
        assert PAYLOADS[0] in page.locator(selector).first.inner_text(), selector
    injected = "document.querySelectorAll('img, [onerror], [onload], script:not([nonce])').length"
    assert page.evaluate(injected) == 0
    from verifyless.report.render import write_report
    from verifyless.store.readonly import open_readonly

    with open_readonly(fx["store"]) as st:
        report = write_report(st, rid, tmp_path / "r", figures=False).html
    page.goto(report.as_uri() + f"#node-{node}")
    assert PAYLOADS[1] in page.locator(f"#node-{node} pre.stdout").inner_text()
    assert page.evaluate(injected) == 0 and page.locator("script").count() == 0
    page.wait_for_timeout(300)  # give any stray handler (onerror, onload) time to fire
    assert fired == []


def test_a_run_started_now_appears_and_its_progress_advances_without_reload(server, fx, page):
    page.goto(server + "/")
    known = page.locator("#runs tbody tr").count()
    page.evaluate("window.__marker = 'no reload'")
    gate = fx["folder"] / "gate"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT / "tests" / "support")]))
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "report_fixtures.py"),
            "live",
            str(fx["ui_store"]),
            str(gate),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        page.wait_for_function(f"document.querySelectorAll('#runs tbody tr').length > {known}", timeout=60_000)
        assert page.evaluate("window.__marker") == "no reload"
        new = page.locator("#runs tbody tr").first  # newest first
        new.locator("a").click()
        page.wait_for_url("**/runs/*")
        page.evaluate("window.__marker = 'no reload'")
        # The run holds after the baseline's verification until the gate opens: progress cannot have advanced yet.
        page.wait_for_function("Number(document.getElementById('p-verifications').textContent) >= 1", timeout=60_000)
        before = int(page.locator("#p-verifications").inner_text())
        assert before == 1
        gate.touch()
        page.wait_for_function("Number(document.getElementById('p-verifications').textContent) > 1", timeout=60_000)
        page.wait_for_function("document.getElementById('p-status').textContent === 'finished'", timeout=90_000)
        # The views redraw at most every 2.5 s, so the rounds may appear a moment after the status flips.
        page.wait_for_function("document.querySelectorAll('#views .round').length >= 1", timeout=30_000)
        assert page.evaluate("window.__marker") == "no reload"
        assert page.locator("#views svg.curve").count() == 1
    finally:
        gate.touch()
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err[-2000:]


def test_report_file_renders_offline_and_requests_nothing(fx, browser, tmp_path):
    from verifyless.report.render import write_report
    from verifyless.store.readonly import open_readonly

    with open_readonly(fx["store"]) as st:
        files = write_report(st, fx["plain"], tmp_path / "report")
    assert {p.name for p in files.figures} >= {"curve.png", "graph.png", "budget.png"}
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in files.figures)
    context = browser.new_context(offline=True)
    outside: list[str] = []

    def gatekeeper(route):
        if route.request.url.startswith("file://"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    context.route("**/*", gatekeeper)
    page = context.new_page()
    page.on("request", lambda r: None if r.url.startswith("file://") else outside.append(r.url))
    page.goto(files.html.as_uri())
    assert page.locator("h1").inner_text().startswith(f"Run {fx['plain']}")
    assert page.locator("svg.curve").count() == 1 and page.locator("svg.tree a.node").count() > 0
    page.locator("svg.tree a.node").nth(1).click()
    assert page.locator(".nodepage:target pre.diff").count() == 1
    assert outside == []
    context.close()


def test_lineage_graph_zooms_pans_and_opens_a_node_with_its_calls(server, fx, page):
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    rid = fx["plain"]
    page.goto(f"{server}/runs/{rid}")
    page.wait_for_selector("#lineage circle.node")
    final = page.locator("#lineage circle.final").get_attribute("data-id")
    on_path = page.locator("#lineage circle.node.path").count()
    assert on_path >= 1 and page.locator("#lineage .edge.path").count() == on_path - 1  # root ... returned node
    before = page.locator("#lineage").get_attribute("viewBox")
    page.locator("#lineage").hover()
    page.mouse.wheel(0, -300)
    zoomed = page.locator("#lineage").get_attribute("viewBox")
    assert float(zoomed.split()[2]) < float(before.split()[2])  # zoomed in
    box = page.locator("#lineage").bounding_box()
    page.mouse.move(box["x"] + 5, box["y"] + 5)
    page.mouse.down()
    page.mouse.move(box["x"] + 85, box["y"] + 45)
    page.mouse.up()
    panned = page.locator("#lineage").get_attribute("viewBox")
    assert panned.split()[:2] != zoomed.split()[:2] and panned.split()[2:] == zoomed.split()[2:]
    page.wait_for_selector("#scatter circle.dot")  # the series (with per-node usage) has arrived
    page.locator(f'#lineage circle[data-id="{final}"]').dispatch_event("click")
    assert page.locator("#side h3").inner_text() == f"Node {final}"
    assert "tokens" in page.locator("#side table").inner_text()  # the node's LLM usage
    # Scatter: one dot per verification; the metric picker redraws it with the metric's name on the axis.
    page.wait_for_selector("#scatter circle.dot")
    dots = page.locator("#scatter circle.dot").count()
    page.select_option("#metric", "sum_radii")
    assert page.locator("#scatter circle.dot").count() == dots
    assert page.locator("#scatter text", has_text="sum_radii").count() == 1
    assert page.locator("#usage polyline").count() == 3 and "calls" in page.locator("#usage-total").inner_text()
    page.locator("#side-calls").click()
    page.wait_for_url(f"**/nodes/{final}/calls")
    assert page.locator("div.call").count() >= 1
    assert errors == []


def test_hostile_calls_and_lineage_are_text_only(server, fx, page):
    fired = _watch(page)
    rid = fx["hostile"]
    page.goto(f"{server}/runs/{rid}")
    page.wait_for_selector("#lineage circle.node")
    page.locator("#lineage circle.node").last.dispatch_event("click")
    node = page.locator("#side h3").inner_text().removeprefix("Node ")
    assert "<script>window.__xss" in page.locator("#side pre.idea").inner_text()  # the graph's idea is shortened
    page.goto(f"{server}/runs/{rid}/nodes/{node}/calls")
    assert PAYLOADS[0] in page.locator("pre.reply").first.inner_text()
    page.goto(f"{server}/runs/{rid}/diff?a=root&b={node}")
    assert PAYLOADS[0] in page.locator("pre.diff").inner_text()
    injected = "document.querySelectorAll('img, [onerror], [onload], script:not([nonce])').length"
    assert page.evaluate(injected) == 0
    page.wait_for_timeout(300)
    assert fired == []
