"""Build a search strategy by name from a plain options dict (the run config's ``search`` block)."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Mapping
from typing import Any

from verifyless.errors import ConfigError
from verifyless.search.base import SearchStrategy
from verifyless.search.greedy import GreedyConfig, GreedyStrategy
from verifyless.search.iid import IIDConfig, IIDStrategy
from verifyless.search.islands import IslandsConfig, IslandsStrategy
from verifyless.search.linear import LinearConfig, LinearStrategy
from verifyless.search.mcgs import MCGSConfig, MCGSStrategy

STRATEGIES: dict[str, tuple[type, Callable[..., SearchStrategy]]] = {
    "greedy": (GreedyConfig, GreedyStrategy),
    "islands": (IslandsConfig, IslandsStrategy),
    "mcgs": (MCGSConfig, MCGSStrategy),
    "linear": (LinearConfig, LinearStrategy),
    "iid": (IIDConfig, IIDStrategy),  # no evolution: every child from the seed (the iid baseline)
}


def build_strategy(name: str, options: Mapping[str, Any] | None, rng: random.Random) -> SearchStrategy:
    """Return a fresh strategy ``name`` configured by ``options`` and drawing its seed from ``rng``.

    Raises ``ConfigError`` for an unknown name (listing the valid ones), for
    unknown option keys (naming them and the valid keys), and for invalid values.
    Resume: build with an identically seeded ``rng`` and tell every stored node.
    """
    config = validate_options(name, options)
    return STRATEGIES[name][1](rng, config)


def validate_options(name: str, options: Mapping[str, Any] | None) -> Any:
    """Strategy ``name``'s config dataclass from ``options`` (what the configuration checks when it loads)."""
    if name not in STRATEGIES:
        raise ConfigError(f"unknown search strategy {name!r}; choose one of: {', '.join(sorted(STRATEGIES))}")
    config_cls = STRATEGIES[name][0]
    options = dict(options or {})
    valid = [f.name for f in dataclasses.fields(config_cls)]
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ConfigError(
            f"unknown option(s) for search strategy {name!r}: {', '.join(unknown)}; "
            f"valid options are: {', '.join(valid)}"
        )
    try:
        return config_cls(**options)
    except (TypeError, ValueError) as exc:  # e.g. a list where a number was expected, a value out of range
        raise ConfigError(f"invalid options for search strategy {name!r}: {exc}; fix strategy.options") from None


def strategy_defaults(name: str) -> dict[str, Any]:
    """The documented default constants of strategy ``name`` (for config dumps and docs)."""
    if name not in STRATEGIES:
        raise ConfigError(f"unknown search strategy {name!r}; choose one of: {', '.join(sorted(STRATEGIES))}")
    return dataclasses.asdict(STRATEGIES[name][0]())
