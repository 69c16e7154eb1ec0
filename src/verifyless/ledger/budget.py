"""The budget: ``BudgetConfig`` (the one form of a hard cap) and the gate that enforces it.

A verification takes a slot before it is dispatched and gives it back once
its result (and charge) is stored::

    slot = gate.reserve()            # the reservation is the check: None once a cap is reached
    if slot is None:
        return                       # nothing is paid past the cap
    async with slot:                 # released on exit, also on error or cancellation
        v = await executor.verify(...)
        record(v)                    # the charge is in the ledger before the slot is released

Checking ``slots_left()`` and reserving later is the bug of issue #25 (an
``await`` in between lets another chain take the last slot); ``reserve``
checks and counts in one step, with no ``await`` in it, so concurrent
coroutines can never overshoot the verification cap.

The gate reads what was spent from the store's ledger (``used``), so a
resumed run continues from what the log says, and it says why a run must stop
(``stop_reason``). Token and cost caps stop new LLM work; they cannot recall a
reply already paid for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from pydantic import Field

from verifyless.registry import StrictOptions
from verifyless.store.records import Budget

__all__ = ["NO_CAP", "BudgetConfig", "BudgetGate", "Slot"]

NO_CAP = 1 << 30


class BudgetConfig(StrictOptions):
    """Hard caps. ``None`` means no cap on that axis; at least one cap must be set."""

    verifications: int | None = Field(30, ge=1, description="paid verifications, repairs and the baseline included")
    evaluator_seconds: float | None = Field(
        None,
        gt=0,
        description="seconds spent running programs: verifications, pilots, smoke runs and submission re-runs",
    )
    gpu_seconds: float | None = Field(
        None,
        gt=0,
        description="GPU seconds: evaluator seconds times the GPUs each verification holds (the task's limits.gpus)",
    )
    tokens: int | None = Field(None, ge=1, description="prompt + completion tokens over all roles")
    cost: float | None = Field(None, gt=0, description="LLM cost, in the price table's currency")
    wall_seconds: float | None = Field(None, gt=0, description="wall-clock seconds since this process started the run")


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


EVALUATOR_SPENT = "budget: evaluator seconds"  # stop reasons of the caps that running programs spend
GPU_SPENT = "budget: GPU seconds"
WALL_SPENT = "budget: wall time"


class BudgetGate:
    """Reserves verification slots against ``caps``; ``used`` returns the ledger totals.

    ``gpus``: the GPUs each of the run's verifications holds (its task's ``limits.gpus``); GPU seconds
    spent are the evaluator seconds times that.
    """

    def __init__(
        self,
        caps: BudgetConfig,
        used: Callable[[], Budget],
        clock: Callable[[], float] = time.monotonic,
        gpus: int = 0,
    ) -> None:
        self.caps = caps
        self.gpus = gpus
        self._used = used
        self._clock = clock
        self.started = clock()
        self.reserved = 0
        self._wall_mark: tuple[float, int] | None = None  # (clock, verifications) at the first wall-paced look
        # Seconds the search leaves for the run's final step (a top-K ensemble that is the run's answer), given
        # what was spent so far; None: nothing held back. The final step itself asks with ``final=True``.
        self.hold: Callable[[Budget], float] | None = None

    def used(self) -> Budget:
        return self._used()

    def stop_reason(self, used: Budget | None = None) -> str | None:
        """Why no new work may start (``budget: ...``), or None while every cap has room."""
        b = self.caps
        used = used if used is not None else self._used()
        if b.verifications is not None and used.verifications + self.reserved >= b.verifications:
            return "budget: verifications"
        return self.llm_stop_reason(used)

    def llm_stop_reason(self, used: Budget | None = None, final: bool = False) -> str | None:
        """Why no new LLM work may start: every cap but the verification count (None while they have room).

        The time caps (evaluator, GPU and wall seconds) count the seconds ``hold`` keeps for the run's final
        step as spent, except for that step itself (``final``)."""
        b = self.caps
        used = used if used is not None else self._used()
        held = self.held(used, final)
        if b.evaluator_seconds is not None and used.evaluator_seconds + held >= b.evaluator_seconds:
            return EVALUATOR_SPENT
        if b.gpu_seconds is not None and self.gpus and (used.evaluator_seconds + held) * self.gpus >= b.gpu_seconds:
            return GPU_SPENT
        if b.tokens is not None and used.tokens_in + used.tokens_out >= b.tokens:
            return "budget: tokens"
        if b.cost is not None and used.cost >= b.cost:
            return "budget: cost"
        if b.wall_seconds is not None and self._clock() - self.started + held >= b.wall_seconds:
            return WALL_SPENT
        return None

    def held(self, used: Budget, final: bool = False) -> float:
        """Seconds kept for the run's final step (0 for that step itself, or when nothing is held)."""
        return 0.0 if final or self.hold is None else max(0.0, self.hold(used))

    def slots_left(self) -> int:
        """Verifications that may still be reserved (0 once any cap is reached)."""
        used = self._used()  # one ledger read serves both checks
        if self.stop_reason(used) is not None:
            return 0
        cap = self.caps.verifications
        return NO_CAP if cap is None else cap - used.verifications - self.reserved

    def steps_left(self, taking: int, wall: bool = False) -> int | None:
        """Verifications the caps allow after ``taking`` more are committed (None: no cap counts them).

        The verification cap counts paid and in-flight verifications; under an evaluator-seconds cap the seconds
        left become steps at the mean seconds per paid verification so far (the baseline's, at first). With
        ``wall`` (a strategy that asks to be paced by wall time), a ``wall_seconds`` cap counts too: the wall
        seconds left become steps at the mean wall seconds per verification paid since the first such look (LLM
        time included, as the wall clock includes it; no count until one verification is paid after it). Where
        several caps are set, the smallest count binds. The engine paces annealing strategies with it.
        """
        used, counts = self._used(), []
        if self.caps.verifications is not None:
            counts.append(self.caps.verifications - used.verifications - self.reserved - taking)
        if self.caps.evaluator_seconds is not None and used.verifications > 0:
            per_step = used.evaluator_seconds / used.verifications
            left = max(0.0, self.caps.evaluator_seconds - used.evaluator_seconds - self.held(used))
            counts.append((NO_CAP if per_step <= 0 else int(left // per_step)) - self.reserved - taking)
        if wall and self.caps.wall_seconds is not None:
            by_wall = self._wall_steps(used.verifications, self.caps.wall_seconds - self.held(used))
            if by_wall is not None:
                counts.append(by_wall - self.reserved - taking)
        return max(0, min(counts)) if counts else None

    def _wall_steps(self, verified: int, cap: float) -> int | None:
        """Steps the wall-clock seconds left allow at this process's pace so far (None: no pace measured yet)."""
        now = self._clock()
        if self._wall_mark is None:
            self._wall_mark = (now, verified)
        since, before = self._wall_mark
        if verified <= before:
            return None
        per_step = (now - since) / (verified - before)
        left = max(0.0, cap - (now - self.started))
        return NO_CAP if per_step <= 0 else int(left // per_step)

    def seconds_left(self) -> float | None:
        """Evaluator seconds left under ``budget.evaluator_seconds`` (None: no such cap)."""
        cap = self.caps.evaluator_seconds
        return None if cap is None else max(0.0, cap - self._used().evaluator_seconds)

    def reserve(self) -> Slot | None:
        """One verification counted as in flight from now on, or None when a cap leaves no room.

        The check and the count are one step (no ``await`` between them), so
        whoever holds a slot may pay for one verification without looking again.
        """
        if self.slots_left() <= 0:
            return None
        return self.reserve_anyway()

    def reserve_anyway(self) -> Slot:
        """A slot without the check: only for the baseline, which every run verifies once (it may pass a cap)."""
        self.reserved += 1
        return Slot(self)

    def summary(self) -> dict[str, Any]:
        """Spent and capped amounts, for progress display."""
        used = self._used()
        return {
            "verifications": used.verifications,
            "cap": self.caps.verifications,
            "evaluator_seconds": round(used.evaluator_seconds, 2),
            "gpu_seconds": round(used.evaluator_seconds * self.gpus, 2),
            "tokens": used.tokens_in + used.tokens_out,
        }
