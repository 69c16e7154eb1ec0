"""Paid verification: a candidate from a made child, and verify-with-repairs that keeps the idea.

``candidate_from(made, ...)`` is the one way a made child (``verifyless.child.Made``)
becomes a ``Candidate`` record. ``verify_with_repairs`` runs one verification
chain: verify in a reserved slot; on a repairable failure (``REPAIRABLE``: a
crash, an invalid metric, out of memory -- never a timeout, which a repair
would only repeat) reserve the next slot, ask for a repair that keeps the
idea, and verify the repaired program; at most ``attempts`` repairs. The
slot for a repair is reserved *before* the repair is awaited, so no other
chain can spend it meanwhile (issue #25: the check and the reservation are
one step); a repair that fails gives its slot back. How a repair is made,
recorded and named stays with the caller (``repair``), as does what a
verification records (``verify``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from verifyless.ledger.budget import BudgetGate, Slot
from verifyless.node import Candidate, Operator, Status, Verification

if TYPE_CHECKING:  # pragma: no cover
    from verifyless.child import Made

__all__ = ["REPAIRABLE", "Repair", "Verify", "candidate_from", "verify_with_repairs"]

REPAIRABLE = frozenset({Status.FAILED, Status.INVALID_METRIC, Status.OOM})

Verify = Callable[[Candidate, Slot, int], Awaitable[Verification]]  # (candidate, its slot, attempt)
Repair = Callable[[Candidate, Verification, int], Awaitable["Candidate | None"]]  # (failed, its result, attempt)


def candidate_from(
    made: Made,
    id: str,
    parent_id: str | None,
    operator: Operator,
    round: int,
    *,
    island: int = 0,
    reference_ids: tuple[str, ...] = (),
) -> Candidate:
    """The ``Candidate`` record of ``made`` (idea, program, hash, summary) at its place in the search."""
    return Candidate(
        id=id,
        parent_id=parent_id,
        operator=operator,
        reference_ids=reference_ids,
        round=round,
        island=island,
        idea=made.idea,
        program=made.program,
        program_hash=made.program_hash,
        summary=made.summary,
    )


async def verify_with_repairs(
    cand: Candidate, slot: Slot, *, gate: BudgetGate, verify: Verify, repair: Repair, attempts: int
) -> Verification:
    """Verify ``cand`` in ``slot``, then repair and verify again while it fails repairably; the last result.

    Stops at a result that is not in ``REPAIRABLE``, after ``attempts``
    repairs, when ``repair`` returns None (no runnable repair), or when the
    gate has no slot left -- then no repair is asked for.
    """
    verification = await verify(cand, slot, 0)
    current = cand
    for attempt in range(1, attempts + 1):
        if verification.status not in REPAIRABLE:
            break
        next_slot = gate.reserve()
        if next_slot is None:
            break
        try:
            fixed = await repair(current, verification, attempt)
        except BaseException:
            next_slot.release()
            raise
        if fixed is None:
            next_slot.release()
            break
        verification = await verify(fixed, next_slot, attempt)
        current = fixed
    return verification
