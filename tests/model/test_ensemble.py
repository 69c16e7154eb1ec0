"""A model ensemble's bandit: calls shift to the member whose children improve, and replays identically."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from pydantic import ValidationError

from verifyless.errors import ConfigError
from verifyless.model.base import Message, Model, ModelRequest
from verifyless.model.ensemble import BanditOptions, ModelEnsemble
from verifyless.model.scripted import Rule, ScriptedModel

REQUEST = ModelRequest(messages=(Message("user", "propose an idea"),), role="proposer")


def scripted(name: str) -> ScriptedModel:
    return ScriptedModel(rules=[Rule(replies=[f"an idea from {name}"], repeat=True)], name=name)


def ensemble(seed: int = 0, **options) -> ModelEnsemble:
    members = {"good": scripted("good"), "bad": scripted("bad")}
    return ModelEnsemble(members, random.Random(seed), BanditOptions(**options))


def run(ens: ModelEnsemble, calls: int, rates: dict[str, float], seed: int = 1, costs=None) -> list[str]:
    """``calls`` calls, each observed at once: the child improves with its member's rate."""
    world = random.Random(seed)
    answered = []
    for _ in range(calls):
        reply = asyncio.run(ens.generate(REQUEST))
        model = ens.last_choice.model
        assert reply.text == f"an idea from {model}"  # the chosen member answered, and the choice says which
        answered.append(model)
        ens.observe(model, world.random() < rates[model], (costs or {}).get(model, 0.0))
    return answered


@pytest.mark.parametrize("rule", ["ucb1", "thompson"])
def test_calls_shift_to_the_member_whose_children_improve_and_replay_identically(rule):
    rates = {"good": 0.7, "bad": 0.1}
    first = ensemble(seed=3, rule=rule)
    answered = run(first, 80, rates)
    assert answered[-40:].count("good") >= 30
    stats = {s.model: s for s in first.stats()}
    assert stats["good"].calls > stats["bad"].calls and stats["good"].share == pytest.approx(stats["good"].calls / 80)
    assert stats["good"].rate is not None and stats["good"].rate > stats["bad"].rate

    again = ensemble(seed=3, rule=rule)
    run(again, 80, rates)
    assert [c.to_dict() for c in again.choices] == [c.to_dict() for c in first.choices]


def test_each_choice_records_the_rule_the_scores_and_why():
    ens = ensemble()
    run(ens, 3, {"good": 1.0, "bad": 0.0})
    first, second, third = ens.choices
    assert (first.model, second.model) == ("good", "bad")  # ucb1 tries each member once, in order
    assert first.reason == "ucb1: good had not been tried" and first.role == "proposer"
    assert third.model == "good" and third.scores["good"] > third.scores["bad"]
    assert "improved 1 of 1 outcomes" in third.reason and third.index == 2
    json.dumps([c.to_dict() for c in ens.choices])  # an event payload


def test_ucb_spreads_a_batch_made_before_any_outcome():
    ens = ensemble()
    assert [ens.choose().model for _ in range(4)] == ["good", "bad", "good", "bad"]


def test_concurrent_calls_each_get_their_own_choice():
    ens = ensemble()

    async def four():
        return await asyncio.gather(*(ens.generate_with_choice(REQUEST) for _ in range(4)))

    pairs = asyncio.run(four())
    assert [choice.model for _, choice in pairs] == ["good", "bad", "good", "bad"]
    assert all(reply.text == f"an idea from {choice.model}" for reply, choice in pairs)
    assert [c.index for _, c in pairs] == [0, 1, 2, 3] and ens.choices == [c for _, c in pairs]


def test_cost_weighting_moves_calls_to_the_cheaper_of_equal_members():
    rates = {"good": 0.5, "bad": 0.5}
    costs = {"good": 10.0, "bad": 1.0}
    plain = run(ensemble(seed=2, rule="thompson"), 120, rates, costs=costs)
    weighted = run(ensemble(seed=2, rule="thompson", cost_weight=1.0), 120, rates, costs=costs)
    assert weighted.count("bad") > 90 and weighted.count("bad") > plain.count("bad") + 20


def test_thompson_depends_on_the_seed_only_through_the_injected_rng():
    rates = {"good": 0.5, "bad": 0.5}
    choices = {seed: run(ensemble(seed=seed, rule="thompson"), 40, rates) for seed in (1, 2)}
    assert choices[1] != choices[2]
    assert run(ensemble(seed=1, rule="thompson"), 40, rates) == choices[1]


def test_the_ensemble_is_a_model_and_checks_its_inputs():
    ens = ensemble()
    assert isinstance(ens, Model) and ens.name == "ensemble" and ens.last_choice is None
    with pytest.raises(ConfigError, match="no member 'other'; members: good, bad"):
        ens.observe("other", True)
    with pytest.raises(ConfigError, match="at least one member"):
        ModelEnsemble({}, random.Random(0))
    with pytest.raises(ValidationError):
        BanditOptions(rule="epsilon")
