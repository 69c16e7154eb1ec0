"""docs/configuration.md and the runtime agree on every component's defaults (issue 48 item 4).

Each registered screener, strategy and the local executor is built from its default options (a
required option given its smallest value) the way a run builds it, and every option whose documented
default is a value (not None, which means "resolved at run time") must be the value the built component
runs with: the component's attribute of that name when it is a plain value (``rank_by``, ``k``,
``min_pairs``...), else the value in the options it holds, and its reply-health limits. A default restated in a
constructor or overridden in a factory (the surrogate's ``rank_by`` did both) fails here.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import pytest

from verifyless import config_doc
from verifyless.executors.registry import EXECUTORS, build_executor
from verifyless.model.scores import LabelScore
from verifyless.model.scripted import ScriptedModel
from verifyless.registry import REQUIRED, option_fields
from verifyless.screen.health import ReplyHealth
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.search.registry import STRATEGIES, build_strategy

REQUIRED_VALUES = {
    ("screener", "ensemble"): {"members": ["default"]},
    ("screener", "arbiter"): {"members": ["default"]},
}
NOT_VALUES = {"model"}  # an option naming a model key; the built component holds the model itself
PLAIN = (bool, int, float, str, list, tuple, dict)  # an attribute that is a value (not a stage, rule or method)


class ProbingModel(ScriptedModel):
    """A scripted model that can also read verdict probabilities (what critic-probs needs)."""

    async def label_score(self, messages: Any, prefix: str, *, tag: str, labels: Any, role: str) -> LabelScore:
        raise AssertionError("not called: the component is only built")


def _learner(model: Any, **options: Any) -> Any:
    return options  # critic-ttl hands its learner its LoRA options; this one keeps them


def _documented(kind: str, name: str) -> dict[str, str]:
    """Option -> the default cell of component ``name``'s table in docs/configuration.md."""
    text = config_doc.DOC.read_text()
    head = f"### {kind.title()} options"
    section = text.split(head, 1)[1].split("\n### ", 1)[0]
    table = section.split(f"`{name}` (", 1)[1].split("\n\n", 2)[1]
    return {m[1]: m[2] for m in re.finditer(r"^\| `([^`]+)` \| [^|]* \| ([^|]*) \|", table, re.M)}


def _build(kind: str, name: str, options: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    if kind == "strategy":
        return build_strategy(name, options, random.Random(0))
    if kind == "executor":
        return build_executor(name, options)
    monkeypatch.setenv("VERIFYLESS_CRITIC_ENCODER", "hashing")  # critic-rm's auto encoder without torch
    model = ProbingModel(replies=["x"])
    return build_screener(name, models={"default": model}, options=options, sandbox=object(), learner=_learner, seed=0)


def _components() -> list[tuple[str, str]]:
    found = [("screener", n) for n in SCREENERS] + [("strategy", n) for n in STRATEGIES]
    return found + [("executor", n) for n in EXECUTORS if n == "local"]  # ray needs a cluster to be built


def _registry(kind: str) -> Any:
    return {"screener": SCREENERS, "strategy": STRATEGIES, "executor": EXECUTORS}[kind]


def _held(component: Any, options_type: type) -> Any:
    """The options a component keeps (whole), or None when it keeps none of that type."""
    for attr in ("probs_options", "options", "config"):
        held = getattr(component, attr, None)
        if isinstance(held, options_type):
            return held
    return None


@pytest.mark.parametrize(("kind", "name"), _components())
def test_the_reference_and_the_built_component_agree_on_every_default(kind, name, monkeypatch):
    registry = _registry(kind)
    options = registry.validate(name, REQUIRED_VALUES.get((kind, name), {}))
    component = _build(kind, name, options, monkeypatch)
    documented = _documented(kind, name)
    fields = option_fields(registry.get(name).options)
    assert set(documented) == set(fields), f"{kind} {name}: the reference lists other options than the model"
    held = _held(component, type(options))
    wrong = []
    for option, (_, default) in fields.items():
        if default is REQUIRED or default is None or option in NOT_VALUES:
            continue  # required, or None: "resolved when built" (the screener's name, the engine's n_verify)
        if isinstance(getattr(component, option, None), PLAIN):
            runs_with = getattr(component, option)
        elif held is not None:
            runs_with = getattr(held, option)
        else:
            wrong.append(f"{option}: not kept by the built {type(component).__name__}")
            continue
        if json.loads(documented[option].strip("`")) != json.loads(json.dumps(runs_with, default=str)):
            wrong.append(f"{option}: documented {documented[option]}, runs with {runs_with!r}")
    health = getattr(component, "health", None)
    if isinstance(health, ReplyHealth) and "min_parse_rate" in fields:
        limits = {"min_parse_rate": health.min_parse_rate, "max_unparsed_screenings": health.max_unparsed_screenings}
        wrong += [f"health {k}: {v!r}" for k, v in limits.items() if v != fields[k][1]]
    assert not wrong, f"{kind} {name} does not run with its documented defaults: {wrong}"


def test_the_surrogate_runs_with_its_one_documented_default():
    surrogate = build_screener("surrogate", models={})
    assert surrogate.rank_by == "fitness" == _documented("screener", "surrogate")["rank_by"].strip('`"')
