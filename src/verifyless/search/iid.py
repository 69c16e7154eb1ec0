"""The iid baseline (no evolution): every expansion improves the seed program.

Every child is drawn around the task's seed (the baseline node, ``root``),
so the children of a run are independent draws from one distribution and
the run returns the best verified one. This is the real-run twin of the
pool-world ``IIDArm`` screener (``offline/replay.py``): set against ``random``
screening on an evolving strategy it measures what evolution adds, and
against the screeners what screening adds without evolution.

Before the baseline is told (or when it has no usable score) an expansion
drafts from it instead (``Operator.DRAFT``), as ``greedy`` does. There is
no randomness: a fresh strategy told the same nodes makes the same ask
(resume equivalence).
"""

from __future__ import annotations

import random

from verifyless.node import Node, Operator
from verifyless.registry import StrictOptions
from verifyless.search.base import Expansion, SearchView


class IIDConfig(StrictOptions):
    """The iid baseline has no constants."""


class IIDStrategy:
    """Improve the seed program every time; the final node is the best verified one."""

    name = "iid"

    def __init__(self, rng: random.Random | None = None, config: IIDConfig | None = None) -> None:
        # ``rng`` is accepted for a uniform constructor; this policy never draws from it.
        self.config = config or IIDConfig()
        self._seen = SearchView()
        self._root_id: str | None = None

    def tell(self, node: Node) -> None:
        self._seen.add(node)
        if node.operator is Operator.BASELINE and self._root_id is None:
            self._root_id = node.id

    def ask(self, view: SearchView, k: int) -> list[Expansion]:
        """``k`` expansions of the seed (reads only told state)."""
        root = self._seen.nodes.get(self._root_id or "")
        if root is not None and root.ok:
            step = Expansion(root.id, Operator.IMPROVE, note="iid: the seed program")
        else:
            step = Expansion(self._root_id, Operator.DRAFT, note="iid: the seed has no usable score")
        return [step] * k

    def final(self, view: SearchView) -> str | None:
        """The best validation node told so far (the seed counts)."""
        return self._seen.best_id
