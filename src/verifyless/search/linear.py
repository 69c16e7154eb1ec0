"""Linear chain: always continue from the newest verified node.

If the newest verified node has a usable score, improve it; if it is buggy,
debug it, unless it already sits at the end of ``max_debug_depth`` consecutive
debug steps, in which case the chain falls back to the newest usable node.
This is the sequential-evolution scaffold used to collect parents (critic paper,
Appendix C: ten sequential steps per task). Every expansion of one ask has the
same parent; the engine's N candidates per expansion give the variety.

There is no randomness, so resume equivalence is immediate: a fresh strategy
told the same nodes makes the same next ask.
"""

from __future__ import annotations

import random

from pydantic import Field

from verifyless.node import Node, Operator
from verifyless.registry import StrictOptions
from verifyless.search.base import Expansion, SearchView
from verifyless.search.greedy import debug_depth


class LinearConfig(StrictOptions):
    """Constants of the linear chain."""

    max_debug_depth: int = Field(
        3, ge=0, description="consecutive DEBUG steps before the chain gives up on a buggy node"
    )


class LinearStrategy:
    """One chain: improve the newest OK node, debug the newest node if buggy."""

    name = "linear"

    def __init__(self, rng: random.Random | None = None, config: LinearConfig | None = None) -> None:
        # ``rng`` is accepted for a uniform constructor; this policy never draws from it.
        self.config = config or LinearConfig()
        self._seen = SearchView()
        self._latest: str | None = None  # newest verified node
        self._latest_ok: str | None = None  # newest verified node with a usable score

    def tell(self, node: Node) -> None:
        known = self._seen.nodes.get(node.id)
        self._seen.add(node)
        if not node.status.verified or (known is not None and known.status.verified):
            return
        self._latest = node.id
        if node.ok:
            self._latest_ok = node.id

    def ask(self, view: SearchView, k: int) -> list[Expansion]:
        """Return ``k`` copies of the next step of the chain (reads only told state)."""
        if self._latest is None:
            step = Expansion(None, Operator.DRAFT, note="no baseline told yet")
        elif self._latest == self._latest_ok:
            step = Expansion(self._latest, Operator.IMPROVE, note="newest node")
        elif debug_depth(self._seen, self._latest) < self.config.max_debug_depth:
            step = Expansion(self._latest, Operator.DEBUG, note="newest node is buggy")
        elif self._latest_ok is not None:
            step = Expansion(self._latest_ok, Operator.IMPROVE, note="debug limit reached")
        else:
            step = Expansion(None, Operator.DRAFT, note="no usable node and debug limit reached")
        return [step] * k

    def final(self, view: SearchView) -> str | None:
        """The best validation node of the chain."""
        return self._seen.best_id
