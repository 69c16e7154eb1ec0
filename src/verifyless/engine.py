"""The engine: the one place where task, roles, screener, search, executor and store meet.

One round, for every expansion the strategy asks for::

    propose N ideas -> implement (concurrently) -> dedup + guards -> summarise
    -> screen -> verify the chosen (repairing non-timeout failures) -> tell

Contracts kept here:

* **Durable first.** Every fact is appended to the store before anything
  depends on it; a finished verification is committed (with its budget
  charge, in one transaction) the moment it returns.
* **Budgets are hard caps that count in-flight work.** A verification is
  reserved before it is dispatched; nothing is dispatched that could exceed a
  cap. Token and cost caps stop new LLM work.
* **Deterministic given the same inputs.** Node ids, per-round random
  generators and the order in which outcomes are told to the strategy do not
  depend on timing. With ``pipeline`` on, round ``r`` is asked knowing the
  outcomes of rounds ``<= r-2`` (its LLM work overlaps the verification of
  round ``r-1``); with it off, rounds ``<= r-1``. This is what makes
  ``resume`` and ``replay`` reach the same decisions.
* **Candidate failures are data.** Parse errors, guard failures, duplicates
  and failed verifications are statuses on nodes; only infrastructure errors
  raise.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from verifyless.config import RunConfig
from verifyless.errors import ModelUnavailable
from verifyless.node import (
    Candidate,
    Idea,
    Node,
    Operator,
    Screening,
    Status,
    Verification,
    content_hash,
)
from verifyless.child import ChildMaker
from verifyless.roles.base import Implementation, ParentInfo, ProposeContext, RoleFailure, Roles, TaskBrief
from verifyless.screen.base import ScreenContext, Screener
from verifyless.screen.health import ReplyHealth  # [screen:health]
from verifyless.search.base import Expansion, SearchStrategy, SearchView
from verifyless.task.base import Task

ProgressFn = Callable[[str, dict[str, Any]], None]

_REPAIRABLE = {Status.FAILED, Status.INVALID_METRIC, Status.OOM}


@dataclass(frozen=True)
class RunResult:
    run_id: str
    best_id: str | None
    best_score: float | None
    best_test_score: float | None
    baseline_score: float | None
    verifications: int
    rounds: int
    stopped: str


@dataclass
class _State:
    """Everything the engine derives from the event log (rebuilt on resume)."""

    view: SearchView = field(default_factory=SearchView)
    programs: dict[str, str] = field(default_factory=dict)        # node id -> program hash
    ideas: dict[str, Idea] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    summary_by_hash: dict[str, str] = field(default_factory=dict)
    candidates: dict[str, Candidate] = field(default_factory=dict)
    verifications: dict[str, Verification] = field(default_factory=dict)
    verified_hashes: set[str] = field(default_factory=set)
    rounds_done: int = 0
    brief: TaskBrief | None = None


class Engine:
    """Runs one search on one task until a budget cap is reached.

    All collaborators are passed in (see ``verifyless.wiring.build_engine`` for
    the config-driven construction). ``memory`` is optional (MLEvolve-style
    hybrid retrieval); ``progress`` receives ``(kind, data)`` for live display.
    """

    def __init__(
        self,
        *,
        task: Task,
        roles: Roles,
        screener: Screener,
        strategy: SearchStrategy,
        executor: Any,
        store: Any,
        config: RunConfig,
        memory: Any | None = None,
        progress: ProgressFn | None = None,
        final_judge: Any | None = None,
        guards: Any | None = None,
    ) -> None:
        self.task = task
        self.roles = roles
        self.screener = screener
        self.strategy = strategy
        self.executor = executor
        self.store = store
        self.config = config
        self.memory = memory
        self.final_judge = final_judge
        self._reply_health = ReplyHealth.for_screener(screener)  # [screen:health] parse rate per screening
        self.progress = progress or (lambda kind, data: None)
        self._watched = progress is not None  # build progress payloads (a ledger read each) only when shown
        self.run_id: str | None = None
        self.run_ref: dict[str, str | None] = {"run_id": None}  # shared with the LLM call recorder
        self.s = _State()
        self._llm = asyncio.Semaphore(config.engine.llm_concurrency)
        self.maker = ChildMaker(task, roles, llm=self._llm, summaries=self.s.summary_by_hash, guards=guards,
                                guard_repairs=config.guards.repair_attempts)
        self._inflight: dict[int, list[asyncio.Task]] = {}   # round -> verification chains
        self._pending_tell: dict[int, list[tuple[tuple, str]]] = {}  # round -> [(order key, node id)]
        self._staged: dict[str, Node] = {}   # recorded but not yet told to the strategy
        self._reserved = 0
        self._claimed: set[str] = set()  # program hashes dispatched for verification
        self._model_failures = 0           # consecutive rounds whose proposer endpoint failed
        self._memory_backlog: list[Any] | None = None  # during resume, memory records are indexed in one batch
        self._started = time.monotonic()

    # ------------------------------------------------------------------ public

    async def run(self, run_id: str | None = None) -> RunResult:
        """Start a new run, or continue ``run_id`` (resume) from its stored events."""
        if run_id is None:
            self.run_id = self.store.create_run(
                self.task.name, self.config.model_dump(mode="json"), seed=self.config.seed
            )
        else:
            self.run_id = run_id
        self.run_ref["run_id"] = self.run_id
        if run_id is not None:
            self._restore()
        self.store.set_status(self.run_id, "running")
        self.progress("start", {"run_id": self.run_id, "task": self.task.name})
        try:
            await self._ensure_brief()
            await self._ensure_baseline()
            await self._finish_interrupted()
            stopped = await self._loop()
        except BaseException:
            self.store.set_status(self.run_id, "interrupted")
            pending = [t for t in _all(self._inflight) if not t.done()]
            for t in pending:
                t.cancel()
            # Collect every chain's outcome so none is left unretrieved; finished verifications are already stored.
            await asyncio.gather(*_all(self._inflight), return_exceptions=True)
            raise
        final_id = self.strategy.final(self.s.view)
        final_id = await self._select_final(final_id)
        self._append("final", {"node_id": final_id, "stopped": stopped})
        await self._submit_ensemble()  # fidelity: MLEvolve's top-K ensemble submission (search/submission.py)
        self.store.set_status(self.run_id, "finished")
        return self._result(final_id, stopped)

    async def _select_final(self, best_id: str | None) -> str | None:
        """Optional end-of-run step: a judged round-robin over the top-N validation nodes (RPM paper)."""
        top_n = self.config.engine.final_selection
        if top_n is None or self.final_judge is None:
            return best_id
        from verifyless.screen.final import select_final

        selection = await select_final(self.s.view.nodes.values(), self.final_judge, top_n,
                                       rng=random.Random(f"{self.config.seed}:final"), task=self.task,
                                       summaries=self.s.summaries)
        self._append("final_selection", {"winner": selection.winner, "pool": list(selection.pool),
                                         "points": dict(selection.points), "strategy_best": best_id,
                                         "matches": [dict(m) for m in selection.matches]})
        return selection.winner or best_id

    # ------------------------------------------------------------------ setup

    async def _ensure_brief(self) -> None:
        if self.s.brief is None:
            brief = await self.roles.briefer.brief(self.task)
            self._append("brief", {"understanding": brief.understanding, "criteria": list(brief.criteria)})
            self.s.brief = brief

    async def _ensure_baseline(self) -> None:
        if "root" in self.s.view.nodes:
            return
        program = self.task.baseline_program
        cand = Candidate(
            id="root", parent_id=None, operator=Operator.BASELINE,
            idea=Idea("the task's baseline program"), program=program,
            program_hash=content_hash(program), round=0,
        )
        cand = cand.replace(summary=await self.maker.summarize(cand.program, cand.idea))
        self._record_candidate(cand, Status.IMPLEMENTED)
        self._reserved += 1
        verification = await self.executor.verify(self.task, program)
        self._reserved -= 1
        self._record_verification(cand, verification)
        self._tell_batch(0, [cand.id])

    async def _finish_interrupted(self) -> None:
        """Verify candidates that were chosen before a crash but never finished.

        They were never charged (the charge is part of the verification event),
        so verifying them now charges each exactly once.
        """
        chosen: list[str] = []
        for ev in self.store.events(self.run_id, kinds=["screening"]):
            chosen.extend(ev.payload.get("to_verify", ev.payload.get("chosen", [])))
        todo = [cid for cid in chosen if cid in self.s.candidates and cid not in self.s.verifications
                and cid in self._staged]
        for cid in todo:
            if self._slots_left() <= 0:
                break
            cand = self.s.candidates[cid]
            cand = cand.replace(program=self.store.get_text(cand.program_hash))
            self.s.candidates[cid] = cand
            self._reserved += 1
            await self._verify_chain(cand, order=(0, chosen.index(cid)))
        for cid, node in list(self._staged.items()):
            if node.status is Status.IMPLEMENTED and cid not in self.s.verifications and cid not in todo:
                self._status(cid, Status.SCREENED_OUT, "the run was interrupted before this candidate was verified")
                self._queue_tell(self.s.candidates[cid].round, (6, cid), cid)

    # ------------------------------------------------------------------ the loop

    async def _loop(self) -> str:
        eng = self.config.engine
        lag = 2 if eng.pipeline else 1
        idle = 0
        while True:
            r = self.s.rounds_done + 1
            await self._drain(upto=r - lag)
            stop = self._budget_stop()
            if stop is None and eng.max_rounds is not None and r > eng.max_rounds:
                stop = "max_rounds"
            if stop:
                await self._drain(upto=r)
                return stop
            expansions = self.strategy.ask(self.s.view, eng.expansions_per_round)
            if not expansions:
                await self._drain(upto=r)
                if not self.strategy.ask(self.s.view, eng.expansions_per_round):
                    return "strategy-exhausted"
                continue
            self._append("round", {"round": r, "expansions": [_expansion_dict(e) for e in expansions]})
            if self._watched:
                self.progress("round", {"round": r, "budget": self._budget_dict()})
            dispatched = len(self._claimed)
            for i, exp in enumerate(expansions):
                await self._expand(r, i, exp)
            self.s.rounds_done = r
            idle = 0 if len(self._claimed) > dispatched else idle + 1
            if idle >= eng.max_idle_rounds:
                await self._drain(upto=r)
                return f"stalled: {idle} rounds in a row produced nothing new to verify"

    async def _expand(self, r: int, i: int, exp: Expansion) -> None:
        eng = self.config.engine
        rng = random.Random(f"{self.config.seed}:{r}:{i}")
        parent = self._parent_info(exp)
        ctx = ProposeContext(
            task=self.task, parent=parent, operator=exp.operator,
            inspirations=tuple(self.s.summaries.get(n, "") for n in exp.inspiration_ids if n in self.s.summaries),
            memory=self._memory_snippets(exp, parent),
            avoid=tuple(self.s.ideas[c].text for c in self.s.view.children.get(parent.id, ())
                        if c in self.s.ideas)[-50:],
            references=tuple(self._node_info(n) for n in exp.reference_ids if n in self.s.programs),
            seed=rng.randrange(2**31),
        )
        try:
            proposals = await self.maker.propose(ctx, eng.candidates)
        except ModelUnavailable as exc:
            self._model_failure(r, f"proposer: {exc}")
            return
        prefix = f"r{r}e{i}c"
        seen: set[str] = set()  # program hashes already in this pool
        made = await asyncio.gather(*(self._make(f"{prefix}{j}", p, exp, parent, r, seen) for j, p in enumerate(proposals)))
        pool = [c for c in made if c is not None]
        self._model_failures = 0
        if not pool:
            return
        sctx = ScreenContext(
            task=self.task, parent=parent, rng=rng, brief=self.s.brief,
            nodes={k: v for k, v in self.s.view.nodes.items() if v.status.verified},
            summaries=self.s.summaries, n_verify=eng.verify_per_expansion, round=r,
            budget_left_s=self._evaluator_seconds_left(), program_of=self._program,
        )
        try:
            screening = await self.screener.screen(sctx, pool)
        except ModelUnavailable as exc:
            # The screener's endpoint failed: fall back to a seeded random pick, and say so in the log.
            order = [c.id for c in pool]
            rng.shuffle(order)
            screening = Screening(f"{getattr(self.screener, 'name', 'screener')}-unavailable", tuple(order),
                                  tuple(order[: eng.verify_per_expansion]))
            self._model_failure(r, f"screener: {exc}", fatal=False)
        to_verify = list(screening.chosen)
        if eng.verify_uncertain:
            to_verify += [c for c in screening.ranking if c not in to_verify
                          and screening.evidence.get(c) and screening.evidence[c].uncertainty >= eng.uncertainty_threshold]
        audited: list[str] = []
        rest = [c for c in screening.ranking if c not in to_verify]
        if rest and eng.audit_rate > 0 and rng.random() < eng.audit_rate * len(rest):
            audited = [rng.choice(rest)]
        allowed = self._slots_left()
        to_verify = (to_verify + audited)[: max(0, allowed)]
        audited = [a for a in audited if a in to_verify]
        record = screening.to_dict()
        self._append("screening", {**record, "to_verify": to_verify, "audited": audited, "round": r})
        self._reply_health.observe(screening)  # [screen:health] warns; raises UnparseableReplies to stop the run
        self._charge_pilots(screening, r)  # fidelity: agentic pilot seconds are evaluator seconds (RPM paper)
        if self._watched:
            self.progress("screening", {"round": r, "screener": screening.screener, "chosen": to_verify,
                                        "evidence": record["evidence"]})
        by_id = {c.id: c for c in pool}
        for k, cid in enumerate(screening.ranking):
            if cid not in to_verify:
                self._status(cid, Status.SCREENED_OUT, f"ranked {k + 1} of {len(pool)} by {screening.screener}")
                self._queue_tell(r, (1, k), cid)
        for k, cid in enumerate(to_verify):
            await self._wait_for_slot()
            self._reserved += 1
            self._claimed.add(by_id[cid].program_hash)
            chain = asyncio.create_task(self._verify_chain(by_id[cid], order=(0, k)))
            self._inflight.setdefault(r, []).append(chain)

    async def _make(self, cid: str, proposal: Idea | RoleFailure, exp: Expansion, parent: ParentInfo, r: int,
                    seen: set[str]) -> Candidate | None:
        """Make one child (``verifyless.child``); record it and return it, or None if it failed before screening."""
        base = dict(id=cid, parent_id=exp.parent_id, operator=exp.operator,
                    reference_ids=exp.reference_ids, round=r, island=exp.island)

        def known(digest: str) -> bool:
            return not self.task.stochastic and (digest in self.s.verified_hashes or digest in self._claimed
                                                 or digest in seen or digest == content_hash(parent.program))

        made = await self.maker.make(parent, proposal, skip=known)
        cand = Candidate(idea=made.idea, program=made.program, program_hash=made.program_hash,
                         summary=made.summary, **base)
        if made.status is Status.DUPLICATE:
            self._record_candidate(cand, Status.DUPLICATE, made.reason)
            self._queue_tell(r, (2, cid), cid)
            return None
        if not made.ok:
            self._record_failure(cand, made.status, made.reason, r)
            return None
        seen.add(cand.program_hash)
        self._record_candidate(cand, Status.IMPLEMENTED)
        return cand

    async def _verify_chain(self, cand: Candidate, order: tuple) -> None:
        """Verify ``cand``; on a repairable failure, repair (same idea) and verify again.

        The caller reserved one verification slot; each repair reserves its own.
        """
        verification = await self.executor.verify(self.task, cand.program)
        self._reserved -= 1
        self._record_verification(cand, verification)
        self._queue_tell(cand.round, (0,) + order + (0,), cand.id)
        current, attempt = cand, 0
        while (verification.status in _REPAIRABLE and attempt < self.config.engine.repair_attempts
               and self._slots_left() > 0):
            attempt += 1
            error = f"{verification.reason}\n{verification.stderr_tail[-2000:]}"
            made = await self.maker.repair(cand.program, current.program, current.idea, error,
                                           skip=lambda d: d in self.s.verified_hashes or d in self._claimed)
            if not made.ok:
                break
            program = made.program
            fixed = Candidate(
                id=f"{cand.id}f{attempt}", parent_id=current.id, operator=Operator.DEBUG, idea=current.idea,
                program=program, program_hash=made.program_hash, round=cand.round, island=cand.island,
                summary=made.summary,
            )
            self._claimed.add(fixed.program_hash)
            self._record_candidate(fixed, Status.IMPLEMENTED)
            self._reserved += 1
            verification = await self.executor.verify(self.task, program)
            self._reserved -= 1
            self._record_verification(fixed, verification)
            self._queue_tell(cand.round, (0,) + order + (attempt,), fixed.id)
            current = fixed

    # ------------------------------------------------------------------ helpers: roles

    def _parent_info(self, exp: Expansion) -> ParentInfo:
        pid = exp.parent_id if exp.parent_id in self.s.programs else "root"
        info = self._node_info(pid)
        v = self.s.verifications.get(pid)
        if exp.operator is Operator.DEBUG and v is not None and v.status is not Status.OK:
            info = ParentInfo(id=info.id, program=info.program, score=info.score, summary=info.summary,
                              idea=info.idea, error=f"{v.status.value}: {v.reason}\n{v.stderr_tail[-2000:]}")
        return info

    def _node_info(self, node_id: str) -> ParentInfo:
        v = self.s.verifications.get(node_id)
        return ParentInfo(
            id=node_id, program=self._program(node_id),
            score=v.score if v is not None and v.status is Status.OK else None,
            summary=self.s.summaries.get(node_id, ""), idea=self.s.ideas.get(node_id),
        )

    def _program(self, node_id: str) -> str:
        cand = self.s.candidates.get(node_id)
        if cand is not None and cand.program:
            return cand.program
        return self.store.get_text(self.s.programs[node_id])

    def _memory_snippets(self, exp: Expansion, parent: ParentInfo) -> tuple[str, ...]:
        if self.memory is None:
            return ()
        stage = "debug" if exp.operator is Operator.DEBUG else "improve"
        idea_text = parent.idea.text if parent.idea else parent.summary
        query = self.memory.query_for(stage, idea=idea_text, error=parent.error)
        return tuple(self.memory.snippet(hit.record) for hit in self.memory.search(query, k=5, stage=stage))

    # ------------------------------------------------------------------ helpers: recording

    def _append(self, kind: str, payload: dict[str, Any], node_id: str | None = None, charge: Any = None) -> int:
        if charge is None:
            return self.store.append(self.run_id, kind, payload, node_id=node_id)
        return self.store.append(self.run_id, kind, payload, node_id=node_id, charge=charge)

    def _record_candidate(self, cand: Candidate, status: Status, reason: str = "") -> None:
        if cand.program:
            self.store.put_blob(cand.program)
        payload = cand.to_dict()
        payload.pop("program")
        payload.update(status=status.value, reason=reason)
        warning = getattr(cand.summary, "warning", "")  # fidelity: an out-of-range summary's tag (roles/llm.py)
        if warning:
            payload["summary_warning"] = warning
        self._append("node", payload, node_id=cand.id)
        self._remember(cand, status, reason)

    def _model_failure(self, r: int, reason: str, fatal: bool = True) -> None:
        """Log an endpoint failure; three rounds in a row without a usable model stop the run with the error."""
        self._append("model_error", {"round": r, "reason": reason[:2000]})
        self.progress("model_error", {"round": r, "reason": reason})
        if fatal:
            self._model_failures += 1
            if self._model_failures >= 3:
                raise ModelUnavailable(f"the model endpoint failed in 3 rounds in a row; last error: {reason}")

    def _record_failure(self, cand: Candidate, status: Status, reason: str, r: int) -> None:
        self._record_candidate(cand, status, reason[:2000])
        self._queue_tell(r, (3, cand.id), cand.id)

    def _remember(self, cand: Candidate, status: Status, reason: str = "") -> None:
        self.s.candidates[cand.id] = cand
        self.s.ideas[cand.id] = cand.idea
        if cand.program_hash:
            self.s.programs[cand.id] = cand.program_hash
        if cand.summary:
            self.s.summaries[cand.id] = cand.summary
            self.s.summary_by_hash.setdefault(cand.program_hash, cand.summary)
        node = Node(id=cand.id, parent_id=cand.parent_id, operator=cand.operator, status=status,
                    idea=cand.idea.text, program_hash=cand.program_hash, reference_ids=cand.reference_ids,
                    round=cand.round, island=cand.island, tags=cand.idea.tags, reason=reason,
                    code_length=cand.code_length or None)  # fidelity: the MAP-Elites length feature
        self._staged[cand.id] = node

    def _status(self, node_id: str, status: Status, reason: str) -> None:
        self._append("status", {"status": status.value, "reason": reason}, node_id=node_id)
        self._staged[node_id] = self._staged[node_id].replace(status=status, reason=reason)

    def _record_verification(self, cand: Candidate, v: Verification) -> None:
        from verifyless.store import Charge

        fitness = self.task.metric.orient(v.score) if v.status is Status.OK and v.score is not None else None
        payload = {**v.to_dict(), "fitness": fitness}
        self._append("verification", payload, node_id=cand.id,
                     charge=Charge(verifications=1, evaluator_seconds=v.seconds))
        self.s.verifications[cand.id] = v
        self.s.verified_hashes.add(v.program_hash or cand.program_hash)
        node = self._staged[cand.id]
        self._staged[cand.id] = node.replace(status=v.status, fitness=fitness, score=v.score,
                                             metrics=dict(v.metrics), reason=v.reason)
        if self._watched:
            self.progress("verification", {"node_id": cand.id, "status": v.status.value, "score": v.score,
                                           "budget": self._budget_dict()})

    # ------------------------------------------------------------------ helpers: telling, in a fixed order

    def _queue_tell(self, r: int, key: tuple, node_id: str) -> None:
        self._pending_tell.setdefault(r, []).append((key, node_id))

    async def _drain(self, upto: int) -> None:
        """Finish every verification of rounds <= upto, then tell their nodes in a fixed order."""
        for r in sorted(k for k in self._inflight if k <= upto):
            await asyncio.gather(*self._inflight.pop(r))
        for r in sorted(k for k in self._pending_tell if k <= upto):
            batch = sorted(self._pending_tell.pop(r), key=lambda kv: _sort_key(kv[0]))
            self._tell_batch(r, [nid for _, nid in batch])

    def _tell_batch(self, r: int, node_ids: list[str], record: bool = True) -> None:
        """Tell nodes to the strategy (and learners, memory); the batch is logged so resume repeats it."""
        if record:
            self._append("tell", {"round": r, "node_ids": node_ids})
        for nid in node_ids:
            self._tell(nid)

    def _tell(self, node_id: str) -> None:
        node = self._staged.pop(node_id)
        self.s.view.add(node)
        self.strategy.tell(node)
        v = self.s.verifications.get(node_id)
        if v is None:
            return
        cand = self.s.candidates[node_id]
        parent = self.s.view.nodes.get(cand.parent_id) if cand.parent_id else None
        parent_fit = parent.fitness if parent is not None else None
        observe = getattr(self.screener, "observe", None)
        if observe is not None:  # learners see validation outcomes only, never hidden test scores
            observe(cand, parent_fit, v.replace(test_metrics={}, test_score=None), node.fitness)
        if self.memory is not None:
            from verifyless.search.memory import MemoryRecord

            change = (node.fitness - parent_fit) if node.fitness is not None and parent_fit is not None else None
            add = self._memory_backlog.append if self._memory_backlog is not None else self.memory.add
            add(MemoryRecord(
                node_id=node_id, plan=cand.idea.text, outcome=v.status.value, score_change=change,
                analysis=f"score {v.score}" if v.score is not None else v.reason, error=v.reason if v.status is not Status.OK else "",
                operator=cand.operator.value,
            ))

    # ------------------------------------------------------------------ helpers: budget

    def _budget_stop(self, used: Any = None) -> str | None:
        b = self.config.budget
        used = used if used is not None else self.store.budget(self.run_id)
        if b.verifications is not None and used.verifications + self._reserved >= b.verifications:
            return "budget: verifications"
        if b.evaluator_seconds is not None and used.evaluator_seconds >= b.evaluator_seconds:
            return "budget: evaluator seconds"
        if b.tokens is not None and used.tokens_in + used.tokens_out >= b.tokens:
            return "budget: tokens"
        if b.cost is not None and used.cost >= b.cost:
            return "budget: cost"
        if b.wall_seconds is not None and time.monotonic() - self._started >= b.wall_seconds:
            return "budget: wall time"
        return None

    # fidelity: a top-K ensemble submission when the task declares how outputs combine (search/submission.py)
    async def _submit_ensemble(self) -> None:
        from verifyless.search.submission import ensemble_members, ensemble_submission
        from verifyless.store import Charge

        ids = ensemble_members(self.strategy, self.task, self.s.view)
        sandbox = getattr(self.executor, "sandbox", None)
        if not ids or sandbox is None:
            return
        members = [(i, self._program(i)) for i in ids]
        sub = await asyncio.to_thread(ensemble_submission, self.task, members, sandbox,
                                      hide=tuple(getattr(self.executor, "hide", ())))
        self._append("submission", sub.to_dict(), charge=Charge(evaluator_seconds=sub.seconds))

    # fidelity: pilot charging and the evaluator seconds left, for screeners that run pilots (screen/agentic.py)
    def _charge_pilots(self, screening: Screening, r: int) -> None:
        from verifyless.screen.agentic import pilot_records
        from verifyless.store import Charge

        for pilot in pilot_records(screening):
            self._append("pilot", {**pilot, "round": r},
                         charge=Charge(evaluator_seconds=pilot["seconds"], pilot_seconds=pilot["seconds"]))

    def _evaluator_seconds_left(self) -> float | None:
        cap = self.config.budget.evaluator_seconds
        return None if cap is None else cap - self.store.budget(self.run_id).evaluator_seconds

    def _slots_left(self) -> int:
        cap = self.config.budget.verifications
        used = self.store.budget(self.run_id)  # one ledger read serves both checks
        if self._budget_stop(used) is not None:
            return 0
        if cap is None:
            return 1 << 30
        return cap - used.verifications - self._reserved

    async def _wait_for_slot(self) -> None:
        while sum(1 for t in _all(self._inflight) if not t.done()) >= self.executor.capacity:
            await asyncio.wait([t for t in _all(self._inflight) if not t.done()], return_when=asyncio.FIRST_COMPLETED)

    def _budget_dict(self) -> dict[str, Any]:
        used = self.store.budget(self.run_id)
        return {"verifications": used.verifications, "cap": self.config.budget.verifications,
                "evaluator_seconds": round(used.evaluator_seconds, 2), "tokens": used.tokens_in + used.tokens_out,
                "best": self.s.view.best.score if self.s.view.best else None}

    # ------------------------------------------------------------------ resume

    def _restore(self) -> None:
        """Rebuild state from the event log, repeating every logged ``tell`` batch in order.

        Nodes recorded after the last batch are queued for their round again;
        candidates that were chosen but never verified are verified by
        ``_finish_interrupted`` (they were never charged).
        """
        order: list[str] = []
        told: set[str] = set()
        self._memory_backlog = []
        for ev in self.store.events(self.run_id):
            p = ev.payload
            if ev.kind == "brief":
                self.s.brief = TaskBrief(p["understanding"], tuple(p["criteria"]))
            elif ev.kind == "round":
                self.s.rounds_done = max(self.s.rounds_done, p["round"])
            elif ev.kind == "node":
                cand = Candidate.from_dict({**p, "program": ""})
                self._remember(cand, Status(p.get("status", "implemented")), p.get("reason", ""))
                order.append(cand.id)
            elif ev.kind == "status":
                node = self._staged[ev.node_id]
                self._staged[ev.node_id] = node.replace(status=Status(p["status"]), reason=p["reason"])
            elif ev.kind == "verification":
                v = Verification.from_dict(p)
                self.s.verifications[ev.node_id] = v
                self.s.verified_hashes.add(v.program_hash or self.s.candidates[ev.node_id].program_hash)
                self._staged[ev.node_id] = self._staged[ev.node_id].replace(
                    status=v.status, fitness=p.get("fitness"), score=v.score, metrics=dict(v.metrics), reason=v.reason)
            elif ev.kind == "tell":
                self._tell_batch(p["round"], p["node_ids"], record=False)
                told.update(p["node_ids"])
        if self.memory is not None and self._memory_backlog:
            self.memory.extend(self._memory_backlog)  # one index build instead of one per record
        self._memory_backlog = None
        for k, cid in enumerate(order):
            if cid in told or cid == "root":
                continue
            node = self._staged[cid]
            if node.status is Status.IMPLEMENTED and cid not in self.s.verifications:
                continue  # chosen but unfinished, or screened when the crash hit: handled below
            self._queue_tell(self.s.candidates[cid].round, (5, k), cid)

    def _result(self, final_id: str | None, stopped: str) -> RunResult:
        rows = {r["node_id"]: r for r in self.store.node_rows(self.run_id)}
        base = rows.get("root", {})
        best = rows.get(final_id, {}) if final_id else {}
        return RunResult(
            run_id=self.run_id or "", best_id=final_id, best_score=best.get("score"),
            best_test_score=best.get("test_score"), baseline_score=base.get("score"),
            verifications=self.store.budget(self.run_id).verifications, rounds=self.s.rounds_done, stopped=stopped,
        )


def _all(inflight: dict[int, list[asyncio.Task]]):
    for tasks in inflight.values():
        yield from tasks


def _sort_key(key: tuple) -> tuple:
    return tuple((0, x) if isinstance(x, (int, float)) else (1, str(x)) for x in key)


def _expansion_dict(e: Expansion) -> dict[str, Any]:
    return {"parent_id": e.parent_id, "operator": e.operator.value, "island": e.island,
            "reference_ids": list(e.reference_ids), "inspiration_ids": list(e.inspiration_ids), "note": e.note}


__all__ = ["Engine", "RunResult"]
