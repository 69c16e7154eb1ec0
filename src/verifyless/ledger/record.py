"""``Ledger``: one run's write side -- every paid or learned fact is stored first, then folded.

``Ledger.emit`` is the single write path: it appends one event to the run
store (program text, view update and budget charge in the same transaction)
and then applies the committed event to ``RunState`` -- exactly what resume
does with the stored log. The ledger also holds the run's ``BudgetGate``,
whose ``used`` totals it reads from the store, so a resumed run continues
from what the log says. It is composed into its users (the engine), not
inherited from.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from verifyless import datareport
from verifyless.events import EventRecord, NodeRecorded, StatusChanged, Verified
from verifyless.ledger.budget import BudgetConfig, BudgetGate
from verifyless.ledger.fold import RunState
from verifyless.node import Candidate, Node, Status, Verification
from verifyless.sandbox.base import Sandbox
from verifyless.store.protocol import RunStoreProtocol
from verifyless.store.records import Budget, Charge, Event
from verifyless.task.base import Metric, Task

__all__ = ["Ledger", "Progress"]

Progress = Callable[[str, dict[str, Any]], None]


def append_and_fold(
    store: RunStoreProtocol,
    run_id: str,
    state: RunState,
    record: EventRecord,
    *,
    node_id: str | None = None,
    charge: Charge | bool | None = None,
) -> list[Node]:
    """The single write path: append one event record (committed, with its charge, on return), then fold it
    into ``state``; returns the nodes a ``tell`` told. ``charge=False`` stores a verification
    uncharged (a reused result); a ``node`` event's program text goes to the blob store, not the fold."""
    if charge is None:
        seq = store.append(run_id, record, node_id=node_id)
    else:
        seq = store.append(run_id, record, node_id=node_id, charge=charge)
    if isinstance(record, NodeRecorded) and record.candidate.program:
        record = replace(record, candidate=record.candidate.replace(program=""))
    stored = charge if isinstance(charge, Charge) else None
    return state.apply(Event.of(seq, run_id, record, node_id=node_id, charge=stored))


class Ledger:
    """The event log of run ``run_id`` in ``store``, its fold ``state`` and its budget ``gate``.

    ``metric`` orients verified scores into fitness. ``progress`` receives
    ``("verification", ...)`` after each recorded verification; ``watched`` is
    False when no one listens (progress payloads cost a ledger read each).
    """

    def __init__(
        self,
        store: RunStoreProtocol,
        caps: BudgetConfig,
        metric: Metric,
        progress: Progress | None = None,
        clock: Callable[[], float] = time.monotonic,
        gpus: int = 0,
    ) -> None:
        self.store, self.metric = store, metric
        self.run_id: str | None = None
        self.state = RunState()
        used = lambda: Budget() if self.run_id is None else store.budget(self.run_id)  # noqa: E731
        self.gate = BudgetGate(caps, used, clock, gpus=gpus)
        self.progress: Progress = progress or (lambda kind, data: None)
        self.watched = progress is not None

    @property
    def rid(self) -> str:
        """The run's id, once the run exists (``RuntimeError`` before: nothing can be recorded yet)."""
        if self.run_id is None:
            raise RuntimeError("the ledger has no run yet: create or resume one first")
        return self.run_id

    def emit(self, record: EventRecord, node_id: str | None = None, charge: Charge | None = None) -> list[Node]:
        """Append one event record (durable on return), then apply it; returns the nodes a ``tell`` told."""
        return append_and_fold(self.store, self.rid, self.state, record, node_id=node_id, charge=charge)

    async def record_data_report(self, task: Task, sandbox: Sandbox, hide: Sequence[Path] = ()) -> None:
        """Compute the task's data report in ``sandbox`` (``hide`` masked) and store it as one event.

        The one way a run (the engine) and a data collection put the report into their log, so the critic's
        prompt carries it in both or in neither (``critic_data.prompt``). Framework code: its seconds are in
        the event and charged to no budget; a report that could not be computed is stored too, saying why.
        """
        report, seconds = await asyncio.to_thread(datareport.report_for_run, task, sandbox, hide=hide)
        blob = self.store.put_blob(report.to_json())
        self.emit(datareport.event_record(report, blob, seconds))

    def record_candidate(self, cand: Candidate, status: Status, reason: str = "") -> None:
        """A ``node`` event; its program text is stored as a blob in the same transaction."""
        warning = str(getattr(cand.summary, "warning", ""))  # an out-of-range summary's tag (roles/llm.py Summary)
        self.emit(NodeRecorded(cand, status=status, reason=reason, summary_warning=warning), node_id=cand.id)

    def set_status(self, node_id: str, status: Status, reason: str) -> None:
        self.emit(StatusChanged(status, reason), node_id=node_id)

    def record_verification(self, node_id: str, v: Verification) -> None:
        """The verification of ``node_id`` with its charge (1 verification + its seconds), in one transaction."""
        record = self._record(v)
        self.emit(record, node_id=node_id, charge=Charge(verifications=1, evaluator_seconds=v.seconds))
        if self.watched:
            self.progress(
                "verification",
                {
                    "node_id": node_id,
                    "status": v.status.value,
                    "score": v.score,
                    "fitness": record.fitness,
                    "parent_fitness": self._parent_fitness(node_id),
                    "budget": self.budget_view(),
                },
            )

    def _parent_fitness(self, node_id: str) -> float | None:
        """The told parent's oriented fitness (None for a root, an unverified or a failed parent)."""
        cand = self.state.candidates.get(node_id)
        parent = self.state.view.nodes.get(cand.parent_id) if cand is not None and cand.parent_id else None
        return parent.fitness if parent is not None else None

    def record_reused(self, node_id: str, source: str, v: Verification) -> None:
        """A result read back by program hash: a ``verification`` event naming ``reused_from``, charged nothing."""
        self.emit(replace(self._record(v), reused_from=source), node_id=node_id)

    def budget_view(self) -> dict[str, Any]:
        """Spent and capped amounts with the best score so far, for progress display."""
        best = self.state.view.best
        return {**self.gate.summary(), "best": best.score if best else None}

    def _record(self, v: Verification) -> Verified:
        fitness = self.metric.orient(v.score) if v.status is Status.OK and v.score is not None else None
        return Verified(v, fitness)
