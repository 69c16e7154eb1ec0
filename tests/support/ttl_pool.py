"""The keyword task's screening context and candidates for the test-time critic."""

from __future__ import annotations

import random

from verifyless.node import Candidate, Idea, Operator  # noqa: E402
from verifyless.roles.base import ParentInfo, TaskBrief  # noqa: E402
from verifyless.screen.base import ScreenContext  # noqa: E402


def context() -> ScreenContext:
    from verifyless.critic_data.prompt import task_for

    task = task_for({"task": "keyword", "task_description": "Improve the score.", "higher_is_better": True})
    return ScreenContext(
        task=task,
        parent=ParentInfo(id="p0", program="", summary="The parent model."),
        rng=random.Random(0),
        brief=TaskBrief("", ("what the change does",)),
    )


def candidate(i: int, keyword: str) -> Candidate:
    return Candidate(
        id=f"c{i}",
        parent_id="p0",
        operator=Operator.IMPROVE,
        idea=Idea(keyword),
        program="",
        program_hash="",
        summary=f"The child will {keyword} it.",
    )
