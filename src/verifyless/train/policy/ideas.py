"""Small pure helpers of the reward pipeline: the world kind, the critic's verdict, audit draws.

Reading a completion as an idea and the option menu live with the menu proposer (``roles/menu.py``).
"""

from __future__ import annotations

import random

from verifyless.node import Evidence
from verifyless.roles.base import Roles
from verifyless.roles.space import TemplateImplementer
from verifyless.task.base import Task

_NO_VOTE = "invalid"


def space_world(task: Task, roles: Roles) -> bool:
    """Whether ideas for ``task`` are idea-space moves: the task has a space and the implementer renders templates.

    A task with an idea space but LLM roles is an LLM task here: its implementer reads the idea's words.
    """
    return task.idea_space is not None and isinstance(roles.implementer, TemplateImplementer)


def critic_improves(evidence: Evidence) -> bool:
    """The critic's k-vote verdict: improve has strictly more votes than tie and than lose."""
    votes = evidence.votes
    up = float(votes.get("improve", 0.0))
    return up > float(votes.get("tie", 0.0)) and up > float(votes.get("lose", 0.0))


def audit_draw(seed: int, key: str, index: int, rate: float) -> bool:
    """Whether the critic reward of idea ``(key, index)`` is audited; one draw per idea, fixed by the run's seed."""
    return rate > 0 and random.Random(f"{seed}:audit:{key}:{index}").random() < rate


def vote_counts(evidence: Evidence) -> dict[str, int]:
    """Votes per direction as counts of the k critiques, plus unparsed ones under ``invalid``."""
    k = len(evidence.labels) + evidence.n_invalid
    counts = {d: round(float(share) * k) for d, share in evidence.votes.items()}
    counts[_NO_VOTE] = evidence.n_invalid
    return counts


__all__ = [
    "audit_draw",
    "critic_improves",
    "space_world",
    "vote_counts",
]
