"""The composition root's first step: ``wiring.resolve`` settles what the run's start decides, before any part is
built, and leaves the validated configuration as it is."""

from __future__ import annotations

import pytest
from cli_runs import in_process
from scripted_runs import SCRIPTS, run_to_end

from verifyless.config import load_config, stored_config, validate
from verifyless.errors import ConfigError
from verifyless.events import ConfigResolved, RunCreated
from verifyless.report.views.card import resolved_line, run_card
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.testing import FakeExecutor, fake_task
from verifyless.wiring import build_engine, resolve

URL = "http://127.0.0.1:9/v1"


@pytest.fixture
def endpoint(monkeypatch):
    monkeypatch.setenv("VERIFYLESS_BASE_URL", URL)
    monkeypatch.setenv("VERIFYLESS_MODEL", "m1")
    monkeypatch.setenv("VERIFYLESS_MEMORY_EMBEDDER", "hashing")
    monkeypatch.setenv("VERIFYLESS_CRITIC_ENCODER", "hashing")


def llm_config(tmp_path, *more: str):
    return load_config(
        overrides=[
            "roles.kind=llm",
            "strategy.name=mcgs",
            f"store={tmp_path / 's.db'}",
            "budget.verifications=1",
            *more,
        ]
    )


def test_resolve_records_the_pins_beside_the_validated_config_and_leaves_it_unchanged(tmp_path, endpoint):
    cfg = llm_config(tmp_path, "engine.final_selection=3", "novelty.enabled=true", "novelty.judge=true")
    before = cfg.model_dump()
    with RunStore(tmp_path / "s.db") as store:
        resolved = resolve(cfg, store, fake_task())
    assert cfg.model_dump() == before  # nothing resolved is written back into what was validated
    assert "default" not in cfg.roles.models and cfg.engine.memory_embedder == "auto"
    assert resolved.config.roles.models["default"] == {"provider": "openai", "model": "m1", "base_url": URL}
    assert resolved.config.engine.memory_embedder == "hashing"
    inner = resolved.config.screener.options.options  # the default screener: adaptive around critic-rm
    assert (inner["warm"], inner["encoder"]) == ("cold", "hashing")  # an empty store: nothing to warm-start from
    assert (resolved.final_judge, resolved.novelty_judge) == ("default", "default")
    assert resolved.pins == {
        "roles.models.default": {"provider": "openai", "model": "m1", "base_url": URL},
        "engine.memory_embedder": "hashing",
        "screener.options.options.warm": "cold",
        "screener.options.options.encoder": "hashing",
        "screener.options.options.gate": "evidence",  # a new run's critic ranks once its evidence says so
        "screener.options.sizing": "evidence",  # and its safety net audits by the evidence (issue 55)
    }


def test_the_engine_gets_the_configuration_as_validated_and_the_judge_resolve_chose(tmp_path, endpoint):
    cfg = llm_config(
        tmp_path, "roles.models.judge=scripted:" + str(tmp_path / "judge.yaml"), "engine.final_selection=2"
    )
    (tmp_path / "judge.yaml").write_text("mode: rules\nname: the-judge\nrules: []\n")
    with RunStore(tmp_path / "s.db") as store:
        engine = build_engine(cfg, store, task=fake_task(), replay_executor=FakeExecutor())
        resolved = resolve(cfg, store, fake_task())
        again = resolve(resolved.config, store, fake_task())  # a resume starts from the configuration in force
    assert engine.config == cfg and engine.resolved == resolved.pins
    assert "roles.models.default" in resolved.pins and "roles.models.judge" not in resolved.pins  # a file: no pin
    assert again.pins == {} and again.config == resolved.config  # nothing is left to resolve a second time
    assert resolved.final_judge == "judge" and engine.lifecycle.final_judge.name == "the-judge"


def test_a_new_run_stores_its_configuration_as_given_and_what_was_resolved_beside_it(
    tmp_path, endpoint, monkeypatch, capsys
):
    script = SCRIPTS / "diabetes.yaml"
    cfg = llm_config(tmp_path, "task=diabetes", "screener.name=critic-rm", f"roles.models.default=scripted:{script}")
    with RunStore(tmp_path / "s.db") as store:
        run_to_end(cfg, store)
        (run,) = store.runs()
        (created,) = [ev.record for ev in store.events(run.run_id, RunCreated)]
        pins = [ev.record.pins for ev in store.events(run.run_id, ConfigResolved)]
        in_force = stored_config(store, run.run_id)
        assert created.config == cfg.model_dump(mode="json")  # as given: nothing written into it
        assert pins == [
            {
                "engine.memory_embedder": "hashing",
                "screener.options.warm": "cold",
                "screener.options.encoder": "hashing",
                "screener.options.gate": "evidence",
            }
        ]
        assert (
            in_force["engine"]["memory_embedder"] == "hashing" and run.config["engine"]["memory_embedder"] == "hashing"
        )
        assert (
            in_force["screener"]["options"]
            == run.config["screener"]["options"]
            == {"warm": "cold", "encoder": "hashing", "gate": "evidence"}
        )
        assert resolve(validate(in_force), store, load_task("diabetes")).pins == {}  # what a resume builds from
        assert run_card(store, run.run_id)["resolved"] == pins[0]
    shown = in_process(monkeypatch, capsys, "show", run.run_id, "--store", str(tmp_path / "s.db")).stdout
    assert "resolved at the start: engine.memory_embedder = hashing; screener.options.warm = cold;" in shown


def test_a_missing_judge_is_refused_before_any_part_is_built(tmp_path):
    cfg = load_config(overrides=[f"store={tmp_path / 's.db'}", "engine.final_selection=3"])  # idea space: no models
    with RunStore(tmp_path / "s.db") as store:
        with pytest.raises(ConfigError, match="final_selection needs a judge model"):
            resolve(cfg, store, fake_task())
        with pytest.raises(ConfigError, match="final_selection needs a judge model"):
            build_engine(cfg, store, task=fake_task(), replay_executor=FakeExecutor())
        assert store.runs() == []


def test_the_line_names_each_pin_and_is_absent_for_runs_stored_before_the_event():
    pinned = {
        "roles.models.default": {"provider": "openai", "model": "m1", "base_url": URL},
        "engine.memory_embedder": "x",
    }
    assert (
        resolved_line(pinned)
        == f"resolved at the start: roles.models.default = m1 at {URL}; engine.memory_embedder = x"
    )
    assert resolved_line({}) == "resolved at the start: nothing (the configuration named every choice)"
    assert resolved_line(None) is None
    digest = "ab12" * 16
    assert (
        resolved_line({"screener.options.warm": digest})
        == "resolved at the start: screener.options.warm = ab12ab12ab12"
    )
