"""The budget gate: hard caps that count work in flight.

A verification takes a slot before it is dispatched and gives it back once
its result (and charge) is stored::

    slot = gate.reserve()            # counted from now on, so nothing can overshoot the cap
    async with slot:                 # released on exit, also on error or cancellation
        v = await executor.verify(...)
        record(v)                    # the charge is in the ledger before the slot is released

The gate reads what was spent from the store's ledger (``used``), so a
resumed run continues from what the log says, and it says why a run must stop
(``stop_reason``). Token and cost caps stop new LLM work; they cannot recall a
reply already paid for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from verifyless.config import BudgetConfig
from verifyless.store.records import Budget

__all__ = ["BudgetGate", "Slot"]

NO_CAP = 1 << 30


class Slot:
    """One reserved verification; ``async with`` releases it exactly once."""

    def __init__(self, gate: BudgetGate) -> None:
        self._gate: BudgetGate | None = gate

    async def __aenter__(self) -> Slot:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    def release(self) -> None:
        if self._gate is not None:
            self._gate.reserved -= 1
            self._gate = None


class BudgetGate:
    """Reserves verification slots against ``caps``; ``used`` returns the ledger totals."""

    def __init__(
        self, caps: BudgetConfig, used: Callable[[], Budget], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.caps = caps
        self._used = used
        self._clock = clock
        self.started = clock()
        self.reserved = 0

    def used(self) -> Budget:
        return self._used()

    def stop_reason(self, used: Budget | None = None) -> str | None:
        """Why no new work may start (``budget: ...``), or None while every cap has room."""
        b = self.caps
        used = used if used is not None else self._used()
        if b.verifications is not None and used.verifications + self.reserved >= b.verifications:
            return "budget: verifications"
        if b.evaluator_seconds is not None and used.evaluator_seconds >= b.evaluator_seconds:
            return "budget: evaluator seconds"
        if b.tokens is not None and used.tokens_in + used.tokens_out >= b.tokens:
            return "budget: tokens"
        if b.cost is not None and used.cost >= b.cost:
            return "budget: cost"
        if b.wall_seconds is not None and self._clock() - self.started >= b.wall_seconds:
            return "budget: wall time"
        return None

    def slots_left(self) -> int:
        """Verifications that may still be reserved (0 once any cap is reached)."""
        used = self._used()  # one ledger read serves both checks
        if self.stop_reason(used) is not None:
            return 0
        cap = self.caps.verifications
        return NO_CAP if cap is None else cap - used.verifications - self.reserved

    def seconds_left(self) -> float | None:
        """Evaluator seconds left under ``budget.evaluator_seconds`` (None: no such cap)."""
        cap = self.caps.evaluator_seconds
        return None if cap is None else max(0.0, cap - self._used().evaluator_seconds)

    def reserve(self) -> Slot:
        """Count one verification as in flight now; the caller checked ``slots_left`` first."""
        self.reserved += 1
        return Slot(self)

    def summary(self) -> dict[str, Any]:
        """Spent and capped amounts, for progress display."""
        used = self._used()
        return {
            "verifications": used.verifications,
            "cap": self.caps.verifications,
            "evaluator_seconds": round(used.evaluator_seconds, 2),
            "tokens": used.tokens_in + used.tokens_out,
        }
