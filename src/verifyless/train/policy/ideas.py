"""Small pure helpers of the reward pipeline: completion -> idea, the option menu, the critic's verdict."""

from __future__ import annotations

import random
from collections.abc import Mapping

from verifyless.node import Evidence, Idea
from verifyless.program import BandError, extract
from verifyless.prompts import render
from verifyless.roles.base import ParentInfo, Roles
from verifyless.roles.parse import extract_approach
from verifyless.roles.space import TemplateImplementer, assignment_of, recognise
from verifyless.task.base import IdeaSpace, Task
from verifyless.train.policy import space_reader

_NO_VOTE = "invalid"


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


def space_world(task: Task, roles: Roles) -> bool:
    """Whether ideas for ``task`` are idea-space moves: the task has a space and the implementer renders templates.

    A task with an idea space but LLM roles is an LLM task here: its implementer reads the idea's words.
    """
    return task.idea_space is not None and isinstance(roles.implementer, TemplateImplementer)


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
    "idea_from_text",
    "menu_text",
    "parent_assignment",
    "space_world",
    "vote_counts",
]
