"""The pre-flight budget check (``verifyless.preflight``) and ``verifyless run --dry-run``."""

from __future__ import annotations

import sqlite3

from cli_runs import cli

from verifyless.config import load_config
from verifyless.preflight import COMPLETION_TOKENS, PROMPT_TOKENS, plan
from verifyless.store import RunStore


def test_the_plan_counts_expansions_calls_tokens_and_cost_from_the_price_table():
    spec = {"provider": "openai", "model": "m", "prices": {"prompt_per_mtok": 1.0, "completion_per_mtok": 2.0}}
    cfg = load_config(
        values={
            "budget.verifications": 11,
            "engine.candidates": 4,
            "engine.verify_per_expansion": 2,
            "roles.kind": "llm",
            "roles.models": {"default": spec},
            "screener.name": "random",
        }
    )
    p = plan(cfg)
    assert (p.verifications, p.expansions) == (11, 5)
    assert p.llm_calls == 2 + 5 * (1 + 2 * 4)  # brief + baseline summary; proposer + implement/summarize each
    assert p.tokens == p.llm_calls * (PROMPT_TOKENS + COMPLETION_TOKENS)
    assert p.priced and abs(p.cost - p.llm_calls * (PROMPT_TOKENS * 1.0 + COMPLETION_TOKENS * 2.0) / 1e6) < 1e-12
    assert p.warnings == ()


def test_too_small_a_budget_warns_for_screening_and_for_island_migration():
    small = plan(load_config(values={"budget.verifications": 2, "engine.verify_per_expansion": 3}))
    assert any("fewer than one expansion sends" in w for w in small.warnings)
    islands = plan(load_config(values={"budget.verifications": 6, "strategy.name": "islands"}))
    assert any("no migration will happen" in w for w in islands.warnings)
    assert not plan(load_config(values={"budget.verifications": 60, "strategy.name": "islands"})).warnings


def test_the_dry_run_prints_the_plan_exits_0_and_spends_nothing(tmp_path):
    db = tmp_path / "s.db"
    RunStore(db).close()  # an existing store, so "nothing written" is checked on a real file
    out = cli("run", "diabetes", "--dry-run", "--budget", "5", "--strategy", "islands", "--store", str(db))
    assert out.returncode == 0, out.stderr
    assert "expansions:    up to 4" in out.stdout and "no migration will happen" in out.stdout
    with sqlite3.connect(db) as conn:
        counts = [conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in ("runs", "events", "ledger")]
    assert counts == [0, 0, 0]
