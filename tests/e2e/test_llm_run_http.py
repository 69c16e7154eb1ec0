"""A whole run through a real OpenAI-compatible HTTP endpoint, then a replay with the endpoint gone."""

from __future__ import annotations

import asyncio
from pathlib import Path

from scripted_runs import run_to_end

from verifyless.config import load_config
from verifyless.engine.replay import replay_run
from verifyless.model.scripted import ScriptedModel
from verifyless.model.testserver import TestServer
from verifyless.store import RunStore
from verifyless.wiring import build_engine

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "scripted" / "circle_packing.yaml"
KEY = "sk-test-never-stored-0123456789"


def test_run_over_http_records_usage_keeps_the_key_out_and_replays_without_the_endpoint(tmp_path, monkeypatch):
    db = tmp_path / "s.db"
    cfg = load_config(
        overrides=[
            "task=circle_packing",
            "screener.name=critic",
            "screener.options.k=3",
            "budget.verifications=3",
            "engine.candidates=3",
            "strategy.name=greedy",
            "strategy.options.num_drafts=1",
            f"store={db}",
            "roles.kind=llm",
            "roles.models.default=env",
        ]
    )
    with TestServer(ScriptedModel.from_file(SCRIPT), api_key=KEY, models=["tiny"]) as server:
        monkeypatch.setenv("VERIFYLESS_BASE_URL", server.base_url)
        monkeypatch.setenv("VERIFYLESS_API_KEY", KEY)
        monkeypatch.setenv("VERIFYLESS_MODEL", "tiny")
        with RunStore(db) as store:
            result = run_to_end(cfg, store)
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
        report = asyncio.run(replay_run(store, result.run_id, build=build_engine))
    assert report.equal, report.describe()


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_roles_block() -> dict:
    """The README's ``roles.models`` example, parsed exactly as written."""
    import re

    import yaml

    text = README.read_text()
    start = text.index("One model per role, in `run.yaml`:")
    block = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    assert block, "the README lost its roles.models example"
    return yaml.safe_load(block.group(1))


def test_the_readme_roles_models_example_runs_as_written_and_a_second_run_records_cache_hits(tmp_path, monkeypatch):
    example = readme_roles_block()
    models = example["roles"]["models"]
    assert {"default", "critic", "summarizer"} <= set(models)
    db = tmp_path / "s.db"
    monkeypatch.chdir(README.parent)  # the example's scripted path is relative to the checkout
    with TestServer(
        ScriptedModel.from_file(SCRIPT),
        api_key=KEY,
        models=[m["model"] for m in models.values() if isinstance(m, dict)],
    ) as server:
        for spec in models.values():  # point every endpoint of the example at the loopback server
            if isinstance(spec, dict):
                spec["base_url"] = server.base_url
                monkeypatch.setenv(spec["api_key_env"], KEY)
        cfg = load_config(
            values={
                "task": "circle_packing",
                "screener.name": "critic",
                "screener.options.k": 2,
                "budget.verifications": 2,
                "engine.candidates": 2,
                "strategy.name": "greedy",
                "strategy.options.num_drafts": 1,
                "store": str(db),
                "roles": example["roles"],
            }
        )
        results = []
        with RunStore(db) as store:
            for _ in range(2):
                engine = build_engine(cfg, store)
                try:
                    results.append(asyncio.run(engine.run()))
                finally:
                    engine.executor.close()
            first, second = ([e.payload for e in store.events(r.run_id, kinds=["llm_call"])] for r in results)
            second_budget = store.budget(results[1].run_id)
    by_role = {c["role"]: c["model"] for c in first}
    assert by_role["critic"] == models["critic"]["model"] and by_role["proposer"] == models["default"]["model"]
    assert by_role["summarizer"] == "scripted"
    assert first and not any(c["cached"] for c in first if c["role"] != "summarizer")
    assert second and all(c["cached"] for c in second), "a repeated run is served from the response cache"
    assert second_budget.tokens_in == second_budget.tokens_out == 0
