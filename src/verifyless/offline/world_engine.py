"""A pool world served as a task's verifier: the real ``Engine`` searching a world whose outcomes are known.

The replays (``offline/replay.py``) re-implement a greedy search around a
screener; this module instead runs ``verifyless``'s own engine round (ask,
make children, screen, route, verify, tell, learn, the store) on a built-in
task whose idea space a world covers, with three world-backed parts:

* ``WorldProposer``: each expansion proposes ``N`` unverified points of the
  world near the parent (``replay.draw_pool``: the same draw, weighted by
  Hamming distance), as idea-space ideas the task's ``TemplateImplementer``
  renders;
* ``WorldExecutor``: an ``Executor`` that answers a verification from the
  world's stored outcome of the program's point (status, validation and
  hidden test score), without running it; a program that is no point of the
  world fails as a candidate (``Status.FAILED``, with the reason);
* ``WorldCritic``: ``offline/simulated.SimulatedCritic`` locating the parent
  and the candidates by their program text (the engine's ids are its own).

``world_run`` wires them with a real ``RunStore`` (SQLite, in a temporary
folder unless a path is given) and returns the best-so-far curve and, for an
``adaptive`` screener, its final state and when it decided. Used by
``bench/adaptive.py`` and the tests; nothing here reads a world point that a
search could not have paid for, except the simulated critic (which is what
makes it simulated) and the proposer's exclusion of points already verified.
"""

from __future__ import annotations

import asyncio
import math
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from verifyless.config import load_config
from verifyless.engine import Engine
from verifyless.events import Screened, Verified
from verifyless.node import Idea, Status, Verification, content_hash
from verifyless.offline.replay import BestCurve, draw_pool
from verifyless.offline.simulated import CriticSpec, SimulatedCritic
from verifyless.offline.worlds import World, make_program
from verifyless.roles.base import ProposeContext, RoleFailure
from verifyless.roles.space import describe_move, space_roles
from verifyless.screen.adaptive import AdaptiveScreener
from verifyless.screen.audit import adaptive_audit
from verifyless.screen.base import Screener
from verifyless.search.registry import build_strategy
from verifyless.store import RunStore
from verifyless.task.base import Task

__all__ = ["WorldBook", "WorldCritic", "WorldExecutor", "WorldProposer", "WorldRun", "world_run"]


class WorldBook:
    """A world's points by program text, and the points this run has verified (shared by proposer and executor)."""

    def __init__(self, world: World, task: Task) -> None:
        if task.idea_space is None:
            raise ValueError(f"task {task.name} has no idea space: a world cannot serve it")
        self.world, self.task = world, task
        self.index = {make_program(task, p.assignment): i for i, p in enumerate(world.points)}
        self.verified: set[int] = set()

    def locate(self, program: str) -> int | None:
        """The point whose rendered program is ``program``; None for any other program."""
        return self.index.get(program)


class WorldExecutor:
    """An ``Executor`` answering from the world (module docstring); ``verified`` counts what it answered."""

    name = "world"
    sandbox = None  # nothing runs: the world answers
    hide: tuple[str, ...] = ()

    def __init__(self, book: WorldBook, capacity: int = 1) -> None:
        self.book, self.capacity = book, capacity

    async def verify(self, task: Task, program: str) -> Verification:
        i, digest = self.book.locate(program), content_hash(program)
        if i is None:
            return Verification(
                status=Status.FAILED, reason="the program is no point of the world", program_hash=digest
            )
        self.book.verified.add(i)
        p = self.book.world.points[i]
        metric, ok = self.book.world.metric or task.metric.name, p.status == "ok"
        test = (task.test_metrics or ("test_score",))[0]
        return Verification(
            status=Status.OK if ok else Status.FAILED,
            reason=p.reason,
            score=p.score if ok else None,
            test_score=p.test_score if ok else None,
            metrics={metric: p.score} if ok and p.score is not None else {},
            test_metrics={test: p.test_score} if ok and p.test_score is not None else {},
            program_hash=digest,
        )

    def close(self) -> None:
        return None


class WorldProposer:
    """``N`` unverified world points near the parent per expansion, as idea-space ideas (module docstring)."""

    def __init__(self, book: WorldBook, *, seed: int = 0, locality: float = 1.0) -> None:
        self.book, self.seed, self.locality = book, seed, locality
        self.calls: dict[str | None, int] = {}

    async def propose(self, ctx: ProposeContext, n: int) -> list[Idea | RoleFailure]:
        world, space = self.book.world, self.book.task.idea_space
        assert space is not None
        parent = self.book.locate(ctx.parent.program)
        parent = world.baseline_index if parent is None else parent
        call = self.calls[ctx.parent.id] = self.calls.get(ctx.parent.id, -1) + 1
        rng = random.Random(f"world-propose:{self.seed}:{ctx.seed}:{ctx.parent.id}:{call}")
        exclude = self.book.verified | {parent}
        before = dict(world.points[parent].assignment)
        ideas: list[Idea | RoleFailure] = []
        for i in draw_pool(world, parent, exclude, n, self.locality, rng):
            child = dict(world.points[i].assignment)
            changed = [d for d in space.dimensions if child[d] != before[d]]
            text = describe_move(space, before, child)
            ideas.append(
                Idea(text, {"assignment": child, "changed": changed, "parent_assignment": before}, tuple(changed))
            )
        return ideas


class WorldCritic(SimulatedCritic):
    """``SimulatedCritic`` on the engine path: parent and candidates located by their program text."""

    def __init__(self, spec: CriticSpec, book: WorldBook, seed: int = 0) -> None:
        super().__init__(spec, book.world, seed)
        self.book = book

    def point(self, ident: str, program: str) -> int:
        i = self.book.locate(program)
        if i is None:
            raise ValueError(f"{ident} is no point of the world {self.world.task}")
        return i


@dataclass(frozen=True)
class WorldRun(BestCurve):
    """One engine run on a world: best-so-far fitness after each verification (baseline first) and the screener."""

    run_id: str
    best: tuple[float, ...]
    verifications: int
    state: str | None = None  # an adaptive screener's final state
    decided_at: int | None = None  # verifications when it last changed state
    audits: int = 0  # verifications an adaptive screener spent on audited siblings
    canaries: int = 0


def world_run(
    world: World,
    task: Task,
    screener: Screener | Any,
    *,
    book: WorldBook,
    budget: int,
    n: int = 6,
    seed: int = 0,
    store: Path | None = None,
    overrides: Sequence[str] = (),
) -> WorldRun:
    """A greedy ``Engine`` run of ``budget`` verifications on ``world`` (module docstring); ``book`` is fresh.

    ``screener`` is any screener (build it around ``book`` for a ``WorldCritic``). ``store`` is the SQLite file
    (a temporary one when None, under /dev/shm where it exists). ``overrides`` are extra dotted config settings.
    """
    if store is not None:
        return asyncio.run(_run(world, task, screener, book, budget, n, seed, store, overrides))
    memory = Path("/dev/shm")  # a temporary store in memory where there is one: the same SQLite, no disk syncs
    with tempfile.TemporaryDirectory(prefix="verifyless-world-", dir=memory if memory.is_dir() else None) as tmp:
        return asyncio.run(_run(world, task, screener, book, budget, n, seed, Path(tmp) / "w.db", overrides))


async def _run(
    world: World,
    task: Task,
    screener: Any,
    book: WorldBook,
    budget: int,
    n: int,
    seed: int,
    path: Path,
    overrides: Sequence[str],
) -> WorldRun:
    settings = ["strategy.name=greedy", f"budget.verifications={budget}", f"engine.candidates={n}", f"seed={seed}"]
    cfg = load_config(overrides=[*settings, *overrides])
    roles = replace(space_roles(task, seed), proposer=WorldProposer(book, seed=seed))
    with RunStore(path) as st:
        engine = Engine(
            task=task,
            roles=roles,
            screener=screener,
            strategy=build_strategy("greedy", None, random.Random(cfg.seed)),
            executor=WorldExecutor(book),
            store=st,
            config=cfg,
        )
        result = await engine.run()
        return _result(st, result.run_id, screener)


def _result(st: RunStore, run_id: str, screener: Any) -> WorldRun:
    best, curve = -math.inf, []
    for ev in st.events(run_id, Verified):
        fit = ev.record.fitness
        if fit is not None and math.isfinite(fit):
            best = max(best, float(fit))
        curve.append(best)
    if not isinstance(screener, AdaptiveScreener):
        return WorldRun(run_id, tuple(curve), len(curve))
    rule = screener.rule
    return WorldRun(
        run_id,
        tuple(curve),
        len(curve),
        state=rule.state,
        decided_at=rule.decided_at,
        audits=sum(bool(adaptive_audit(ev.record.screening)) for ev in st.events(run_id, Screened)),
        canaries=rule.kinds.get("canary", 0),
    )
