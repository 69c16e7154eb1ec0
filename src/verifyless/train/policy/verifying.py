"""Paid verification for policy training: the hard cap, reuse, and repairs that keep the idea.

``PaidVerifier.verify`` records every verification with its budget charge in
one transaction before returning it (``PolicyLedger.verification``). A node
already verified in the run is read back, never verified again; a
verification that was running when the process died left no event, so it
runs again and is charged once. On a deterministic task a program already
verified in the run (or being verified right now by a concurrent idea) is
not paid again: its event copies the result with no charge (``reused_from``).

The cap is a ``BudgetConfig`` enforced by the kernel's ``BudgetGate``
(``verifyless.ledger``): paid verifications in the ledger plus the ones in
flight. A verification reserves its slot at the moment it must be paid (the
reservation is the check); when the cap leaves none,
``VerificationBudgetSpent`` is raised before anything runs.

``verify_with_repairs`` runs the kernel's chain (``ledger.verify_with_repairs``)
with the kernel's one repair rule (``ledger.REPAIRABLE``): policy training
repairs exactly what the engine repairs -- a crash, an invalid metric, out
of memory; never a timeout nor a contract violation (until issue #34 it had
its own rule, any failure but a timeout). Such a child gets up to
``repairs`` repairs through ``ChildMaker.repair`` (the idea is kept; fixed
regions are checked against the original parent). Each repaired program is a
new node ``<child>r<k>`` and its verification is paid like any other. The
last verification decides the outcome.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import dataclass

from verifyless.child import ChildMaker
from verifyless.executors.base import Executor
from verifyless.ledger import REPAIRABLE, BudgetConfig, BudgetGate, Slot, candidate_from, verify_with_repairs
from verifyless.ledger.paid import Smoke
from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.outcome import improved, verified_outcome
from verifyless.roles.base import ParentInfo
from verifyless.task.base import Task
from verifyless.train.policy.contract import VerificationBudgetSpent
from verifyless.train.policy.ledger import PolicyLedger

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checked:
    """The outcome of verifying one idea's child, repairs included."""

    node_id: str  # the node whose verification decided (the child, or its last repair)
    verification: Verification
    paid: int  # verifications charged for this idea
    seconds: float  # evaluator seconds of the charged verifications


class LoopGate:
    """At most ``n`` holders at once, in whatever event loop is running (one semaphore per loop).

    ``asyncio.Semaphore`` binds to the first loop in which it has to wait, so a
    trainer that calls ``asyncio.run`` once per step would fail on the second
    step. The rewarder gates executor calls with this (never more than the
    executor's ``capacity`` at once, so the executor's own semaphore never
    waits) and the wiring gates LLM calls with it.
    """

    def __init__(self, n: int) -> None:
        self.n = max(1, int(n))
        self._gates: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Semaphore]] = {}

    def _gate(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        known = self._gates.get(id(loop))
        if known is None or known[0] is not loop:
            self._gates = {k: v for k, v in self._gates.items() if not v[0].is_closed()}
            known = (loop, asyncio.Semaphore(self.n))
            self._gates[id(loop)] = known
        return known[1]

    async def __aenter__(self) -> None:
        await self._gate().acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._gate().release()


class PaidVerifier:
    """Verifies recorded nodes through ``executor`` under the caps of ``budget``."""

    def __init__(self, ledger: PolicyLedger, executor: Executor, budget: BudgetConfig) -> None:
        self.ledger = ledger
        self.executor = executor
        self.gate = BudgetGate(budget, lambda: ledger.store.budget(ledger.run_id))
        self._slots = LoopGate(executor.capacity)
        self._inflight: dict[tuple[str, str], asyncio.Future[Verification]] = {}

    def left(self) -> int:
        """Verifications left under the cap (``sys.maxsize`` when there is no cap)."""
        if self.gate.caps.verifications is None:
            return sys.maxsize
        return max(0, self.gate.slots_left())

    async def verify(self, nid: str, task: Task) -> tuple[Verification, int]:
        """The verification of node ``nid`` and how many verifications it charged (0 or 1)."""
        known = self.ledger.verified(nid)
        if known is not None:
            return known, 0
        program = self.ledger.program(nid)
        digest = (task.name, content_hash(program))
        if not task.stochastic:
            reused = await self._reuse(nid, task, digest)
            if reused is not None:
                return reused, 0
        return await self._pay(nid, task, program, digest), 1

    async def _reuse(self, nid: str, task: Task, digest: tuple[str, str]) -> Verification | None:
        source = self._verified_twin(task, digest[1])
        if source is None and digest in self._inflight:
            try:
                await asyncio.shield(self._inflight[digest])
            except asyncio.CancelledError:
                return None
            source = self._verified_twin(task, digest[1])
        if source is None:
            return None
        v = self.ledger.state.verifications[source]
        self.ledger.verification(nid, v, fitness(task, v), reused_from=source)
        return v

    def _verified_twin(self, task: Task, digest: str) -> str | None:
        """The node whose paid result of program ``digest`` on ``task`` can be reused (the kernel's lookup)."""
        found = self.ledger.known_result(task.name, digest)
        return None if found is None else found[0]

    async def _pay(self, nid: str, task: Task, program: str, digest: tuple[str, str]) -> Verification:
        slot = self.gate.reserve()
        if slot is None:
            raise VerificationBudgetSpent(
                f"the verification cap of {self.gate.caps.verifications} is reached "
                f"({self.ledger.paid_verifications()} paid, {self.gate.reserved} running); node {nid} needs one more"
            )
        pending: asyncio.Future[Verification] = asyncio.get_running_loop().create_future()
        self._inflight[digest] = pending
        try:
            async with slot:
                async with self._slots:
                    v = await self.executor.verify(task, program)
                self.ledger.verification(nid, v, fitness(task, v))
        except BaseException:
            pending.cancel()
            raise
        finally:
            self._inflight.pop(digest, None)
        pending.set_result(v)
        return v

    async def verify_with_repairs(
        self,
        nid: str,
        task: Task,
        maker: ChildMaker,
        base_program: str,
        idea: Idea,
        repairs: int,
        smoke: Smoke | None = None,
    ) -> Checked:
        """Verify ``nid``; on a failure in ``ledger.REPAIRABLE`` repair (keeping ``idea``) and verify again, ``repairs`` times.

        ``smoke`` runs before each verification (the kernel chain's step): a result it returns stands for that
        verification, which is then never paid.
        """
        paid, seconds = 0, 0.0

        async def verify(cand: Candidate, _slot: Slot | None, attempt: int) -> Verification:
            nonlocal paid, seconds
            v, charged = await self.verify(cand.id, task)
            paid, seconds = paid + charged, seconds + (v.seconds if charged else 0.0)
            return v

        async def repair(failed: Candidate, v: Verification, k: int) -> Candidate | None:
            rid = await self._repaired(nid, k, failed.id, task, maker, base_program, idea, v)
            return None if rid is None else self.ledger.candidate(rid)

        last, v = await verify_with_repairs(
            self.ledger.candidate(nid),
            verify=verify,
            repair=repair,
            attempts=repairs,
            repairable=REPAIRABLE,
            smoke=smoke,
        )
        return Checked(last.id, v, paid, seconds)

    async def _repaired(
        self,
        nid: str,
        k: int,
        failed: str,
        task: Task,
        maker: ChildMaker,
        base_program: str,
        idea: Idea,
        v: Verification,
    ) -> str | None:
        """Node id of repair ``k`` of ``nid`` when it is runnable, else None (recorded either way)."""
        rid = f"{nid}r{k}"
        if not self.ledger.recorded(rid):
            error = "\n".join(x for x in (f"{v.status.value}: {v.reason}", v.stderr_tail) if x.strip())
            made = await maker.repair(base_program, self.ledger.program(failed), idea, error)
            child = self.ledger.state.candidates[nid]
            cand = candidate_from(made, id=rid, parent_id=child.parent_id, operator=Operator.DEBUG, round=child.round)
            self.ledger.node(cand, made.status, made.reason, task=task.name, repair_of=failed)
        status, reason = self.ledger.made(rid)
        if status is not Status.IMPLEMENTED:
            log.info("repair %s of %s is not runnable: %s", rid, nid, reason)
            return None
        return rid


def improves(task: Task, v: Verification, parent: ParentInfo, tolerance: float = 0.0) -> bool:
    """Whether a verified child beats its parent: the one label rule's ``improved`` (``verifyless.outcome``).

    Relative, oriented Delta above ``tolerance``; a failed child never improves (its reward is -1).
    """
    parent_fit = task.metric.orient(parent.score) if parent.score is not None else None
    higher = task.metric.direction == "maximize"
    return improved(verified_outcome(parent.id or "", parent_fit, "", v, higher_is_better=higher, tie=tolerance))


def fitness(task: Task, v: Verification) -> float | None:
    """Oriented validation fitness (higher is better) of an OK verification, else None."""
    return task.metric.orient(v.score) if v.status is Status.OK and v.score is not None else None


__all__ = ["Checked", "LoopGate", "PaidVerifier", "fitness", "improves"]
