"""The engine's round: ask -> make children -> screen -> route -> verify/repair -> tell.

Read ``Engine.run`` and ``Engine._round`` top to bottom for the whole loop.
The rooms it uses, one idea each:

* ``Ledger`` (``verifyless.ledger``, the kernel for paid work): the event log
  and its fold ``RunState``; every event the round writes goes through
  ``ledger.emit`` = append to the store, then ``state.apply``. Resume applies
  the stored events the same way (resume.py). Its ``BudgetGate`` reserves a
  verification slot before dispatch (the reservation is the check) and
  releases it after the result is stored; it says why a run stops.
  ``verify_with_repairs`` is the verification chain.
* ``TellQueue`` (tells.py) and ``Learners`` (learners.py): outcomes are told
  in named ordering classes at round boundaries, to the strategy, the memory
  and learning screeners.
* ``select`` / ``route`` (routing.py): the pure choice of what to verify.
* ``Snapshots`` (snapshot.py): periodic pickled state so resume replays only
  the tail of the log.

Contracts: durable first (an event is stored before anything depends on it;
a verification and its charge commit together); budgets count in-flight work;
decisions do not depend on timing (positional node ids, per-expansion seeded
generators, fixed tell order; with ``pipeline`` round r is asked knowing
rounds <= r-2); candidate failures are node statuses, only infrastructure
errors raise.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from verifyless.child import ChildMaker, Made
from verifyless.config import RunConfig
from verifyless.engine import ends, resume
from verifyless.engine.context import Programs, parent_info, propose_context
from verifyless.engine.ends import RunResult
from verifyless.engine.fallback import check_answered, screener_failed
from verifyless.engine.health import RoleHealth, made_stats, proposal_stats
from verifyless.engine.learners import Learners
from verifyless.engine.peers import Peers, gate_pool, owned
from verifyless.engine.routing import select
from verifyless.engine.snapshot import Snapshots
from verifyless.engine.tells import TellOrder, TellQueue
from verifyless.errors import ModelUnavailable
from verifyless.executors.base import Executor
from verifyless.guards import Guards
from verifyless.ledger import BudgetGate, Ledger, RunState, Slot, candidate_from, low_fidelity_for, verify_with_repairs
from verifyless.model.base import Model
from verifyless.node import Candidate, Idea, Operator, Screening, Status, Verification, content_hash
from verifyless.roles.base import ParentInfo, RoleFailure, Roles
from verifyless.screen.agentic import pilot_records
from verifyless.screen.base import ScreenContext, Screener, candidates_wanted
from verifyless.screen.health import ReplyHealth
from verifyless.search.base import Expansion, SearchStrategy
from verifyless.search.memory import Memory
from verifyless.search.submission import ensemble_members, ensemble_submission
from verifyless.store.protocol import RunStoreProtocol
from verifyless.store.records import Charge
from verifyless.task.base import Task

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, dict[str, Any]], None]


class Engine:
    """Runs one search on one task until a budget cap (or another stop reason) is reached.

    All collaborators are passed in (``verifyless.wiring.build_engine`` builds them from a ``RunConfig``).
    ``memory`` is optional (MLEvolve-style hybrid retrieval); ``progress`` receives ``(kind, data)`` for live
    display. What the run stores and pays for goes through ``self.ledger`` (``state`` and ``gate`` are its
    fold and budget gate).
    """

    def __init__(
        self,
        *,
        task: Task,
        roles: Roles,
        screener: Screener,
        strategy: SearchStrategy,
        executor: Executor,
        store: RunStoreProtocol,
        config: RunConfig,
        memory: Memory | None = None,
        progress: ProgressFn | None = None,
        final_judge: Model | None = None,
        guards: Guards | None = None,
    ) -> None:
        self.task, self.roles, self.screener, self.strategy = task, roles, screener, strategy
        self.executor, self.config, self.memory, self.final_judge = executor, config, memory, final_judge
        self.store, self.peers = store, Peers()  # the novelty gate and model ensembles: wiring sets them (peers.py)
        self.ledger = Ledger(store, config.budget, task.metric, progress)
        self.progress = self.ledger.progress
        self.run_ref: dict[str, str | None] = {"run_id": None}  # shared with the LLM call recorder
        self._model_failures = 0
        self.tells = TellQueue()
        self.learners = Learners(strategy, screener, memory, task, tie=config.tie_tolerance)
        self.snapshots = Snapshots(store, config.engine.snapshot_every)
        self.maker = ChildMaker(
            task,
            roles,
            llm=asyncio.Semaphore(config.engine.llm_concurrency),
            summaries=self.state.summary_by_hash,
            guards=guards,
            guard_repairs=config.guards.repair_attempts,
        )
        self.reply_health = ReplyHealth.for_screener(screener)  # parse rate per screening; stops on silence
        self.role_health = _role_health(roles, config)  # the same for the proposer and the implementer
        self.programs = Programs(store, self.state)
        self._inflight: dict[int, list[asyncio.Task]] = {}  # round -> verification chains
        self._claimed: set[str] = set()  # program hashes dispatched for verification
        eng, llm = config.engine, config.roles.kind == "llm"  # pilots and smoke runs (ledger/pilots.py):
        self.low_fidelity, self.smoke_at = low_fidelity_for(
            self.ledger, task, executor, smoke=eng.smoke, llm_roles=llm, smoke_wall_seconds=eng.smoke_wall_seconds
        )

    @property
    def state(self) -> RunState:
        return self.ledger.state

    @property
    def gate(self) -> BudgetGate:
        return self.ledger.gate

    @property
    def run_id(self) -> str | None:
        return self.ledger.run_id

    @run_id.setter
    def run_id(self, run_id: str | None) -> None:
        self.ledger.run_id = run_id

    def adopt(self, state: RunState) -> None:
        """Continue from ``state`` (a loaded snapshot); everything that shares it is pointed at it."""
        self.ledger.state = state
        self.maker.summaries = state.summary_by_hash
        self.programs.state = state

    # ------------------------------------------------------------------ the run

    async def run(self, run_id: str | None = None, *, from_snapshot: bool = True) -> RunResult:
        """Start a new run, or continue ``run_id`` (resume) from its stored events."""
        self.run_id = run_id or self.store.create_run(
            self.task.name, self.config.model_dump(mode="json"), seed=self.config.seed
        )
        self.run_ref["run_id"] = self.run_id
        if run_id is not None:
            resume.restore(self, from_snapshot=from_snapshot)
        self.store.set_status(self.run_id, "running")
        self.progress("start", {"run_id": self.run_id, "task": self.task.name})
        if run_id is not None:
            resume.announce(self)
        try:
            await ends.ensure_brief(self)
            await ends.ensure_baseline(self)
            await resume.finish_interrupted(self)
            stopped = await self._loop()
        except BaseException as exc:
            ends.mark_stopped(self, exc)
            for chain in self._chains():
                chain.cancel()
            # Collect every chain's outcome so none is left unretrieved; finished verifications are stored.
            await asyncio.gather(*self._chains(), return_exceptions=True)
            raise
        final_id = await ends.select_final(self, self.strategy.final(self.state.view))
        self.ledger.emit("final", {"node_id": final_id, "stopped": stopped})
        await submit_ensemble(self)
        check_answered(self)  # a screener that never answered: exit 6 (fallback.py)
        self.store.set_status(self.run_id, "finished")
        return ends.result(self, final_id, stopped)

    async def _loop(self) -> str:
        eng = self.config.engine
        lag, idle = (2 if eng.pipeline else 1), 0
        while True:
            r = self.state.rounds_done + 1
            await self._drain(upto=r - lag)
            self.snapshots.maybe_take(self, r)
            stop = self.gate.stop_reason()
            if stop is None and eng.max_rounds is not None and r > eng.max_rounds:
                stop = "max_rounds"
            if stop:
                await self._drain(upto=r)
                return stop
            expansions = self.strategy.ask(self.state.view, eng.expansions_per_round)
            if not expansions:
                await self._drain(upto=r)
                if not self.strategy.ask(self.state.view, eng.expansions_per_round):
                    return "strategy-exhausted"
                continue
            self.ledger.emit("round", {"round": r, "expansions": [_expansion_dict(e) for e in expansions]})
            if self.ledger.watched:
                replies = {role: h.seen.to_dict() for role, h in self.role_health.items() if h.seen.total}
                self.progress("round", {"round": r, "budget": self.ledger.budget_view(), "replies": replies})
            dispatched = len(self._claimed)
            for i, exp in enumerate(expansions):
                await self._round(r, i, exp)
            idle = 0 if len(self._claimed) > dispatched else idle + 1
            if idle >= eng.max_idle_rounds:
                await self._drain(upto=r)
                return f"stalled: {idle} rounds in a row produced nothing new to verify"

    # ------------------------------------------------------------------ one expansion of one round

    async def _round(self, r: int, i: int, exp: Expansion) -> None:
        """Ask -> make children -> screen -> route -> dispatch verification chains (told at the boundary)."""
        rng = random.Random(f"{self.config.seed}:{r}:{i}")
        parent = parent_info(self.state, self.programs, exp)
        ctx = propose_context(self.task, self.state, self.programs, self.memory, exp, parent, rng)
        try:
            proposals = await owned(
                f"r{r}e{i}", self.maker.propose(ctx, candidates_wanted(self.screener, self.config.engine.candidates))
            )
        except ModelUnavailable as exc:
            _model_failure(self, r, f"proposer: {exc}")
            return
        self.role_health["proposer"].feed(r, [proposal_stats(proposals)])
        seen: set[str] = set()  # program hashes already in this pool
        made = await asyncio.gather(
            *(self._make(f"r{r}e{i}c{j}", p, exp, parent, r, seen) for j, p in enumerate(proposals))
        )
        implemented = [made_stats(m) for p, (m, _) in zip(proposals, made, strict=True) if isinstance(p, Idea)]
        self.role_health["implementer"].feed(r, implemented)
        pool = await gate_pool(self, r, [c for _, c in made if c is not None])  # audited rejections dispatched
        self._model_failures = 0
        if not pool:
            return
        screening = await _screen_pool(self, r, rng, parent, pool)
        eng = self.config.engine
        routed = select(
            screening,
            slots=self.gate.slots_left(),
            verify_uncertain=eng.verify_uncertain,
            threshold=eng.uncertainty_threshold,
            audit_rate=eng.audit_rate,
            rng=rng,
        )
        record = screening.to_dict()
        self.ledger.emit(
            "screening", {**record, "to_verify": list(routed.to_verify), "audited": list(routed.audited), "round": r}
        )
        _after_screening(self, r, screening, record, list(routed.to_verify))
        if routed.uncertain:
            log.info(
                "round %d: routed %s to verification (vote uncertainty >= %s)",
                r,
                list(routed.uncertain),
                eng.uncertainty_threshold,
            )
        for k, cid in enumerate(screening.ranking):
            if cid not in routed.to_verify:
                self.ledger.set_status(
                    cid, Status.SCREENED_OUT, f"ranked {k + 1} of {len(pool)} by {screening.screener}"
                )
                self.tells.add(r, TellOrder.SCREENED_OUT, (k,), cid)
        by_id = {c.id: c for c in pool}
        for k, cid in enumerate(routed.to_verify):
            await self._wait_for_executor()
            self._dispatch(by_id[cid], (k,), screening.ranking.index(cid))

    async def _make(
        self, cid: str, proposal: Idea | RoleFailure, exp: Expansion, parent: ParentInfo, r: int, seen: set[str]
    ) -> tuple[Made, Candidate | None]:
        """Make one child (``verifyless.child``) and record it; the candidate is None if it failed before screening."""

        def known(digest: str) -> bool:
            return not self.task.stochastic and (
                digest in self.state.verified_hashes
                or digest in self._claimed
                or digest in seen
                or digest == content_hash(parent.program)
            )

        made = await owned(cid, self.maker.make(parent, proposal, skip=known))
        cand = candidate_from(
            made,
            id=cid,
            parent_id=exp.parent_id,
            operator=exp.operator,
            round=r,
            island=exp.island,
            reference_ids=exp.reference_ids,
        )
        if not made.ok:
            self.ledger.record_candidate(cand, made.status, made.reason[:2000])
            order = TellOrder.DUPLICATE if made.status is Status.DUPLICATE else TellOrder.FAILED
            self.tells.add(r, order, (cid,), cid)
            return made, None
        seen.add(cand.program_hash)
        self.ledger.record_candidate(cand, Status.IMPLEMENTED)
        return made, cand

    # ------------------------------------------------------------------ verification chains

    def _dispatch(self, cand: Candidate, position: tuple, rank: int) -> None:
        """Reserve a slot now (so the cap counts it) and start the chain in the background.

        With no slot left (a repair of an earlier round took it while this
        round waited for the executor) the candidate is screened out instead.
        """
        slot = self.gate.reserve()
        if slot is None:
            self.ledger.set_status(cand.id, Status.SCREENED_OUT, "the budget was spent before it could be verified")
            self.tells.add(cand.round, TellOrder.SCREENED_OUT, (rank,), cand.id)
            return
        self._claimed.add(cand.program_hash)
        chain = asyncio.create_task(self._verify_chain(cand, position, slot))
        self._inflight.setdefault(cand.round, []).append(chain)

    async def _verify_chain(self, cand: Candidate, position: tuple, slot: Slot) -> None:
        """Verify ``cand``; on a repairable failure, repair (same idea) and verify again, each in its own slot."""

        async def verify(c: Candidate, slot_: Slot | None, attempt: int) -> Verification:
            assert slot_ is not None  # the gate reserved it
            return await self._verify(c, slot_, position, attempt)

        async def repair(current: Candidate, verification: Verification, attempt: int) -> Candidate | None:
            return await owned(f"{cand.id}f{attempt}", _repair(self, cand, current, verification, attempt))

        async def smoke(c: Candidate, attempt: int) -> Verification | None:
            assert self.low_fidelity is not None and self.smoke_at is not None
            stopped = await self.low_fidelity.smoke(c, self.smoke_at)
            if stopped is not None:  # its status is stored: tell it like a verified node
                self.tells.add(cand.round, TellOrder.VERIFIED, (*position, attempt), c.id)
            return stopped

        attempts = self.config.engine.repair_attempts
        smoking = smoke if self.smoke_at is not None else None
        await verify_with_repairs(
            cand, verify=verify, repair=repair, attempts=attempts, gate=self.gate, slot=slot, smoke=smoking
        )

    async def _verify(self, cand: Candidate, slot: Slot, position: tuple, attempt: int) -> Verification:
        async with slot:
            verification = await self.executor.verify(self.task, cand.program)
            self.ledger.record_verification(cand.id, verification)
        self.tells.add(cand.round, TellOrder.VERIFIED, (*position, attempt), cand.id)
        return verification

    async def _wait_for_executor(self) -> None:
        while sum(1 for t in self._chains() if not t.done()) >= self.executor.capacity:
            await asyncio.wait([t for t in self._chains() if not t.done()], return_when=asyncio.FIRST_COMPLETED)

    def _chains(self) -> Iterator[asyncio.Task]:
        for tasks in self._inflight.values():
            yield from tasks

    # ------------------------------------------------------------------ round boundaries: tell, learn

    async def _drain(self, upto: int) -> None:
        """Finish every chain of rounds <= upto, then tell each such round's nodes as one batch and learn from it."""
        for r in sorted(k for k in self._inflight if k <= upto):
            await asyncio.gather(*self._inflight.pop(r))
        started = range(self.state.told_round + 1, min(upto, self.state.rounds_done) + 1)  # rounds run, not told
        for r in sorted(set(self.tells.rounds(upto)) | set(started)):
            await self._tell_round(r, self.tells.take(r))

    async def _tell_round(self, r: int, node_ids: list[str]) -> None:
        told = self.ledger.emit("tell", {"round": r, "node_ids": node_ids})
        self.learners.tell(self.state, told)
        self.peers.observe(told, self.state.view.nodes, self.config.tie_tolerance)
        record = await self.learners.learn(self.learners.outcomes(self.state, node_ids), r)
        if record is not None:
            self.ledger.emit("screener_learn", {**record, "round": r})


async def _repair(
    engine: Engine, first: Candidate, current: Candidate, verification: Verification, attempt: int
) -> Candidate | None:
    """Repair ``current`` (same idea) as node ``<first>f<attempt>``, recorded; None if no program was made."""
    error = f"{verification.reason}\n{verification.stderr_tail[-2000:]}"
    made = await engine.maker.repair(
        first.program,
        current.program,
        current.idea,
        error,
        skip=lambda d: d in engine.state.verified_hashes or d in engine._claimed,
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
    engine._claimed.add(fixed.program_hash)
    engine.ledger.record_candidate(fixed, Status.IMPLEMENTED)
    return fixed


async def submit_ensemble(engine: Engine) -> None:
    """MLEvolve's top-K ensemble submission, where the task declares how outputs combine (search/submission.py).

    The members re-run in the executor's sandbox; one ``submission`` event, charged as evaluator seconds.
    """
    ids = ensemble_members(engine.strategy, engine.task, engine.state.view)
    sandbox = getattr(engine.executor, "sandbox", None)
    if not ids or sandbox is None:
        return
    scored = [e.payload.get("members") for e in engine.store.events(engine.ledger.rid, kinds=["submission"])]
    if scored and scored[-1] == ids:  # a resume that changed nothing: the same members were scored already
        return
    members = [(i, engine.programs.text(i)) for i in ids]
    sub = await asyncio.to_thread(
        ensemble_submission, engine.task, members, sandbox, hide=tuple(getattr(engine.executor, "hide", ()))
    )
    engine.ledger.emit("submission", sub.to_dict(), charge=Charge(evaluator_seconds=sub.seconds))


def _model_failure(engine: Engine, r: int, reason: str) -> None:
    """Log an endpoint failure; three rounds in a row without a usable proposer stop the run with the error."""
    engine.ledger.emit("model_error", {"round": r, "reason": reason[:2000]})
    engine.progress("model_error", {"round": r, "reason": reason})
    engine._model_failures += 1
    log.warning("round %d: %s (%d in a row)", r, reason, engine._model_failures)
    if engine._model_failures >= 3:
        raise ModelUnavailable(f"the model endpoint failed in 3 rounds in a row; last error: {reason}")


def _role_health(roles: Roles, config: RunConfig) -> dict[str, RoleHealth]:
    """Reply-health trackers of the proposer and the implementer, named after their models.

    ``roles`` may be None for an engine that only restores a run (``bench/scale.py``): the trackers are unnamed.
    """
    eng = config.engine

    def model(role: Any) -> str:
        return str(getattr(getattr(role, "model", None), "name", "") or "")

    return {
        name: RoleHealth(name, model(role), eng.min_parse_rate, eng.max_unparsed_replies)
        for name, role in (
            ("proposer", getattr(roles, "proposer", None)),
            ("implementer", getattr(roles, "implementer", None)),
        )
    }


def _expansion_dict(e: Expansion) -> dict[str, Any]:
    return {
        "parent_id": e.parent_id,
        "operator": e.operator.value,
        "island": e.island,
        "reference_ids": list(e.reference_ids),
        "inspiration_ids": list(e.inspiration_ids),
        "note": e.note,
    }


def _after_screening(engine, r: int, screening: Screening, record: dict[str, Any], to_verify: list[str]) -> None:
    """After a screening is stored: check reply health, charge pilot seconds, show progress.

    ``reply_health.observe`` warns on a low parse rate and raises
    ``UnparseableReplies`` (the run stops) after consecutive screenings
    that parsed nothing. Agentic pilots are evaluator seconds (RPM paper):
    one ``pilot`` event each, charged so the budget gate sees them.
    """
    engine.reply_health.observe(screening)
    for pilot in pilot_records(screening):
        engine.ledger.emit(
            "pilot",
            {**pilot, "round": r},
            charge=Charge(evaluator_seconds=pilot["seconds"], pilot_seconds=pilot["seconds"]),
        )
    if engine.ledger.watched:
        engine.progress(
            "screening",
            {"round": r, "screener": screening.screener, "chosen": to_verify, "evidence": record["evidence"]},
        )


async def _screen_pool(engine, r: int, rng: random.Random, parent: ParentInfo, pool: list[Candidate]) -> Screening:
    """The screener's ranking; a dead screener endpoint falls back to a seeded random pick or stops the run
    (``engine/fallback.py``: counted, shown, and never silent)."""
    eng = engine.config.engine
    ctx = ScreenContext(
        task=engine.task,
        parent=parent,
        rng=rng,
        brief=engine.state.brief,
        data_report=engine.state.data_report_text(),
        nodes={k: v for k, v in engine.state.view.nodes.items() if v.status.verified},
        summaries=engine.state.summaries,
        n_verify=eng.verify_per_expansion,
        round=r,
        budget_left_s=engine.gate.seconds_left(),
        program_of=engine.programs.text,
        pilot=None if engine.low_fidelity is None else partial(engine.low_fidelity.pilot, round=r),
    )
    try:
        return await engine.screener.screen(ctx, pool)
    except ModelUnavailable as exc:
        return screener_failed(engine, r, rng, pool, exc)
