"""The policy-training run's own event records (``verifyless.events`` holds the kernel's).

They subclass ``EventRecord`` like every other kind, so the store, the fold and the schema table treat them
alike; they live here because only policy training writes and reads them (``train/policy/ledger.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from verifyless.events import EventRecord, _spec, _tuple
from verifyless.node import Evidence

__all__ = ["PolicyCritic", "PolicyIdea", "PolicyPrompted", "PolicyStep"]


@dataclass(frozen=True)
class PolicyPrompted(EventRecord):
    """``{key, step, task, parent_id, messages}``: one prompt of a policy step, logged before it is sampled."""

    KIND: ClassVar[str] = "policy_prompt"

    key: str
    step: int
    task: str
    parent_id: str
    messages: tuple[Mapping[str, Any], ...] = _spec((), convert=_tuple)


@dataclass(frozen=True)
class PolicyCritic(EventRecord):
    """``{evidence}``: the critic's evidence about one sampled idea's node."""

    KIND: ClassVar[str] = "policy_critic"
    NODE_ID: ClassVar[str] = "candidate id"

    evidence: Evidence = _spec(convert=Evidence.from_dict)


@dataclass(frozen=True)
class PolicyIdea(EventRecord):
    """``IdeaReward`` fields (key, index, source, uncertainty, votes, reward, ...) + extras: one sampled idea's
    reward; ``payload()`` is the dict the policy log keeps."""

    KIND: ClassVar[str] = "policy_idea"
    NODE_ID: ClassVar[str] = "optional"

    key: str
    index: int


@dataclass(frozen=True)
class PolicyStep(EventRecord):
    """``StepStats`` fields + ``{parents}``: one finished policy step."""

    KIND: ClassVar[str] = "policy_step"

    step: int
    parents: tuple[str, ...] = _spec((), convert=_tuple)
