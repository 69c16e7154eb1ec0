"""Verification chains in flight, and the novelty gate that may dispatch before screening.

``Dispatch`` owns what is dispatched for verification: the chains in flight by round, the program
hashes claimed (dispatched, so never made again), the executor, and the low-fidelity runner whose
smoke step precedes each attempt (``ledger/pilots.py``). ``dispatch`` reserves a slot first (the cap
counts it) and starts the chain in the background; a chain is verify, then on a repairable failure
repair (same idea, node ``<id>f<k>``) and verify again, each in its own slot (``verify_with_repairs``).
Each verified node is queued in the ``TellQueue`` at its position; ``finish(upto)`` awaits the chains
of rounds <= upto.

``gate_pool`` runs the novelty gate between *make children* and *screen*: one ``novelty`` event per
candidate (the verdict and the round), ``Status.NOT_NOVEL`` with the verdict's reason for a rejection
(told like a duplicate: never screened, never verified); audited rejections are dispatched for
verification at once, without screening. The archive is every verified program and every program
dispatched for verification (the baseline included). The gate's audit generator is reseeded per round
(``"{seed}:novelty:{round}"``), so a resumed run draws what the uninterrupted one drew.

``owned`` sets the ensemble call owner (``model.ensemble.call_owner``) around a piece of work, so a
model choice names the node it is for (``engine/ensembles.py``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Iterator
from typing import TypeVar

from verifyless.child import ChildMaker
from verifyless.config import RunConfig
from verifyless.engine.context import Programs
from verifyless.engine.tells import TellOrder, TellQueue
from verifyless.events import NoveltyJudged
from verifyless.executors.base import Executor
from verifyless.ledger import Ledger, LowFidelity, Slot, candidate_from, low_fidelity_for, verify_with_repairs
from verifyless.model.ensemble import call_owner
from verifyless.node import Candidate, Operator, Status, Verification
from verifyless.screen.novelty import ArchiveProgram, NoveltyGate
from verifyless.task.base import Task

T = TypeVar("T")

__all__ = ["Dispatch", "owned"]


async def owned(owner: str, work: Awaitable[T]) -> T:
    """Await ``work`` with ``call_owner`` set to ``owner`` (so ensemble choices name the node they are for)."""
    token = call_owner.set(owner)
    try:
        return await work
    finally:
        call_owner.reset(token)


class Dispatch:
    """The run's verification chains and claimed programs, and the novelty gate before screening (module docstring).

    Reads the run's state through ``ledger`` (a state adopted from a snapshot is the one read), and from
    ``config`` the seed, the repair attempts and the smoke setting. ``claimed`` is the set of program hashes
    dispatched for verification: read it, do not write it. ``low_fidelity`` (None where the executor has no
    sandbox) also runs the screener's pilots (``ScreenStep``).
    """

    def __init__(
        self,
        *,
        task: Task,
        executor: Executor,
        ledger: Ledger,
        tells: TellQueue,
        maker: ChildMaker,
        programs: Programs,
        novelty: NoveltyGate | None,
        config: RunConfig,
    ) -> None:
        self.task, self.executor, self.ledger, self.tells, self.maker = task, executor, ledger, tells, maker
        self.programs, self.novelty, self.seed = programs, novelty, config.seed
        eng = config.engine
        self.repair_attempts = eng.repair_attempts
        self.low_fidelity: LowFidelity | None  # pilots (the screener's) and smoke runs (before each attempt)
        self.smoke_at: str | None
        self.low_fidelity, self.smoke_at = low_fidelity_for(
            ledger,
            task,
            executor,
            smoke=eng.smoke,
            llm_roles=config.roles.kind == "llm",
            smoke_wall_seconds=eng.smoke_wall_seconds,
        )
        self.claimed: set[str] = set()  # program hashes dispatched for verification
        self._inflight: dict[int, list[asyncio.Task]] = {}  # round -> verification chains

    # ------------------------------------------------------------------ the novelty gate

    def archive(self) -> list[ArchiveProgram]:
        """The run's verified programs and those dispatched for verification, in node order."""
        state, out = self.ledger.state, []
        for nid, node in state.view.nodes.items():
            if nid in state.programs and (node.status.verified or node.program_hash in self.claimed):
                out.append(ArchiveProgram(nid, self.programs.text(nid), node.parent_id))
        return out

    async def gate_pool(self, r: int, pool: list[Candidate]) -> list[Candidate]:
        """The candidates that go on to screening; audited rejections are dispatched for verification here.

        An audited candidate skips screening: it is verified after waiting for the executor, at tell position
        ``("audit", k)`` (after the round's screened choices).
        """
        gate = self.novelty
        if gate is None or not pool:
            return pool
        gate.rng = random.Random(f"{self.seed}:novelty:{r}")
        verdicts = await gate.check(pool, self.archive())
        for v in verdicts:
            self.ledger.emit(NoveltyJudged.parse({**v.to_dict(), "round": r}), node_id=v.candidate_id)
            if v.outcome == "rejected":
                self.ledger.set_status(v.candidate_id, Status.NOT_NOVEL, v.reason)
                self.tells.add(r, TellOrder.DUPLICATE, (v.candidate_id,), v.candidate_id)
        audited = [c for c, v in zip(pool, verdicts, strict=True) if v.outcome == "audited"]
        for k, cand in enumerate(audited):
            await self.wait_for_executor()
            self.dispatch(cand, ("audit", k), k)
        return [c for c, v in zip(pool, verdicts, strict=True) if v.outcome == "accepted"]

    # ------------------------------------------------------------------ verification chains

    def dispatch(self, cand: Candidate, position: tuple, rank: int) -> None:
        """Reserve a slot now (so the cap counts it) and start the chain in the background.

        With no slot left (a repair of an earlier round took it while this
        round waited for the executor) the candidate is screened out instead.
        """
        slot = self.ledger.gate.reserve()
        if slot is None:
            self.ledger.set_status(cand.id, Status.SCREENED_OUT, "the budget was spent before it could be verified")
            self.tells.add(cand.round, TellOrder.SCREENED_OUT, (rank,), cand.id)
            return
        self.claimed.add(cand.program_hash)
        chain = asyncio.create_task(self.verify_chain(cand, position, slot))
        self._inflight.setdefault(cand.round, []).append(chain)

    async def verify_chain(self, cand: Candidate, position: tuple, slot: Slot) -> None:
        """Verify ``cand``; on a repairable failure, repair (same idea) and verify again, each in its own slot."""

        async def verify(c: Candidate, slot_: Slot | None, attempt: int) -> Verification:
            assert slot_ is not None  # the gate reserved it
            return await self.verify(c, slot_, position, attempt)

        async def repair(current: Candidate, verification: Verification, attempt: int) -> Candidate | None:
            return await owned(f"{cand.id}f{attempt}", self._repair(cand, current, verification, attempt))

        async def smoke(c: Candidate, attempt: int) -> Verification | None:
            assert self.low_fidelity is not None and self.smoke_at is not None
            stopped = await self.low_fidelity.smoke(c, self.smoke_at)
            if stopped is not None:  # its status is stored: tell it like a verified node
                self.tells.add(cand.round, TellOrder.VERIFIED, (*position, attempt), c.id)
            return stopped

        smoking = smoke if self.smoke_at is not None else None
        await verify_with_repairs(
            cand,
            verify=verify,
            repair=repair,
            attempts=self.repair_attempts,
            gate=self.ledger.gate,
            slot=slot,
            smoke=smoking,
        )

    async def verify(self, cand: Candidate, slot: Slot, position: tuple, attempt: int) -> Verification:
        """One paid verification in ``slot``, stored with its charge, then queued for its round's tell."""
        async with slot:
            verification = await self.executor.verify(self.task, cand.program)
            self.ledger.record_verification(cand.id, verification)
        self.tells.add(cand.round, TellOrder.VERIFIED, (*position, attempt), cand.id)
        return verification

    async def _repair(
        self, first: Candidate, current: Candidate, verification: Verification, attempt: int
    ) -> Candidate | None:
        """Repair ``current`` (same idea) as node ``<first>f<attempt>``, recorded; None if no program was made."""
        error = f"{verification.reason}\n{verification.stderr_tail[-2000:]}"
        made = await self.maker.repair(
            first.program,
            current.program,
            current.idea,
            error,
            skip=lambda d: d in self.ledger.state.verified_hashes or d in self.claimed,
        )
        if not made.ok:
            return None
        fixed = candidate_from(
            made,
            id=f"{first.id}f{attempt}",
            parent_id=current.id,
            operator=Operator.DEBUG,
            round=first.round,
            island=first.island,
        )
        self.claimed.add(fixed.program_hash)
        self.ledger.record_candidate(fixed, Status.IMPLEMENTED)
        return fixed

    async def wait_for_executor(self) -> None:
        """Return once fewer chains run than the executor's capacity."""
        while sum(1 for t in self._chains() if not t.done()) >= self.executor.capacity:
            await asyncio.wait([t for t in self._chains() if not t.done()], return_when=asyncio.FIRST_COMPLETED)

    async def finish(self, upto: int) -> None:
        """Await every chain of rounds <= ``upto``, round by round."""
        for r in sorted(k for k in self._inflight if k <= upto):
            await asyncio.gather(*self._inflight.pop(r))

    async def cancel(self) -> None:
        """Cancel every chain and collect each outcome, so none is left unretrieved (finished ones are stored)."""
        for chain in self._chains():
            chain.cancel()
        await asyncio.gather(*self._chains(), return_exceptions=True)

    def _chains(self) -> Iterator[asyncio.Task]:
        for tasks in self._inflight.values():
            yield from tasks
