"""``verifyless propose``: N ideas for a task's baseline, implemented and summarised."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from verifyless._cli.terminal import shown
from verifyless.model import build_model
from verifyless.node import Idea, Operator
from verifyless.program import band_diff
from verifyless.roles.base import ParentInfo, ProposeContext, RoleFailure
from verifyless.roles.llm import llm_roles
from verifyless.roles.space import space_roles
from verifyless.task import load_task


def pick_roles(task: Any, model: str | None, seed: int):
    """The task's idea space when no model is named and no endpoint is configured; else LLM roles."""
    if model is None and task.idea_space is not None and not os.environ.get("VERIFYLESS_BASE_URL"):
        return space_roles(task, seed), "idea space (offline)"

    spec = model or "env"
    return llm_roles(build_model(spec)), spec


async def propose_for_baseline(task_ref: str, *, n: int, model: str | None, seed: int, console: Any) -> list[dict]:
    task = load_task(task_ref)
    roles, source = pick_roles(task, model, seed)
    parent = ParentInfo(
        id="root",
        program=task.baseline_program,
        summary=await roles.summarizer.summarize(task, task.baseline_program, None),
    )
    ideas = await roles.proposer.propose(
        ProposeContext(task=task, parent=parent, operator=Operator.IMPROVE, seed=seed), n
    )

    async def build(idea: Idea | RoleFailure) -> dict:
        if isinstance(idea, RoleFailure):
            return {"idea": None, "failure": f"{idea.kind}: {idea.reason}"}
        impl = await roles.implementer.implement(task, parent, idea)
        if not impl.ok:
            return {"idea": idea.text, "failure": f"{impl.failure.kind}: {impl.failure.reason}"}
        summary = await roles.summarizer.summarize(task, impl.program, idea)
        return {
            "idea": idea.text,
            "diff": band_diff(task.baseline_program, impl.program, task.band),
            "summary": summary,
        }

    results = await asyncio.gather(*(build(i) for i in ideas))
    console.print(f"[bold]{shown(task.name)}[/]: {len(results)} ideas from {shown(source)}\n")
    for k, r in enumerate(results, 1):
        console.rule(f"idea {k}")
        if r.get("idea"):
            console.print(r["idea"], highlight=False, markup=False)
        if r.get("failure"):
            console.print(f"[red]{shown(r['failure'])}[/]", highlight=False)
            continue
        console.print(r["diff"], highlight=False, markup=False)
        console.print(f"[italic]{shown(r['summary'])}[/]", highlight=False)
    return results
