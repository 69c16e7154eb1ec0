"""Role contracts: one protocol, one async verb each.

Roles get frozen contexts and return records; they never touch the store.
A role failure caused by the model (unparseable reply, contract-breaking code)
is returned as a ``RoleFailure`` so the engine records it on the candidate;
an unusable endpoint raises ``ModelUnavailable``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from verifyless.model.base import Usage
from verifyless.node import Idea, Operator
from verifyless.task.base import Task


@dataclass(frozen=True)
class TaskBrief:
    """Task understanding + fixed task-specific criteria; made once per task."""

    understanding: str
    criteria: tuple[str, ...]


@dataclass(frozen=True)
class ParentInfo:
    """What roles and screeners may know about the parent (validation only)."""

    id: str | None
    program: str
    score: float | None = None  # raw main validation metric
    summary: str = ""
    idea: Idea | None = None
    error: str = ""  # for DEBUG: the failure reason / log tail
    # The operator of the expansion the child is made in (set by the engine for the implementer, which may code by
    # stage: roles/staged.py); None outside an engine expansion. Never rendered into a prompt.
    operator: Operator | None = None


@dataclass(frozen=True)
class ProposeContext:
    task: Task
    parent: ParentInfo
    operator: Operator = Operator.IMPROVE
    inspirations: tuple[str, ...] = ()  # neutral summaries of other good programs
    inspiration_scores: tuple[float | None, ...] = ()  # their validation scores, in the same order (critic paper)
    memory: tuple[str, ...] = ()  # retrieved memory snippets
    avoid: tuple[str, ...] = ()  # ideas already drawn this round / tried before
    references: tuple[ParentInfo, ...] = ()  # MCGS context nodes (ancestors / other branches)
    seed: int = 0


@dataclass(frozen=True)
class RoleFailure:
    kind: Literal["parse-error", "guard-failed", "model-error"]
    reason: str
    raw: str = ""


@dataclass(frozen=True)
class Implementation:
    """A child program whose fixed regions match the parent's, or a failure."""

    program: str | None
    failure: RoleFailure | None = None
    attempts: int = 1
    usage: Usage = field(default_factory=Usage)

    @property
    def ok(self) -> bool:
        return self.program is not None and self.failure is None


@runtime_checkable
class Briefer(Protocol):
    async def brief(self, task: Task, data_report: str = "") -> TaskBrief: ...  # data_report: markdown


@runtime_checkable
class Proposer(Protocol):
    async def propose(self, ctx: ProposeContext, n: int) -> list[Idea | RoleFailure]: ...


@runtime_checkable
class Implementer(Protocol):
    async def implement(self, task: Task, parent: ParentInfo, idea: Idea) -> Implementation: ...

    async def repair(self, task: Task, program: str, idea: Idea, error: str) -> Implementation: ...


@runtime_checkable
class Summarizer(Protocol):
    async def summarize(self, task: Task, program: str, idea: Idea | None = None) -> str: ...


@dataclass(frozen=True)
class Roles:
    """The bundle the engine uses; built from config by ``verifyless.wiring.build_roles``."""

    briefer: Briefer
    proposer: Proposer
    implementer: Implementer
    summarizer: Summarizer
