"""The dashboard's routes through Starlette's test client (no browser): pages, JSON API, headers, read-only."""

from __future__ import annotations

import hashlib

import pytest
from report_fixtures import PAYLOADS, SECRET, cached_build

from verifyless.report import views
from verifyless.store.readonly import open_readonly

pytest.importorskip("starlette", reason="the ui extra is not installed (pip install -e '.[ui]')")


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from starlette.testclient import TestClient

    from verifyless.ui.app import create_app

    built = cached_build(tmp_path_factory)
    digest = hashlib.sha256(built["store"].read_bytes()).hexdigest()
    with TestClient(create_app(built["store"])) as c:
        yield c, built
    assert hashlib.sha256(built["store"].read_bytes()).hexdigest() == digest  # nothing written


def test_pages_and_api_answer_with_strict_headers(client):
    c, built = client
    rid = built["plain"]
    for url in (
        "/",
        f"/runs/{rid}",
        f"/runs/{rid}/fragment",
        f"/runs/{rid}/nodes/root",
        f"/runs/{rid}/report",
        f"/compare?run={rid}&run={built['hostile']}",
        "/api/runs",
        f"/api/runs/{rid}/progress",
        f"/api/runs/{rid}/curve",
        f"/api/runs/{rid}/nodes/root",
        f"/runs/{rid}/nodes/root/calls",
        f"/runs/{rid}/diff?a=root&b=root",
        f"/api/runs/{rid}/lineage",
        f"/api/runs/{rid}/series",
    ):
        r = c.get(url)
        assert r.status_code == 200, url
        assert "default-src 'none'" in r.headers["content-security-policy"] and r.headers["x-content-type-options"]
    page = c.get(f"/runs/{rid}").text
    nonce = c.get(f"/runs/{rid}").headers["content-security-policy"].split("'nonce-")[1].split("'")[0]
    assert "<script nonce=" in page and nonce not in page  # a fresh nonce per response
    assert [r["run_id"] for r in c.get("/api/runs").json()] == [built["secret"], built["hostile"], rid]
    assert c.post("/api/runs").status_code == 405


def test_unknown_runs_and_nodes_are_404_with_the_reason(client):
    c, built = client
    assert c.get("/runs/nope").status_code == 404 and "unknown run" in c.get("/runs/nope").text
    assert c.get(f"/runs/{built['plain']}/nodes/zz").status_code == 404
    assert "error" in c.get("/api/runs/nope/progress").json()
    assert c.get(f"/runs/{built['plain']}/nodes/zz/calls").status_code == 404
    diff = c.get(f"/runs/{built['plain']}/diff?a=root&b=zz")
    assert diff.status_code == 404 and "no node &#39;zz&#39;" in diff.text
    assert c.get("/api/runs/nope/lineage").status_code == 404


def test_dashboard_views_answer_with_the_runs_data(client):
    c, built = client
    rid = built["plain"]
    with open_readonly(built["store"]) as st:
        final = views.final.final_view(st, rid).node_id
        nodes = [r["node_id"] for r in st.node_rows(rid)]
        verifications = len(list(st.events(rid, kinds=["verification"])))
    lineage = c.get(f"/api/runs/{rid}/lineage").json()
    assert lineage["final_id"] == final and sorted(n["id"] for n in lineage["nodes"]) == sorted(nodes)
    series = c.get(f"/api/runs/{rid}/series").json()
    assert len(series["scatter"]["points"]) == verifications == len(series["usage"]["points"]) - 1
    assert "combined_score" in series["scatter"]["metrics"]
    with open_readonly(built["store"]) as st:
        root_calls = views.calls.node_calls(st, rid, "root")
    assert series["nodes"]["root"] == {
        "calls": len(root_calls.calls),
        "prompt_tokens": root_calls.prompt_tokens,
        "completion_tokens": root_calls.completion_tokens,
        "cost": root_calls.cost,
    }
    assert c.get(f"/api/runs/{rid}/series").json() == series  # the memoised per-node usage answers the same
    child = next(n for n in nodes if n != "root")
    calls = c.get(f"/runs/{rid}/nodes/{child}/calls").text
    assert calls.count('class="box call"') == 3 and "proposer" in calls and "implementer" in calls
    page = c.get(f"/runs/{rid}/nodes/{child}").text
    assert f"/runs/{rid}/nodes/{child}/calls" in page and '<span class="kw">' in page  # link + highlighted code
    diff = c.get(f"/runs/{rid}/diff?a=root&b={child}").text
    assert '<pre class="diff">' in diff and 'class="add"' in diff


def test_polled_progress_matches_a_full_read(client):
    c, built = client
    rid = built["plain"]
    first, second = c.get(f"/api/runs/{rid}/progress").json(), c.get(f"/api/runs/{rid}/progress").json()
    with open_readonly(built["store"]) as st:
        full = views.progress.progress(st, rid)
    assert first == second and second["last_seq"] == full.last_seq and second["rounds"] == full.rounds
    assert [tuple(x) for x in second["recent"]] == [tuple(x) for x in full.recent]


def test_no_key_and_no_live_markup_in_any_answer(client):
    c, built = client
    hostile = built["hostile"]
    for url in (
        "/",
        "/api/runs",
        f"/runs/{built['secret']}",
        f"/runs/{hostile}",
        f"/runs/{hostile}/report",
        f"/runs/{hostile}/fragment",
        f"/runs/{hostile}/nodes/root/calls",
        f"/api/runs/{hostile}/lineage",
        f"/api/runs/{hostile}/series",
    ):
        text = c.get(url).text
        assert SECRET not in text and PAYLOADS[0] not in text and PAYLOADS[1] not in text, url
    assert "&lt;script&gt;window.__xss" in c.get(f"/runs/{hostile}").text
    with open_readonly(built["store"]) as st:
        nodes = [r["node_id"] for r in st.node_rows(hostile)]
    for node in nodes:
        for url in (
            f"/runs/{hostile}/nodes/{node}",
            f"/runs/{hostile}/nodes/{node}/calls",
            f"/runs/{hostile}/diff?a=root&b={node}",
        ):
            text = c.get(url).text
            assert SECRET not in text and not any(p in text for p in PAYLOADS), url
    assert "&lt;script&gt;window.__xss" in c.get(f"/runs/{hostile}/nodes/{nodes[-1]}/calls").text


def _request(path: str, query: str = "", **path_params: str):
    from starlette.requests import Request

    scope = {"type": "http", "method": "GET", "path": path, "query_string": query.encode(), "headers": []}
    return Request(scope | {"path_params": path_params})


def test_a_handler_answers_alone_without_the_app(tmp_path_factory):
    """Handlers are module-level functions of a ``Dashboard`` and a request: no Starlette app is needed."""
    import json

    from verifyless.ui import app as ui

    built = cached_build(tmp_path_factory)
    rid = built["plain"]
    dash = ui.Dashboard(built["store"])
    try:
        runs = json.loads(ui.runs_api(dash, _request("/api/runs")).body)
        assert rid in {r["run_id"] for r in runs}
        node = json.loads(ui.node_api(dash, _request("", run_id=rid, node_id="root")).body)
        assert node["id"] == "root" and SECRET not in json.dumps(node)
        first = json.loads(ui.progress_api(dash, _request("", run_id=rid)).body)
        assert dash.last_progress[rid].last_seq == first["last_seq"]  # the poll memo lives on the Dashboard
        page = ui.diff_page(dash, _request("", "a=root&b=root", run_id=rid))
        assert page.status_code == 200 and "nonce-" in page.headers["content-security-policy"]
        with pytest.raises(ui.StoreError, match="no node 'zz'"):
            ui.calls_page(dash, _request("", run_id=rid, node_id="zz"))
    finally:
        dash.holder.close()


def test_an_absent_store_gives_an_empty_runs_list_and_a_404_compare(tmp_path):
    from verifyless.ui import app as ui

    dash = ui.Dashboard(tmp_path / "not-yet.db")
    assert ui.runs_api(dash, _request("/api/runs")).body == b"[]"
    assert ui.compare_page(dash, _request("/compare", "run=x")).status_code == 404
