"""MLEvolve's stage-adaptive coder (``roles.implement_mode: stage``): the coding mode follows the expansion.

MLEvolve's coder works in one of three modes (Section 2.3): *Base*, a full rewrite, for initial drafting;
*Stepwise*, module by module following the planner's specification; *Diff*, targeted patches for localized
refinement. ``StagedImplementer`` picks the mode from the operator of the expansion a child belongs to
(``ParentInfo.operator``, set by the engine):

* ``draft`` (and a call outside an engine expansion, operator None): Base, the whole band rewritten
  (``roles/implement``);
* ``evolve``, ``reference``, ``aggregate`` (the stagnation operators, which carry other nodes' ideas into a branch
  under a plan): Stepwise, when the idea lists at least two steps (``plan_steps``): one SEARCH/REPLACE call per
  step, each on the band the previous steps left (``LLMImplementer.implement_steps``); an idea that is one step
  is a Diff;
* ``improve``, ``debug`` and every repair: Diff (``roles/implement_diff``).

The paper states the three modes and that they are chosen by stage, not the exact rule from operator to mode; the
mapping above is ours (``docs/design/differences-from-papers.md``). Every call is an ordinary implementer call
(request role ``implementer`` or ``repair``), charged and cached like any other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from verifyless.node import Idea, Operator
from verifyless.roles.base import Implementation, Implementer, ParentInfo
from verifyless.task.base import Task

__all__ = ["STAGE_MODES", "StagedImplementer", "StepImplementer", "plan_steps"]


class StepImplementer(Implementer, Protocol):
    """An implementer that can also code a plan step by step (``roles.llm.LLMImplementer`` in diff mode)."""

    async def implement_steps(
        self, task: Task, parent: ParentInfo, idea: Idea, steps: Sequence[str]
    ) -> Implementation: ...


Mode = Literal["base", "stepwise", "diff"]

STAGE_MODES: dict[Operator, Mode] = {
    Operator.DRAFT: "base",
    Operator.EVOLVE: "stepwise",
    Operator.REFERENCE: "stepwise",
    Operator.AGGREGATE: "stepwise",
    Operator.IMPROVE: "diff",
    Operator.DEBUG: "diff",
}

# A step starts a line: "1." / "2)" / "Step 3:" / "-" / "*" / "•", then text.
_STEP = re.compile(r"^\s*(?:\d{1,2}[.)]|step\s+\d{1,2}\s*[:.)-]?|[-*\u2022])\s+(?=\S)", re.I)


def plan_steps(text: str, max_steps: int) -> list[str]:
    """The steps an idea lists (numbered or bulleted lines, each with its continuation lines), at most
    ``max_steps`` (the rest are merged into the last); ``[]`` when it lists fewer than two. Text before the first
    step is the plan's preamble, shown with every step as the idea itself."""
    steps: list[str] = []
    for line in text.splitlines():
        marker = _STEP.match(line)
        if marker:
            steps.append(line[marker.end() :].strip())
        elif steps and line.strip():
            steps[-1] = f"{steps[-1]} {line.strip()}"
    if len(steps) < 2:
        return []
    if len(steps) > max_steps:
        steps = [*steps[: max_steps - 1], " ".join(steps[max_steps - 1 :])]
    return steps


@dataclass(eq=False)
class StagedImplementer:
    """An ``Implementer`` that codes in MLEvolve's Base, Stepwise or Diff mode by stage (module docstring)."""

    full: Implementer
    diff: StepImplementer
    max_steps: int = 4

    def mode_for(self, operator: Operator | None, idea: Idea) -> Mode:
        """The mode a child made by ``operator`` from ``idea`` is coded in."""
        mode = STAGE_MODES.get(operator, "base") if operator is not None else "base"
        if mode == "stepwise" and not plan_steps(idea.text, self.max_steps):
            return "diff"
        return mode

    async def implement(self, task: Task, parent: ParentInfo, idea: Idea) -> Implementation:
        mode = self.mode_for(parent.operator, idea)
        if mode == "base":
            return await self.full.implement(task, parent, idea)
        if mode == "diff":
            return await self.diff.implement(task, parent, idea)
        return await self.diff.implement_steps(task, parent, idea, plan_steps(idea.text, self.max_steps))

    async def repair(self, task: Task, program: str, idea: Idea, error: str) -> Implementation:
        """A repair is a localized fix: Diff (MLEvolve's Debug agent makes minimal modifications)."""
        return await self.diff.repair(task, program, idea, error)
