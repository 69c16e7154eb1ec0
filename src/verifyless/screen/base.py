"""The Screener contract: ``screen(context, candidates) -> Screening``.

A screener ranks every candidate, chooses the ids to verify and records its
evidence. Online learners (today the surrogate) also implement
``observe`` to learn from outcomes already paid for.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence, runtime_checkable

from verifyless.node import Candidate, Node, Screening, Verification
from verifyless.roles.base import ParentInfo, TaskBrief
from verifyless.task.base import Task


@dataclass(frozen=True)
class ContextNode:
    """An executed, non-buggy node shown to pairwise judges: description, validation score and program.

    ``program`` is empty when the screening context has no way to read it
    (``ScreenContext.program_of`` is None); the node is then shown without code.
    """

    id: str
    summary: str
    score: float
    idea: str = ""
    program: str = ""


@dataclass
class ScreenContext:
    """Everything a screener may look at. Never contains hidden test scores.

    ``nodes`` is the executed part of the search graph (for BFS context);
    ``summaries`` maps node id -> neutral summary where known.
    ``rng`` is the run's seeded generator for tie-breaks (explicit randomness).
    ``program_of`` reads an executed node's program text by node id (the
    engine passes its store-backed reader); None means programs are unknown.
    ``budget_left_s``: the run's evaluator seconds left (None when the run has
    no evaluator-seconds cap); screeners that spend evaluator time (agentic
    pilots) stay within it.
    """

    task: Task
    parent: ParentInfo
    rng: random.Random
    brief: TaskBrief | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    summaries: dict[str, str] = field(default_factory=dict)
    n_verify: int = 1
    round: int = 0
    budget_left_s: float | None = None
    program_of: Callable[[str], str] | None = None


@runtime_checkable
class Screener(Protocol):
    name: str

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening: ...


@runtime_checkable
class LearningScreener(Screener, Protocol):
    def observe(self, candidate: Candidate, parent_fitness: float | None, child: Verification, fitness: float | None) -> None: ...
