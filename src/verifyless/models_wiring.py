"""Models and what is built on them, for every loop: the parts below the composition root, from a RunConfig.

Models (each recorded and cached), the call recorder that stores ``llm_call`` events, the child-making
roles and the guards. A recorder reads the run's id from its owner at each call (``RunIdOf``: the
engine's and a collection's ``Ledger``, a policy run's rewarder); before the run exists it is None and
nothing is stored. The engine's composition root (``wiring.build_engine``), data collection
(``critic_data/pipeline``) and policy rewards (``train/policy/wiring``) all build their parts here, so none of
them imports another's assembly.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from verifyless.config import RunConfig
from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.events import LlmCalled, ModelChosen, ReplyParsed
from verifyless.guards import Guards
from verifyless.model import build_model
from verifyless.model.base import Model, ParseRecord
from verifyless.model.cache import ResponseCache
from verifyless.model.config import ENV_BASE_URL, ENV_MODEL, ENV_SETTINGS, OPENAI_URL, parse_spec
from verifyless.model.ensemble import ModelEnsemble
from verifyless.model.probe import unreachable
from verifyless.roles.kinds import CHILD_ROLE_KEYS, ROLE_KINDS
from verifyless.screen.registry import check_screener_models
from verifyless.store import Charge, RunStoreProtocol
from verifyless.task.base import Task

RunIdOf = Callable[[], "str | None"]  # the run's id when a call is recorded; None before the run exists

SCREEN_ROLE_KEYS = ("critic", "judge", "arbiter", "novelty_judge")  # asked for by screeners, final selection, gate


def model_keys_used(cfg: RunConfig) -> set[str]:
    """Every ``roles.models`` key something in this run may ask for.

    The child-making roles, ``default``, the screening roles (``critic``,
    ``judge``, ``arbiter``) and any key named in the screener's options (a
    ``model`` option or an ensemble's ``members``, nested specs included).
    """
    used = {"default", *CHILD_ROLE_KEYS, *SCREEN_ROLE_KEYS}
    if cfg.novelty.judge_model:
        used.add(cfg.novelty.judge_model)

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, key)
        elif isinstance(value, str) and key in ("model", "members"):
            used.add(value)

    walk(cfg.screener.options.model_dump(exclude_unset=True))
    return used


def check_model_keys(cfg: RunConfig) -> None:
    """A ``roles.models`` key nothing asks for is a ConfigError naming it (usually a typo)."""
    unused = sorted(set(cfg.roles.models) - model_keys_used(cfg))
    if unused:
        raise ConfigError(
            f"roles.models has keys nothing in this run uses: {unused}; use default, "
            f"{', '.join(CHILD_ROLE_KEYS + SCREEN_ROLE_KEYS)} or a key named in the screener's 'model'/'members' "
            "options"
        )


def build_models(cfg: RunConfig, store: RunStoreProtocol, run_id: RunIdOf, *, replay: bool = False) -> dict[str, Any]:
    """One model per ``roles.models`` key, each ``RecordedModel(CachedModel(provider))``.

    Every call, cache hits included (``cached: true``, charged nothing), is
    stored as an ``llm_call`` event once ``run_id()`` names the run (the
    first LLM call is the brief, after the run is created). Identical specs
    share one model (and its endpoint limits).
    """
    check_model_keys(cfg)
    specs = model_specs(cfg)
    if not specs:
        return {}
    cache = ResponseCache(Path(cfg.store))
    recorder = call_recorder(store, run_id)
    models: dict[str, Any] = {}
    built: dict[str, Any] = {}

    def one(spec: Any) -> Any:
        key = repr(spec)
        if key not in built:
            built[key] = build_model(
                spec,
                cache=cache,
                recorder=recorder,
                cache_mode="replay" if replay else "readwrite",
                on_parse=parse_recorder(store, run_id),
            )
        return built[key]

    for role, spec in specs.items():
        if isinstance(spec, list):
            models[role] = build_ensemble(cfg, role, [one(s) for s in spec], choice_recorder(store, run_id, role))
        else:
            models[role] = one(spec)
    return models


def model_specs(cfg: RunConfig) -> dict[str, Any]:
    """``roles.models`` with the implied ``default``: ``env`` for LLM roles when ``VERIFYLESS_BASE_URL`` or
    ``VERIFYLESS_MODEL`` is set (a ConfigError naming both ways when LLM roles have no model at all)."""
    specs = dict(cfg.roles.models)
    if "default" not in specs and cfg.roles.kind == "llm":
        if not (os.environ.get(ENV_BASE_URL) or os.environ.get(ENV_MODEL)):
            raise ConfigError(
                "roles.kind=llm needs a model: set roles.models.default (e.g. scripted:FILE or openai:MODEL) "
                "or the environment variables VERIFYLESS_BASE_URL, VERIFYLESS_API_KEY, VERIFYLESS_MODEL"
            )
        specs["default"] = "env"
    return specs


def check_final_judge(cfg: RunConfig, keys: Iterable[str]) -> None:
    """A ``ConfigError`` when ``engine.final_selection`` is on and no ``judge`` (or ``default``) model is among ``keys``."""
    if cfg.engine.final_selection is not None and not {"judge", "default"} & set(keys):
        raise ConfigError("engine.final_selection needs a judge model: set roles.models.judge or roles.models.default")


def novelty_judge_key(cfg: RunConfig, keys: Iterable[str]) -> str | None:
    """The ``roles.models`` key of the novelty gate's judge (None when it has none); a ConfigError when it is missing.

    ``novelty.judge_model``, else the ``novelty_judge`` key, else ``default``.
    """
    have = set(keys)
    if not (cfg.novelty.enabled and cfg.novelty.judge):
        return None
    key = cfg.novelty.judge_model or ("novelty_judge" if "novelty_judge" in have else "default")
    if key not in have:
        raise ConfigError(
            f"novelty.judge is on but roles.models has no {key!r} model: set roles.models.novelty_judge "
            "(or roles.models.default), or novelty.judge=false"
        )
    return key


def check_models(cfg: RunConfig) -> None:
    """What building the run's models and what asks for them would refuse, found without building a model
    or opening a store.

    Unused keys (``check_model_keys``), a model the screener (or a screener it nests) asks for and lacks
    (``screen.registry.check_screener_models``), a missing final-selection or novelty judge, specs that do
    not parse (``env`` without its variables, an unknown spec string) and scripted model files that do not
    exist are ConfigErrors, so ``run --dry-run`` refuses what the real run would, and a real run refuses it
    before it creates its store.
    """
    check_model_keys(cfg)
    specs = model_specs(cfg)
    check_screener_models(cfg.screener.name, cfg.screener.options, specs)
    check_final_judge(cfg, specs)
    novelty_judge_key(cfg, specs)
    for role, spec in specs.items():
        for one in spec if isinstance(spec, list) else [spec]:
            config = parse_spec(one)
            if config.provider == "scripted" and not Path(str(config.script)).is_file():
                raise ConfigError(
                    f"roles.models.{role}: scripted model file {config.script!r} does not exist; pass "
                    "scripted:<path to .yaml or .json> (in a --config file, relative to that file's folder)"
                )


def probe_endpoints(cfg: RunConfig) -> None:
    """``ModelUnavailable`` (exit 6) naming the first ``roles.models`` endpoint where nothing answers
    (``model.probe.unreachable``), so that a run finds a dead endpoint before it pays for a verification.
    Scripted and local models have no endpoint."""
    for role, spec in model_specs(cfg).items():
        for one in spec if isinstance(spec, list) else [spec]:
            config = parse_spec(_pinned(one))
            if config.provider != "openai":
                continue
            url = config.base_url or OPENAI_URL
            why = unreachable(url)
            if why:
                raise ModelUnavailable(
                    f"roles.models.{role}: the endpoint {url} does not answer ({why}); start it or fix "
                    f"roles.models.{role}, then run again (nothing was paid)"
                )


def endpoint_pins(cfg: RunConfig) -> dict[str, Any]:
    """``roles.models.<role>`` -> the pinned spec, for every model spec of ``cfg`` that reads the environment.

    ``env``, ``openai:MODEL`` and an ``openai`` mapping without ``base_url`` take their endpoint from
    ``VERIFYLESS_BASE_URL`` / ``VERIFYLESS_MODEL`` when the run starts; the pinned spec (``{provider:
    openai, model, base_url}`` plus the mapping's own settings) is what the run records (``wiring.resolve``),
    so ``replay`` and ``--resume`` reach the same endpoint and response cache with no variable set. The key is
    never written: a spec holds only the *name* of its variable (``api_key_env``). A spec already pinned pins to
    itself and is left out, so a stored configuration has no pins; the implied ``default`` (``model_specs``) is
    pinned too.
    """
    if cfg.roles.kind != "llm" and not cfg.roles.models:
        return {}
    given = cfg.roles.models
    pins = {role: _pinned(spec) for role, spec in model_specs(cfg).items()}
    return {f"roles.models.{role}": spec for role, spec in pins.items() if spec != given.get(role)}


def _pinned(spec: Any) -> Any:
    if isinstance(spec, list):
        return [_pinned(s) for s in spec]
    if isinstance(spec, str) and not (spec == "env" or spec.startswith("openai:")):
        return spec
    if isinstance(spec, Mapping) and spec.get("provider", "openai") != "openai":
        return spec
    config = parse_spec(spec)
    fields = dict(spec) if isinstance(spec, Mapping) else {}
    if spec == "env":  # what the optional variables set (model.config.ENV_SETTINGS)
        fields |= config.model_dump(include=set(ENV_SETTINGS.values()), exclude_defaults=True)
    return {**fields, "provider": "openai", "model": config.model, "base_url": config.base_url or OPENAI_URL}


def build_ensemble(cfg: RunConfig, role: str, members: list[Model], on_choice: Callable[[Any], None]) -> ModelEnsemble:
    """A ``ModelEnsemble`` over a role's list of models (each member recorded and cached on its own).

    Members are named by their model name, ``#<i>`` appended when two share one; the bandit's generator is
    ``Random(f"{seed}:ensemble:{role}")`` and its options ``cfg.ensemble``.
    """
    if not members:
        raise ConfigError(f"roles.models.{role} is an empty list; give one model spec or more")
    names: dict[str, Any] = {}
    for i, model in enumerate(members):
        name = model.name or f"model{i}"
        names[name if name not in names else f"{name}#{i}"] = model
    rng = random.Random(f"{cfg.seed}:ensemble:{role}")
    return ModelEnsemble(names, rng, cfg.ensemble, name=role, on_choice=on_choice)


def choice_recorder(store: RunStoreProtocol, run_id: RunIdOf, ensemble: str) -> Callable[[Any], None]:
    """A ``ModelChoice`` sink storing ``model_choice`` events: the choice and ``ensemble`` (its roles.models key)."""

    def record(choice: Any) -> None:
        run = run_id()
        if run is not None:
            store.append(run, ModelChosen.parse({**choice.to_dict(), "ensemble": ensemble}))

    return record


def call_recorder(store: RunStoreProtocol, run_id: RunIdOf) -> Callable[[Any], None]:
    """A ``CallRecord`` sink that stores ``llm_call`` events; a cache hit is recorded but charges nothing."""

    def record(rec: Any) -> None:
        run = run_id()
        if run is None:
            return
        record = LlmCalled(
            role=rec.role,
            model=rec.model,
            prompt_hash=rec.prompt_hash,
            prompt_tokens=rec.usage.prompt_tokens,
            completion_tokens=rec.usage.completion_tokens,
            cost=rec.usage.cost,
            cached=rec.cached,
            latency_s=rec.latency_s,
            n=rec.n,
            error=rec.error,
        )
        charge = (
            None
            if rec.cached
            else Charge(tokens_in=rec.usage.prompt_tokens, tokens_out=rec.usage.completion_tokens, cost=rec.usage.cost)
        )
        store.append(run, record, charge=charge)

    return record


def parse_recorder(store: RunStoreProtocol, run_id: RunIdOf) -> Callable[[ParseRecord], None]:
    """A ``ParseRecord`` sink that stores ``reply_parsed`` events (nothing before the run exists)."""

    def record(rec: ParseRecord) -> None:
        run = run_id()
        if run is not None:
            store.append(run, ReplyParsed(role=rec.role, model=rec.model, outcome=rec.outcome, reason=rec.reason))

    return record


def build_roles(cfg: RunConfig, task: Task, models: dict[str, Any]) -> Any:
    """The child-making roles of ``cfg.roles.kind`` (``roles/kinds.ROLE_KINDS``) for ``task``."""
    return ROLE_KINDS.get(cfg.roles.kind).factory(cfg.roles, task, models, cfg.seed)


def build_guards(cfg: RunConfig, models: dict[str, Any]):
    """The ``guards:`` section as a ``Guards`` (the reviewer uses ``guards.reviewer_model``, else ``default``)."""
    reviewer = None
    if cfg.guards.reviewer != "off":
        reviewer = models.get(cfg.guards.reviewer_model) or models.get("default")
    return Guards(cfg.guards, reviewer_model=reviewer)


__all__ = [
    "CHILD_ROLE_KEYS",
    "SCREEN_ROLE_KEYS",
    "RunIdOf",
    "build_ensemble",
    "build_guards",
    "build_models",
    "build_roles",
    "call_recorder",
    "check_final_judge",
    "check_model_keys",
    "check_models",
    "choice_recorder",
    "parse_recorder",
    "model_keys_used",
    "model_specs",
    "novelty_judge_key",
    "endpoint_pins",
]
