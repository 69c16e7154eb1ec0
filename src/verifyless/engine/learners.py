"""Learners: everything a told node feeds, in one place.

A ``tell`` batch reaches, in this order for each node: the search strategy
(``tell``), an ``OutcomeObserver`` screener (``observe``, verified nodes
only) and the memory (verified nodes only). At each round boundary a
``LearningScreener`` gets the round's verified parent -> child pairs
(``learn``). Learners see validation outcomes only: hidden test metrics are
stripped before anything is handed on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

from verifyless.engine.state import RunState
from verifyless.node import Node, Status, Verification
from verifyless.screen.base import LearningScreener, Outcome, OutcomeObserver
from verifyless.search.base import SearchStrategy
from verifyless.task.base import Task

__all__ = ["Learners"]


class Learners:
    """Feeds told nodes to the strategy, an observing screener and the memory; runs screener learning."""

    def __init__(self, strategy: SearchStrategy, screener: Any, memory: Any | None, task: Task) -> None:
        self.strategy = strategy
        self.observer = screener if isinstance(screener, OutcomeObserver) else None
        self.learner = screener if isinstance(screener, LearningScreener) else None
        self.memory = memory
        self.task = task
        self._backlog: list[Any] | None = None

    def tell(
        self,
        state: RunState,
        nodes: Sequence[Node],
        *,
        strategy: bool = True,
        memory: bool = True,
        observer: bool = True,
    ) -> None:
        """Feed ``nodes`` (just moved into ``state.view``); flags skip parts restored from a snapshot."""
        for node in nodes:
            if strategy:
                self.strategy.tell(node)
            v = state.verifications.get(node.id)
            if v is None:
                continue
            cand = state.candidates[node.id]
            parent = state.view.nodes.get(cand.parent_id) if cand.parent_id else None
            parent_fit = parent.fitness if parent is not None else None
            if observer and self.observer is not None:
                self.observer.observe(cand, parent_fit, _validation_only(v), node.fitness)
            if memory and self.memory is not None:
                self._remember(node, cand, v, parent_fit)

    @contextlib.contextmanager
    def batched_memory(self) -> Iterator[None]:
        """Collect memory records and index them in one batch at the end (resume)."""
        self._backlog = []
        try:
            yield
        finally:
            backlog, self._backlog = self._backlog, None
            if self.memory is not None and backlog:
                self.memory.extend(backlog)

    def outcomes(self, state: RunState, node_ids: Sequence[str], round: int) -> list[Outcome]:
        """The verified parent -> child pairs among ``node_ids`` (told in ``round``)."""
        out = []
        for nid in node_ids:
            v = state.verifications.get(nid)
            cand = state.candidates.get(nid)
            if v is None or cand is None or cand.parent_id is None:
                continue
            pv = state.verifications.get(cand.parent_id)
            out.append(
                Outcome(
                    node_id=nid,
                    parent_id=cand.parent_id,
                    round=round,
                    parent_summary=state.summaries.get(cand.parent_id, ""),
                    child_summary=state.summaries.get(nid, ""),
                    idea=cand.idea.text,
                    parent_score=pv.score if pv is not None and pv.status is Status.OK else None,
                    child_score=v.score if v.status is Status.OK else None,
                    higher_is_better=self.task.metric.direction == "maximize",
                    status=v.status.value,
                )
            )
        return out

    async def learn(self, outcomes: Sequence[Outcome], round: int) -> dict[str, Any] | None:
        return None if self.learner is None else await self.learner.learn(outcomes, round)

    def restore(self, records: Sequence[dict[str, Any]]) -> None:
        if self.learner is not None:
            self.learner.restore(records)

    def _remember(self, node: Node, cand: Any, v: Verification, parent_fit: float | None) -> None:
        from verifyless.search.memory import MemoryRecord

        change = (node.fitness - parent_fit) if node.fitness is not None and parent_fit is not None else None
        record = MemoryRecord(
            node_id=node.id,
            plan=cand.idea.text,
            outcome=v.status.value,
            score_change=change,
            analysis=f"score {v.score}" if v.score is not None else v.reason,
            error=v.reason if v.status is not Status.OK else "",
            operator=cand.operator.value,
        )
        if self._backlog is not None:
            self._backlog.append(record)
        else:
            self.memory.add(record)  # type: ignore[union-attr]


def _validation_only(v: Verification) -> Verification:
    return v.replace(test_metrics={}, test_score=None)
