"""Paid verification: a candidate from a made child, and verify-with-repairs that keeps the idea.

``candidate_from(made, ...)`` is the one way a made child (``verifyless.child.Made``)
becomes a ``Candidate`` record. ``verify_with_repairs`` runs one verification
chain: verify; on a repairable failure (``REPAIRABLE`` by default: a crash,
an invalid metric, out of memory -- never a timeout, which a repair would
only repeat) ask for a repair that keeps the idea and verify the repaired
program; at most ``attempts`` repairs. Given a ``BudgetGate``, the slot for
a repair is reserved *before* the repair is awaited, so no other chain can
spend it meanwhile (issue #25: the check and the reservation are one step);
a repair that fails gives its slot back. How a repair is made, recorded and
named stays with the caller (``repair``), as does what a verification
records and whether it is read back instead of paid (``verify``).

With a ``smoke`` step (ledger/pilots.py: the cheapest fidelity level, a short
wall limit), every attempt -- the first and each repair -- is smoke-run
before its full verification; a smoke result that stops the candidate takes
the place of the verification (its slot is given back unpaid) and goes
through the same repair that keeps the idea.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Required, TypedDict, Unpack

from verifyless.ledger.budget import BudgetGate, Slot
from verifyless.node import Candidate, Operator, Status, Verification

if TYPE_CHECKING:  # pragma: no cover
    from verifyless.child import Made

__all__ = ["REPAIRABLE", "Place", "Repair", "Smoke", "Verify", "candidate_from", "verify_with_repairs"]

REPAIRABLE = frozenset({Status.FAILED, Status.INVALID_METRIC, Status.OOM})

Verify = Callable[[Candidate, "Slot | None", int], Awaitable[Verification]]  # (candidate, its slot, attempt)
Repair = Callable[[Candidate, Verification, int], Awaitable["Candidate | None"]]  # (failed, its result, attempt)
Smoke = Callable[[Candidate, int], Awaitable["Verification | None"]]  # (candidate, attempt) -> a stopping result


class Place(TypedDict, total=False):
    """Where a made child sits in the search (``Candidate``'s own fields): id, parent, operator, round, ..."""

    id: Required[str]
    parent_id: Required[str | None]
    operator: Required[Operator]
    round: Required[int]
    island: int
    reference_ids: tuple[str, ...]


def candidate_from(made: Made, **place: Unpack[Place]) -> Candidate:
    """The ``Candidate`` record of ``made`` (idea, program, hash, summary) at its ``place`` in the search."""
    return Candidate(
        **place, idea=made.idea, program=made.program, program_hash=made.program_hash, summary=made.summary
    )


async def verify_with_repairs(
    cand: Candidate,
    *,
    verify: Verify,
    repair: Repair,
    attempts: int,
    gate: BudgetGate | None = None,
    slot: Slot | None = None,
    repairable: frozenset[Status] = REPAIRABLE,
    smoke: Smoke | None = None,
) -> tuple[Candidate, Verification]:
    """Verify ``cand``, then repair and verify again while it fails repairably; (last candidate, its result).

    With a ``gate``, ``slot`` is the first verification's reserved slot and
    each repair's slot is reserved before the repair is asked for (no slot:
    the chain ends, no repair is asked for). Without one, ``verify`` is
    called with ``None`` and pays at its own reserved moment (it may raise
    when the cap is reached). Stops at a result outside ``repairable``,
    after ``attempts`` repairs, or when ``repair`` returns None. ``smoke``
    runs before each ``verify``: a result it returns replaces that
    verification (never paid; the slot is released), None lets it go on.
    """

    async def attempt_once(c: Candidate, slot_: Slot | None, attempt: int) -> Verification:
        try:
            stopped = await smoke(c, attempt) if smoke is not None else None
        except BaseException:
            _release(slot_)
            raise
        if stopped is None:
            return await verify(c, slot_, attempt)
        _release(slot_)
        return stopped

    verification = await attempt_once(cand, slot, 0)
    current = cand
    for attempt in range(1, attempts + 1):
        if verification.status not in repairable:
            break
        next_slot = gate.reserve() if gate is not None else None
        if gate is not None and next_slot is None:
            break
        try:
            fixed = await repair(current, verification, attempt)
        except BaseException:
            _release(next_slot)
            raise
        if fixed is None:
            _release(next_slot)
            break
        verification = await attempt_once(fixed, next_slot, attempt)
        current = fixed
    return current, verification


def _release(slot: Slot | None) -> None:
    if slot is not None:
        slot.release()
