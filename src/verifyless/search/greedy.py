"""Greedy tree search in the style of AIRA-dojo / AIDE.

Policy, read top to bottom in ``ask``:

1. Draft phase: until ``num_drafts`` drafts have been verified, make fresh
   drafts (``Operator.DRAFT``) from the baseline.
2. Debug: with probability ``debug_prob``, repair the most recently told buggy
   leaf (a verified node without a usable score and without verified
   children) whose run of consecutive debug steps is below ``max_debug_depth``.
3. Otherwise improve the best validation node (the baseline counts, unless
   ``baseline_counts`` is off: then only drafts and their descendants do, as
   in AIRA-dojo on AIRS-Bench, which gives no baseline code).

State is derived only from ``tell``; ``ask`` does not change what later asks
return except through the per-ask random generator, which is seeded from
``(seed, number of tells, asks since the last tell)``. A fresh strategy built
with an identically seeded ``random.Random`` and told the same nodes therefore
makes the same next ask (resume equivalence).
"""

from __future__ import annotations

import random

from pydantic import Field

from verifyless.node import Node, Operator
from verifyless.registry import StrictOptions
from verifyless.search.base import Expansion, SearchView, ToldState


class GreedyConfig(StrictOptions):
    """Constants of the greedy policy."""

    num_drafts: int = Field(
        5, ge=0, description="verified drafts made from the baseline before improving (AIRA-dojo: 5)"
    )
    max_debug_depth: int = Field(
        3, ge=0, description="a buggy node reached by this many consecutive DEBUG steps is abandoned"
    )
    debug_prob: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="chance of debugging the newest buggy leaf instead of improving the best (AIDE's shipped "
        "config: 0.5)",
    )
    baseline_counts: bool = Field(
        True,
        description="the baseline is a node like any other: the best node to improve and the final answer may be it; "
        "false: only drafts and their descendants count (AIRS-Bench gives no baseline code, AIRA-dojo starts from "
        "drafts); the baseline is still verified once and drafts are written into its program file",
    )


def debug_depth(view: SearchView, node_id: str) -> int:
    """Number of consecutive DEBUG operators on the primary path ending at ``node_id``."""
    depth = 0
    node = view.nodes.get(node_id)
    while node is not None and node.operator is Operator.DEBUG:
        depth += 1
        node = view.nodes.get(node.parent_id) if node.parent_id else None
    return depth


class GreedyStrategy(ToldState):
    """Draft, then improve the best node and debug buggy leaves (see module docstring)."""

    name = "greedy"

    def __init__(self, rng: random.Random, config: GreedyConfig | None = None) -> None:
        self.config = config or GreedyConfig()
        super().__init__(rng)
        self._root_id: str | None = None
        self._drafts = 0
        self._buggy_leaves: dict[str, None] = {}  # buggy verified nodes with no verified child (kept on tell)
        self._best_grown: str | None = None  # the best node that is not the baseline (kept when baseline_counts is off)

    # ------------------------------------------------------------------ tell
    def tell(self, node: Node) -> None:
        newly_verified = self._record(node)
        if node.operator is Operator.BASELINE and self._root_id is None:
            self._root_id = node.id
        if newly_verified:
            if node.parent_id is not None:
                self._buggy_leaves.pop(node.parent_id, None)  # it now has a verified child
            # A node's debug depth never changes, so the depth limit is checked once, here.
            if node.status.buggy and debug_depth(self._seen, node.id) < self.config.max_debug_depth:
                self._buggy_leaves[node.id] = None
            if node.operator is Operator.DRAFT:
                self._drafts += 1
            if not self.config.baseline_counts and node.ok and node.operator is not Operator.BASELINE:
                best = self._seen.nodes.get(self._best_grown or "")
                if best is None or node.fitness > best.fitness:  # type: ignore[operator]
                    self._best_grown = node.id  # the first of equals stays, as SearchView's best does

    # ------------------------------------------------------------------- ask
    def ask(self, view: SearchView, k: int) -> list[Expansion]:
        """Return ``k`` expansions; reads only told state (``view`` is not consulted)."""
        rng = self._ask_rng()
        out: list[Expansion] = []
        drafts_left = self.config.num_drafts - self._drafts
        debuggable = self._debuggable_leaves()
        for _ in range(k):
            if drafts_left > 0:
                drafts_left -= 1
                out.append(Expansion(self._root_id, Operator.DRAFT, note="draft phase"))
            elif debuggable and rng.random() < self.config.debug_prob:
                target = debuggable.pop(0)
                out.append(Expansion(target, Operator.DEBUG, note="newest buggy leaf"))
            elif (best := self._best()) is not None:
                out.append(Expansion(best, Operator.IMPROVE, note="best validation node"))
            else:
                # Nothing usable yet (every draft buggy and past its debug limit): draft again.
                out.append(Expansion(self._root_id, Operator.DRAFT, note="no valid node yet"))
        return out

    def final(self, view: SearchView) -> str | None:
        """The best validation node told so far (the baseline excluded when ``baseline_counts`` is off)."""
        return self._best()

    def _best(self) -> str | None:
        return self._seen.best_id if self.config.baseline_counts else self._best_grown

    def _debuggable_leaves(self) -> list[str]:
        """Buggy verified leaves under the debug depth limit, newest first."""
        return list(reversed(self._buggy_leaves))  # insertion order is tell order, so reversed = newest first
