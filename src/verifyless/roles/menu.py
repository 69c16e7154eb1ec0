"""A model-driven proposer for idea-space tasks: how a trained policy proposes in a normal run.

With ``roles.kind: space`` and a ``roles.models.proposer`` (e.g. ``{provider:
local, model: BASE, adapter: DIR}``, the adapter written by ``verifyless train
policy-grpo``), the run keeps the task's offline implementer, summariser and
briefer but asks the model for ideas: the prompt is the LLM proposer's own
(``LLMProposer.render``, with the run's references and ideas to avoid) plus
the same option menu the policy saw in training, and each reply is read with
the training pipeline's reader (``idea_from_text`` below: named options on the
parent's assignment). A reply that names no change is a ``parse-error``
``RoleFailure`` (the engine records it as a failed candidate). Draw ``i`` uses
seed ``ctx.seed + i``, as the LLM proposer does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from verifyless.model.base import Message, ModelRequest
from verifyless.node import Idea
from verifyless.program import BandError, extract
from verifyless.prompts import render
from verifyless.roles import space_reader
from verifyless.roles.base import ParentInfo, ProposeContext, RoleFailure
from verifyless.roles.llm import LLMProposer
from verifyless.roles.parse import extract_approach
from verifyless.roles.space import assignment_of, recognise
from verifyless.task.base import IdeaSpace, Task


def parent_assignment(task: Task, parent: ParentInfo) -> dict[str, str]:
    """The parent's full idea-space assignment: from its idea, else recognised from its band, else the baseline."""
    space = task.idea_space
    assert space is not None
    known = assignment_of(parent.idea, space)
    if known is not None:
        return known
    try:
        found = recognise(space, extract(parent.program, task.band))
    except BandError:
        found = None
    return found if found is not None else dict(space.baseline)


def idea_from_text(task: Task, parent: ParentInfo, text: str, *, space: bool | None = None) -> Idea | None:
    """The idea a completion proposes on ``parent``, or None when it proposes nothing usable.

    Idea-space worlds (``space``; default: the task has an idea space):
    ``space_reader.read`` on the parent's assignment. Otherwise the reply's
    Approach section (``roles.parse.extract_approach``, as the LLM proposer
    reads its own replies), keeping the full text in ``params["policy_text"]``.
    """
    if space is None:
        space = task.idea_space is not None
    if space and task.idea_space is not None:
        return space_reader.read(task.idea_space, parent_assignment(task, parent), text)
    approach = extract_approach(text or "")
    return Idea(approach, {"policy_text": text[:4000]}) if approach else None


def menu_text(space: IdeaSpace, current: Mapping[str, str]) -> str:
    """The prompt section that lists the options a policy may name (package data ``prompts/policy/menu.md``)."""
    dim = next(iter(space.dimensions))
    other = next((o.name for o in space.dimensions[dim] if o.name != current.get(dim)), current.get(dim, ""))
    return render("policy/menu", "text", {"example": other, "menu": space_reader.menu(space, current)})


class MenuProposer:
    """Ideas from ``model`` for an idea-space task (see the module docstring)."""

    def __init__(self, model: Any, task: Task, temperature: float = 0.8) -> None:
        if task.idea_space is None:
            raise ValueError(f"task {task.name!r} declares no idea_space")
        self.model = model
        self.task = task
        self.temperature = temperature

    def render(self, ctx: ProposeContext) -> tuple[Message, Message]:
        system, user = LLMProposer(self.model).render(ctx, tuple(ctx.avoid))
        assert self.task.idea_space is not None
        menu = menu_text(self.task.idea_space, parent_assignment(self.task, ctx.parent))
        return system, Message(role=user.role, content=user.content + "\n\n" + menu)

    async def propose(self, ctx: ProposeContext, n: int) -> list[Idea | RoleFailure]:
        return list(await asyncio.gather(*(self._draw(ctx, i) for i in range(n))))

    async def _draw(self, ctx: ProposeContext, i: int) -> Idea | RoleFailure:
        request = ModelRequest(
            messages=self.render(ctx), role="proposer", temperature=self.temperature, seed=ctx.seed + i
        )
        reply = await self.model.generate(request)
        if not reply.choices:
            return RoleFailure("model-error", "the model returned no choices")
        text = reply.choices[0].text or ""
        idea = idea_from_text(self.task, ctx.parent, text)
        if idea is None:
            return RoleFailure("parse-error", "the reply names no option that changes the parent", raw=text[:500])
        return idea


__all__ = ["MenuProposer", "idea_from_text", "menu_text", "parent_assignment"]
