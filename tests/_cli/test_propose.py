"""`verifyless propose`: offline idea-space roles, scripted LLM roles, and a real endpoint set by three env vars."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console

from verifyless._cli.propose import propose_for_baseline
from verifyless.model.scripted import ScriptedModel
from verifyless.model.testserver import TestServer

SCRIPTS = Path(__file__).resolve().parents[2] / "examples" / "scripted"


def _propose(task: str, model: str | None, n: int = 3):
    out = io.StringIO()
    results = asyncio.run(propose_for_baseline(task, n=n, model=model, seed=0, console=Console(file=out, width=120)))
    return results, out.getvalue()


@pytest.mark.parametrize("task", ["diabetes", "sunspots", "moons_torch", "circle_packing"])
def test_offline_roles_propose_on_every_builtin_task(task, monkeypatch):
    monkeypatch.delenv("VERIFYLESS_BASE_URL", raising=False)
    results, text = _propose(task, None)
    assert len(results) == 3 and all("diff" in r for r in results), results
    assert len({r["diff"] for r in results}) == 3
    assert "idea space" in text and "@@" in text


def test_scripted_model_proposes_on_an_openevolve_folder():
    results, text = _propose("circle_packing", f"scripted:{SCRIPTS / 'circle_packing.yaml'}")
    assert all("diff" in r for r in results), results
    assert "Approach" not in text or "variant" in text


def test_endpoint_from_three_environment_variables(monkeypatch):
    script = ScriptedModel.from_file(SCRIPTS / "diabetes.yaml")
    with TestServer(script, api_key="sk-test-123", models=["tiny"]) as server:
        monkeypatch.setenv("VERIFYLESS_BASE_URL", server.base_url)
        monkeypatch.setenv("VERIFYLESS_API_KEY", "sk-test-123")
        monkeypatch.setenv("VERIFYLESS_MODEL", "tiny")
        results, _ = _propose("diabetes", None, n=2)
        roles_seen = {c.request.role for c in script.calls}
    assert all("diff" in r for r in results), results
    assert {"proposer", "implementer", "summarizer"} <= roles_seen
