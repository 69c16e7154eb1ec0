"""PointwiseCritic: average-rank selection, ties, uncertainty routing, invalid samples, prompts."""

from __future__ import annotations

import asyncio
import random

import pytest
from critic_screens import VERDICT, cand, make_ctx, scripted

from verifyless.engine.routing import select
from verifyless.errors import ConfigError
from verifyless.roles.base import TaskBrief
from verifyless.screen.critic import CriticOptions, PointwiseCritic, evidence_from_critiques
from verifyless.screen.ranking import route
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.testing import SampleFnModel


def FakeModel(fn, name: str = "fake-critic") -> SampleFnModel:
    return SampleFnModel(fn, name)


def run(screener, ctx, cands):
    return asyncio.run(screener.screen(ctx, cands))


def test_ranks_by_average_label_and_verifies_the_best() -> None:
    plan = {"a": ["SmallWin"], "b": ["BigWin", "MediumWin"], "c": ["Lose", "Tie"], "d": ["Tie"]}
    model = FakeModel(scripted(plan))
    s = run(PointwiseCritic(model, CriticOptions(k=4)), make_ctx(), [cand(x) for x in "abcd"])
    assert s.ranking == ("b", "a", "d", "c")
    assert s.chosen == ("b",)
    assert s.evidence["b"].rank_value == pytest.approx(3.5)
    assert s.evidence["c"].rank_value == pytest.approx(0.5)
    assert s.evidence["b"].votes == {"improve": 1.0, "tie": 0.0, "lose": 0.0}
    assert s.evidence["c"].labels == ("Lose", "Tie", "Lose", "Tie")
    assert s.screener == "critic"


def test_k_samples_concurrent_requests_and_temperature() -> None:
    model = FakeModel(scripted({x: ["Tie"] for x in "ab"}))
    run(PointwiseCritic(model), make_ctx(), [cand("a"), cand("b")])
    assert [r.n for r in model.requests] == [16, 16]
    assert all(r.temperature == 0.7 and r.role == "critic" for r in model.requests)
    chunked = FakeModel(scripted({"a": ["Tie"]}))
    s = run(PointwiseCritic(chunked, CriticOptions(k=10, samples_per_request=4)), make_ctx(), [cand("a")])
    assert [(r.n, r.sample_offset) for r in chunked.requests] == [(4, 0), (4, 4), (2, 8)]
    assert s.evidence["a"].n_valid == 10


def test_ties_broken_by_rng_reproducibly() -> None:
    plan = {x: ["MediumWin"] for x in "abc"}
    tops = set()
    for seed in range(20):
        first = run(
            PointwiseCritic(FakeModel(scripted(plan)), CriticOptions(k=2)), make_ctx(seed), [cand(x) for x in "abc"]
        )
        again = run(
            PointwiseCritic(FakeModel(scripted(plan)), CriticOptions(k=2)), make_ctx(seed), [cand(x) for x in "abc"]
        )
        assert first.ranking == again.ranking
        tops.add(first.chosen[0])
    assert tops == {"a", "b", "c"}


def test_uncertainty_and_routing_threshold() -> None:
    # 12 improve / 4 lose of 16 -> u = 0.25 (routed); 13 / 3 -> u = 0.1875 (kept)
    plan = {"edge": ["SmallWin"] * 12 + ["Lose"] * 4, "sure": ["SmallWin"] * 13 + ["Lose"] * 3, "best": ["BigWin"]}
    critic = PointwiseCritic(FakeModel(scripted(plan)), CriticOptions(k=16))
    s = run(critic, make_ctx(), [cand(x) for x in ("edge", "sure", "best")])
    assert s.evidence["edge"].uncertainty == pytest.approx(0.25)
    assert s.evidence["sure"].uncertainty == pytest.approx(0.1875)
    assert s.evidence["best"].uncertainty == 0.0
    assert route(s.evidence["edge"].uncertainty, 0.25) and critic.route(s.evidence["edge"])
    assert not route(s.evidence["sure"].uncertainty, 0.25)
    assert route(s.evidence["sure"].uncertainty, 0.15)
    assert s.chosen == ("best",)
    assert s.evidence["edge"].detail["uncertain"] is True


def routed(screening, threshold: float = 0.25) -> tuple[str, ...]:
    """What the engine's one routing switch (engine.verify_uncertain) sends to verification."""
    return select(
        screening, slots=100, verify_uncertain=True, threshold=threshold, audit_rate=0.0, rng=random.Random(0)
    ).to_verify


def test_verify_uncertain_adds_the_uncertain_candidates() -> None:
    plan = {"edge": ["SmallWin"] * 12 + ["Lose"] * 4, "sure": ["Lose"], "best": ["BigWin"], "split": ["Tie", "Lose"]}
    critic = PointwiseCritic(FakeModel(scripted(plan)), CriticOptions(k=16), route_threshold=0.25)
    s = run(critic, make_ctx(), [cand(x) for x in ("sure", "edge", "split", "best")])
    chosen = routed(s)
    assert s.chosen == ("best",) and chosen[0] == "best"
    assert set(chosen) == {"best", "edge", "split"}
    assert list(chosen[1:]) == [c for c in s.ranking if c in {"edge", "split"}]


def test_candidate_without_valid_sample_ranks_last_and_is_uncertain() -> None:
    plan = {"junk": ["junk"], "bad": ["Lose"], "ok": ["Tie", "junk"]}
    critic = PointwiseCritic(FakeModel(scripted(plan)), CriticOptions(k=4, format_reminders=0))
    s = run(critic, make_ctx(), [cand("junk"), cand("bad"), cand("ok")])
    assert s.ranking == ("ok", "bad", "junk")
    e = s.evidence["junk"]
    assert (e.n_valid, e.n_invalid, e.uncertainty) == (0, 4, 1.0)
    assert e.detail["uncertain"] is True and e.detail["n_invalid"] == 4
    assert "junk" in routed(s)  # routed to verification because the critic produced nothing usable
    ok = s.evidence["ok"]
    assert (ok.n_valid, ok.n_invalid) == (2, 2)
    assert ok.detail["sample_labels"] == ["Tie", None, "Tie", None]
    assert ok.detail["critiques"][1].startswith("Criterion analysis...")


def test_prompt_carries_brief_and_falls_back_to_statement() -> None:
    brief = TaskBrief(understanding="Digits are 8x8 grey images.", criteria=("Feature quality", "Overfitting risk"))
    model = FakeModel(scripted({"a": ["Tie"]}))
    run(PointwiseCritic(model, CriticOptions(k=1)), make_ctx(brief=brief), [cand("a")])
    user = model.requests[0].messages[-1].content
    for text in (
        "Predict the digit class.",
        "Parent: a logistic regression.",
        "ID=a",
        "Digits are 8x8",
        "1. Feature quality",
        "2. Overfitting risk",
        "accuracy (higher is better)",
        "[IMPROVEMENT]",
        "[WINTIER]",
    ):
        assert text in user
    bare = FakeModel(scripted({"a": ["Tie"]}))
    run(PointwiseCritic(bare, CriticOptions(k=1)), make_ctx(brief=None), [cand("a")])
    user = bare.requests[0].messages[-1].content
    assert "rely on the task statement" in user and "Feature quality" not in user


def test_evidence_round_trips_to_dict() -> None:
    e = evidence_from_critiques("x", [VERDICT["BigWin"], VERDICT["junk"]])
    assert e.to_dict()["detail"]["sample_labels"] == ["BigWin", None]
    assert type(e).from_dict(e.to_dict()).labels == ("BigWin",)


def test_registry_builds_critic_and_reports_config_errors() -> None:
    model = FakeModel(scripted({}))
    critic = build_screener(
        "critic", models={"default": model}, options=SCREENERS.validate("critic", {"k": 4}), threshold=0.3
    )
    assert isinstance(critic, PointwiseCritic) and critic.k == 4 and critic.model is model
    assert critic.route_threshold == 0.3  # the engine's engine.uncertainty_threshold, handed down
    other = FakeModel(scripted({}), name="other")
    assert build_screener("critic", models={"default": model, "critic": other}).model is other
    with pytest.raises(ConfigError, match="screener.name='nope' is unknown: use 'adaptive'"):
        build_screener("nope", models={"default": model})
    with pytest.raises(ConfigError, match="needs a model"):
        build_screener("critic", models={"judge": model})
    with pytest.raises(ConfigError, match="bad options"):
        build_screener("critic", models={"default": model}, options=SCREENERS.validate("critic", {"kk": 3}))
