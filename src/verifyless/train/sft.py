"""Critic SFT: TRL ``SFTTrainer`` with a LoRA adapter on the dataset's kept critiques.

Each example is prompt = the critic's own chat prompt for the row
(``messages_for``), completion = the kept teacher critique; the loss covers
the completion only (TRL's prompt-completion format). Rows without a
critique are skipped. Defaults follow the paper (r=32, lr 1e-5, 3 epochs);
see ``settings.SFTSettings``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from verifyless.errors import ConfigError
from verifyless.model.local import chat_prompt, encode, load_pretrained
from verifyless.train.common import (
    TrainResult,
    callbacks,
    finish_training,
    lora_config,
    start_training,
    trainer_args,
)
from verifyless.train.critic_rows import load_dataset, messages_for, split
from verifyless.train.settings import SFTSettings

log = logging.getLogger(__name__)


def sft_examples(rows: Any, tokenizer: Any, settings: SFTSettings) -> Any:
    """A ``Dataset`` of {prompt: messages, completion: [assistant critique]} for rows with a critique."""
    from datasets import Dataset

    examples = []
    for row in rows:
        if not row.get("critique"):
            continue
        prompt = messages_for(row)
        if (
            settings.max_prompt_tokens
            and len(encode(tokenizer, chat_prompt(tokenizer, prompt))) > settings.max_prompt_tokens
        ):
            continue
        examples.append({"prompt": prompt, "completion": [{"role": "assistant", "content": row["critique"]}]})
    if not examples:
        raise ConfigError("no 'sft' row has a critique to learn from; synthesise critiques first (data commands)")
    return Dataset.from_list(examples)


def train_critic_sft(
    dataset_dir: Path,
    *,
    base: str,
    out: Path,
    settings: SFTSettings | None = None,
    resume: bool = False,
    console: Any = None,
) -> TrainResult:
    """Train a LoRA critic on ``dataset_dir``'s sft split; the adapter lands in ``out/adapter``."""
    from trl import SFTConfig, SFTTrainer

    settings = settings or SFTSettings()
    out, checkpoint, started = start_training(out, resume)
    rows = split(load_dataset(dataset_dir), "sft")
    tokenizer, model, resolved = load_pretrained(base, device=settings.device, dtype=settings.dtype)
    examples = sft_examples(rows, tokenizer, settings)
    args = SFTConfig(
        **trainer_args(settings, out),
        max_length=settings.max_length,
        warmup_steps=settings.warmup_steps,
        completion_only_loss=True,
        packing=False,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=examples,
        processing_class=tokenizer,
        peft_config=lora_config(settings),
        callbacks=callbacks(out, console),
    )
    trainer.train(resume_from_checkpoint=checkpoint)
    card = {"kind": "sft", "base": base, "resolved": resolved, "dataset": str(dataset_dir), "rows": len(examples)}
    return finish_training(trainer, tokenizer, out, metric="loss", started=started, card=card | {"settings": settings})


__all__ = ["sft_examples", "train_critic_sft"]
