"""A tiny random chat LM that writes one-line ideas, for policy-training tests and smoke runs.

``build_tiny_policy_lm(directory, prompts, answers)`` trains the byte-level
tokenizer of ``train.tiny`` on the given proposer prompts and answer lines (so
option words such as ``a2`` or ``bravo`` are a few tokens each), builds a
2-layer Llama and teaches it, with ``format_steps`` full-parameter steps, to
answer any of the prompts with one of ``answers`` drawn *uniformly at random*:
it writes well-formed ideas but has no preference between them, which is the
starting point GRPO has to improve on. ``space_answers(task)`` gives the answer
lines for an idea-space task (one ``## Approach`` line per dimension option).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifyless.model.local import chat_prompt, encode
from verifyless.train.tiny import build_tiny_tokenizer, save_tiny, teacher_forcing_steps, tiny_llama


def space_answers(task: Any) -> list[str]:
    """``## Approach`` lines naming one option of one dimension of the task's idea space."""
    space = task.idea_space
    if space is None:
        raise ValueError(f"task {task.name!r} declares no idea_space")
    return [
        f"## Approach\nSet {dim} to {opt.name}: {opt.description}."
        for dim, options in space.dimensions.items()
        for opt in options
    ]


def teach_answers(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[Sequence[Mapping[str, str]]],
    answers: Sequence[str],
    *,
    steps: int,
    seed: int = 0,
    lr: float = 1e-2,
) -> list[float]:
    """Full-parameter steps on (random prompt -> random answer) transcripts; returns the losses."""

    rng = random.Random(seed)
    heads = [encode(tokenizer, chat_prompt(tokenizer, [dict(m) for m in p])) for p in prompts]
    tails = [encode(tokenizer, a) + [tokenizer.eos_token_id] for a in answers]
    batches = ([(rng.choice(heads), rng.choice(tails)) for _ in range(8)] for _ in range(steps))
    return teacher_forcing_steps(model, tokenizer.pad_token_id, batches, lr=lr)


def build_tiny_policy_lm(
    directory: str | Path,
    prompts: Sequence[Sequence[Mapping[str, str]]],
    answers: Sequence[str],
    *,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    format_steps: int = 60,
    vocab_size: int = 1024,
) -> Path:
    """Build, teach and ``save_pretrained`` the tiny policy LM under ``directory``; returns the folder."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    corpus = [m["content"] for p in prompts for m in p] + list(answers) * 8
    tokenizer = build_tiny_tokenizer(vocab_size, corpus=corpus * 2)
    model = tiny_llama(tokenizer, hidden=hidden, layers=layers, max_positions=8192, seed=seed)
    if format_steps:
        teach_answers(model, tokenizer, prompts, answers, steps=format_steps, seed=seed)
    return save_tiny(model, tokenizer, out)


__all__ = ["build_tiny_policy_lm", "space_answers", "teach_answers"]
