"""A model-driven proposer for idea-space tasks: how a trained policy proposes in a normal run.

With ``roles.kind: space`` and a ``roles.models.proposer`` (e.g. ``{provider:
local, model: BASE, adapter: DIR}``, the adapter written by ``verifyless train
policy-grpo``), the run keeps the task's offline implementer, summariser and
briefer but asks the model for ideas: the prompt is the LLM proposer's own
(``LLMProposer.render``, with the run's references and ideas to avoid) plus
the same option menu the policy saw in training, and each reply is read with
the training pipeline's reader (``ideas.idea_from_text``: named options on the
parent's assignment). A reply that names no change is a ``parse-error``
``RoleFailure`` (the engine records it as a failed candidate). Draw ``i`` uses
seed ``ctx.seed + i``, as the LLM proposer does.
"""

from __future__ import annotations

import asyncio
from typing import Any

from verifyless.model.base import Message, ModelRequest
from verifyless.node import Idea
from verifyless.roles.base import ProposeContext, RoleFailure
from verifyless.task.base import Task


class MenuProposer:
    """Ideas from ``model`` for an idea-space task (see the module docstring)."""

    def __init__(self, model: Any, task: Task, temperature: float = 0.8) -> None:
        if task.idea_space is None:
            raise ValueError(f"task {task.name!r} declares no idea_space")
        self.model = model
        self.task = task
        self.temperature = temperature

    def render(self, ctx: ProposeContext) -> tuple[Message, Message]:
        from verifyless.roles.llm import LLMProposer
        from verifyless.train.policy.ideas import menu_text, parent_assignment

        system, user = LLMProposer(self.model).render(ctx, tuple(ctx.avoid))
        assert self.task.idea_space is not None
        menu = menu_text(self.task.idea_space, parent_assignment(self.task, ctx.parent))
        return system, Message(role=user.role, content=user.content + "\n\n" + menu)

    async def propose(self, ctx: ProposeContext, n: int) -> list[Idea | RoleFailure]:
        return list(await asyncio.gather(*(self._draw(ctx, i) for i in range(n))))

    async def _draw(self, ctx: ProposeContext, i: int) -> Idea | RoleFailure:
        from verifyless.train.policy.ideas import idea_from_text

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


__all__ = ["MenuProposer"]
