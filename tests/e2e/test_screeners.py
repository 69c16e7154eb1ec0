"""Every screener by name through configuration, on a built-in task, with scripted LLM roles and the real sandbox."""

from __future__ import annotations

import pytest
from scripted_runs import run_to_end, scripted_overrides

from verifyless.config import load_config
from verifyless.events import Screened
from verifyless.screen.health import health_by_screener
from verifyless.store import RunStore

SCREENERS = [
    ("critic", ["screener.options.k=4", "engine.final_selection=3", "budget.verifications=4"]),
    ("tournament", ["screener.options.context_nodes=3"]),
    ("cascade", ["screener.options.m=2", "screener.options.critic={k: 3}"]),
    ("ensemble", ["screener.options.members=[{screener: critic, k: 3}, {screener: tournament}]"]),
    ("arbiter", ["screener.options.members=[{screener: critic, k: 3}, {screener: tournament}]"]),
    ("agentic", ["screener.options.budget_s=20", "screener.options.theta_s=1", "screener.options.max_pilots=2"]),
    ("surrogate", []),
    ("random", []),
    ("oracle", []),
]


@pytest.mark.parametrize("name, options", SCREENERS, ids=[s for s, _ in SCREENERS])
def test_screener_runs_by_name_with_scripted_llm_roles(tmp_path, name, options):
    overrides = scripted_overrides(tmp_path, "circle_packing", budget=3, candidates=3)
    cfg = load_config(overrides=[*overrides, f"screener.name={name}", *options])
    with RunStore(cfg.store) as store:
        result = run_to_end(cfg, store)
        assert result.verifications == cfg.budget.verifications
        if cfg.engine.final_selection:
            (final,) = [e.payload for e in store.events(result.run_id, kinds=["final_selection"])]
            assert final["winner"] == result.best_id and len(final["matches"]) == 30
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        assert screenings and all(s["screener"] for s in screenings)
        assert all(set(s["chosen"]) <= set(s["ranking"]) for s in screenings)
        if name not in ("random", "oracle", "surrogate"):  # every LLM screener records its replies' parse health
            stored = [e.record.screening for e in store.events(result.run_id, Screened)]
            assert health_by_screener(stored)[name]["total"] > 0
        calls = [e.payload["role"] for e in store.events(result.run_id, kinds=["llm_call"])]
        assert {"brief", "proposer", "implementer", "summarizer"} <= set(calls)
        statuses = {r["status"] for r in store.node_rows(result.run_id)}
        assert "ok" in statuses
