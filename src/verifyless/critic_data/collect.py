"""Outcome collection for critic data (critic paper, Section 2.3 and Appendix C.2).

Two modes, both recorded as one run in the run store (config ``kind:
data-collect``), so ``verifyless.critic_data.harvest`` turns them into examples and
a run killed at any moment resumes without paying twice:

* ``sft`` (two stages). Stage 1 runs ``parents - 1`` sequential evolution
  steps from the task's baseline: each step proposes one idea on the current
  solution, implements, summarises and verifies it; the verified child is kept
  as a parent, and evolution continues from it only if it beat the current
  solution (the agent keeps the better program). A step whose child is
  infeasible is retried (``stage1_attempts``); the baseline is parent 0, so
  there are ``parents`` parents in all. Stage 2 draws ``children`` ideas per
  parent in one proposer call (independent samples), and makes and verifies
  each of them against that same parent.
* ``grpo`` (improvement-driven). ``parents * children`` steps; each proposes
  one child of the current parent, and a child that improves becomes the next
  parent. Class balancing happens when the dataset is built
  (``verifyless.critic_data.dataset.balance``).

Children are made only through ``verifyless.child.ChildMaker`` (implement,
contract check, the run config's guards, duplicate check, neutral summary);
parents get the same neutral summaries. Verification goes through an executor
(``verifyless.executors``: local pool or Ray).

Durability and resume: node ids are fixed by position (``root``, ``e<k>``,
``e<k>a<attempt>``, ``p<i>c<j>``, ``g<t>``). Every proposer reply is logged
(``proposals`` event) before it is used, every child as a ``node`` event, and
every verification with its budget charge in one transaction. Resuming reads
the log: verified nodes are never verified again, implemented ones are
verified from their stored program, and logged proposals are reused instead
of asking the proposer again. A verification that was running when the
process died was never charged and runs again.

Smoke runs (ledger/pilots.py, as in the engine): with ``smoke`` a fidelity
level (default: the task's cheapest level when the roles are LLM roles,
``smoke_level``), every child is run once at that level under a short wall
limit before its full verification; one that crashes there (``SMOKE_STOPS``)
gets that status (a ``status`` event) at smoke cost and is never fully
verified: it counts as infeasible, and ``harvest`` leaves it out (it has no
verification). The baseline is not smoke-run. A smoke run is stored before it
is used and read back on resume.

On a deterministic task a child whose program was already verified in this
run (e.g. a move back to an earlier solution) is not verified again: its
``verification`` event copies the earlier result with no charge
(``reused_from`` names the source node).

The paid-work cycle is the kernel's (``verifyless.ledger``): every event goes
through ``Ledger.emit`` (store, then fold into ``RunState``, which a resume
rebuilds from the log), a verification takes a ``BudgetGate`` slot (the
reservation is the check, counting the ones in flight) and reuse is
``RunState.known_result``. Budgets are a ``BudgetConfig``, checked before each
new verification and before new LLM work (tokens, cost, wall time); wall time
counts this process only. Reaching a cap stops the collection cleanly (run
status ``stopped``); the examples collected so far are kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from verifyless.child import ChildMaker
from verifyless.critic_data.harvest import COLLECT_KIND
from verifyless.engine.baseline import check_baseline
from verifyless.events import (
    BriefLogged,
    DataReported,
    NodeRecorded,
    ProposalsLogged,
    SmokeRan,
    StatusChanged,
    Verified,
)
from verifyless.ledger import BudgetConfig, Ledger, RunState, candidate_from, low_fidelity_for
from verifyless.node import BASELINE_IDEA, Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.roles.base import ParentInfo, ProposeContext, RoleFailure, Roles
from verifyless.sandbox.local import LocalSandbox
from verifyless.task.base import Task

log = logging.getLogger(__name__)

Mode = Literal["sft", "grpo"]
Progress = Callable[[str, dict[str, Any]], None]


NO_CAPS = BudgetConfig(verifications=None)  # the default: collect until the settings are met


@dataclass(frozen=True)
class CollectSettings:
    """What to collect; stored in the run's config so a resume uses the same settings."""

    parents: int = 10
    children: int = 20
    mode: Mode = "sft"
    seed: int = 0
    stage1_attempts: int = 3
    llm_concurrency: int = 8

    def __post_init__(self) -> None:
        if self.parents < 1 or self.children < 1:
            raise ValueError("data collection needs parents >= 1 and children >= 1")
        if self.mode not in ("sft", "grpo"):
            raise ValueError(f"mode must be sft or grpo, got {self.mode!r}")


@dataclass(frozen=True)
class CollectResult:
    run_id: str
    parents: tuple[str, ...]
    children: int  # children made (any status)
    verified: int  # verifications recorded in the run (reused ones included)
    reused: int  # verifications restored from the log instead of paid again
    stopped: str  # "finished" or the cap that stopped it


class BudgetStop(Exception):
    """A cap was reached; the collection ends cleanly."""


def _item_to(item: Idea | RoleFailure) -> dict[str, Any]:
    if isinstance(item, RoleFailure):
        return {"failure": item.kind, "reason": item.reason[:2000]}
    return {"text": item.text, "params": dict(item.params)}


def _item_from(data: dict[str, Any]) -> Idea | RoleFailure:
    if "failure" in data:
        return RoleFailure(data["failure"], data.get("reason", ""))
    return Idea(data["text"], dict(data.get("params") or {}))


class Collector:
    """Runs one collection (see module docstring). All collaborators are passed in.

    What it stores and pays for goes through ``self.ledger``, which owns the run's id: pass ``ledger`` (on
    ``store``, with ``caps``) to share it with what was built before the collector (the model call recorders
    read the run id from it, ``models_wiring.RunIdOf``). ``smoke`` is ``engine.smoke``'s setting (a level, ``"off"``, or None: auto,
    which smoke-runs only when ``llm_roles``); smoke runs need an executor with
    a sandbox (``ledger.pilots.run_in_sandbox``), else there are none.
    """

    def __init__(
        self,
        task: Task,
        roles: Roles,
        executor: Any,
        store: Any,
        settings: CollectSettings,
        caps: BudgetConfig = NO_CAPS,
        *,
        progress: Progress | None = None,
        ledger: Ledger | None = None,
        run_config: dict[str, Any] | None = None,
        guards: Any = None,
        guard_repairs: int = 0,
        smoke: str | None = None,
        llm_roles: bool = False,
        smoke_wall_seconds: float = 30.0,
        data_report: bool = False,
        hide: tuple[Path, ...] = (),
    ) -> None:
        self.task, self.roles, self.executor, self.store = task, roles, executor, store
        self.data_report, self.hide = data_report, hide
        self.settings, self.caps = settings, caps
        self.progress = progress or (lambda kind, data: None)
        self.run_config = dict(run_config or {})
        self.maker = ChildMaker(
            task, roles, llm=asyncio.Semaphore(settings.llm_concurrency), guards=guards, guard_repairs=guard_repairs
        )
        if ledger is not None and (ledger.store is not store or ledger.gate.caps is not caps):
            raise ValueError("a ledger passed to the Collector is on its store and holds its caps")
        self.ledger = ledger or Ledger(store, caps, task.metric)
        self.low_fidelity, self.smoke_at = low_fidelity_for(
            self.ledger, task, executor, smoke=smoke, llm_roles=llm_roles, smoke_wall_seconds=smoke_wall_seconds
        )
        self.reused = 0

    @property
    def state(self) -> RunState:
        """The run's fold (``verifyless.ledger.RunState``): nodes, verifications, proposals, brief."""
        return self.ledger.state

    @property
    def run_id(self) -> str:
        return self.ledger.run_id or ""

    # ------------------------------------------------------------------ public

    async def run(self, run_id: str | None = None) -> CollectResult:
        """Start a new collection, or resume ``run_id`` from its log; held (the store's lease) while it runs, so a
        second process that resumes it meanwhile is refused (``RunHeld``)."""
        if run_id is None:
            caps = self.caps.model_dump()
            config = {"kind": COLLECT_KIND, **asdict(self.settings), "caps": caps, **self.run_config}
            self.ledger.run_id = self.store.create_run(self.task.name, config, seed=self.settings.seed)
        else:
            self.ledger.run_id = run_id
        with self.store.holding(self.run_id):
            return await self._run(resumed=run_id is not None)

    async def _run(self, *, resumed: bool) -> CollectResult:
        if resumed:
            for ev in self.store.events(
                self.run_id, DataReported, BriefLogged, ProposalsLogged, NodeRecorded, Verified, SmokeRan, StatusChanged
            ):
                self.state.apply(ev)
        self.store.set_status(self.run_id, "running")
        parents: list[str] = []
        stopped = "finished"
        try:
            if not resumed and self.data_report:  # as a run does: the critic's prompt then carries it
                sandbox = getattr(self.executor, "sandbox", None) or LocalSandbox()
                await self.ledger.record_data_report(self.task, sandbox, hide=self.hide)
            await self._brief()
            root = await _record_root(self)
            parents.append(root.id or "root")
            if self.settings.mode == "sft":
                parents = await self._stage1(root)
                await self._stage2(parents)
            else:
                parents = await self._grpo(root)
        except BudgetStop as stop:
            stopped = str(stop)
        self.store.set_status(self.run_id, "finished" if stopped == "finished" else "stopped")
        made = sum(1 for nid in self.state.candidates if nid != "root")
        return CollectResult(self.run_id, tuple(parents), made, len(self.state.verifications), self.reused, stopped)

    # ------------------------------------------------------------------ stages

    async def _stage1(self, root: ParentInfo) -> list[str]:
        parents, current = [root], root
        self.progress("stage", {"stage": "stage 1: evolution", "total": self.settings.parents})
        self.progress("advance", {"stage": "stage 1: evolution", "n": 1})
        for k in range(1, self.settings.parents):
            kept = None
            for attempt in range(self.settings.stage1_attempts):
                nid = f"e{k}" + (f"a{attempt}" if attempt else "")
                ideas = await self._proposals(nid, current, 1, avoid=_ideas(parents))
                if not ideas:  # the proposer has nothing new for this parent
                    break
                kept = await self._child(nid, current, ideas[0], k)
                if kept is not None and kept.score is not None:
                    break
                kept = None
            if kept is None:
                log.warning(
                    "stage 1 step %d made no feasible child in %d attempts; stage 1 ends with %d parents",
                    k,
                    self.settings.stage1_attempts,
                    len(parents),
                )
                break
            parents.append(kept)
            if self._fitness(kept) > self._fitness(current):
                current = kept
            self.progress("advance", {"stage": "stage 1: evolution", "n": 1})
        return [p.id or "root" for p in parents]

    async def _stage2(self, parent_ids: list[str]) -> None:
        stage = "stage 2: children"
        self.progress("stage", {"stage": stage, "total": len(parent_ids) * self.settings.children})
        for i, pid in enumerate(parent_ids):
            parent = self._parent(pid)
            ideas = await self._proposals(f"p{i}", parent, self.settings.children)
            seen: set[str] = {
                c.program_hash
                for nid, c in self.state.candidates.items()
                if nid.startswith(f"p{i}c") and c.program_hash
            }

            async def one(j: int, idea: Idea | RoleFailure) -> None:
                await self._child(f"p{i}c{j}", parent, idea, len(parent_ids) + i, seen)  # noqa: B023 (awaited here)
                self.progress("advance", {"stage": stage, "n": 1})

            await _gather_in_order(one(j, idea) for j, idea in enumerate(ideas))
            missing = self.settings.children - len(ideas)
            if missing > 0:  # the proposer returned fewer ideas (e.g. an exhausted idea space)
                self.progress("advance", {"stage": stage, "n": missing})

    async def _grpo(self, root: ParentInfo) -> list[str]:
        stage = "improvement-driven pool"
        steps = self.settings.parents * self.settings.children
        self.progress("stage", {"stage": stage, "total": steps})
        current, parents = root, [root.id or "root"]
        tried: list[str] = []
        for t in range(steps):
            ideas = await self._proposals(f"g{t}", current, 1, avoid=tuple(tried[-20:]))
            if not ideas:
                log.warning("the proposer has no new idea for parent %s; the pool ends after %d steps", current.id, t)
                break
            idea = ideas[0]
            if isinstance(idea, Idea):
                tried.append(idea.text)
            child = await self._child(f"g{t}", current, idea, t + 1)
            if child is not None and child.score is not None and self._fitness(child) > self._fitness(current):
                current, tried = child, []
                parents.append(child.id or "")
            self.progress("advance", {"stage": stage, "n": 1})
        return parents

    # ------------------------------------------------------------------ one child

    async def _child(
        self, nid: str, parent: ParentInfo, idea: Idea | RoleFailure, rnd: int, seen: set[str] | None = None
    ) -> ParentInfo | None:
        """Make, record and verify one child; its ParentInfo (score None if infeasible), or None if not made."""
        if nid in self.state.verifications:
            self.reused += 1
            return self._parent(nid)
        if nid not in self.state.candidates:
            self._check_llm_budget()
            made = await self.maker.make(parent, idea, skip=_skipper(parent, seen))
            cand = candidate_from(made, id=nid, parent_id=parent.id, operator=Operator.IMPROVE, round=rnd)
            self.ledger.record_candidate(cand, made.status, made.reason[:2000])
        if self.state.staged[nid].status is not Status.IMPLEMENTED:
            return None
        digest = self.state.candidates[nid].program_hash
        if seen is not None:
            seen.add(digest)  # restored nodes join the pool's duplicate set too
        program = self.store.get_text(digest)
        if await self._smoke(nid, program) is None:
            await self._verify(nid, program)
        return self._parent(nid)

    async def _smoke(self, nid: str, program: str) -> Verification | None:
        """The smoke run's result when it stops ``nid`` (status stored), else None; None without smoke runs."""
        if self.low_fidelity is None or self.smoke_at is None or nid in self.state.verifications:
            return None
        if not self.task.stochastic and self.state.known_result(content_hash(program)) is not None:
            return None  # the full result is known and free: nothing to smoke
        self._check_llm_budget()  # a smoke run is paid evaluator seconds: no new one past a cap
        cand = self.state.candidates[nid].replace(program=program)
        return await self.low_fidelity.smoke(cand, self.smoke_at)

    async def _verify(self, nid: str, program: str) -> Verification:
        """Verify ``nid`` once: a result for the same program is read back (deterministic tasks), else paid."""
        known = None if self.task.stochastic else self.state.known_result(content_hash(program))
        if known is not None:  # the same program scores the same, so it is not paid again
            source, v = known
            self.ledger.record_reused(nid, source, v)
            return v
        slot = self.ledger.gate.reserve()
        if slot is None:
            raise BudgetStop(self.ledger.gate.stop_reason() or "budget: verifications")
        async with slot:
            v = await self.executor.verify(self.task, program)
            self.ledger.record_verification(nid, v)
        return v

    # ------------------------------------------------------------------ recording and restoring

    async def _brief(self) -> None:
        if self.state.brief is None:
            self._check_llm_budget()
            brief = await self.roles.briefer.brief(self.task, data_report=self.state.data_report_text())
            self.ledger.emit(BriefLogged(brief.understanding, tuple(brief.criteria)))

    async def _proposals(
        self, key: str, parent: ParentInfo, n: int, avoid: tuple[str, ...] = ()
    ) -> list[Idea | RoleFailure]:
        if key not in self.state.proposals:
            self._check_llm_budget()
            ctx = ProposeContext(
                task=self.task,
                parent=parent,
                operator=Operator.IMPROVE,
                avoid=avoid,
                seed=_seed(self.settings.seed, key),
            )
            items = list(await self.maker.propose(ctx, n))[:n]
            self.ledger.emit(ProposalsLogged(key, parent.id, tuple(_item_to(i) for i in items)))
        return [_item_from(i) for i in self.state.proposals[key]]

    def _parent(self, nid: str) -> ParentInfo:
        cand, v = self.state.candidates[nid], self.state.verifications.get(nid)
        score = v.score if v is not None and v.status is Status.OK else None
        return ParentInfo(
            id=nid,
            program=self.store.get_text(cand.program_hash),
            score=score,
            summary=cand.summary,
            idea=Idea(cand.idea.text, dict(cand.idea.params)),
        )

    def _fitness(self, info: ParentInfo) -> float:
        return self.task.metric.orient(info.score) if info.score is not None else float("-inf")

    # ------------------------------------------------------------------ budgets

    def _check_llm_budget(self) -> None:
        """Stop before new LLM work once the token, cost, evaluator-seconds or wall-time cap is reached."""
        reason = self.ledger.gate.llm_stop_reason()
        if reason is not None:
            raise BudgetStop(reason)


def _ideas(parents: list[ParentInfo]) -> tuple[str, ...]:
    return tuple(p.idea.text for p in parents if p.idea is not None and p.idea.text)


def _skipper(parent: ParentInfo, seen: set[str] | None) -> Callable[[str], bool]:
    """Duplicate check for ChildMaker: the parent's own program, or one already made in this pool.

    A program that passes is added to ``seen`` at once, so concurrent makes of
    the same pool cannot both pass.
    """
    parent_hash = content_hash(parent.program)

    def skip(digest: str) -> bool:
        if digest == parent_hash or (seen is not None and digest in seen):
            return True
        if seen is not None:
            seen.add(digest)
        return False

    return skip


def _seed(seed: int, key: str) -> int:
    return int(content_hash(f"{seed}:{key}")[:8], 16)


async def _gather_in_order(coros: Any) -> None:
    """Run coroutines concurrently; the first exception (e.g. BudgetStop) propagates after all settle."""
    results = await asyncio.gather(*coros, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r


__all__ = ["NO_CAPS", "BudgetStop", "CollectResult", "CollectSettings", "Collector"]


async def _record_root(collector: Collector) -> ParentInfo:
    if "root" not in collector.state.candidates:
        program = collector.task.baseline_program
        idea = Idea(BASELINE_IDEA)
        collector._check_llm_budget()
        summary = await collector.maker.summarize(program, idea)
        collector.ledger.record_candidate(
            Candidate(
                id="root",
                parent_id=None,
                operator=Operator.BASELINE,
                idea=idea,
                program=program,
                program_hash=content_hash(program),
                summary=summary,
            ),
            Status.IMPLEMENTED,
            "",
        )
    if "root" not in collector.state.verifications:
        await collector._verify("root", collector.task.baseline_program)
    else:
        collector.reused += 1
    check_baseline(collector.task, collector.state.verifications["root"], allow_failed=False, needs="data collection")
    return collector._parent("root")
