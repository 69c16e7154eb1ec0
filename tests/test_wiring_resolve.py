"""The composition root's first step: ``wiring.resolve`` settles what the run's start decides, before any part is
built, and leaves the validated configuration as it is."""

from __future__ import annotations

import pytest

from verifyless.config import load_config
from verifyless.errors import ConfigError
from verifyless.store import RunStore
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


def test_the_configuration_a_run_stores_is_the_resolved_one_and_it_resolves_to_itself(tmp_path, endpoint):
    cfg = llm_config(
        tmp_path, "roles.models.judge=scripted:" + str(tmp_path / "judge.yaml"), "engine.final_selection=2"
    )
    (tmp_path / "judge.yaml").write_text("mode: rules\nname: the-judge\nrules: []\n")
    with RunStore(tmp_path / "s.db") as store:
        engine = build_engine(cfg, store, task=fake_task(), replay_executor=FakeExecutor())
        resolved = resolve(cfg, store, fake_task())
        again = resolve(engine.config, store, fake_task())  # a resume starts from the stored configuration
    assert engine.config == resolved.config
    assert again.config == resolved.config  # resolving a stored configuration changes nothing
    assert resolved.final_judge == "judge" and engine.lifecycle.final_judge.name == "the-judge"


def test_a_missing_judge_is_refused_before_any_part_is_built(tmp_path):
    cfg = load_config(overrides=[f"store={tmp_path / 's.db'}", "engine.final_selection=3"])  # idea space: no models
    with RunStore(tmp_path / "s.db") as store:
        with pytest.raises(ConfigError, match="final_selection needs a judge model"):
            resolve(cfg, store, fake_task())
        with pytest.raises(ConfigError, match="final_selection needs a judge model"):
            build_engine(cfg, store, task=fake_task(), replay_executor=FakeExecutor())
        assert store.runs() == []
