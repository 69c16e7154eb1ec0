"""Critic GRPO: TRL ``GRPOTrainer`` continuing the SFT LoRA adapter on the ``grpo`` split.

Reward: +1 when the critique's parsed three-way verdict (``parse_verdict``,
the screening critic's own parser) equals the row's ``label3``, else -1; an
unparseable critique gets -1. Groups whose rewards are all equal carry no
relative signal and are skipped outright (their tokens are masked out of the
loss, KL term included), as the paper does. The KL reference is the SFT
adapter itself (TRL keeps a frozen copy named ``ref`` when it retrains an
existing adapter). Defaults: 8 generations, temperature 0.7, lr 1e-6,
weight decay 0.1, KL 0.01 (``settings.GRPOSettings``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verifyless.model.local import load_pretrained
from verifyless.screen.critic import parse_verdict
from verifyless.train.common import (
    TrainResult,
    adapter_folder,
    callbacks,
    finish_training,
    read_card,
    start_training,
    trainer_args,
)
from verifyless.train.critic_rows import load_dataset, messages_for, split
from verifyless.train.settings import GRPOSettings, grpo_accumulation

log = logging.getLogger(__name__)


def completion_text(completion: Any) -> str:
    """TRL hands conversational completions as ``[{"role": "assistant", "content": ...}]``."""
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def verdict_reward(completions: Sequence[Any], label3: Sequence[str], **_: Any) -> list[float]:
    """+1 when the parsed three-way verdict matches ``label3``, else -1 (unparseable: -1)."""
    rewards = []
    for completion, label in zip(completions, label3, strict=False):
        verdict = parse_verdict(completion_text(completion))
        rewards.append(1.0 if verdict is not None and verdict.improvement == label else -1.0)
    return rewards


def grpo_examples(rows: Any, prompt: str = "critic") -> Any:
    from datasets import Dataset

    return Dataset.from_list([{"prompt": messages_for(row, prompt), "label3": row["label3"]} for row in rows])


def mask_equal_reward_groups(advantages: Any, completion_mask: Any, group: int) -> tuple[Any, float]:
    """(``completion_mask`` with every token of an all-zero-advantage group masked, the share of such groups).

    ``advantages``: [B] with B = groups x ``group`` consecutive completions; ``completion_mask``: [B, T].
    A group whose rewards are all equal has zero advantage everywhere and is dropped from the loss.
    """
    dead = (advantages.view(-1, group) == 0).all(dim=1)
    keep = (~dead).repeat_interleave(group).unsqueeze(1).to(completion_mask.dtype)
    return completion_mask * keep, float(dead.float().mean())


def _trainer_class(skip_equal: bool) -> Any:
    from trl import GRPOTrainer

    class CriticGRPOTrainer(GRPOTrainer):
        """GRPO that drops groups whose rewards are all equal (zero advantage everywhere)."""

        def _generate_and_score_completions(self, inputs: Any) -> Any:
            output = super()._generate_and_score_completions(inputs)
            if not skip_equal:
                return output
            group = self.num_generations
            assert group is not None
            output["completion_mask"], skipped = mask_equal_reward_groups(
                output["advantages"], output["completion_mask"], group
            )
            output["num_items_in_batch"] = self.accelerator.gather(output["completion_mask"].sum()).sum()
            assert self.model is not None
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["frac_groups_skipped"].append(skipped)
            return output

    return CriticGRPOTrainer


def load_policy(start: Path, settings: GRPOSettings) -> tuple[Any, Any, str, dict[str, Any]]:
    """(tokenizer, trainable PEFT model, resolved base, SFT card) from an SFT output or adapter folder."""
    from peft import PeftModel

    card = read_card(start)
    tokenizer, base, resolved = load_pretrained(card["base_model"], device=settings.device, dtype=settings.dtype)
    model = PeftModel.from_pretrained(base, str(adapter_folder(start)), is_trainable=True)
    return tokenizer, model, resolved, card


def train_critic_grpo(
    dataset_dir: Path,
    *,
    start: Path,
    out: Path,
    settings: GRPOSettings | None = None,
    resume: bool = False,
    console: Any = None,
) -> TrainResult:
    """GRPO from the SFT adapter at ``start``; the new adapter lands in ``out/adapter``."""
    from trl import GRPOConfig

    settings = settings or GRPOSettings()
    settings = settings.model_copy(update={"grad_accum": grpo_accumulation(settings)})
    out, checkpoint, started = start_training(out, resume)
    rows = split(load_dataset(dataset_dir), "grpo")
    tokenizer, model, resolved, card = load_policy(Path(start), settings)
    args = GRPOConfig(
        **trainer_args(settings, out),
        weight_decay=settings.weight_decay,
        beta=settings.beta,
        num_generations=settings.num_generations,
        temperature=settings.temperature,
        max_completion_length=settings.max_completion_length,
        log_completions=False,
        shuffle_dataset=settings.shuffle,
        top_entropy_quantile=settings.top_entropy_quantile,
    )
    trainer = _trainer_class(settings.skip_equal_reward_groups)(
        model=model,
        reward_funcs=[verdict_reward],
        args=args,
        train_dataset=grpo_examples(rows, settings.prompt),
        processing_class=tokenizer,
        callbacks=callbacks(out, console),
    )
    trainer.train(resume_from_checkpoint=checkpoint)
    base = {"kind": "sft+grpo", "base": card["base_model"], "resolved": resolved, "dataset": str(dataset_dir)}
    return finish_training(
        trainer,
        tokenizer,
        out,
        metric="reward",
        started=started,
        card=base | {"rows": len(rows), "settings": settings},
        extra_stats={"from": str(start)},
        save={"selected_adapters": ["default"]},
    )


__all__ = ["completion_text", "grpo_examples", "train_critic_grpo", "verdict_reward"]
