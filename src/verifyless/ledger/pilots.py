"""Cheap evidence before a full verification: pilots and smoke runs, paid and recorded through the ledger.

A *pilot* runs a candidate at one of the task's cheaper fidelity levels
(``task.fidelity``, docs/design/task-format.md) for a screener (``pilot``,
successive halving); a *smoke run* runs it at the cheapest level with a short
wall limit just before its full verification (``verify_with_repairs``'s
``smoke`` step). Both are paid work:

* each one is its own event (``pilot_run`` or ``smoke``) charged in evaluator
  seconds (also counted as ``pilot_seconds``), stored when it ends -- so a
  kill -9 loses only the one in flight, which was never charged;
* each is read back by (program hash, kind, level) from the fold before it is
  paid, so a resumed run (or a second screening of the same program) charges
  nothing twice;
* a low-fidelity result is never a full outcome: it never enters
  ``RunState.verifications`` and never marks a program as verified.

The same cycle serves every paid loop: the engine (``Ledger``), ``data
collect`` (its own ``Ledger``) and the policy rewards (the run's ``PolicyLedger``,
train/policy/ledger.py).

A smoke run is not paid when a pilot of the same program at the same level
is stored: that pilot's result answers it. A smoke run that ends in a crash or a contract violation (``SMOKE_STOPS``)
becomes the candidate's status (a ``status`` event) at smoke cost; anything
else (OK, a timeout under the short limit) lets the full verification go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from verifyless.errors import ConfigError
from verifyless.events import EventRecord, LowFidelityRan, SmokeRan
from verifyless.executors.base import Executor
from verifyless.ledger.paid import REPAIRABLE
from verifyless.node import Candidate, Status, Verification
from verifyless.store.records import Charge
from verifyless.task.base import Task
from verifyless.verify import verify

__all__ = ["SMOKE_STOPS", "LowFidelity", "PaidBook", "RunAt", "low_fidelity_for", "run_in_sandbox", "smoke_level"]

SMOKE_STOPS = REPAIRABLE | {Status.CONTRACT_VIOLATION}

RunAt = Callable[[Task, str, str], Awaitable[Verification]]  # (task, program text, level) -> its result


class PaidBook(Protocol):
    """What ``LowFidelity`` needs of a ledger (the kernel's ``Ledger`` is one).

    ``state.low_fidelity_result(digest, kind, level)`` reads a stored result
    back; ``emit`` stores one event with its charge, durable on return;
    ``set_status`` stores a candidate's new status.
    """

    @property
    def state(self) -> Any: ...

    def emit(self, record: EventRecord, node_id: str | None = None, charge: Charge | None = None) -> Any: ...

    def set_status(self, node_id: str, status: Status, reason: str) -> None: ...


def run_in_sandbox(executor: Executor | None) -> RunAt | None:
    """A ``RunAt`` on ``executor``'s sandbox (as the ensemble submission runs), or None if it has none.

    ``executor`` is None for an engine that only restores a run and verifies nothing (``bench/scale.py``).
    """
    if executor is None or executor.sandbox is None:
        return None
    sandbox, hide = executor.sandbox, tuple(Path(p) for p in executor.hide)

    async def run(task: Task, program: str, level: str) -> Verification:
        return await asyncio.to_thread(verify, task, program, sandbox, hide=hide, level=level)

    return run


def smoke_level(task: Task, setting: str | None, llm_roles: bool) -> str | None:
    """The level smoke runs use: ``setting`` itself, none for ``"off"``; None means auto.

    An unknown level is a ``ConfigError`` naming the task's levels.
    Auto: the task's cheapest level, for LLM roles only (idea-space programs
    are made from a menu and rarely crash); None when the task declares no level.
    """
    if setting == "off":
        return None
    if setting is not None:
        if setting not in task.fidelity.names:
            raise ConfigError(
                f"engine.smoke={setting!r}: task {task.name!r} has no such fidelity level; "
                f"use one of {list(task.fidelity.names)} or 'off'"
            )
        return setting
    levels = task.fidelity.levels
    return levels[0].name if llm_roles and levels else None


class LowFidelity:
    """Pays and records one run's pilots and smoke runs through ``ledger``; ``run`` executes one.

    ``smoke_wall_seconds`` caps a smoke run's wall time (the task's own limit
    when it is smaller).
    """

    def __init__(self, ledger: PaidBook, task: Task, run: RunAt, *, smoke_wall_seconds: float = 30.0) -> None:
        self.ledger, self.task, self.run = ledger, task, run
        self.smoke_wall_seconds = smoke_wall_seconds

    async def pilot(self, cand: Candidate, level: str, round: int = 0) -> Verification:
        """``cand`` at ``level``: read back when this program ran there before, else paid and stored."""
        return await self._paid(LowFidelityRan, cand, level, self.task, round)

    async def smoke(self, cand: Candidate, level: str) -> Verification | None:
        """A smoke run of ``cand`` at ``level``; its result when it stops the candidate (status stored), else None."""
        v = self.ledger.state.low_fidelity_result(cand.program_hash, LowFidelityRan.KIND, level)
        if v is None:  # a pilot of this program at this level already answers the smoke question, unpaid
            wall = min(self.task.limits.wall_seconds, self.smoke_wall_seconds)
            short = dataclasses.replace(self.task, limits=dataclasses.replace(self.task.limits, wall_seconds=wall))
            v = await self._paid(SmokeRan, cand, level, short, cand.round)
        if v.status not in SMOKE_STOPS:
            return None
        self.ledger.set_status(cand.id, v.status, f"smoke run at level {level!r}: {v.reason}"[:2000])
        return v

    async def _paid(
        self, kind: type[LowFidelityRan], cand: Candidate, level: str, task: Task, round: int
    ) -> Verification:
        known = self.ledger.state.low_fidelity_result(cand.program_hash, kind.KIND, level)
        if known is not None:
            return known
        v = await self.run(task, cand.program, level)
        v = v.replace(fidelity=level, program_hash=v.program_hash or cand.program_hash)
        charge = Charge(evaluator_seconds=v.seconds, pilot_seconds=v.seconds)
        self.ledger.emit(kind(v, level, round), node_id=cand.id, charge=charge)
        return v


def low_fidelity_for(
    ledger: PaidBook,
    task: Task,
    executor: Executor | None,
    *,
    smoke: str | None,
    llm_roles: bool,
    smoke_wall_seconds: float,
) -> tuple[LowFidelity | None, str | None]:
    """A run's ``LowFidelity`` and its smoke level (``smoke_level``); (None, None) when ``executor`` has no sandbox."""
    run = run_in_sandbox(executor)
    if run is None:
        return None, None
    low = LowFidelity(ledger, task, run, smoke_wall_seconds=smoke_wall_seconds)
    return low, smoke_level(task, smoke, llm_roles)
