"""Run policy GRPO against the test world in a subprocess (for the kill -9 test): LM_DIR WORK STEPS [--resume]."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import torch

from policy_world import WorldRewarder
from verifyless.train.policy.grpo_settings import load_policy_settings
from verifyless.train.policy.trainer import PolicyTrainer

if __name__ == "__main__":
    torch.set_num_threads(1)
    lm, work, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    settings = load_policy_settings(
        None, generations=8, lora_r=8, lora_alpha=16, max_completion_length=16, learning_rate=1e-2
    )
    rewarder = WorldRewarder(work / "rewards.jsonl", parents=4)
    trainer = PolicyTrainer(rewarder, base=str(lm), out=work / "out", settings=settings)
    asyncio.run(trainer.train(steps, resume="--resume" in sys.argv))
