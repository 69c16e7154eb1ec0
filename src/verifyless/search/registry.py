"""Search strategies by name: ``STRATEGIES``, a ``verifyless.registry.Registry``, and ``build_strategy``.

Each strategy's options are its ``StrictOptions`` config (``GreedyConfig``, ...), defined beside it and
validated through the registry once, when the run config's ``strategy`` block loads.
"""

from __future__ import annotations

import random
from typing import Any

from verifyless.registry import Component, Registry
from verifyless.search.base import SearchStrategy
from verifyless.search.greedy import GreedyConfig, GreedyStrategy
from verifyless.search.iid import IIDConfig, IIDStrategy
from verifyless.search.islands import IslandsConfig, IslandsStrategy
from verifyless.search.linear import LinearConfig, LinearStrategy
from verifyless.search.mcgs import MCGSConfig, MCGSStrategy

STRATEGIES = Registry(
    "strategy",
    [
        Component("greedy", GreedyStrategy, GreedyConfig, "AIDE-style tree search: drafts, debug, improve the best"),
        Component("islands", IslandsStrategy, IslandsConfig, "OpenEvolve-style islands with MAP-Elites archives"),
        Component("mcgs", MCGSStrategy, MCGSConfig, "MLEvolve's progressive Monte Carlo graph search"),
        Component("linear", LinearStrategy, LinearConfig, "one chain: each child improves (or debugs) the last"),
        Component("iid", IIDStrategy, IIDConfig, "no evolution: every child from the seed (the iid baseline)"),
    ],
)


def build_strategy(name: str, config: Any, rng: random.Random) -> SearchStrategy:
    """Return a fresh strategy ``name`` configured by ``config`` and drawing its seed from ``rng``.

    ``config`` is the strategy's config as ``STRATEGIES.validate`` made it (the run's
    ``cfg.strategy.options``; ``STRATEGIES.validate(name, mapping)`` for a mapping), not checked again;
    None means its defaults. An unknown name is a ``ConfigError`` listing the valid ones; a mapping a
    ``TypeError`` (``Registry.typed``). Resume: build with an identically seeded ``rng`` and tell every
    stored node.
    """
    strategy: SearchStrategy = STRATEGIES.get(name).factory(rng, STRATEGIES.typed(name, config))
    return strategy


def strategy_defaults(name: str) -> dict[str, Any]:
    """The documented default constants of strategy ``name`` (for config dumps and docs)."""
    return dict(STRATEGIES.validate(name, {}).model_dump())


__all__ = ["STRATEGIES", "build_strategy", "strategy_defaults"]
