"""The torch side of test-time learning (screener ``critic-ttl``, ``screen/ttl.py``): one LoRA adapter.

``LoRALearner`` gives the critic's local model a private, trainable copy of its weights with the
``ttl`` adapter and implements the screener's
``AdapterLearner``: ``update(lessons, mode, seed, verdict_of)`` takes one optimizer step and writes
the next version (``adapter_model.safetensors`` plus ``optimizer.pt``) to ``<adapter_root>/v0001`` ...;
``load`` reloads a stored version and its optimizer state. The model's ``version`` (``ttl-vN``) enters
the response-cache identity, so cached critiques of an older version are never reused for a newer one.

The starting adapter (paper §4.2: "Both methods start from our trained critic model checkpoint"):
``init_adapter`` when given, else the critic model's own configured ``adapter:`` (one folder; a list
of several is a ConfigError, as they cannot become one trainable adapter), else a fresh LoRA (rank
``lora_r``, B = 0, so version 0 is the base model). The folder is copied into the trainable ``ttl``
adapter; the shared model and the folder are never written. ``origin`` is its ``adapter_tag``
(``<folder>@<sha256 prefix>``; None for a fresh LoRA) and replaces the model's ``adapter_tags``, so the
response cache and the run's ``screener_learn`` events name the weights every version grew from.

* ``sdft``: per lesson the student (critic + adapter) samples a critique for the plain prompt; the
  teacher, without gradient, reads the privileged prompt; the loss is the token-level reverse KL,
  KL(student || teacher), averaged over the critique's tokens. ``teacher="frozen"`` (the default, the
  paper's Table 14) is the starting adapter, kept as a second, never-trained ``teacher`` adapter (the
  base model, adapter disabled, for a fresh LoRA); ``teacher="current"`` is the adapter being trained
  (a teacher that drifts with the student).
* ``grpo``: per lesson ``rollouts`` critiques, reward +1 when ``verdict_of(text)`` is the label else -1,
  group-normalised advantages (groups with equal rewards skipped), one policy-gradient step.
"""

from __future__ import annotations

import contextlib
import random
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from verifyless.errors import ConfigError
from verifyless.model.base import wrapped
from verifyless.model.local import adapter_tag, chat_prompt, encode, load_lm, sample_texts
from verifyless.screen.critic import TEMPERATURE
from verifyless.screen.learner import Lesson
from verifyless.screen.ttl import group_advantages


def reverse_kl(student_logits: Any, teacher_logits: Any, mask: Any) -> Any:
    """Mean over masked positions of KL(p_s || p_t) = sum_v p_s(v) (log p_s(v) - log p_t(v)).

    ``*_logits``: [B, T, V]; ``mask``: [B, T] of 0/1. The teacher side carries no gradient.
    """
    import torch

    log_s = torch.log_softmax(student_logits.float(), dim=-1)
    log_t = torch.log_softmax(teacher_logits.detach().float(), dim=-1)
    per_token = (log_s.exp() * (log_s - log_t)).sum(dim=-1)
    mask = mask.float()
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


def local_model(model: Any) -> Any:
    """The in-process model (one with ``loaded`` weights) under cache and recorder wrappers; ConfigError if none."""
    for seen in wrapped(model):
        if getattr(seen, "loaded", None) is not None:
            return seen
    raise ConfigError("critic-ttl trains its critic in process: give it a local critic (provider: local)")


def configured_adapter(local: Any) -> str | None:
    """The one adapter folder the critic model was configured with (``adapter:``), or None."""
    config = getattr(local, "config", None)
    adapter = getattr(config, "adapter", None)
    folders = [adapter] if isinstance(adapter, str) else list(adapter or [])
    if len(folders) > 1:
        raise ConfigError(
            f"critic-ttl trains one adapter, but the critic model has {len(folders)} ({folders}); "
            "configure one, or set screener.options.init_adapter to the one to start from"
        )
    return folders[0] if folders else None


class LoRALearner:
    """A trainable ``ttl`` LoRA adapter on a local critic (see the module docstring)."""

    def __init__(
        self,
        model: Any,
        *,
        adapter_root: str | None,
        lora_r: int = 32,
        lora_alpha: int = 64,
        learning_rate: float = 1e-5,
        init_adapter: str | None = None,
        rollouts: int = 16,
        temperature: float = TEMPERATURE,
        max_tokens: int = 256,
        teacher: str = "frozen",
    ) -> None:
        if adapter_root is None:
            raise ConfigError(
                "critic-ttl needs a folder for its adapter versions: set screener.options.adapter_root=DIR "
                "(keep it beside the run store; a resumed run reloads the versions from there)"
            )
        if teacher not in ("frozen", "current"):
            raise ConfigError(f"critic-ttl teacher must be 'frozen' or 'current', got {teacher!r}")
        self.root, self.version, self.teacher = Path(adapter_root), 0, teacher
        self.lr, self.rollouts, self.temperature, self.max_tokens = learning_rate, rollouts, temperature, max_tokens
        self.local = local_model(model)
        self.start = init_adapter or configured_adapter(self.local)
        self.origin = adapter_tag(self.start) if self.start else None
        self._setup(lora_r, lora_alpha, self.start)

    def _setup(self, r: int, alpha: int, start: str | None) -> None:
        """Give the local model a private, trainable copy of its weights with the ``ttl`` adapter active."""
        import torch
        from peft import LoraConfig, PeftModel, get_peft_model

        shared = self.local.loaded
        loaded = load_lm(shared.source, device=shared.device, dtype=shared.dtype, shared=False)
        if start:
            loaded.model = PeftModel.from_pretrained(loaded.model, start, adapter_name="ttl", is_trainable=True)
            if self.teacher == "frozen":
                loaded.model.load_adapter(start, adapter_name="teacher", is_trainable=False)
                loaded.model.set_adapter("ttl")
        else:
            config = LoraConfig(
                r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
            )
            loaded.model = get_peft_model(loaded.model, config, adapter_name="ttl")
        loaded.model.eval()
        loaded.adapters = {"<test-time>": "ttl"}
        self.local.loaded, self.local.adapter_names, self.local.version = loaded, ("ttl",), "ttl-v0"
        self.local.adapter_tags = (self.origin,) if self.origin else ()
        params = [p for n, p in loaded.model.named_parameters() if "lora_" in n and ".ttl." in n]
        for p in params:
            p.requires_grad_(True)
        self.optimizer = torch.optim.AdamW(params, lr=self.lr, weight_decay=0.0)

    # -- one step ---------------------------------------------------------------
    def update(self, lessons: Sequence[Lesson], mode: str, seed: int, verdict_of: Callable[[str], str | None]) -> float:
        """One optimizer step on ``lessons``, the next version written; the loss (0.0 when no lesson had signal)."""
        import torch

        rng = random.Random(seed)
        loaded = self.local.loaded
        with loaded.lock:
            torch.manual_seed(rng.randrange(2**31))
            losses = [
                self.sdft_loss(lesson, rng) if mode == "sdft" else self.grpo_loss(lesson, rng, verdict_of)
                for lesson in lessons
            ]
            losses = [x for x in losses if x is not None]
            if not losses:
                return 0.0
            total = torch.stack(losses).mean()
            self.optimizer.zero_grad()
            total.backward()
            self.optimizer.step()
            loaded.model.eval()
        self.version += 1
        self._save()
        return float(total.detach())

    def _prompt_ids(self, messages: Sequence[dict[str, str]]) -> list[int]:
        tok = self.local.loaded.tokenizer
        return encode(tok, chat_prompt(tok, messages))

    def _sample(self, prompt: list[int], seeds: Sequence[int]) -> list[Any]:
        return sample_texts(
            self.local.loaded, prompt, seeds, temperature=self.temperature, max_new_tokens=self.max_tokens
        )

    def _logits(self, prompt: list[int], completion: Sequence[int]) -> Any:
        """Next-token logits at each completion position: [1, len(completion), V]."""
        import torch

        ids = torch.tensor([prompt + list(completion)], device=self.local.loaded.device)
        logits = self.local.loaded.model(input_ids=ids).logits
        return logits[:, len(prompt) - 1 : len(prompt) - 1 + len(completion), :]

    def sdft_pair(self, lesson: Lesson, rng: random.Random) -> tuple[list[int], list[int], list[int]]:
        """(student prompt ids, teacher prompt ids, the student's sampled critique ids)."""
        student_ids = self._prompt_ids(lesson.messages)
        self.local.loaded.model.eval()
        critique = self._sample(student_ids, [rng.randrange(2**31)])[0]
        return student_ids, self._prompt_ids(lesson.teacher), list(critique.token_ids)

    def sdft_loss(self, lesson: Lesson, rng: random.Random) -> Any:
        import torch

        student_ids, teacher_ids, critique = self.sdft_pair(lesson, rng)
        if not critique:
            return None
        with torch.no_grad(), self.teacher_weights():
            teacher_logits = self._logits(teacher_ids, critique)
        self.local.loaded.model.train()
        student_logits = self._logits(student_ids, critique)
        mask = torch.ones(student_logits.shape[:2], device=student_logits.device)
        return reverse_kl(student_logits, teacher_logits, mask)

    @contextlib.contextmanager
    def teacher_weights(self) -> Iterator[None]:
        """Run the model as the SDFT teacher: the frozen starting weights, or the current adapter."""
        model = self.local.loaded.model
        if self.teacher == "current":
            yield
        elif self.start is None:  # a fresh LoRA started as the base model
            with model.disable_adapter():
                yield
        else:
            model.set_adapter("teacher")
            try:
                yield
            finally:
                model.set_adapter("ttl")  # peft marks only the active adapter trainable

    def grpo_loss(self, lesson: Lesson, rng: random.Random, verdict_of: Callable[[str], str | None]) -> Any:
        import torch

        prompt = self._prompt_ids(lesson.messages)
        self.local.loaded.model.eval()
        samples = self._sample(prompt, [rng.randrange(2**31) for _ in range(self.rollouts)])
        rewards = [1.0 if verdict_of(s.text) == lesson.label else -1.0 for s in samples]
        advantages = group_advantages(rewards)
        if advantages is None:
            return None
        self.local.loaded.model.train()
        terms = []
        for sample, advantage in zip(samples, advantages, strict=False):
            if sample.token_ids:
                logp = torch.log_softmax(self._logits(prompt, sample.token_ids).float(), dim=-1)
                chosen = logp[0, torch.arange(len(sample.token_ids)), torch.tensor(sample.token_ids)]
                terms.append(-advantage * chosen.mean())
        return torch.stack(terms).mean() if terms else None

    # -- versions ---------------------------------------------------------------
    def folder(self, version: int) -> Path:
        return self.root / f"v{version:04d}"

    def _save(self) -> None:
        import torch

        target, tmp = self.folder(self.version), self.root / f".v{self.version:04d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self.local.loaded.model.save_pretrained(tmp, selected_adapters=["ttl"])
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        shutil.rmtree(target, ignore_errors=True)  # a version written before a crash, never recorded
        tmp.rename(target)
        self.local.version = f"ttl-v{self.version}"

    def load(self, version: int, folder: Path) -> None:
        """Reload adapter ``version`` (and its optimizer state) from ``folder``; later versions go beside it."""
        import torch
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        self.version = version
        weights = folder / "ttl" / "adapter_model.safetensors"
        if not weights.is_file():
            weights = folder / "adapter_model.safetensors"
        if not weights.is_file():
            raise ConfigError(
                f"critic-ttl: adapter version {version} is missing at {folder}; the run's "
                "adapter folder was moved or deleted"
            )
        set_peft_model_state_dict(self.local.loaded.model, load_file(str(weights)), adapter_name="ttl")
        if (folder / "optimizer.pt").is_file():
            self.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
        self.root = folder.parent
        self.local.version = f"ttl-v{version}"


__all__ = ["LoRALearner", "configured_adapter", "local_model", "reverse_kl"]
