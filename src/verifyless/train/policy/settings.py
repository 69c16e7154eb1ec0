"""Settings of the policy-training reward pipeline (critic paper, Section 5).

Defaults are the paper's: 16 parents x 16 ideas per step, a frozen critic
with k = 16 votes, routing threshold T = 0.25, up to 3 repairs that keep the
idea, and a budget of 10,000 verifications (``verifications``, the hard cap;
None means no cap). ``audit_rate`` has no paper value and defaults to 0 (no
extra verifications). With more tasks than groups the groups' tasks are drawn
per step (``rewards.PolicyRewarder.step_tasks``).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError

from verifyless.errors import ConfigError
from verifyless.ledger import BudgetConfig
from verifyless.registry import StrictOptions, error_text
from verifyless.train.policy.contract import RewardMode


class RewardSettings(StrictOptions):
    """How ideas are rewarded; stored in the run's config so a resume uses the same values."""

    mode: RewardMode = Field(
        "critic-in-loop",
        description="verify-all: verify every runnable idea; critic-in-loop: the critic's verdict is the reward "
        "when its votes agree (u < threshold), else verify; critic-only: never verify ideas",
    )
    parents: int = Field(
        16,
        ge=1,
        description="groups (parents) per step (paper: 16); with more tasks than groups, each step draws its "
        "groups' tasks from all tasks (seeded), else group g keeps task g % len(tasks)",
    )
    ideas: int = Field(16, ge=1, description="ideas sampled per group by the trainer, G (paper: 16)")
    votes: int = Field(16, ge=1, description="critic critiques per idea, k (paper: 16)")
    threshold: float = Field(
        0.25, ge=0, le=1, description="route to real verification when the critic's uncertainty u >= this (paper: 0.25)"
    )
    repairs: int = Field(
        3,
        ge=0,
        description="repairs that keep the idea after a crash, invalid metric or OOM (ledger.REPAIRABLE; paper: 3)",
    )
    verifications: int | None = Field(
        10_000,
        ge=1,
        description="hard cap on paid verifications in the run, baselines and repairs included "
        "(paper: 10,000; None: no cap)",
    )
    audit_rate: float = Field(
        0.0,
        ge=0,
        le=1,
        description="share of confident critic rewards that are verified too (charged), to audit the critic",
    )
    tolerance: float = Field(
        0.0, ge=0, description="relative change at or below which a child ties its parent (not an improvement)"
    )
    seed: int = Field(0, description="seed for audit draws and for choosing the next parent among improving children")
    smoke: str | None = Field(
        None,
        description="smoke-run each verified idea's child at this fidelity level first ('off': never; None: the "
        "task's cheapest level for LLM roles, as engine.smoke)",
    )
    smoke_wall_seconds: float = Field(30.0, gt=0, description="wall limit of a smoke run (the task's when smaller)")

    @property
    def budget(self) -> BudgetConfig:
        """The cap as the kernel's ``BudgetConfig`` (verifications only), for ``PaidVerifier``'s gate."""
        return BudgetConfig(verifications=self.verifications)

    @classmethod
    def of(cls, values: dict[str, Any]) -> RewardSettings:
        """Validated settings, or a one-line ``ConfigError`` naming the bad field."""
        try:
            return cls(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "settings"
            raise ConfigError(f"policy reward setting {where}: {error_text(first)}") from None


__all__ = ["RewardSettings"]
