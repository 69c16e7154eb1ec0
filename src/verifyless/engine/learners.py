"""Learners: everything a told node feeds, in one place.

A ``tell`` batch reaches, in this order for each node: the search strategy
(``tell``), a ``PilotObserver`` screener (``observe_pilot``, once per level
the node's program was piloted at), an ``OutcomeObserver`` screener
(``observe``, verified nodes only) and the memory (verified nodes only). At each round boundary a
``LearningScreener`` gets the round's verified parent -> child pairs
(``learn``). Screeners get every verified child as the same
``verifyless.outcome.Outcome`` record (``outcome``), stamped with the run's
one tie tolerance (config ``tie_tolerance``), and label it with the one rule
there. Learners see validation outcomes only: an ``Outcome`` holds no test
score, and the memory reads validation fields only.

The strategy keeps ``SearchStrategy.tell(node)``: it needs every told node
(failed, screened-out and duplicate ones too, which have no outcome) and
reads the node's own fitness, not a comparison with its parent.

Pilot results (``pilot_run`` events, ledger/pilots.py) are low-fidelity
evidence. Each learner's choice, by construction:

* a ``PilotObserver`` gets them as ``Outcome``s with ``fidelity`` = the level
  (``pilot_outcomes``; the parent side is the parent's own pilot at that
  level when one is stored, else None), which ``label3`` / ``reward_label``
  never label;
* the surrogate ignores them: it is no ``PilotObserver``. Its labels and
  Delta targets compare full fitnesses; a quarter-data score is on another
  scale (a quarter of the training rows scores systematically worse, and
  ranks like full fidelity only at rho 0.71-0.99 on the built-in tasks,
  docs/benchmarks.md), so it would be a biased label, not a weaker one;
* test-time critics (``learn``) and critic data see only verified outcomes
  (``outcomes`` reads ``RunState.verifications``, which pilots never enter);
* strategies and the memory see nodes, and a pilot makes no node: a piloted
  candidate's node carries its full verification or its screened-out status.

Smoke runs are not delivered: a smoke run under a short wall limit answers
"does it crash", not "how good is it".
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from verifyless.engine.state import RunState
from verifyless.node import Candidate, Node, Status, Verification
from verifyless.outcome import Outcome, outcome_of
from verifyless.screen.base import LearningScreener, OutcomeObserver, PilotObserver, Screener
from verifyless.search.base import SearchStrategy
from verifyless.search.memory import Memory, MemoryRecord
from verifyless.task.base import Task

__all__ = ["Learners"]


class Learners:
    """Feeds told nodes to the strategy, an observing screener and the memory; runs screener learning."""

    def __init__(
        self, strategy: SearchStrategy, screener: Screener, memory: Memory | None, task: Task, *, tie: float = 0.0
    ) -> None:
        self.strategy = strategy
        self.observer = screener if isinstance(screener, OutcomeObserver) else None
        self.learner = screener if isinstance(screener, LearningScreener) else None
        self.pilot_observer = screener if isinstance(screener, PilotObserver) else None
        self.memory = memory
        self.task = task
        self.tie = tie
        self._backlog: list[MemoryRecord] | None = None

    def adopt(self, strategy: SearchStrategy, memory: Memory | None, observer: Any) -> None:
        """Continue with the parts a snapshot restored: its strategy, and its memory and observing screener
        where they pickled (None: keep the one built); a restored observer learns too where this one did."""
        self.strategy = strategy
        if memory is not None:
            self.memory = memory
        if observer is not None:
            self.observer = observer
            if self.learner is not None:
                self.learner = observer

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
            if observer and self.pilot_observer is not None:
                for low in self.pilot_outcomes(state, node.id):
                    self.pilot_observer.observe_pilot(low)
            outcome = self.outcome(state, node.id)
            if outcome is None:
                continue
            if observer and self.observer is not None:
                self.observer.observe(outcome)
            if memory and self.memory is not None:
                self._remember(node, state.candidates[node.id], state.verifications[node.id], outcome.parent_fitness)

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

    def outcome(self, state: RunState, node_id: str) -> Outcome | None:
        """The ``Outcome`` of a verified node against its parent's validation fitness; None if unverified."""
        v, cand = state.verifications.get(node_id), state.candidates.get(node_id)
        if v is None or cand is None:
            return None
        parent = state.view.nodes.get(cand.parent_id) if cand.parent_id else None
        return outcome_of(
            parent,
            cand,
            v,
            higher_is_better=self.task.metric.direction == "maximize",
            tie=self.tie,
            round=cand.round,
            parent_summary=state.summaries.get(cand.parent_id or "", ""),
            child_summary=state.summaries.get(node_id, ""),
        )

    def pilot_outcomes(self, state: RunState, node_id: str) -> list[Outcome]:
        """The node's stored pilot results as low-fidelity outcomes, cheapest level first (module docstring)."""
        cand = state.candidates.get(node_id)
        if cand is None:
            return []
        parent = state.candidates.get(cand.parent_id or "")
        found = []
        for level in (lv.name for lv in self.task.fidelity.levels):
            v = state.low_fidelity_result(cand.program_hash, "pilot_run", level)
            if v is None:
                continue
            p = None if parent is None else state.low_fidelity_result(parent.program_hash, "pilot_run", level)
            p_fit = None if p is None or p.score is None else self.task.metric.orient(p.score)
            low = outcome_of(
                p_fit if p is not None and p.status is Status.OK else None,
                cand,
                v,
                higher_is_better=self.task.metric.direction == "maximize",
                tie=self.tie,
                round=cand.round,
            )
            found.append(dataclasses.replace(low, fidelity=level))
        return found

    def outcomes(self, state: RunState, node_ids: Sequence[str]) -> list[Outcome]:
        """The verified parent -> child outcomes among ``node_ids``, in tell order (drafts without a parent left out)."""
        found = [self.outcome(state, nid) for nid in node_ids if (c := state.candidates.get(nid)) and c.parent_id]
        return [o for o in found if o is not None]

    async def learn(self, outcomes: Sequence[Outcome], round: int) -> dict[str, Any] | None:
        return None if self.learner is None else await self.learner.learn(outcomes, round)

    def restore(self, records: Sequence[dict[str, Any]]) -> None:
        if self.learner is not None:
            self.learner.restore(records)

    def _remember(self, node: Node, cand: Candidate, v: Verification, parent_fit: float | None) -> None:
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
        elif self.memory is not None:
            self.memory.add(record)
