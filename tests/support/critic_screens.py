"""A pointwise-critic screening: a toy task and parent, named candidates, and scripted critic replies per candidate."""

from __future__ import annotations

import random
import re
from pathlib import Path

from verifyless.model.base import ModelRequest
from verifyless.node import Candidate, Idea, Operator
from verifyless.roles.base import ParentInfo, TaskBrief
from verifyless.screen.base import ScreenContext
from verifyless.task.base import Band, Metric, Task

VERDICT = {
    "BigWin": "[IMPROVEMENT] improve --- r\n[WINTIER] big --- r",
    "MediumWin": "[IMPROVEMENT] improve --- r\n[WINTIER] medium --- r",
    "SmallWin": "[IMPROVEMENT] improve --- r\n[WINTIER] small --- r",
    "Tie": "[IMPROVEMENT] tie --- r\n[WINTIER] NA --- r",
    "Lose": "[IMPROVEMENT] lose --- r\n[WINTIER] NA --- r",
    "junk": "I cannot decide.",
}


def make_task() -> Task:
    return Task(
        name="toy",
        root=Path("."),
        kind="native",
        statement="Predict the digit class.",
        program_file="solution.py",
        baseline_program="print(1)\n",
        band=Band(),
        metric=Metric("accuracy", "maximize"),
    )


def make_ctx(seed: int = 0, brief: TaskBrief | None = None, n_verify: int = 1) -> ScreenContext:
    parent = ParentInfo(id="p", program="print(1)\n", score=0.5, summary="Parent: a logistic regression.")
    return ScreenContext(task=make_task(), parent=parent, rng=random.Random(seed), brief=brief, n_verify=n_verify)


def cand(cid: str) -> Candidate:
    return Candidate(
        id=cid,
        parent_id="p",
        operator=Operator.IMPROVE,
        idea=Idea(f"idea {cid}"),
        program="print(2)\n",
        program_hash=cid,
        summary=f"Child ID={cid}; uses a forest.",
    )


def scripted(plan: dict[str, list[str]]):
    """plan[cid][i] is the label of sample i (cycled)."""

    def fn(request: ModelRequest, i: int) -> str:
        cid = re.search(r"ID=(\w+)", request.messages[-1].content).group(1)
        labels = plan[cid]
        return "Criterion analysis...\n" + VERDICT[labels[i % len(labels)]]

    return fn
