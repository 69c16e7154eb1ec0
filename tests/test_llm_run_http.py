"""A whole run through a real OpenAI-compatible HTTP endpoint, then a replay with the endpoint gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from verifyless.config import load_config
from verifyless.model.scripted import ScriptedModel
from verifyless.model.testserver import TestServer
from verifyless.replay import replay_run
from verifyless.store import RunStore
from verifyless.wiring import build_engine

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "scripted" / "circle_packing.yaml"
KEY = "sk-test-never-stored-0123456789"


def test_run_over_http_records_usage_keeps_the_key_out_and_replays_without_the_endpoint(tmp_path, monkeypatch):
    db = tmp_path / "s.db"
    cfg = load_config(overrides=[
        "task=circle_packing", "screener.name=critic", "screener.options.k=3", "budget.verifications=3",
        "engine.candidates=3", "strategy.name=greedy", "strategy.options.num_drafts=1", f"store={db}",
        "roles.kind=llm", "roles.models.default=env",
    ])
    with TestServer(ScriptedModel.from_file(SCRIPT), api_key=KEY, models=["tiny"]) as server:
        monkeypatch.setenv("VERIFYLESS_BASE_URL", server.base_url)
        monkeypatch.setenv("VERIFYLESS_API_KEY", KEY)
        monkeypatch.setenv("VERIFYLESS_MODEL", "tiny")
        with RunStore(db) as store:
            engine = build_engine(cfg, store)
            try:
                result = asyncio.run(engine.run())
            finally:
                engine.executor.close()
            calls = [e.payload for e in store.events(result.run_id, kinds=["llm_call"])]
            budget = store.budget(result.run_id)
        served = len(server.requests)
    assert result.verifications == 3 and served > 0
    assert {"brief", "proposer", "implementer", "summarizer", "critic"} <= {c["role"] for c in calls}
    assert budget.tokens_in > 0 and budget.tokens_out > 0
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), f"the API key leaked into {path.name}"

    # The server is gone and the key unset: replay answers from the response cache and stored outcomes.
    monkeypatch.delenv("VERIFYLESS_API_KEY")
    with RunStore(db) as store:
        report = asyncio.run(replay_run(store, result.run_id))
    assert report.equal, report.describe()
