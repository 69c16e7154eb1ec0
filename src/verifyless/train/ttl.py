"""Test-time learning of a local critic inside a run (screener ``critic-ttl``, SPEC section 6).

The backbone stays frozen; one LoRA adapter (rank 32 by default; initialised
from ``init_adapter`` when given, e.g. the SFT/GRPO critic) learns from
outcomes the run has already paid for. The engine calls ``learn(outcomes,
round)`` once per round boundary; screening always uses the current adapter.

* ``mode: sdft`` (TT-SDFT): for each new verified pair the student (critic +
  adapter) samples a critique for the plain prompt; the teacher is the same
  model, same weights, without gradient, whose prompt also carries the measured
  parent and child scores and the label (privileged context). The loss is the
  token-level reverse KL, KL(student || teacher) over the full vocabulary,
  averaged over the critique's tokens; one optimizer step per round.
* ``mode: grpo`` (TT-GRPO): pairs accumulate; every ``every`` rounds (default
  2) each pending pair gets ``rollouts`` critiques (default 16), reward +1 when
  the parsed verdict matches the label else -1, group-normalised advantages,
  groups with equal rewards skipped; one on-policy policy-gradient step.

Each update writes adapter version ``v`` (``adapter_model.safetensors`` plus
``optimizer.pt``) to ``<adapter_root>/v0001`` ... and returns
``{"adapter_version", "adapter_dir", "loss", "pairs", "mode"}``, which the
engine stores as a ``screener_learn`` event; ``restore(records)`` reloads the
version the last record names (and the optimizer state and TT-GRPO's pending
pairs), so resume and replay screen with the same weights. The adapter
version enters the response-cache identity, so cached critiques of an older
version are never reused for a newer one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifyless.errors import ConfigError
from verifyless.node import Candidate, Idea, Operator, Screening
from verifyless.outcome import Outcome, label3
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import ScreenContext
from verifyless.screen.critic import PointwiseCritic, parse_verdict


# ------------------------------------------------------------------ the losses
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


def group_advantages(rewards: Sequence[float]) -> list[float] | None:
    """(r - mean) / std for one group; None when all rewards are equal (no signal: the group is skipped)."""
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / len(rewards)
    if var == 0:
        return None
    return [(r - mean) / var**0.5 for r in rewards]


def privileged_note(outcome: Outcome, label: str) -> str:
    """The teacher's privileged context: the measured raw scores and the label (``verifyless.outcome.label3``)."""
    better = "higher" if outcome.higher_is_better else "lower"
    return (
        f"\n\n## Measured outcome (known to you only)\nParent score: {outcome.parent_score:.6g}. "
        f"Child score: {outcome.child_score:.6g} ({better} is better). Outcome: {label}."
    )


# ------------------------------------------------------------------ the screener
def local_model(model: Any) -> Any:
    """The in-process model (one with ``loaded`` weights) under cache and recorder wrappers; ConfigError if none."""
    seen = model
    while seen is not None:
        if getattr(seen, "loaded", None) is not None:
            return seen
        seen = getattr(seen, "inner", None)
    raise ConfigError("critic-ttl trains its critic in process: give it a local critic (provider: local)")


class TestTimeCritic:
    """Screener ``critic-ttl``: a local pointwise critic whose LoRA adapter learns during the run."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        model: Any,
        mode: str = "sdft",
        *,
        k: int = 16,
        temperature: float = 0.7,
        route_threshold: float = 0.25,
        verify_uncertain: bool = False,
        n_verify: int | None = None,
        max_tokens: int = 256,
        lora_r: int = 32,
        lora_alpha: int = 64,
        learning_rate: float = 1e-5,
        every: int = 2,
        rollouts: int = 16,
        init_adapter: str | None = None,
        adapter_root: str | None = None,
        seed: int = 0,
        name: str = "critic-ttl",
        task: Any = None,
    ) -> None:
        if mode not in ("sdft", "grpo"):
            raise ConfigError(f"critic-ttl mode must be 'sdft' or 'grpo', got {mode!r}")
        if adapter_root is None:
            raise ConfigError(
                "critic-ttl needs a folder for its adapter versions: set screener.options.adapter_root=DIR "
                "(keep it beside the run store; a resumed run reloads the versions from there)"
            )
        self.name, self.mode, self.every, self.rollouts = name, mode, every, rollouts
        self.max_tokens, self.temperature, self.lr, self.seed = max_tokens, temperature, learning_rate, seed
        self.root = Path(adapter_root)
        self.local = local_model(model)
        self.critic = PointwiseCritic(
            model,
            k=k,
            temperature=temperature,
            route_threshold=route_threshold,
            verify_uncertain=verify_uncertain,
            n_verify=n_verify,
            max_tokens=max_tokens,
            name=name,
        )
        self.version = 0
        self.pending: list[Outcome] = []
        self._ctx: ScreenContext | None = None
        self.task = task  # prompts before the first screening (e.g. learning right after a resume)
        self._setup(lora_r, lora_alpha, init_adapter)

    def _setup(self, r: int, alpha: int, init_adapter: str | None) -> None:
        """Give the local model a private, trainable copy of its weights with the ``ttl`` adapter active."""
        import torch
        from peft import LoraConfig, PeftModel, get_peft_model

        from verifyless.model.local import load_lm

        shared = self.local.loaded
        loaded = load_lm(shared.source, device=shared.device, dtype=shared.dtype, shared=False)
        if init_adapter:
            loaded.model = PeftModel.from_pretrained(loaded.model, init_adapter, adapter_name="ttl", is_trainable=True)
        else:
            config = LoraConfig(
                r=r, lora_alpha=alpha, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM"
            )
            loaded.model = get_peft_model(loaded.model, config, adapter_name="ttl")
        loaded.model.eval()
        loaded.adapters = {"<test-time>": "ttl"}
        self.local.loaded, self.local.adapter_names, self.local.version = loaded, ("ttl",), "ttl-v0"
        params = [p for n, p in loaded.model.named_parameters() if "lora_" in n]
        for p in params:
            p.requires_grad_(True)
        self.optimizer = torch.optim.AdamW(params, lr=self.lr, weight_decay=0.0)

    # -- screening ------------------------------------------------------------
    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        self._ctx = ctx  # the task and brief that learning renders its prompts with
        return await self.critic.screen(ctx, candidates)

    def route(self, evidence: Any) -> bool:
        return self.critic.route(evidence)

    def messages_for(self, outcome: Outcome) -> list[dict[str, str]]:
        """The critic's own prompt for a verified pair (the task and brief of the last screening)."""
        parent = ParentInfo(id=outcome.parent_id, program="", summary=outcome.parent_summary)
        if self._ctx is not None:
            ctx = dataclasses.replace(self._ctx, parent=parent)
        elif self.task is not None:  # no brief yet: the prompt says so, as the critic's does without one
            ctx = ScreenContext(task=self.task, parent=parent, rng=random.Random(0))
        else:
            raise ConfigError(
                "critic-ttl learned before it ever screened and was built without a task; "
                "build it with build_screener(..., task=TASK)"
            )
        child = Candidate(
            id=outcome.child_id,
            parent_id=outcome.parent_id,
            operator=Operator.IMPROVE,
            idea=Idea(outcome.idea),
            program="",
            program_hash="",
            summary=outcome.child_summary,
        )
        return [{"role": m.role, "content": m.content} for m in self.critic.messages(ctx, child)]

    # -- learning ---------------------------------------------------------------
    async def learn(self, outcomes: Sequence[Outcome], round: int) -> dict[str, Any] | None:
        """Learn from the round's compared outcomes; a failed child has no label and is skipped (``label3``)."""
        usable = [o for o in outcomes if label3(o) is not None]
        if self.mode == "grpo":
            self.pending += usable
            if not self.pending or round % self.every:
                return self._record(None) if usable else None
            batch, self.pending = self.pending, []
        else:
            batch = usable
        if not batch:
            return None
        loss = await asyncio.to_thread(self._update, batch, round)
        return self._record(loss, pairs=len(batch))

    def _update(self, batch: Sequence[Outcome], round: int) -> float:
        import torch

        rng = random.Random(self.seed * 100_003 + round)
        loaded = self.local.loaded
        with loaded.lock:
            torch.manual_seed(rng.randrange(2**31))
            losses = [self._sdft_loss(o, rng) if self.mode == "sdft" else self._grpo_loss(o, rng) for o in batch]
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
        from verifyless.model.local import chat_prompt, encode

        tok = self.local.loaded.tokenizer
        return encode(tok, chat_prompt(tok, messages))

    def _sample(self, prompt: list[int], seeds: Sequence[int]) -> list[Any]:
        from verifyless.model.local import sample_texts

        return sample_texts(
            self.local.loaded, prompt, seeds, temperature=self.temperature, max_new_tokens=self.max_tokens
        )

    def _logits(self, prompt: list[int], completion: Sequence[int]) -> Any:
        """Next-token logits at each completion position: [1, len(completion), V]."""
        import torch

        ids = torch.tensor([prompt + list(completion)], device=self.local.loaded.device)
        logits = self.local.loaded.model(input_ids=ids).logits
        return logits[:, len(prompt) - 1 : len(prompt) - 1 + len(completion), :]

    def sdft_pair(self, outcome: Outcome, rng: random.Random) -> tuple[list[int], list[int], list[int]]:
        """(student prompt ids, teacher prompt ids, the student's sampled critique ids)."""
        messages = self.messages_for(outcome)
        teacher = [dict(m) for m in messages]
        teacher[-1]["content"] += privileged_note(outcome, str(label3(outcome)))
        student_ids = self._prompt_ids(messages)
        self.local.loaded.model.eval()
        critique = self._sample(student_ids, [rng.randrange(2**31)])[0]
        return student_ids, self._prompt_ids(teacher), list(critique.token_ids)

    def _sdft_loss(self, outcome: Outcome, rng: random.Random) -> Any:
        import torch

        student_ids, teacher_ids, critique = self.sdft_pair(outcome, rng)
        if not critique:
            return None
        with torch.no_grad():
            teacher_logits = self._logits(teacher_ids, critique)
        self.local.loaded.model.train()
        student_logits = self._logits(student_ids, critique)
        mask = torch.ones(student_logits.shape[:2], device=student_logits.device)
        return reverse_kl(student_logits, teacher_logits, mask)

    def _grpo_loss(self, outcome: Outcome, rng: random.Random) -> Any:
        import torch

        prompt = self._prompt_ids(self.messages_for(outcome))
        self.local.loaded.model.eval()
        samples = self._sample(prompt, [rng.randrange(2**31) for _ in range(self.rollouts)])
        label = label3(outcome)
        rewards = [
            1.0 if (v := parse_verdict(s.text)) is not None and v.improvement == label else -1.0 for s in samples
        ]
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
    def _dir(self, version: int) -> Path:
        return self.root / f"v{version:04d}"

    def _save(self) -> None:
        import shutil

        import torch

        target, tmp = self._dir(self.version), self.root / f".v{self.version:04d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self.local.loaded.model.save_pretrained(tmp, selected_adapters=["ttl"])
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        shutil.rmtree(target, ignore_errors=True)  # a version written before a crash, never recorded
        tmp.rename(target)
        self.local.version = f"ttl-v{self.version}"

    def _record(self, loss: float | None, pairs: int = 0) -> dict[str, Any]:
        record: dict[str, Any] = {
            "adapter_version": self.version,
            "mode": self.mode,
            "loss": loss,
            "pairs": pairs,
            "adapter_dir": str(self._dir(self.version)) if self.version else None,
        }
        if self.mode == "grpo":
            record["pending"] = [o.to_dict() for o in self.pending]
        return record

    def restore(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Reload the adapter (and optimizer, pending pairs) named by the last stored record."""
        import torch
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        if not records:
            return
        last = records[-1]
        self.version = int(last.get("adapter_version") or 0)
        self.pending = [Outcome.from_dict(p) for p in last.get("pending") or []]
        if not self.version:
            return
        folder = Path(str(last["adapter_dir"]))
        weights = folder / "ttl" / "adapter_model.safetensors"
        if not weights.is_file():
            weights = folder / "adapter_model.safetensors"
        if not weights.is_file():
            raise ConfigError(
                f"critic-ttl: adapter version {self.version} is missing at {folder}; the run's "
                "adapter folder was moved or deleted"
            )
        set_peft_model_state_dict(self.local.loaded.model, load_file(str(weights)), adapter_name="ttl")
        if (folder / "optimizer.pt").is_file():
            self.optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
        self.root = folder.parent
        self.local.version = f"ttl-v{self.version}"


__all__ = ["TestTimeCritic", "group_advantages", "privileged_note", "reverse_kl"]
