"""Policy GRPO optimiser settings (critic paper, Section 5; SPEC section 6), overridable from a YAML file.

Paper values: 16 parents x 16 ideas per step, reward +1 Improve else -1, the
critic routes at u < 0.25 with k = 16 votes, and the policy's optimiser and
sampling: lr 1e-6, weight decay 0.1, temperature 0.7 (LoRA rank 32). The KL
coefficient 0.01 is the critic GRPO's, reused; everything else is ours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from pydantic import Field

from verifyless.train.settings import LoRASettings, RunSettings, settings_from


class PolicySettings(LoRASettings, RunSettings):
    """One policy GRPO run's optimiser, sampling and LoRA settings (LoRA dropout 0: one model samples and scores)."""

    generations: int = Field(
        16, ge=2, description="ideas sampled per prompt, G (paper: 16); equals the rewarder's ``ideas``"
    )
    learning_rate: float = Field(1e-6, gt=0, description="AdamW learning rate (paper: 1e-6)")
    weight_decay: float = Field(0.1, ge=0, description="AdamW weight decay (paper: 0.1)")
    beta: float = Field(0.01, ge=0, description="KL coefficient to the frozen base (ours: the critic GRPO's 0.01)")
    clip_epsilon: float = Field(0.2, gt=0, lt=1, description="PPO-style ratio clip (ours: TRL's default 0.2)")
    updates_per_step: int = Field(1, ge=1, description="optimiser passes over one step's samples (1 = on-policy)")
    temperature: float = Field(0.7, gt=0, description="sampling temperature (paper: 0.7)")
    top_p: float | None = Field(None, gt=0, le=1, description="nucleus sampling (ours: off)")
    max_completion_length: int = Field(256, ge=4, description="idea tokens sampled (ours)")
    micro_batch: int = Field(8, ge=1, description="completions per forward/backward pass (memory only)")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping (ours)")
    skip_equal_reward_groups: bool = Field(True, description="groups whose rewards are all equal are dropped")
    lora_dropout: float = Field(0.0, ge=0, lt=1, description="ours: 0, so sampling and scoring see one model")
    save_every: int = Field(1, ge=1, description="checkpoint every this many steps")


def load_policy_settings(path: Path | None = None, **overrides: Any) -> PolicySettings:
    """Defaults, then the YAML file at ``path`` (a flat mapping), then non-None ``overrides``."""
    return cast(PolicySettings, settings_from(PolicySettings, "policy", path, overrides))


__all__ = ["PolicySettings", "load_policy_settings"]
