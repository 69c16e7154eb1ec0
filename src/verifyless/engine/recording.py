"""Recording: every fact the engine learns is stored first, then folded into its state.

``Recorder._emit`` is the single write path of the engine: it appends one
event to the run store (program text, view update and budget charge in the
same transaction) and then applies the committed event to ``RunState`` --
exactly what resume does with the stored log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from verifyless.engine.state import RunState
from verifyless.errors import ModelUnavailable
from verifyless.node import Candidate, Node, Status, Verification
from verifyless.store.records import Charge, Event

log = logging.getLogger(__name__)

__all__ = ["Recorder"]


class Recorder:
    """The engine's write side (a base class of ``Engine``): events in, state updated."""

    state: RunState
    task: Any
    gate: Any

    def __init__(self, store: Any, progress: Callable[[str, dict[str, Any]], None] | None) -> None:
        self.store = store
        self.run_id: str | None = None
        self.run_ref: dict[str, str | None] = {"run_id": None}  # shared with the LLM call recorder
        self.progress = progress or (lambda kind, data: None)
        self._watched = progress is not None  # build progress payloads (a ledger read each) only when shown
        self._model_failures = 0

    def _emit(
        self, kind: str, payload: dict[str, Any], node_id: str | None = None, charge: Charge | None = None
    ) -> list[Node]:
        """Append one event (durable on return), then apply it; returns the nodes a ``tell`` told."""
        if charge is None:
            seq = self.store.append(self.run_id, kind, payload, node_id=node_id)
        else:
            seq = self.store.append(self.run_id, kind, payload, node_id=node_id, charge=charge)
        if kind == "node":
            payload = {k: v for k, v in payload.items() if k != "program"}
        return self.state.apply(Event(seq, self.run_id or "", time.time(), kind, node_id, payload, charge))

    def charge(
        self, kind: str, payload: dict[str, Any], *, evaluator_seconds: float = 0.0, node_id: str | None = None
    ) -> None:
        """Store an event that spends evaluator time outside a verification (e.g. an agentic ``pilot``)."""
        self._emit(kind, payload, node_id=node_id, charge=Charge(evaluator_seconds=evaluator_seconds))

    def _record_candidate(self, cand: Candidate, status: Status, reason: str = "") -> None:
        """A ``node`` event; its program text is stored as a blob in the same transaction."""
        payload = cand.to_dict()
        if not cand.program:
            payload.pop("program")
        payload.update(status=status.value, reason=reason)
        warning = getattr(cand.summary, "warning", "")  # an out-of-range summary's tag (roles/llm.py Summary)
        if warning:
            payload["summary_warning"] = warning
        self._emit("node", payload, node_id=cand.id)

    def _set_status(self, node_id: str, status: Status, reason: str) -> None:
        self._emit("status", {"status": status.value, "reason": reason}, node_id=node_id)

    def _record_verification(self, cand: Candidate, v: Verification) -> None:
        """The verification with its charge (1 verification + its seconds), in one transaction."""
        fitness = self.task.metric.orient(v.score) if v.status is Status.OK and v.score is not None else None
        self._emit(
            "verification",
            {**v.to_dict(), "fitness": fitness},
            node_id=cand.id,
            charge=Charge(verifications=1, evaluator_seconds=v.seconds),
        )
        if self._watched:
            self.progress(
                "verification",
                {"node_id": cand.id, "status": v.status.value, "score": v.score, "budget": self._budget_view()},
            )

    def _model_failure(self, r: int, reason: str, fatal: bool = True) -> None:
        """Log an endpoint failure; three rounds in a row without a usable proposer stop the run with the error."""
        self._emit("model_error", {"round": r, "reason": reason[:2000]})
        self.progress("model_error", {"round": r, "reason": reason})
        if fatal:
            self._model_failures += 1
            log.warning("round %d: %s (%d in a row)", r, reason, self._model_failures)
            if self._model_failures >= 3:
                raise ModelUnavailable(f"the model endpoint failed in 3 rounds in a row; last error: {reason}")

    def _budget_view(self) -> dict[str, Any]:
        best = self.state.view.best
        return {**self.gate.summary(), "best": best.score if best else None}
