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
* ``Dispatch`` (dispatch.py): the verification chains in flight, the claimed
  programs, the executor, and the novelty gate before screening.
* ``Lifecycle`` (lifecycle.py): the start and the end of a run (data report,
  brief, baseline, final selection, ensemble submission, result, early stop).
* ``Resume`` (resume.py) and ``Snapshots`` (snapshot.py): rebuild from the
  store, from periodic pickled state so resume replays only the log's tail.

Each room is built here with exactly the collaborators it needs (the ledger,
the tell queue, config values, callbacks), never with the engine itself.

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
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from verifyless.child import ChildMaker, Made
from verifyless.config import RunConfig
from verifyless.engine.context import Programs, parent_info, propose_context
from verifyless.engine.dispatch import Dispatch, owned
from verifyless.engine.ensembles import Peers
from verifyless.engine.fallback import check_answered
from verifyless.engine.health import RoleHealth, made_stats, proposal_stats
from verifyless.engine.learners import Learners
from verifyless.engine.lifecycle import Lifecycle, RunResult
from verifyless.engine.resume import Resume
from verifyless.engine.screen_step import ScreenStep
from verifyless.engine.snapshot import Loaded, Snapshots
from verifyless.engine.tells import TellOrder, TellQueue
from verifyless.errors import ModelUnavailable
from verifyless.events import ConfigResolved, Finalised, ModelFailed, RoundStarted, ScreenerLearned, Told
from verifyless.executors.base import Executor
from verifyless.guards import Guards
from verifyless.ledger import BudgetGate, Ledger, RunState, candidate_from
from verifyless.model.base import Model
from verifyless.node import Candidate, Idea, Status, content_hash
from verifyless.roles.base import ParentInfo, RoleFailure, Roles
from verifyless.screen.base import Screener
from verifyless.search.base import Expansion, PacedStrategy, SearchStrategy
from verifyless.search.memory import Memory
from verifyless.store.protocol import RunStoreProtocol
from verifyless.task.base import Task

log = logging.getLogger(__name__)

ProgressFn = Callable[[str, dict[str, Any]], None]


class Engine:
    """Runs one search on one task until a budget cap (or another stop reason) is reached.

    All collaborators are passed in (``verifyless.wiring.build_engine`` builds them from a ``RunConfig``).
    ``memory`` is optional (MLEvolve-style hybrid retrieval); ``progress`` receives ``(kind, data)`` for live
    display. ``config`` is the run's configuration as validated and ``resolved`` what the composition root settled
    at the start (``wiring.Resolved.pins``: dotted keys to values); a new run stores them as its ``config`` and
    ``config_resolved`` events. ``peers`` holds the novelty gate and the model ensembles (``engine/ensembles.py``; none by
    default). What the run stores and pays for goes through ``self.ledger`` (``state`` and ``gate`` are its
    fold and budget gate): pass ``ledger`` to share it with what was built before the engine (wiring's model
    call recorders read the run's id from it), else the engine builds one on ``store`` with ``progress``.
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
        resolved: Mapping[str, Any] | None = None,
        memory: Memory | None = None,
        progress: ProgressFn | None = None,
        final_judge: Model | None = None,
        guards: Guards | None = None,
        peers: Peers | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        if ledger is not None and (ledger.store is not store or progress is not None):
            raise ValueError("a ledger passed to the Engine is on its store and holds its progress callback")
        self.task, self.roles, self.config, self.resolved = task, roles, config, dict(resolved or {})
        self.store, self.peers = store, peers or Peers()
        self.ledger = ledger or Ledger(store, config.budget, task.metric, progress, gpus=task.limits.gpus)
        self.progress = self.ledger.progress
        self._model_failures = 0
        eng = config.engine
        self.tells = TellQueue()
        self.learners = Learners(strategy, screener, memory, task, tie=config.tie_tolerance)
        self.snapshots = Snapshots(store, eng.snapshot_every, self.ledger, self.learners)
        self.maker = ChildMaker(
            task,
            roles,
            llm=asyncio.Semaphore(eng.llm_concurrency),
            summaries=self.state.summary_by_hash,
            guards=guards,
            guard_repairs=config.guards.repair_attempts,
        )
        self.role_health = _role_health(roles, config)  # the same for the proposer and the implementer
        self.programs = Programs(store, self.state)
        self.dispatch = Dispatch(
            task=task,
            executor=executor,
            ledger=self.ledger,
            tells=self.tells,
            maker=self.maker,
            programs=self.programs,
            novelty=self.peers.novelty,
            config=config,
        )
        self.screen = ScreenStep(
            task=task,
            config=config,
            ledger=self.ledger,
            tells=self.tells,
            programs=self.programs,
            dispatch=self.dispatch,
            screener=screener,
        )
        self.lifecycle = Lifecycle(
            task=task,
            roles=roles,
            config=config,
            ledger=self.ledger,
            dispatch=self.dispatch,
            programs=self.programs,
            final_judge=final_judge,
            tell=self.tell_round,
            strategy=lambda: self.strategy,
        )
        self.resume = Resume(
            config=config,
            ledger=self.ledger,
            learners=self.learners,
            snapshots=self.snapshots,
            peers=self.peers,
            tells=self.tells,
            dispatch=self.dispatch,
            adopt=self.adopt,
        )

    @property
    def state(self) -> RunState:
        return self.ledger.state

    @property
    def gate(self) -> BudgetGate:
        return self.ledger.gate

    @property
    def screener(self) -> Screener:
        return self.screen.screener

    @property
    def strategy(self) -> SearchStrategy:
        return self.learners.strategy

    @property
    def memory(self) -> Memory | None:
        return self.learners.memory

    @property
    def executor(self) -> Executor:
        return self.dispatch.executor

    @property
    def run_id(self) -> str | None:
        return self.ledger.run_id

    @run_id.setter
    def run_id(self, run_id: str | None) -> None:
        self.ledger.run_id = run_id

    def adopt(self, loaded: Loaded) -> None:
        """Continue from a loaded snapshot: its state, and the strategy, memory and observing screener it holds."""
        self.ledger.state = loaded.state
        self.maker.summaries = loaded.state.summary_by_hash
        self.programs.state = loaded.state
        self.learners.adopt(loaded.strategy, loaded.memory, loaded.observer)
        if loaded.observer is not None:
            self.screen.screener = loaded.observer

    # ------------------------------------------------------------------ the run

    async def run(self, run_id: str | None = None, *, from_snapshot: bool = True) -> RunResult:
        """Start a new run, or continue ``run_id`` (resume) from its stored events, holding it (``store.holding``)."""
        self.run_id = rid = run_id or self.lifecycle.new_run()
        with self.store.holding(rid):
            return await self._run(rid, resumed=run_id is not None, from_snapshot=from_snapshot)

    async def _run(self, rid: str, *, resumed: bool, from_snapshot: bool) -> RunResult:
        if resumed:
            self.resume.restore(from_snapshot=from_snapshot)
        else:  # what was resolved before the run existed (pins, critic-rm's warm start), stored first
            self.ledger.emit(ConfigResolved(self.resolved))  # {}: the configuration named every choice
            for record in getattr(self.screener, "start_events", list)():
                self.ledger.emit(record)
        self.store.set_status(rid, "running")
        self.progress("start", {"run_id": rid, "task": self.task.name})
        if resumed:
            self.resume.announce()
        life = self.lifecycle
        try:
            await life.ensure_brief()
            await life.ensure_baseline()
            await self.resume.finish_interrupted()
            stopped = await self._loop()
        except BaseException as exc:
            life.mark_stopped(exc)
            await self.dispatch.cancel()
            raise
        final_id = await life.select_final(self.strategy.final(self.state.view))
        self.ledger.emit(Finalised(final_id, stopped, self.task.selection_metric))
        await life.submit_ensemble(self.strategy, final_id)
        check_answered(self.ledger, self.config.engine, self.screen.name)  # never answered: exit 6
        self.store.set_status(rid, "finished")
        return life.result(final_id, stopped, self.strategy)

    async def _loop(self) -> str:
        eng = self.config.engine
        lag, idle = (2 if eng.pipeline else 1), 0
        while True:
            r = self.state.rounds_done + 1
            await self._drain(upto=r - lag)
            self.snapshots.maybe_take(r)
            stop = self.gate.stop_reason()
            if stop is None and eng.max_rounds is not None and r > eng.max_rounds:
                stop = "max_rounds"
            if stop:
                await self._drain(upto=r)
                return stop
            paced = self._pace()
            expansions = self.strategy.ask(self.state.view, eng.expansions_per_round)
            if not expansions:
                await self._drain(upto=r)
                if not self.strategy.ask(self.state.view, eng.expansions_per_round):
                    return "strategy-exhausted"
                continue
            schedule = paced.schedule() if paced is not None else None  # c(t), w(t) of this ask
            self.ledger.emit(RoundStarted(r, tuple(_expansion_dict(e) for e in expansions), schedule))
            if self.ledger.watched:
                replies = {role: h.seen.to_dict() for role, h in self.role_health.items() if h.seen.total}
                self.progress("round", {"round": r, "budget": self.ledger.budget_view(), "replies": replies})
            dispatched = len(self.dispatch.claimed)
            for i, exp in enumerate(expansions):
                await self._round(r, i, exp)
            idle = 0 if len(self.dispatch.claimed) > dispatched else idle + 1
            if idle >= eng.max_idle_rounds:
                await self._drain(upto=r)
                return f"stalled: {idle} rounds in a row produced nothing new to verify"

    def _pace(self) -> PacedStrategy | None:
        """Tell an annealing strategy how many verified steps the budget leaves after this ask (None: not one)."""
        strategy = self.strategy
        if not isinstance(strategy, PacedStrategy):
            return None
        taking = self.config.engine.expansions_per_round * self.config.engine.verify_per_expansion
        strategy.pace(self.gate.steps_left(taking, wall=strategy.paces_wall))
        return strategy

    # ------------------------------------------------------------------ one expansion of one round

    async def _round(self, r: int, i: int, exp: Expansion) -> None:
        """Ask -> make children -> screen -> route -> dispatch verification chains (told at the boundary)."""
        rng = random.Random(f"{self.config.seed}:{r}:{i}")
        parent = parent_info(self.state, self.programs, exp)
        eng = self.config.engine
        ctx = propose_context(self.task, self.state, self.programs, self.memory, exp, parent, rng, eng.tried_ideas)
        try:
            proposals = await owned(f"r{r}e{i}", self.maker.propose(ctx, self.screen.wanted(eng.candidates)))
        except ModelUnavailable as exc:
            self._model_failed(r, f"proposer: {exc}")
            return
        self.role_health["proposer"].feed(r, [proposal_stats(proposals)])
        seen: set[str] = set()  # program hashes already in this pool
        made = await asyncio.gather(
            *(self._make(f"r{r}e{i}c{j}", p, exp, parent, r, seen) for j, p in enumerate(proposals))
        )
        implemented = [made_stats(m) for p, (m, _) in zip(proposals, made, strict=True) if isinstance(p, Idea)]
        self.role_health["implementer"].feed(r, implemented)
        pool = await self.dispatch.gate_pool(r, [c for _, c in made if c is not None])  # audited: dispatched
        self._model_failures = 0
        if not pool:
            return
        await self.screen.screen_and_route(r, rng, parent, pool)

    async def _make(
        self, cid: str, proposal: Idea | RoleFailure, exp: Expansion, parent: ParentInfo, r: int, seen: set[str]
    ) -> tuple[Made, Candidate | None]:
        """Make one child (``verifyless.child``) and record it; the candidate is None if it failed before screening."""

        def known(digest: str) -> bool:
            return not self.task.stochastic and (
                digest in self.state.verified_hashes
                or digest in self.dispatch.claimed
                or digest in seen
                or digest == content_hash(parent.program)
            )

        made = await owned(cid, self.maker.make(replace(parent, operator=exp.operator), proposal, skip=known))
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

    def _model_failed(self, r: int, reason: str) -> None:
        """Log an endpoint failure; three rounds in a row without a usable proposer stop the run with the error."""
        self.ledger.emit(ModelFailed(r, reason[:2000]))
        self.progress("model_error", {"round": r, "reason": reason})
        self._model_failures += 1
        log.warning("round %d: %s (%d in a row)", r, reason, self._model_failures)
        if self._model_failures >= 3:
            raise ModelUnavailable(f"the model endpoint failed in 3 rounds in a row; last error: {reason}")

    # ------------------------------------------------------------------ round boundaries: tell, learn

    async def _drain(self, upto: int) -> None:
        """Finish every chain of rounds <= upto, then tell each such round's nodes as one batch and learn from it."""
        await self.dispatch.finish(upto)
        started = range(self.state.told_round + 1, min(upto, self.state.rounds_done) + 1)  # rounds run, not told
        for r in sorted(set(self.tells.rounds(upto)) | set(started)):
            await self.tell_round(r)

    async def tell_round(self, r: int) -> None:
        """Tell round ``r``'s queued nodes as one batch (a ``tell`` event), feed the learners and the
        ensembles, and store what a learning screener learned from the round."""
        node_ids = self.tells.take(r)
        told = self.ledger.emit(Told(r, tuple(node_ids)))
        self.learners.tell(self.state, told)
        self.peers.observe(told, self.state.view.nodes, self.config.tie_tolerance)
        record = await self.learners.learn(self.learners.outcomes(self.state, node_ids), r)
        if record is not None:
            self.ledger.emit(ScreenerLearned(r, extra={k: v for k, v in record.items() if k != "round"}))
            self.progress("screener_learn", {**record, "round": r})


def _role_health(roles: Roles | None, config: RunConfig) -> dict[str, RoleHealth]:
    """Reply-health trackers of the proposer and the implementer, named after their models.

    ``roles`` may be None for an engine that only restores a run (``bench/scale.py``): the trackers are unnamed.
    """
    eng = config.engine

    def model(role: Any) -> str:
        return str(getattr(getattr(role, "model", None), "name", "") or "")

    return {
        name: RoleHealth(name, model(role), eng.min_parse_rate, eng.max_unparsed_replies)
        for name, role in (
            ("proposer", roles.proposer if roles else None),
            ("implementer", roles.implementer if roles else None),
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
