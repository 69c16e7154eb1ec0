"""The contract between the policy trainer and the reward pipeline.

One training step (critic paper, Section 5): the rewarder hands out P groups,
each a prompt for one parent; the trainer samples G ideas per prompt from the
policy and hands them back; the rewarder turns every idea into a child
(implement, summarise, up to 3 repairs that keep the idea), rewards it +1 for
Improve and -1 otherwise, and tells where the reward came from:

* ``verify-all``: every runnable idea is really verified;
* ``critic-in-loop``: the critic's k-vote verdict is the reward when its
  uncertainty ``u < T``; otherwise the idea is really verified;
* ``critic-only``: the critic's verdict is always the reward (no verification).

An idea that cannot become a runnable child (unparseable, guard failure,
duplicate of its parent, repairs exhausted) gets -1 from source ``invalid``
and costs no verification. The verification budget is a hard cap counted like
a run's: when an idea needs a verification and none is left, ``score`` raises
``VerificationBudgetSpent`` and the trainer stops before the step's update.

Scoring is idempotent and durable: every reward is written to the run store
before ``score`` returns, and scoring the same ``(key, index)`` again (after
a crash) reads it back instead of paying twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

RewardMode = Literal["verify-all", "critic-in-loop", "critic-only"]
RewardSource = Literal["critic", "verifier", "invalid"]
REWARD_MODES: tuple[str, ...] = ("verify-all", "critic-in-loop", "critic-only")


class VerificationBudgetSpent(Exception):
    """An idea needed a real verification and the budget's hard cap was reached."""


@dataclass(frozen=True)
class PolicyPrompt:
    """One group of a step: the proposer prompt for one parent, asking for one idea."""

    key: str  # stable group id within the training run, e.g. "s3/g07"
    step: int
    task: str  # task name
    parent_id: str
    messages: tuple[Mapping[str, str], ...]  # chat messages ({"role", "content"}), the policy's input


@dataclass(frozen=True)
class IdeaReward:
    """The reward of one sampled idea, with its provenance (for auditing the critic afterwards)."""

    key: str  # the group's PolicyPrompt.key
    index: int  # the idea's position among the group's completions
    reward: float  # +1.0 improve, -1.0 otherwise
    source: RewardSource
    node_id: str = ""  # the child's node id in the run store ("" when no child was made)
    status: str = ""  # the child's Status value (e.g. "implemented", "verified", "parse-error")
    reason: str = ""
    improved: bool | None = None  # the verifier's outcome, when verified
    votes: Mapping[str, int] = field(default_factory=dict)  # critic verdict counts, when the critic ran
    uncertainty: float | None = None  # the critic's u, when it ran
    parent_score: float | None = None
    child_score: float | None = None
    verify_seconds: float = 0.0
    tokens: int = 0  # LLM tokens spent making, summarising and critiquing this idea


@dataclass(frozen=True)
class StepStats:
    """Per-step numbers for the training log."""

    step: int
    ideas: int
    mean_reward: float
    verified: int
    share_verified: float
    rewarded_per_verification: float  # ideas that got a reward (critic or verifier) per real verification
    audited: int  # ideas with both a critic verdict and a verification
    agreement: float | None  # critic/verifier agreement on the audited ideas (None when none)
    tokens: int
    verify_seconds: float
    verifications_left: int
    parents_advanced: int  # groups whose G ideas all improved, so a child became the next parent


@runtime_checkable
class Rewarder(Protocol):
    """What the trainer needs from the reward pipeline (``rewards.PolicyRewarder`` implements it)."""

    async def prompts(self, step: int) -> list[PolicyPrompt]: ...

    async def score(self, prompt: PolicyPrompt, completions: Sequence[str]) -> list[IdeaReward]: ...

    async def finish_step(self, step: int) -> StepStats: ...

    def verifications_left(self) -> int: ...


__all__ = [
    "REWARD_MODES",
    "IdeaReward",
    "PolicyPrompt",
    "Rewarder",
    "RewardMode",
    "RewardSource",
    "StepStats",
    "VerificationBudgetSpent",
]
