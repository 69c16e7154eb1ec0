"""Offline selector replay: verify every candidate once, then judge any screener for free.

``collect_pools`` runs a short evolution on a task with its offline
idea-space roles and verifies *every* candidate: the baseline is the first
parent; each parent gets ``n_per_parent`` independently proposed children,
all verified; the best working child becomes the next parent (so a parent's
pool doubles as the evolution step that yields the next parent, and the run
costs ``1 + parents * n_per_parent`` verifications, fewer when programs
repeat: identical programs in the run are verified and charged once). Pools are saved as
JSON lines, one ``PoolRecord`` per line, programs included; with a
``store`` the same verifications are also recorded as a run.

``evaluate_screener(pools, screener)`` runs any ``Screener`` on each pool
with no further verification and measures its pick against the known
outcomes (``verifyless.offline.selection``): selection advantage, normalised
advantage (random = 0, oracle = 1), regret against the pool's best, top-1
hit rate and pairwise accuracy. ``ScoreOracle`` ranks by known scores: with
hidden test scores it is the test oracle, for offline studies only.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from verifyless.child import ChildMaker, status_for
from verifyless.errors import ConfigError, TaskError
from verifyless.ledger import BudgetConfig, Ledger, candidate_from
from verifyless.node import (
    BASELINE_IDEA,
    Candidate,
    Evidence,
    Idea,
    Operator,
    Screening,
    Status,
    Verification,
    content_hash,
)
from verifyless.offline.compare import Estimate, bootstrap_ci
from verifyless.offline.selection import Pool, SelectionSummary, summarize_selection
from verifyless.roles.base import ParentInfo, ProposeContext, RoleFailure, TaskBrief
from verifyless.roles.space import space_roles
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.base import ScreenContext, Screener
from verifyless.store import RunStore
from verifyless.task.base import Task
from verifyless.task.loader import load_task
from verifyless.verify import verify

Target = Literal["validation", "test"]


@dataclass(frozen=True)
class PoolCandidate:
    """One child with its verification outcome (``program`` empty when implementation failed)."""

    id: str
    idea: str
    status: str
    program: str = ""
    program_hash: str = ""
    summary: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)
    score: float | None = None  # raw validation metric
    test_score: float | None = None  # raw hidden test metric (measurement only)
    fitness: float | None = None  # oriented validation (higher is better)
    test_fitness: float | None = None  # oriented hidden test
    seconds: float = 0.0
    reason: str = ""

    @property
    def implemented(self) -> bool:
        return bool(self.program)

    def target(self, which: Target) -> float | None:
        return self.fitness if which == "validation" else self.test_fitness


@dataclass(frozen=True)
class PoolRecord:
    """One parent and all its verified children."""

    task: str
    pool_id: str
    step: int
    parent_id: str
    parent_program: str
    parent_summary: str
    parent_score: float | None
    parent_fitness: float | None
    candidates: tuple[PoolCandidate, ...]
    seed: int = 0
    understanding: str = ""
    criteria: tuple[str, ...] = ()
    task_folder: str = ""  # the task's folder when collected (a folder task cannot be found by its name); "" before

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PoolRecord:
        d = dict(data)
        d["candidates"] = tuple(PoolCandidate(**c) for c in d.get("candidates", ()))
        d["criteria"] = tuple(d.get("criteria", ()))
        return cls(**d)


def _pool_task(pool: PoolRecord) -> Task:
    """The task a pool was collected on: its recorded folder where it still exists, else the task's name."""
    if pool.task_folder and Path(pool.task_folder).is_dir():
        return load_task(pool.task_folder)
    try:
        return load_task(pool.task)
    except TaskError as exc:
        where = f" (collected from {pool.task_folder}, which is gone)" if pool.task_folder else ""
        raise TaskError(
            f"the pools' task {pool.task!r} cannot be loaded{where}: {exc}; name its folder with --task"
        ) from None


def save_pools(pools: Iterable[PoolRecord], path: str | Path) -> Path:
    """Write one JSON object per line (parent folders are created)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for p in pools:
            fh.write(json.dumps(p.to_dict(), ensure_ascii=False) + "\n")
    return out


def load_pools(path: str | Path) -> list[PoolRecord]:
    """Read pools written by ``save_pools``; a missing or empty file, or a malformed line (named), is a ConfigError."""
    if not Path(path).is_file():
        raise ConfigError(f"no pool file at {path}; write one with `verifyless collect-pools TASK --out FILE`")
    pools = []
    for i, line in enumerate(Path(path).read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            pools.append(PoolRecord.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError, KeyError, AttributeError) as exc:
            raise ConfigError(
                f"{path}:{i}: not a pool record ({exc}); pool files are written by `verifyless collect-pools`"
            ) from None
    if not pools:
        raise ConfigError(f"{path} holds no pools; write them with `verifyless collect-pools TASK --out FILE`")
    return pools


# ---------------------------------------------------------------------- collection


def collect_pools(task: Task | str, **options: Any) -> list[PoolRecord]:
    """Build the pool dataset (see module docstring): ``collect_pools_async`` run to completion, same options."""
    return asyncio.run(collect_pools_async(task, **options))


async def collect_pools_async(
    task: Task | str,
    *,
    parents: int = 3,
    n_per_parent: int = 8,
    seed: int = 0,
    store: Any = None,
    sandbox: Any = None,
    roles: Any = None,
    progress: Callable[[str], None] | None = None,
) -> list[PoolRecord]:
    """Collect pools. ``roles`` defaults to the task's idea-space roles, ``sandbox`` to ``LocalSandbox()``.

    Paid work goes through the kernel (``verifyless.ledger``): each candidate is
    a ``node`` event, a program already verified in the run is read back
    (``reused_from``, no charge), every other one is charged once. Without a
    ``store`` the run is kept in a temporary store that is deleted at the end.
    """

    task = _task(task)
    if parents < 1 or n_per_parent < 1:
        raise ValueError("collect_pools needs parents >= 1 and n_per_parent >= 1")
    roles = roles if roles is not None else _space_roles(task, seed)
    sandbox = sandbox if sandbox is not None else _local_sandbox()
    say = progress or (lambda msg: None)
    rng = random.Random(seed)
    config = {"kind": "collect-pools", "parents": parents, "n_per_parent": n_per_parent, "seed": seed}
    with _run_store(store) as run_store:
        ledger = _PoolLedger(task, sandbox, run_store, config, seed)
        brief = await roles.briefer.brief(task)
        maker = ChildMaker(task, roles)
        base_idea = Idea(BASELINE_IDEA)
        root = _pool_candidate(
            "root", None, base_idea, task.baseline_program, await maker.summarize(task.baseline_program, None), 0
        )
        base = await ledger.check(root)
        if base.status is not Status.OK:
            say(f"baseline failed ({base.status.value}: {base.reason}); pools start from it anyway")
        parent = ParentInfo(id="root", program=root.program, score=base.score, summary=root.summary)
        pools: list[PoolRecord] = []
        for step in range(parents):
            members = await _pool_members(ledger, maker, roles, parent, step, n_per_parent, rng)
            pools.append(_pool_record(task, step, parent, members, seed, brief))
            ok = [c for c in members if c.fitness is not None]
            say(f"pool {step}: {len(members)} candidates, {len(ok)} verified ok")
            if not ok:
                break
            best = max(ok, key=lambda c: c.fitness)  # type: ignore[arg-type, return-value]
            idea = Idea(best.idea, dict(best.params))
            parent = ParentInfo(id=best.id, program=best.program, score=best.score, summary=best.summary, idea=idea)
        run_store.set_status(ledger.ledger.run_id, "finished")
    return pools


class _PoolLedger:
    """The pool run's kernel: record each candidate, read a known program back, pay the rest once."""

    def __init__(self, task: Task, sandbox: Any, store: Any, config: dict[str, Any], seed: int) -> None:
        self.task, self.sandbox = task, sandbox
        self.ledger = Ledger(store, BudgetConfig(verifications=None), task.metric)
        self.ledger.run_id = store.create_run(task.name, config, seed=seed)

    async def check(self, cand: Candidate) -> Verification:
        self.ledger.record_candidate(cand, Status.IMPLEMENTED)
        known = self.ledger.state.known_result(cand.program_hash)
        if known is not None:  # identical programs are verified once, and paid once
            self.ledger.record_reused(cand.id, *known)
            return known[1]
        slot = self.ledger.gate.reserve()
        assert slot is not None  # the pool run sets no cap
        async with slot:
            # verify() blocks on the sandbox: run it in a worker thread so the event loop stays responsive.
            v = await asyncio.to_thread(verify, self.task, cand.program, self.sandbox)
            self.ledger.record_verification(cand.id, v)
        return v


async def _pool_members(
    ledger: _PoolLedger, maker: Any, roles: Any, parent: Any, step: int, n: int, rng: random.Random
) -> list[PoolCandidate]:
    """Propose ``n`` children of ``parent``, make each and verify every runnable one."""

    ctx = ProposeContext(task=ledger.task, parent=parent, operator=Operator.IMPROVE, seed=rng.randrange(2**31))
    members: list[PoolCandidate] = []
    for j, proposal in enumerate(await roles.proposer.propose(ctx, n)):
        cid = f"s{step}c{j}"
        if isinstance(proposal, RoleFailure):
            members.append(PoolCandidate(cid, "", status_for(proposal).value, reason=proposal.reason))
            continue
        made = await maker.make(parent, proposal)
        if not made.ok:
            params = dict(proposal.params)
            members.append(PoolCandidate(cid, proposal.text, made.status.value, params=params, reason=made.reason))
            continue
        cand = candidate_from(made, id=cid, parent_id=parent.id, operator=Operator.IMPROVE, round=step + 1).replace(
            idea=proposal
        )
        v = await ledger.check(cand)
        members.append(_member(ledger.task, cand, v, proposal))
    return members


def _member(task: Task, cand: Candidate, v: Verification, proposal: Idea) -> PoolCandidate:
    return PoolCandidate(
        id=cand.id,
        idea=proposal.text,
        status=v.status.value,
        program=cand.program,
        program_hash=cand.program_hash,
        summary=cand.summary,
        params=dict(proposal.params),
        score=v.score,
        test_score=v.test_score,
        fitness=_orient(task, v.score),
        test_fitness=_orient(task, v.test_score),
        seconds=v.seconds,
        reason=v.reason,
    )


def _pool_record(task: Task, step: int, parent: Any, members: list[PoolCandidate], seed: int, brief: Any) -> PoolRecord:
    return PoolRecord(
        task=task.name,
        task_folder=str(task.root),
        pool_id=f"{task.name}:s{step}",
        step=step,
        parent_id=parent.id or "root",
        parent_program=parent.program,
        parent_summary=parent.summary,
        parent_score=parent.score,
        parent_fitness=_orient(task, parent.score),
        candidates=tuple(members),
        seed=seed,
        understanding=brief.understanding,
        criteria=tuple(brief.criteria),
    )


def _pool_candidate(cid: str, parent_id: str | None, idea: Idea, program: str, summary: str, step: int) -> Candidate:
    operator = Operator.BASELINE if parent_id is None else Operator.IMPROVE
    return Candidate(cid, parent_id, operator, idea, program, content_hash(program), summary, round=step)


@contextlib.contextmanager
def _run_store(store: Any) -> Iterator[Any]:
    """``store``, or a temporary run store (deleted on exit) when it is None."""
    if store is not None:
        yield store
        return

    with tempfile.TemporaryDirectory(prefix="verifyless-pools-") as tmp, RunStore(Path(tmp) / "pools.db") as temp:
        yield temp


def _task(task: Task | str) -> Task:
    if isinstance(task, str):
        return load_task(task)
    return task


def _space_roles(task: Task, seed: int) -> Any:
    return space_roles(task, seed)


def _local_sandbox() -> Any:
    return LocalSandbox()


def _orient(task: Task, value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else task.metric.orient(value)


# ---------------------------------------------------------------------- replay


class ScoreOracle:
    """Ranks candidates by known scores (higher first, unknown last) and chooses the top one.

    ``scores`` is keyed by candidate id or by program hash (looked up in that
    order). ``ScoreOracle.from_pools(pools, "test")`` keys hidden test
    fitness by program hash (the same program scores the same on a
    deterministic task): that is the test oracle, for offline measurement
    only; it must never screen a live run.
    """

    def __init__(self, scores: Mapping[str, float | None], *, name: str = "score-oracle") -> None:
        self.scores = dict(scores)
        self.name = name

    @classmethod
    def from_pools(cls, pools: Sequence[PoolRecord], target: Target = "test") -> ScoreOracle:
        scores: dict[str, float | None] = {}
        for p in pools:
            for c in p.candidates:
                if c.implemented:
                    scores.setdefault(c.program_hash or content_hash(c.program), c.target(target))
        return cls(scores, name="test-oracle" if target == "test" else "validation-oracle")

    def _value(self, cand: Candidate) -> float:
        s = self.scores.get(cand.id, self.scores.get(cand.program_hash))
        return -math.inf if s is None or not math.isfinite(s) else float(s)

    async def screen(self, ctx: Any, candidates: Sequence[Candidate]) -> Screening:
        values = {c.id: self._value(c) for c in candidates}
        ranking = sorted(values, key=lambda cid: -values[cid])  # stable: input order among equals
        evidence = {
            cid: Evidence(cid, rank_value=v, uncertainty=0.0, detail={"oracle": self.name}) for cid, v in values.items()
        }
        return Screening(self.name, tuple(ranking), tuple(ranking[:1]), evidence, 0.0)


@dataclass(frozen=True)
class ScreeningReport:
    """How a screener's picks fared on pools whose every candidate was verified."""

    screener: str
    target: str
    summary: SelectionSummary
    normalized_ci: Estimate | None
    chosen: Mapping[str, str | None]
    seconds: float

    def row(self) -> dict[str, Any]:
        s = self.summary
        return {
            "screener": self.screener,
            "pools": s.n_pools,
            "advantage": s.advantage,
            "normalized": s.normalized,
            "regret": s.regret,
            "top1": s.top1,
            "pairwise": s.pairwise.accuracy,
        }


def pool_candidates(pool: PoolRecord) -> list[Candidate]:
    """The implemented children as ``Candidate`` records, as the engine would have screened them."""
    return [
        Candidate(
            id=c.id,
            parent_id=pool.parent_id,
            operator=Operator.IMPROVE,
            idea=Idea(c.idea, dict(c.params)),
            program=c.program,
            program_hash=c.program_hash or content_hash(c.program),
            summary=c.summary,
            round=pool.step + 1,
        )
        for c in pool.candidates
        if c.implemented
    ]


def evaluate_screener(pools: Sequence[PoolRecord], screener: Screener, **options: Any) -> ScreeningReport:
    """Replay ``screener`` on every pool: ``evaluate_screener_async`` run to completion, same options."""
    return asyncio.run(evaluate_screener_async(pools, screener, **options))


async def evaluate_screener_async(
    pools: Sequence[PoolRecord],
    screener: Screener,
    *,
    target: Target = "validation",
    seed: int = 0,
    tasks: Mapping[str, Task] | None = None,
    n_boot: int = 2000,
) -> ScreeningReport:
    """Screen each pool once, take the first chosen id (else the top ranked) and score the pick.

    Each pool gets its own ``random.Random(f"{seed}:{pool_id}")`` so results
    do not depend on pool order. Tasks are loaded by name unless given in
    ``tasks``. Candidates whose implementation failed are not screened (the
    engine drops them before screening too); failed verifications count
    with the pool's worst working score.
    """

    loaded: dict[str, Task] = dict(tasks or {})
    outcomes: list[Pool] = []
    chosen: dict[str, str | None] = {}
    started = time.monotonic()
    for pool in pools:
        cands = pool_candidates(pool)
        if not cands:
            continue
        if pool.task not in loaded:
            loaded[pool.task] = _pool_task(pool)
        parent = ParentInfo(
            id=pool.parent_id, program=pool.parent_program, score=pool.parent_score, summary=pool.parent_summary
        )
        brief = TaskBrief(pool.understanding, tuple(pool.criteria)) if (pool.understanding or pool.criteria) else None
        ctx = ScreenContext(
            task=loaded[pool.task],
            parent=parent,
            rng=random.Random(f"{seed}:{pool.pool_id}"),
            brief=brief,
            summaries={pool.parent_id: pool.parent_summary},
            n_verify=1,
            round=pool.step + 1,
        )
        screening = await screener.screen(ctx, cands)
        pick = screening.chosen[0] if screening.chosen else (screening.ranking[0] if screening.ranking else None)
        chosen[pool.pool_id] = pick
        n = len(screening.ranking)
        values = {
            cid: float(screening.evidence[cid].rank_value) if cid in screening.evidence else float(n - i)
            for i, cid in enumerate(screening.ranking)
        }
        scores = {c.id: c.target(target) for c in pool.candidates if c.implemented}
        outcomes.append(Pool(pool.pool_id, scores, pick, values))
    summary = summarize_selection(outcomes)
    normalized = [s.normalized for s in summary.pools if not s.degenerate]
    ci = bootstrap_ci(normalized, n_boot=n_boot, seed=seed) if normalized else None
    return ScreeningReport(screener.name, target, summary, ci, chosen, time.monotonic() - started)


__all__ = [
    "PoolCandidate",
    "PoolRecord",
    "ScoreOracle",
    "ScreeningReport",
    "collect_pools",
    "collect_pools_async",
    "evaluate_screener",
    "evaluate_screener_async",
    "load_pools",
    "pool_candidates",
    "save_pools",
]
