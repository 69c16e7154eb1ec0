"""Search strategies by name: ``STRATEGIES``, a ``verifyless.registry.Registry``, and ``build_strategy``.

Each strategy's options are its frozen config dataclass (``GreedyConfig``, ...), defined beside it and
validated by pydantic through the registry (the run config's ``strategy`` block).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Mapping
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


def build_strategy(name: str, options: Mapping[str, Any] | None, rng: random.Random) -> SearchStrategy:
    """Return a fresh strategy ``name`` configured by ``options`` and drawing its seed from ``rng``.

    Raises ``ConfigError`` for an unknown name (listing the valid ones), for
    unknown option keys (naming them and the valid keys), and for invalid values.
    Resume: build with an identically seeded ``rng`` and tell every stored node.
    """
    config = STRATEGIES.validate(name, options)
    strategy: SearchStrategy = STRATEGIES.get(name).factory(rng, config)
    return strategy


def strategy_defaults(name: str) -> dict[str, Any]:
    """The documented default constants of strategy ``name`` (for config dumps and docs)."""
    return dataclasses.asdict(STRATEGIES.validate(name, {}))


__all__ = ["STRATEGIES", "build_strategy", "strategy_defaults"]
