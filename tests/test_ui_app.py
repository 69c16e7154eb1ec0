"""The dashboard's routes through Starlette's test client (no browser): pages, JSON API, headers, read-only."""

from __future__ import annotations

import hashlib

import pytest

from report_fixtures import PAYLOADS, SECRET, cached_build
from verifyless.report import data
from verifyless.report.reader import open_readonly

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


def test_polled_progress_matches_a_full_read(client):
    c, built = client
    rid = built["plain"]
    first, second = c.get(f"/api/runs/{rid}/progress").json(), c.get(f"/api/runs/{rid}/progress").json()
    with open_readonly(built["store"]) as st:
        full = data.progress(st, rid)
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
    ):
        text = c.get(url).text
        assert SECRET not in text and PAYLOADS[0] not in text and PAYLOADS[1] not in text, url
    assert "&lt;script&gt;window.__xss" in c.get(f"/runs/{hostile}").text
