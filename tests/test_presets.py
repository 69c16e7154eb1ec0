"""A preset per paper (issue 47, item 6): each resolves to the paper's constants, is listed and printed."""

from __future__ import annotations

import asyncio

import pytest
from typer.testing import CliRunner

from verifyless._cli.app import app
from verifyless.config import load_config
from verifyless.errors import ConfigError
from verifyless.presets import PRESETS, preset_text


def test_critic_paper_preset_is_the_papers_openevolve_setup():
    cfg = load_config(preset="critic-paper")
    s, e, o = cfg.screener, cfg.engine, cfg.strategy.options
    assert cfg.strategy.name == "islands" and (o.n_islands, o.migration_interval) == (3, 4)
    assert s.name == "critic" and (s.options.k, s.options.temperature, s.options.tie_break) == (16, 0.7, "none")
    assert (e.candidates, e.expansions_per_round, e.verify_per_expansion, e.repair_attempts) == (16, 1, 1, 0)
    assert e.max_rounds == o.n_islands * 10 and cfg.budget.verifications == 30 + 1  # 30 selected ideas + baseline
    assert e.uncertainty_threshold == 0.25 and not e.verify_uncertain and not e.pipeline
    llm = cfg.roles.llm
    assert cfg.roles.kind == "llm" and (llm.proposer_temperature, llm.summarizer_temperature) == (0.8, 0.4)
    assert (llm.summary_min_words, llm.summary_max_words, llm.proposer_mode) == (120, 200, "independent")


def test_aira_rpm_preset_is_greedy_with_a_pairwise_tournament_submitting_the_best_validation_node():
    cfg = load_config(preset="aira-rpm")  # the paper's table: tests/test_presets_papers.py
    assert cfg.strategy.name == "greedy" and cfg.strategy.options.debug_prob == 1.0
    assert cfg.screener.name == "tournament" and cfg.screener.options.show == "code"
    assert cfg.screener.options.context_nodes is None  # BFS context: as many nodes as fit
    assert cfg.engine.candidates == 15 and cfg.engine.final_selection is None and cfg.engine.repair_attempts == 0


# MLEvolve's values, each with where the paper states it (seeds/004: Sections 2.1-2.7 and 3).
MLEVOLVE_PAPER = [
    ("strategy.name", "mcgs", "2.1: progressive MCGS over a graph with reference edges"),
    ("strategy.options.horizon", None, "2.1, Eqs. 3-4: c(t) and w(t) anneal over the run"),
    ("strategy.options.wall_pacing", True, "3: the run's budget is wall-clock (12 h) as well as 500 steps"),
    ("strategy.options.submit_ensemble", True, "2.6: the final submission is an ensemble of the top-K nodes"),
    ("strategy.options.ensemble_tasks", "all", "2.6: the ensemble is the final answer on every task"),
    ("strategy.options.ensemble_answer", True, "2.6: the submission (the run's answer) is the ensemble"),
    ("roles.implement_mode", "stage", "2.3: Base / Stepwise / Diff coder modes chosen by stage"),
    ("roles.llm.proposer_temperature", 1.0, "2.3: every agent at temperature 1.0"),
    ("roles.llm.implementer_temperature", 1.0, "2.3: every agent at temperature 1.0"),
    ("roles.llm.summarizer_temperature", 1.0, "2.3: every agent at temperature 1.0"),
    ("roles.llm.brief_temperature", 1.0, "2.3: every agent at temperature 1.0"),
    ("engine.candidates", 1, "2.3: each expansion makes one child, which is executed"),
    ("screener.name", "random", "2.3: no screening (one candidate: the random pick is the child)"),
    ("engine.memory", True, "2.5: retrospective memory"),
    ("engine.repair_attempts", 3, "2.7: the Debug agent retries up to a limit (the limit is ours)"),
    ("budget.verifications", 500, "3: at most 500 expansion steps per task"),
]


def _dotted(cfg, path: str):
    value = cfg
    for part in path.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize(("path", "paper", "where"), MLEVOLVE_PAPER, ids=[p for p, _, _ in MLEVOLVE_PAPER])
def test_mlevolve_preset_matches_the_papers_table(path, paper, where):
    assert _dotted(load_config(preset="mlevolve"), path) == paper, where


def test_mlevolve_preset_is_progressive_mcgs_with_memory_and_the_ensemble():
    cfg = load_config(preset="mlevolve")
    o = cfg.strategy.options
    assert cfg.strategy.name == "mcgs" and o.horizon is None and o.w_horizon is None  # paced by the run
    assert o.submit_ensemble and o.top_k == 5 and cfg.engine.memory is True
    assert cfg.engine.candidates == 1 and cfg.roles.llm.proposer_temperature == 1.0
    assert cfg.budget.verifications == 500


def test_flags_and_overrides_win_over_a_preset():
    cfg = load_config(overrides=["engine.candidates=4"], values={"budget.verifications": 12}, preset="critic-paper")
    assert cfg.engine.candidates == 4 and cfg.budget.verifications == 12 and cfg.strategy.name == "islands"


def test_an_unknown_preset_names_the_known_ones():
    with pytest.raises(ConfigError, match="critic-paper"):
        load_config(preset="nope")


def test_presets_are_listed_and_printed_by_the_cli():
    runner = CliRunner()
    listed = runner.invoke(app, ["components", "preset"])
    assert listed.exit_code == 0 and all(name in listed.output for name in PRESETS)
    out = runner.invoke(
        app,
        ["run", "diabetes", "--preset", "mlevolve", "--dry-run", "roles.kind=space"],
    )
    assert out.exit_code == 0, out.output
    assert "preset mlevolve" in out.output and "submit_ensemble: true" in out.output
    assert preset_text("mlevolve").splitlines()[0] in out.output


def test_the_critic_paper_preset_spends_exactly_the_papers_30_verifications(tmp_path):
    """3 islands x 10 rounds, one verified idea per island round, no repairs; the baseline on top (item 3)."""
    import asyncio
    import random

    from verifyless.engine import Engine
    from verifyless.screen.registry import build_screener
    from verifyless.search.registry import build_strategy
    from verifyless.store import RunStore
    from verifyless.testing import FakeExecutor, fake_roles, fake_task

    cfg = load_config(preset="critic-paper", overrides=["engine.candidates=4"])  # a random pick stands in
    strategy = build_strategy("islands", cfg.strategy.options, random.Random(0))
    with RunStore(tmp_path / "s.db") as store:
        engine = Engine(
            task=fake_task(),
            roles=fake_roles(),
            screener=build_screener("random", models={}, seed=0),
            strategy=strategy,
            executor=FakeExecutor(),
            store=store,
            config=cfg,
        )
        result = asyncio.run(engine.run())
        paid = store.budget(result.run_id).verifications
        screenings = list(store.events(result.run_id, kinds=["screening"]))
    assert result.rounds == 30 and paid == 31 and len(screenings) == 30  # the 30 plus the baseline
    assert all(len(ev.payload["to_verify"]) == 1 for ev in screenings)
    assert strategy.generations == [10, 10, 10]


def test_a_short_mlevolve_run_answers_with_its_ensemble_and_codes_by_stage(tmp_path):
    """The preset end to end with the scripted model on diabetes (a small budget): drafts are coded as full
    rewrites, the run's answer is the top-K ensemble, charged as evaluator seconds (issue 56, items 3 and 7)."""
    from scripted_runs import Recorder, scripted_overrides

    from verifyless.roles.staged import StagedImplementer
    from verifyless.store import RunStore
    from verifyless.wiring import build_engine

    overrides = scripted_overrides(tmp_path, "diabetes", budget=5, candidates=1)
    keep = [o for o in overrides if not o.startswith(("strategy.", "engine.candidates"))]
    cfg = load_config(overrides=[*keep, "engine.memory_embedder=hashing"], preset="mlevolve")
    with RunStore(cfg.store) as store:
        engine = build_engine(cfg, store)
        implementer = engine.roles.implementer
        assert isinstance(implementer, StagedImplementer)
        implementer.full.model = recorder = Recorder(implementer.full.model)
        try:
            result = asyncio.run(engine.run())
        finally:
            engine.executor.close()
        (sub,) = [e for e in store.events(result.run_id, kinds=["submission"])]
        drafts = [r for r in store.node_rows(result.run_id) if r["operator"] == "draft"]
    assert result.answer == "ensemble" and result.answer_score == sub.payload["score"]
    assert sub.payload["status"] == "ok" and sub.charge.evaluator_seconds == pytest.approx(sub.payload["seconds"])
    assert drafts and len(recorder.requests) >= len(drafts)  # every draft went to the Base (full rewrite) coder
    assert all(r.temperature == 1.0 for r in recorder.requests)
