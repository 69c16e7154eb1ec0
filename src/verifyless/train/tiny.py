"""A tiny randomly initialised chat LM, built offline in seconds, for tests and smoke runs.

``build_tiny_lm(directory)`` trains a byte-level BPE tokenizer on the critic's
own prompt text plus a few verdict lines, wraps it with a ChatML chat template,
builds a 2-layer Llama of matching vocabulary and saves both with
``save_pretrained``. The folder then loads like any Hugging Face model
(``provider: local, model: DIR``).

The verdict tags (``[IMPROVEMENT]``, ``[WINTIER]``) are ordinary tokens, never
special ones: TRL decodes completions with special tokens stripped, so a tag
registered as special would vanish before the reward function sees it.
The weights start random; ``format_steps`` full-parameter steps then teach
the model the critic's output format on synthetic keyword rows whose
critiques carry *random* verdicts, so it writes parseable critiques (like an
instruct model that follows the format) without knowing which verdict is
right. It exists so that training and serving code run real forward and
backward passes quickly.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from verifyless.model.local import chat_prompt, encode
from verifyless.prompts import OPTIONAL, load_template
from verifyless.train.critic_rows import critique_text, keyword_rows, messages_for

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
_VERDICT_LINES = [
    "[IMPROVEMENT] improve --- the change helps.",
    "[IMPROVEMENT] tie --- the change does not matter.",
    "[IMPROVEMENT] lose --- the change hurts.",
    "[WINTIER] big --- large gain.",
    "[WINTIER] medium --- moderate gain.",
    "[WINTIER] small --- slight gain.",
    "[WINTIER] NA --- no gain.",
]


def _corpus() -> list[str]:
    critic = load_template("screen/critic")
    system, user = critic.text("system"), critic.text("user")
    for name in OPTIONAL:  # a line that is often empty (the data report): the vocabulary stays as it was
        user = user.replace("{{" + name + "}}\n\n", "")
    lines = [system, user, *_VERDICT_LINES]
    lines += ["The child adds dropout. The child uses a larger learning rate. The parent is a linear model."] * 3
    lines += ["Criterion 1: capacity. Criterion 2: regularisation. weight high medium low because"] * 3

    lines += [critique_text(label, tier) for label in ("improve", "tie", "lose") for tier in ("small", "medium", "big")]
    return lines * 4


def build_tiny_tokenizer(vocab_size: int = 2048, corpus: list[str] | None = None) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` with a ChatML template (eos = ``<|im_end|>``).

    Merges may cross word boundaries (no regex pre-split), so the critic template and the critique
    format become few tokens and tests run on short sequences. ``corpus`` replaces the critic text
    (the policy LM of ``train.policy.tiny`` trains on proposer prompts and idea-space option words).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        max_token_length=48,
    )
    tok.train_from_iterator(_corpus() if corpus is None else corpus, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def teach_format(
    model: Any, tokenizer: Any, *, steps: int, seed: int = 0, lr: float = 1e-2, reads: bool = False
) -> list[float]:
    """Full-parameter steps on prompt -> critique transcripts with random verdicts; returns the losses.

    ``reads``: the critiques first name the change they read in the child summary (``Criterion 1: the
    child will <keyword>.``), then give a random verdict, so the model learns to read the prompt but
    not which verdict follows from it.
    """

    rows = keyword_rows(32, random.Random(seed), split_name="format", critique_labels="random", name_keyword=reads)
    pairs = [
        (
            encode(tokenizer, chat_prompt(tokenizer, messages_for(r))),
            encode(tokenizer, str(r["critique"])) + [tokenizer.eos_token_id],
        )
        for r in rows
    ]
    batches = ([pairs[(step * 4 + i) % len(pairs)] for i in range(4)] for step in range(steps))
    return teacher_forcing_steps(model, tokenizer.pad_token_id, batches, lr=lr)


def teacher_forcing_steps(
    model: Any, pad_id: int, batches: Iterable[Sequence[tuple[list[int], list[int]]]], *, lr: float
) -> list[float]:
    """Full-parameter AdamW steps, one per batch of (prompt ids, completion ids); the loss covers the completion
    tokens only (prompts and right padding are masked). Returns the losses; leaves the model in eval mode."""
    import torch

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for batch in batches:
        width = max(len(p) + len(c) for p, c in batch)
        ids = torch.tensor([p + c + [pad_id] * (width - len(p) - len(c)) for p, c in batch])
        labels = torch.full_like(ids, -100)
        for i, (p, c) in enumerate(batch):
            labels[i, len(p) : len(p) + len(c)] = torch.tensor(c)
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def tiny_llama(tokenizer: Any, *, hidden: int, layers: int, max_positions: int, seed: int) -> Any:
    """A randomly initialised 2-head Llama over ``tokenizer`` (seeded): the tiny model every training test uses."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden,
        intermediate_size=hidden * 2,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


def save_tiny(model: Any, tokenizer: Any, out: Path) -> Path:
    """Save a tiny model and its tokenizer under ``out`` as one ``save_pretrained`` folder that generates
    with the tokenizer's pad and end tokens; returns ``out``."""
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_tiny_lm(
    directory: str | Path,
    *,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    format_steps: int = 80,
    reads: bool = False,
) -> Path:
    """Build and save the tiny tokenizer + Llama (taught the format) under ``directory``; returns the folder.

    ``reads``: see ``teach_format`` (the critiques name the keyword before their random verdict).
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer()
    model = tiny_llama(tokenizer, hidden=hidden, layers=layers, max_positions=4096, seed=seed)
    if format_steps:
        teach_format(model, tokenizer, steps=format_steps, seed=seed, reads=reads)
    return save_tiny(model, tokenizer, out)


def cached_tiny_lm(root: str | Path, *, seed: int = 0, reads: bool = False) -> Path:
    """``build_tiny_lm`` into ``root/tiny-lm-[reads-]v4-s<seed>-<corpus hash>`` unless it is there (safe for
    parallel callers). The folder name carries a hash of the tokenizer's corpus, which is built from the
    critic prompt: a changed prompt builds a new model at once, instead of a stale cached one hiding the
    change until a fresh clone (CI) builds it."""
    import shutil

    kind = "tiny-lm-reads-v1" if reads else "tiny-lm-v4"
    corpus = hashlib.sha256("\n".join(_corpus()).encode()).hexdigest()[:8]
    target = Path(root) / f"{kind}-s{seed}-{corpus}"
    if (target / "config.json").is_file():
        return target
    tmp = Path(root) / f".{kind}-s{seed}.{os.getpid()}"
    build_tiny_lm(tmp, seed=seed, reads=reads)
    try:
        tmp.rename(target)
    except OSError:  # another process finished first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


__all__ = ["CHAT_TEMPLATE", "build_tiny_lm", "build_tiny_tokenizer", "cached_tiny_lm", "save_tiny", "teach_format"]
