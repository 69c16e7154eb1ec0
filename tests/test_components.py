"""Conformance of every registered component, over the one map ``verifyless.components.COMPONENTS``."""

from __future__ import annotations

import typing

import pytest
from pydantic import BaseModel

from verifyless.components import COMPONENTS, component, registry_of
from verifyless.config import RolesConfig, RunConfig, load_config
from verifyless.errors import ConfigError
from verifyless.registry import Component, Registry, option_fields

EVERY = [(kind, name) for kind, registry in COMPONENTS.items() for name in registry.names()]


def test_the_map_holds_every_kind():
    assert set(COMPONENTS) == {"screener", "strategy", "executor", "provider", "roles"}
    assert {"critic", "surrogate", "adaptive"} <= set(COMPONENTS["screener"].names())
    assert set(COMPONENTS["roles"]) == set(typing.get_args(RolesConfig.model_fields["kind"].annotation))


@pytest.mark.parametrize("kind, name", EVERY, ids=[f"{k}:{n}" for k, n in EVERY])
def test_every_component_is_found_helped_and_validates_its_defaults(kind, name):
    registry = COMPONENTS[kind]
    found = component(kind, name)
    assert found is registry.get(name) and found.name == name
    assert found.help.strip() and "\n" not in found.help
    if found.options is None:
        assert registry.validate(name, {}) is None
        with pytest.raises(ConfigError, match=f"{kind} '{name}' takes no options"):
            registry.validate(name, {"anything": 1})
        return
    required = [key for key in option_fields(found.options) if not _has_default(found.options, key)]
    if required:  # no complete defaults: asking for none names the first required option
        with pytest.raises(ConfigError, match=f"option {required[0]} is required"):
            registry.validate(name, {})
        return
    defaults = registry.validate(name, {})
    again = registry.validate(name, _as_options(defaults))
    assert again == defaults, "an options model must accept its own defaults back"
    with pytest.raises(ConfigError) as caught:
        registry.validate(name, {"no_such_option": 1})
    message = str(caught.value)
    assert "\n" not in message
    head = f"bad options for {kind} '{name}': unknown option 'no_such_option'; "
    assert message.startswith(head + ("valid options are [" if found.options.model_fields else "it takes no options"))


def _has_default(options: type[BaseModel], key: str) -> bool:
    return not options.model_fields[key].is_required()


def _as_options(options: BaseModel) -> dict[str, object]:
    return options.model_dump()


@pytest.mark.parametrize("kind", list(COMPONENTS))
def test_an_unknown_name_is_one_line_listing_the_names(kind):
    registry = COMPONENTS[kind]
    with pytest.raises(ConfigError) as caught:
        component(kind, "no-such-name")
    names = sorted(registry.names())
    expected = ", ".join(map(repr, names[:-1])) + f" or {names[-1]!r}"
    assert str(caught.value) == f"{registry.name_key}='no-such-name' is unknown: use {expected}"


def test_an_unknown_kind_names_the_kinds():
    with pytest.raises(ConfigError, match="component kind 'widget' is unknown: use 'screener', 'strategy'"):
        registry_of("widget")


def test_a_bad_value_names_the_option_its_help_the_fix_and_the_default():
    with pytest.raises(ConfigError) as caught:
        COMPONENTS["screener"].validate("critic", {"k": 0})
    message = str(caught.value)
    assert message.startswith("bad options for screener 'critic': option k=0: ")
    assert "(critiques sampled per candidate" in message
    assert "fix screener.options.k or remove it to use the default 16" in message
    with pytest.raises(ConfigError, match=r"option tau_branch='three': .*fix strategy.options.tau_branch or remove it"):
        COMPONENTS["strategy"].validate("mcgs", {"tau_branch": "three"})


def test_several_problems_give_one_line_each():
    with pytest.raises(ConfigError) as caught:
        COMPONENTS["strategy"].validate("mcgs", {"c0": "x", "tau_branch": "y"})
    head, *lines = str(caught.value).splitlines()
    assert head == "bad options for strategy 'mcgs' (see docs/configuration.md):"
    assert [line.split("=")[0].strip() for line in lines] == ["option c0", "option tau_branch"]


def test_the_configuration_checks_names_through_the_registries():
    for override, message in [
        ("screener.name=nope", "screener.name='nope' is unknown: use 'adaptive'"),
        ("executor.name=slurm", "executor.name='slurm' is unknown: use 'local' or 'ray'"),
        ("strategy.name=beam", "strategy.name='beam' is unknown: use 'greedy'"),
        ("roles.kind=menu", "roles.kind='menu' is unknown: use 'llm' or 'space'"),
        ("executor.options.cap=1", "bad options for executor 'local': unknown option 'cap'"),
    ]:
        with pytest.raises(ConfigError) as caught:
            load_config(overrides=[override])
        assert str(caught.value).startswith(message), (override, str(caught.value))


def test_the_configuration_unions_hold_every_component_chosen_by_name():
    for kind in ("screener", "strategy", "executor"):
        for c in COMPONENTS[kind].components():
            assert c.options is not None, f"{kind} {c.name!r} needs an options type to be chosen in a config"
            if any(not _has_default(c.options, key) for key in option_fields(c.options)):
                continue
            assert getattr(RunConfig.model_validate({kind: {"name": c.name}}), kind).name == c.name
    members = {"name": "ensemble", "options": {"members": ["default"]}}
    assert RunConfig.model_validate({"screener": members}).screener.options.members == ["default"]


def test_register_adds_or_replaces_and_help_is_one_line():
    registry = Registry("widget", [Component("a", dict, None, "the first")])
    registry.register(Component("a", list, None, "replaced"))
    registry.register(Component("b", set, None, "the second"))
    assert registry.names() == ("a", "b") and registry.get("a").factory is list and list(registry) == ["a", "b"]
    assert "b" in registry and len(registry) == 2
    with pytest.raises(ValueError, match="one line of help"):
        Component("c", dict, None, "two\nlines")


@pytest.mark.parametrize(
    "name, options, have",
    [
        *((name, {}, ()) for name in ("critic", "critic-ttl", "critic-probs", "tournament", "agentic")),
        ("arbiter", {"members": ["critic"]}, ("critic",)),  # its own model: 'arbiter' or 'default'
        ("critic", {"model": "critic", "tie_break_model": "j2"}, ("critic",)),
        ("adaptive", {"screener": "critic", "options": {"model": "m9"}}, ("critic",)),
        ("cascade", {}, ("critic",)),  # the tournament stage asks for 'judge'
        ("ensemble", {"members": ["critic", "m2"], "member": "critic"}, ("critic",)),
        ("arbiter", {"model": "critic", "members": [{"screener": "tournament", "model": "m3"}]}, ("critic",)),
    ],
)
def test_the_pre_flight_model_check_refuses_what_building_the_screener_would(name, options, have):
    """``check_screener_models`` (run before a store exists) and ``build_screener`` agree on a missing model key,
    nested screeners included; with every key configured the check passes."""
    from verifyless.screen.registry import SCREENERS, build_screener, check_screener_models

    class Named:  # stands in for a configured model: here the factories only pick it by its key
        def __init__(self, name: str) -> None:
            self.name = name

    typed = SCREENERS.validate(name, options)
    models = {k: Named(k) for k in have}
    with pytest.raises(ConfigError, match="needs a model under") as checked:
        check_screener_models(name, typed, models)
    with pytest.raises(ConfigError, match="needs a model under") as built:
        build_screener(name, models=models, options=typed, sandbox=object(), learner=lambda *a, **k: None)
    missing = str(checked.value).split("needs a model under ")[1].split(", but")[0]
    assert missing in str(built.value), (str(checked.value), str(built.value))
    everything = {k: Named(k) for k in ("default", "critic", "judge", "arbiter", "j2", "m2", "m3", "m9")}
    check_screener_models(name, typed, everything)


def test_validation_problems_read_as_plain_sentences_everywhere():
    """pydantic's "Value error, " lead never reaches a user: options, the run config, model specs, settings."""
    from verifyless.model.config import make_config

    messages = []
    for attempt in (
        lambda: COMPONENTS["strategy"].validate("islands", {"exploration_ratio": 0.5}),
        lambda: load_config(overrides=["novelty.judge_lower=0.99", "novelty.threshold=0.9"]),
        lambda: make_config(provider="openai", model="m", base_url="ftp://x"),
    ):
        with pytest.raises(ConfigError) as caught:
            attempt()
        messages.append(str(caught.value))
    assert all("Value error" not in m for m in messages), messages
    assert "must sum to 1" in messages[0] and "must not exceed threshold" in messages[1]
    assert "must start with http:// or https://" in messages[2]
