"""Build screeners by name from config: ``build_screener(name, models=..., options=cfg.screener.options)``.

``models`` maps a role key to a ``Model`` (for example ``{"default": m,
"critic": c, "judge": j}``). Each factory picks its model by
``options["model"]`` when given, else by its own role key, else
``"default"``.

``SCREENERS`` is a ``verifyless.registry.Registry``: one ``Component`` per name with its factory,
its typed options (a pydantic model, ``options_model(name)``, with a description per field) and
one line of help. An unknown name or option, a value of the wrong type or out of range (checked once, by
``SCREENERS.validate``, when the configuration loads; a programmatic caller with a mapping calls it before
``build_screener``), or a missing model is a ``ConfigError`` (CLI exit code 2) whose message
names the option, what is wrong and how to fix it; a screener constructor's own ``ValueError`` is
converted the same way; an option that moved (``REMOVED``) names its replacement.
Every screener takes its options whole (``PointwiseCritic(model, CriticOptions(...))``, as TRL's
``Trainer(args=...)``): each option's default is written once, in its options model beside the
screener, and what a factory adds is what the options cannot hold (models, the sandbox, the run's
seed and task, the engine's uncertainty threshold, nested screeners built from the options' specs).

Every LLM screener's options carry the reply-health options ``min_parse_rate`` and
``max_unparsed_screenings``; it builds the run's ``ReplyHealth`` tracker from them as ``.health``
(see ``screen/health.py``).

Names: ``critic``, ``tournament``, ``cascade``, ``ensemble``, ``arbiter``,
``random``, ``oracle``, ``surrogate``, ``agentic``, ``pilot``, ``critic-ttl``, ``critic-probs``, ``critic-rm`` and ``adaptive`` (a wrapper)
(their heavy dependencies, scikit-learn and torch, are imported only when one is built).

Ensemble and arbiter members: ``options["members"]`` is a list whose entries
are either a model key (built as ``options["member"]``, default
``"tournament"``, with ``options["member_options"]``) or a nested spec dict
``{"screener": "critic", "model": "m2", ...options}``.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from verifyless.errors import ConfigError
from verifyless.model.base import Model
from verifyless.registry import Component, Registry
from verifyless.screen.adaptive import AdaptiveOptions, AdaptiveScreener
from verifyless.screen.agentic import AgenticOptions, AgenticRPM
from verifyless.screen.base import Screener
from verifyless.screen.baselines import OracleOptions, OracleScreener, PeekOracle, RandomOptions, RandomScreener
from verifyless.screen.cascade import CascadeOptions, CriticThenJudge
from verifyless.screen.critic import CriticOptions, PointwiseCritic
from verifyless.screen.ensemble import Arbiter, ArbiterOptions, EnsembleOptions, MajorityVote, MembersOptions
from verifyless.screen.pilot import PilotOptions, PilotScreener, check_levels
from verifyless.screen.probcritic import LabelProbCritic, LabelProbOptions
from verifyless.screen.reward import COLD, RewardModelCritic, RewardModelOptions
from verifyless.screen.surrogate import SurrogateOptions, SurrogateScreener
from verifyless.screen.tournament import PairwiseRPM, TournamentOptions
from verifyless.screen.ttl import TestTimeCritic, TestTimeCriticOptions
from verifyless.task.base import Task
from verifyless.task.identity import identity_of

ScreenerFactory = Callable[..., Screener]


# Options that moved: one routing switch for every screener, the engine's.
REMOVED = {
    "verify_uncertain": "routing has one switch now: set engine.verify_uncertain=true instead",
    "route_threshold": "the uncertainty threshold is the engine's now: set engine.uncertainty_threshold instead",
}


# ------------------------------------------------------------------ factories


# The roles.models key each LLM screener asks for when its 'model' option is unset ('default' after it).
MODEL_ROLE = {
    "critic": "critic",
    "critic-ttl": "critic",
    "critic-probs": "critic",
    "tournament": "judge",
    "agentic": "judge",
    "arbiter": "arbiter",
}


def _model_keys(key: str | None, screener: str) -> list[str]:
    return [key] if key else [MODEL_ROLE[screener], "default"]


def _no_model(screener: str, key: str | None, have: Iterable[str]) -> ConfigError:
    wanted = key or f"{MODEL_ROLE[screener]!r} or 'default'"
    return ConfigError(
        f"screener {screener!r} needs a model under {wanted}, but only {sorted(have)} are configured; "
        f"add that model key or set the screener's 'model' option to one of them"
    )


def _pick_model(models: Mapping[str, Model], key: str | None, screener: str) -> Model:
    for candidate in _model_keys(key, screener):
        if candidate in models:
            return models[candidate]
    raise _no_model(screener, key, models)


def _construct(cls: Callable[..., Screener], screener: str, *args: Any, **options: Any) -> Screener:
    try:
        return cls(*args, **options)
    except (TypeError, ValueError) as exc:  # an option the schema let through but the constructor rejects
        raise ConfigError(f"bad options for screener {screener!r}: {exc}; see docs/design/screening.md") from exc


def _critic(models, opts: CriticOptions, *, threshold: float = 0.25, **_):
    judge = None
    if opts.tie_break_model:
        judge = _pick_model(models, opts.tie_break_model, "critic")
    elif opts.tie_break == "pairwise":
        judge = models.get("judge")
    model = _pick_model(models, opts.model, "critic")
    return _construct(PointwiseCritic, "critic", model, opts, judge=judge, route_threshold=threshold)


def _tournament(models, opts: TournamentOptions, **_):
    model = _pick_model(models, opts.model, "tournament")
    return _construct(PairwiseRPM, "tournament", model, opts)


def _member_specs(opts: MembersOptions, screener: str) -> list[tuple[str, BaseModel]]:
    """Each member of an ensemble or arbiter as (screener name, validated options)."""
    specs: list[tuple[str, BaseModel]] = []
    for spec in opts.members:
        if isinstance(spec, str):
            specs.append((opts.member, SCREENERS.validate(opts.member, {**opts.member_options, "model": spec})))
        elif "screener" in spec:
            nested = dict(spec)
            member = str(nested.pop("screener"))
            specs.append((member, SCREENERS.validate(member, nested)))
        else:
            raise ConfigError(
                f"screener {screener!r}: member {spec!r} is neither a model key nor a spec with "
                "'screener'; write e.g. {screener: critic, model: m2}"
            )
    return specs


def _members(models, opts: MembersOptions, screener: str, **extra) -> list[Screener]:
    return [build_screener(name, models=models, options=o, **extra) for name, o in _member_specs(opts, screener)]


def _ensemble(models, opts: EnsembleOptions, **extra):
    members = _members(models, opts, "ensemble", **extra)
    return _construct(MajorityVote, "ensemble", members, opts)


def _arbiter(models, opts: ArbiterOptions, **extra):
    members = _members(models, opts, "arbiter", **extra)
    model = _pick_model(models, opts.model, "arbiter")
    return _construct(Arbiter, "arbiter", model, members, opts)


def _cascade_stages(opts: CascadeOptions) -> list[tuple[str, dict[str, Any]]]:
    """The cascade's two stages as (screener name, raw options): the critic, then the tournament or the pilot."""
    second = ("pilot", opts.pilot) if opts.then == "pilot" else ("tournament", opts.tournament)
    return [("critic", opts.critic), second]


def _cascade(models, opts: CascadeOptions, **extra):
    stages = []
    for stage, options in _cascade_stages(opts):
        try:
            stages.append(build_screener(stage, models=models, options=SCREENERS.validate(stage, options), **extra))
        except ConfigError as exc:  # the stage's options live one level down
            raise ConfigError(
                f"cascade stage {stage!r} (screener.options.{stage}.*): "
                + str(exc).replace("screener.options.", f"screener.options.{stage}.")
            ) from None
    critic, tournament = stages
    return _construct(CriticThenJudge, "cascade", critic, tournament, opts)


def _random(models, opts: RandomOptions, **_):
    return _construct(RandomScreener, "random", opts)


def _oracle(models, opts: OracleOptions, **_):
    return _construct(OracleScreener, "oracle", opts)


def _peek(models, opts: OracleOptions, **_):
    return _construct(PeekOracle, "peek", opts)


def _pilot(models, opts: PilotOptions, task: Task | None = None, **_):
    if task is not None:
        check_levels(task, opts.levels)
    return _construct(PilotScreener, "pilot", opts)


def _surrogate(models, opts: SurrogateOptions, *, seed: int = 0, **_):
    return _construct(SurrogateScreener, "surrogate", opts, seed=seed)


def _agentic(models, opts: AgenticOptions, *, sandbox=None, **_):
    if sandbox is None:
        raise ConfigError(
            "screener 'agentic' runs pilot experiments and needs a sandbox; pass sandbox= from the engine"
        )
    model = _pick_model(models, opts.model, "agentic")
    return _construct(AgenticRPM, "agentic", model, sandbox, opts)


def _critic_ttl(
    models,
    opts: TestTimeCriticOptions,
    *,
    seed: int = 0,
    task: Any = None,
    learner: Any = None,
    threshold: float = 0.25,
    **_,
):
    if learner is None:
        raise ConfigError(
            "screener 'critic-ttl' learns with torch and needs its learner: build it through verifyless.wiring "
            "(or pass learner=verifyless.train.ttl_learner.LoRALearner to build_screener)"
        )
    model = _pick_model(models, opts.model, "critic-ttl")
    try:
        built = learner(model, **opts.learner_options())
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"bad options for screener 'critic-ttl': {exc}; see docs/design/screening.md") from exc
    critic = _construct(PointwiseCritic, "critic-ttl", model, opts.critic_options(), route_threshold=threshold)
    return _construct(TestTimeCritic, "critic-ttl", critic, built, opts, seed=seed, task=task)


def _critic_probs(models, opts: LabelProbOptions, *, threshold: float = 0.25, **_):
    model = _pick_model(models, opts.model, "critic-probs")
    return _construct(LabelProbCritic, "critic-probs", model, opts, route_threshold=threshold)


def _critic_rm(models, opts: RewardModelOptions, *, threshold: float = 0.25, task: Any = None, warm=None, **_):
    digest = opts.warm
    if digest not in (None, COLD) and (warm is None or warm.digest != digest):
        raise ConfigError(
            f"the run recorded its critic-rm warm start as blob {digest[:16]}..., which was not handed to the "
            "screener: build the run through verifyless.wiring with the run store that holds it"
        )
    identity = identity_of(task) if isinstance(task, Task) else None
    head = None if digest == COLD else warm  # None: a new run, which starts from what it was handed
    return _construct(RewardModelCritic, "critic-rm", opts, route_threshold=threshold, task=identity, warm=head)


def _adaptive(models, opts: AdaptiveOptions, **extra):
    try:
        inner_options = SCREENERS.validate(opts.screener, opts.options)
        inner = build_screener(opts.screener, models=models, options=inner_options, **extra)
    except ConfigError as exc:  # the wrapped screener's options live one level down
        raise ConfigError(
            "adaptive's wrapped screener (screener.options.options.*): "
            + str(exc).replace("screener.options.", "screener.options.options.")
        ) from None
    return _construct(AdaptiveScreener, "adaptive", inner, opts)


def check_screener_models(name: str, options: BaseModel | None, keys: Iterable[str]) -> None:
    """The "needs a model" ``ConfigError`` that building screener ``name`` would raise, found without building it.

    ``keys`` are the run's ``roles.models`` keys. Nested screeners (an ensemble's or arbiter's members, a
    cascade's stages, adaptive's wrapped screener) are checked through the same specs their factories build
    from, so a dry run refuses what the real run would, before any store exists.
    """
    keyed: dict[str, Any] = dict.fromkeys(
        keys
    )  # only the keys matter: _pick_model finds one or refuses, as when building
    opts: Any = SCREENERS.typed(name, options)
    if name in MODEL_ROLE:
        _pick_model(keyed, opts.model, name)
    if name == "critic" and opts.tie_break_model:
        _pick_model(keyed, opts.tie_break_model, name)
    for inner, inner_opts in nested_screeners(name, opts):
        check_screener_models(inner, inner_opts, keyed)


def check_screener_fits(name: str, options: BaseModel | None, task: Task) -> None:
    """The ``ConfigError`` that screener ``name`` (or one it nests) gives on ``task`` when it cannot screen it:
    ``pilot`` on a task without the fidelity levels it pilots at. Checked before a run's store exists (the CLI's
    pre-flight) and again when the screener is built."""
    opts: Any = SCREENERS.typed(name, options)
    if name == "pilot":
        check_levels(task, opts.levels)
    for inner, inner_opts in nested_screeners(name, opts):
        check_screener_fits(inner, inner_opts, task)


def nested_screeners(name: str, opts: Any) -> list[tuple[str, Any]]:
    """The screeners ``name`` builds inside itself, as (name, typed options): an ensemble's or arbiter's
    members, a cascade's stages, adaptive's wrapped screener."""
    if name in ("ensemble", "arbiter"):
        return list(_member_specs(opts, name))
    if name == "cascade":
        return [(stage, SCREENERS.validate(stage, raw)) for stage, raw in _cascade_stages(opts)]
    if name == "adaptive":
        return [(opts.screener, SCREENERS.validate(opts.screener, opts.options))]
    return []


SCREENERS = Registry(
    "screener",
    [
        Component(
            "critic", _critic, CriticOptions, "pointwise soft-rubric critic: k sampled verdicts, ranked by label"
        ),
        Component("tournament", _tournament, TournamentOptions, "pairwise preference knockout over the candidates"),
        Component("cascade", _cascade, CascadeOptions, "the critic keeps its top m, then a tournament or pilot picks"),
        Component("ensemble", _ensemble, EnsembleOptions, "majority vote over member screeners or models"),
        Component("arbiter", _arbiter, ArbiterOptions, "an LLM arbiter reads the members' anonymised reasoning"),
        Component("random", _random, RandomOptions, "the unguided baseline: a random pick"),
        Component("oracle", _oracle, OracleOptions, "verifies every candidate (best-of-N validation oracle)"),
        Component(
            "peek",
            _peek,
            OracleOptions,
            "a ceiling, not a screener: runs all N off the books, charges only the best validation pick",
        ),
        Component("surrogate", _surrogate, SurrogateOptions, "no LLM: learns online from the run's paid outcomes"),
        Component("agentic", _agentic, AgenticOptions, "an agent runs sandboxed pilot experiments, a judge picks"),
        Component("pilot", _pilot, PilotOptions, "no LLM: successive halving on the task's cheaper fidelity levels"),
        Component(
            "critic-ttl", _critic_ttl, TestTimeCriticOptions, "the critic on a local model that learns in the run"
        ),
        Component("critic-probs", _critic_probs, LabelProbOptions, "ranks on the critic's verdict probabilities"),
        Component("critic-rm", _critic_rm, RewardModelOptions, "no LLM: a head trained on earlier runs' paid outcomes"),
        Component(
            "adaptive", _adaptive, AdaptiveOptions, "wraps a screener; screens only while paid outcomes say it helps"
        ),
    ],
    doc="docs/design/screening.md",
    removed=REMOVED,
)


def options_model(name: str) -> type[BaseModel]:
    """The pydantic options model of screener ``name`` (``ConfigError`` for an unknown name)."""
    return typing.cast(type[BaseModel], SCREENERS.get(name).options)


def build_screener(
    name: str,
    *,
    models: Mapping[str, Model],
    options: BaseModel | None = None,
    sandbox: Any = None,
    seed: int = 0,
    task: Any = None,
    learner: Any = None,
    threshold: float = 0.25,
    warm: Any = None,
) -> Screener:
    """The screener registered as ``name``, built from ``models`` and its typed ``options`` (not mutated).

    ``options`` are the screener's options as ``SCREENERS.validate`` made them (the configuration's
    ``cfg.screener.options``, or ``SCREENERS.validate(name, mapping)`` for a programmatic caller); they are
    not checked again; None means the screener's defaults. A mapping is a ``TypeError``
    (``Registry.typed``). Nested options (a cascade's stages, an ensemble's members, the screener
    ``adaptive`` wraps) are mappings in those options and are validated here, once, when built.

    ``sandbox`` (agentic pilots), ``seed`` (surrogate estimator, test-time learning), ``task`` and
    ``learner`` (the factory of ``critic-ttl``'s torch learner, ``screen/ttl.AdapterLearner``, injected
    by the composition root so this layer never imports ``train/``) and ``threshold`` (the engine's
    ``engine.uncertainty_threshold``, with which the critics mark evidence ``uncertain``) are handed to
    every factory, which uses what it needs; the LLM screeners read the task from ``ScreenContext`` at
    screening time instead. An LLM screener gets its reply-health options in its constructor and builds its
    ``ReplyHealth`` tracker there (``.health``); the others have none (``ReplyHealth.for_screener``).
    ``screener.options.verify_uncertain`` / ``route_threshold`` are a ``ConfigError`` naming the
    engine's switch that replaced them (``REMOVED``). ``warm`` is the ``screen.reward.WarmHead`` a
    ``critic-rm`` learnt in the run starts from (the composition root fits or reloads it from the run store,
    ``train/warm.py``), None for a cold start.
    """
    component = SCREENERS.get(name)
    opts = SCREENERS.typed(name, options)
    extra = {"sandbox": sandbox, "seed": seed, "task": task, "learner": learner, "threshold": threshold, "warm": warm}
    screener: Screener = component.factory(models, opts, **extra)
    return screener


__all__ = [
    "MODEL_ROLE",
    "REMOVED",
    "SCREENERS",
    "ScreenerFactory",
    "build_screener",
    "check_screener_fits",
    "check_screener_models",
    "nested_screeners",
    "options_model",
]
