"""Build screeners by name from config: ``build_screener(name, models=..., options=...)``.

``models`` maps a role key to a ``Model`` (for example ``{"default": m,
"critic": c, "judge": j}``). Each factory picks its model by
``options["model"]`` when given, else by its own role key, else
``"default"``. The remaining options are passed to the screener's
constructor; an unknown option or a missing model is a ``ConfigError`` that
names the fix.

Names: ``critic``, ``tournament``, ``ensemble``, ``arbiter``, ``random``,
``oracle``, plus ``surrogate`` and ``agentic``, whose modules are imported
only when asked for (they carry heavier dependencies).

Ensemble and arbiter members: ``options["members"]`` is a list whose entries
are either a model key (built as ``options["member"]``, default
``"tournament"``, with ``options["member_options"]``) or a nested spec dict
``{"screener": "critic", "model": "m2", ...options}``.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from verifyless.errors import ConfigError
from verifyless.model.base import Model
from verifyless.screen.base import Screener

ScreenerFactory = Callable[..., Screener]


def _pick_model(models: Mapping[str, Model], options: dict[str, Any], role: str, screener: str) -> Model:
    key = options.pop("model", None)
    for candidate in ([key] if key else [role, "default"]):
        if candidate in models:
            return models[candidate]
    wanted = key or f"{role!r} or 'default'"
    raise ConfigError(
        f"screener {screener!r} needs a model under {wanted}, but only {sorted(models)} are configured; "
        f"add that model key or set the screener's 'model' option to one of them"
    )


def _construct(cls: Callable[..., Screener], screener: str, *args: Any, **options: Any) -> Screener:
    try:
        return cls(*args, **options)
    except TypeError as exc:  # an unknown or mistyped option from config
        raise ConfigError(f"bad options for screener {screener!r}: {exc}; see docs/design/screening.md") from exc


def _critic(models, options, **_):
    from verifyless.screen.critic import PointwiseCritic

    return _construct(PointwiseCritic, "critic", _pick_model(models, options, "critic", "critic"), **options)


def _tournament(models, options, **_):
    from verifyless.screen.tournament import PairwiseRPM

    return _construct(PairwiseRPM, "tournament", _pick_model(models, options, "judge", "tournament"), **options)


def _members(models, options, screener: str, **extra) -> list[Screener]:
    specs = options.pop("members", None)
    kind = options.pop("member", "tournament")
    member_options = dict(options.pop("member_options", {}) or {})
    if not specs:
        raise ConfigError(
            f"screener {screener!r} needs options.members: a list of model keys or "
            f"{{'screener': name, 'model': key, ...}} specs"
        )
    built = []
    for spec in specs:
        if isinstance(spec, str):
            built.append(build_screener(kind, models=models, options={**member_options, "model": spec}, **extra))
        elif isinstance(spec, Mapping) and "screener" in spec:
            nested = dict(spec)
            built.append(build_screener(nested.pop("screener"), models=models, options=nested, **extra))
        else:
            raise ConfigError(f"screener {screener!r}: member {spec!r} is neither a model key nor a spec with 'screener'")
    return built


def _ensemble(models, options, **extra):
    from verifyless.screen.ensemble import MajorityVote

    members = _members(models, options, "ensemble", **extra)
    return _construct(MajorityVote, "ensemble", members, **options)


def _arbiter(models, options, **extra):
    from verifyless.screen.ensemble import Arbiter

    members = _members(models, options, "arbiter", **extra)
    return _construct(Arbiter, "arbiter", _pick_model(models, options, "arbiter", "arbiter"), members, **options)


def _random(models, options, **_):
    from verifyless.screen.baselines import RandomScreener

    return _construct(RandomScreener, "random", **options)


def _oracle(models, options, **_):
    from verifyless.screen.baselines import OracleScreener

    return _construct(OracleScreener, "oracle", **options)


def _surrogate(models, options, *, seed: int = 0, **_):
    from verifyless.screen.surrogate import SurrogateScreener

    # Fitness ranking is the default for runs (docs/benchmarks.md, "Evidence on pool worlds"); rank_by=delta keeps
    # the previous behaviour.
    return _construct(SurrogateScreener, "surrogate", seed, **{"rank_by": "fitness", **options})


def _agentic(models, options, *, sandbox=None, **_):
    if sandbox is None:
        raise ConfigError("screener 'agentic' runs pilot experiments and needs a sandbox; pass sandbox= from the engine")
    from verifyless.screen.agentic import AgenticRPM

    return _construct(AgenticRPM, "agentic", _pick_model(models, options, "judge", "agentic"), sandbox, **options)


SCREENERS: dict[str, ScreenerFactory] = {
    "critic": _critic,
    "tournament": _tournament,
    "ensemble": _ensemble,
    "arbiter": _arbiter,
    "random": _random,
    "oracle": _oracle,
    "surrogate": _surrogate,
    "agentic": _agentic,
}


def build_screener(
    name: str,
    *,
    models: Mapping[str, Model],
    options: Mapping[str, Any] | None = None,
    sandbox: Any = None,
    seed: int = 0,
    task: Any = None,
) -> Screener:
    """The screener registered as ``name``, built from ``models`` and ``options`` (not mutated).

    ``sandbox`` (agentic pilots), ``seed`` (surrogate estimator) and ``task``
    are handed to every factory, which uses what it needs; the LLM screeners
    read the task from ``ScreenContext`` at screening time instead.
    """
    factory = SCREENERS.get(name)
    if factory is None:
        raise ConfigError(f"unknown screener {name!r}; choose one of {sorted(SCREENERS)}")
    return factory(models, dict(options or {}), sandbox=sandbox, seed=seed, task=task)


__all__ = ["SCREENERS", "ScreenerFactory", "build_screener"]
