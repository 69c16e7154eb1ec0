"""The critic's view of one dataset row: screening context, candidate, and chat messages.

``critic_messages(row)`` renders the pointwise critic's own prompt
(``PointwiseCritic.messages``, template ``prompts/screen/critic.md``) from the
row, through the same ``screen_context`` / ``row_candidate`` pair the critic
benchmark hands to screeners, so training, synthesis and screening read the
same text: a row's prompt equals, byte for byte, the prompt the run's critic was
given for the same parent and child, the run's data report included (the row's
``data_report`` column; '' for a run without one). When the row's task can be loaded, its ``Task`` supplies the
statement and metric line; otherwise a stand-in built from the row's
``task_description`` and ``higher_is_better`` does (metric name "score").
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from verifyless.node import Candidate, Idea, Operator
from verifyless.roles.base import ParentInfo, TaskBrief
from verifyless.screen.base import ScreenContext
from verifyless.screen.critic import CriticOptions, PointwiseCritic
from verifyless.task import load_task


@dataclass(frozen=True)
class _Metric:
    name: str
    direction: str

    def orient(self, value: float) -> float:
        return value if self.direction == "maximize" else -value


@dataclass(frozen=True)
class RowTask:
    """What prompts need of a task that cannot be loaded here (statement and metric only)."""

    name: str
    statement: str
    metric: _Metric
    stochastic: bool = False


@lru_cache(maxsize=64)
def _load(name: str) -> Any:
    try:
        return load_task(name)
    except Exception:  # unknown here: fall back to the row's own description
        return None


def task_for(row: Mapping[str, Any]) -> Any:
    """The row's ``Task`` when loadable, else a ``RowTask`` from the row."""
    task = _load(str(row["task"]))
    if task is not None:
        return task
    direction = "maximize" if row.get("higher_is_better", True) else "minimize"
    return RowTask(str(row["task"]), str(row.get("task_description") or ""), _Metric("score", direction))


def screen_context(row: Mapping[str, Any], rng: random.Random | None = None) -> Any:
    """The ``ScreenContext`` a screener sees for this row (validation-side facts only, no scores of the child)."""
    brief = TaskBrief(str(row.get("understanding") or ""), tuple(row.get("criteria") or ()))
    parent = ParentInfo(
        id=str(row["parent_id"]),
        program="",
        score=row.get("parent_score"),
        summary=str(row.get("parent_summary") or ""),
    )
    return ScreenContext(
        task=task_for(row),
        parent=parent,
        rng=rng or random.Random(0),
        brief=brief if (brief.understanding or brief.criteria) else None,
        summaries={parent.id or "": parent.summary},
        n_verify=1,
        data_report=str(row.get("data_report") or ""),
    )


def row_candidate(row: Mapping[str, Any]) -> Candidate:
    """The child as a ``Candidate`` (no program: datasets carry summaries, not code)."""
    return Candidate(
        id=str(row["example_id"]),
        parent_id=str(row["parent_id"]),
        operator=Operator.IMPROVE,
        idea=Idea(str(row.get("idea") or "")),
        program="",
        program_hash=str(row.get("child_hash") or ""),
        summary=str(row.get("child_summary") or ""),
    )


def critic_messages(row: Mapping[str, Any], prompt: str = "critic") -> list[dict[str, str]]:
    """The pointwise critic's chat prompt for ``row`` as ``[{"role", "content"}, ...]``.

    ``prompt`` names the template under ``prompts/screen/``: ``critic`` (the soft rubric, the default) or
    ``freestyle`` (free reasoning, the paper's App. H ablation).
    """
    critic = PointwiseCritic(None, CriticOptions(prompt=prompt))  # type: ignore[arg-type]  # messages() never calls it
    messages = critic.messages(screen_context(row), row_candidate(row))
    return [{"role": m.role, "content": m.content} for m in messages]


__all__ = ["RowTask", "critic_messages", "row_candidate", "screen_context", "task_for"]
