"""Policy GRPO: train the proposer (a LoRA adapter on a local causal LM) from verified or critic rewards.

One step (critic paper, Section 5): the rewarder hands out P prompts (one per
parent); the trainer samples G ideas for each from the current policy; the
rewarder turns every idea into a child and rewards it (+1 Improve, -1
otherwise; from the verifier, the critic or ``invalid``); the trainer then
takes one GRPO update (``loss``: group-normalised advantages, clipped ratio,
k3 KL to the frozen base with ``beta``).

Why not TRL's ``GRPOTrainer``: its reward functions are called synchronously
from inside its own generation step over a fixed dataset, while here the
prompts of step s+1 depend on the outcomes of step s (a parent advances when
all its ideas improve), the reward pipeline is asynchronous (children are
built, summarised, critiqued and verified concurrently), the verification
budget must stop the run *before* an update whose rewards were not all paid
for, and a resumed run must re-ask exactly the stored ``(key, index)`` pairs so
no verification is paid twice. A 200-line loop with the same loss is smaller
than bending the trainer to all four.

Determinism and resume: idea ``i`` of group ``key`` is sampled with its own
generator seeded from ``(settings.seed, key, i)``. A checkpoint is written
after every ``save_every`` updates (adapter, optimizer, step count) through a
temporary folder and a rename. ``resume=True`` loads the newest checkpoint and
continues at the next step: the policy weights are those that sampled that
step before the crash, so the same ideas come out, and the rewarder, which
stores every reward durably before ``score`` returns, reads them back instead
of verifying again.

Output folder ``out``::

    out/train_log.jsonl          one record per step (StepStats fields + loss, kl, wall times) and a final
                                 ``{"event": "stopped", ...}`` record saying why the run ended
    out/checkpoints/step-N/      adapter/ (PEFT folder), optimizer.pt, state.json (N = steps completed)
    out/adapter/                 the final adapter + tokenizer + verifyless_card.json + README.md

Limits: one process, one device; sampling is the plain batched sampler of
``model.local`` (no vLLM). The KL reference is the policy the run started
from: the base with the adapter disabled for a fresh LoRA, or, for a run
started from an existing adapter (``init_adapter``), a frozen copy of that
adapter (loaded as a second, non-trainable PEFT adapter named ``reference``),
so training from a trained proposer is regularised towards it, not towards
the base. A resumed run keeps the same reference.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from verifyless.errors import ConfigError
from verifyless.model.local import LoadedLM, chat_prompt, encode, load_pretrained, resolve_device, sample_texts
from verifyless.screen.ttl import group_advantages
from verifyless.train.common import lora_config
from verifyless.train.policy.contract import IdeaReward, PolicyPrompt, Rewarder, VerificationBudgetSpent
from verifyless.train.policy.grpo_settings import PolicySettings
from verifyless.train.policy.loss import ADVANTAGE_EPS, Sequenced, grpo_terms, token_logps

log = logging.getLogger(__name__)

CARD_JSON = "verifyless_card.json"
POLICY_ADAPTER = "default"  # the trainable LoRA (PEFT's default adapter name)
REFERENCE_ADAPTER = "reference"  # the frozen starting adapter, the KL reference when training starts from one


@dataclass(frozen=True)
class Group:
    """One prompt's sampled ideas and their rewards."""

    prompt: PolicyPrompt
    prompt_ids: tuple[int, ...]
    completions: tuple[tuple[int, ...], ...]  # token ids (end-of-sequence included when the idea ended)
    texts: tuple[str, ...]
    rewards: tuple[IdeaReward, ...] = ()


@dataclass(frozen=True)
class PolicyResult:
    """What one training run produced."""

    adapter_dir: Path
    steps: int  # steps completed in total (resumed runs count the earlier ones)
    stopped: str  # "steps" | "budget" | "no-prompts"
    log_path: Path
    seconds: float
    rewards: tuple[float, ...]  # mean reward of each step logged by this call


def idea_seed(seed: int, key: str, index: int) -> int:
    """The sampling seed of idea ``index`` of group ``key`` (stable across processes and resumes)."""
    return (zlib.crc32(f"{seed}/{key}".encode()) * 1009 + index) % 2**62


class PolicyTrainer:
    """GRPO on a LoRA proposer against a ``Rewarder`` (see the module docstring)."""

    def __init__(
        self,
        rewarder: Rewarder,
        *,
        base: str,
        out: Path,
        settings: PolicySettings | None = None,
        init_adapter: Path | None = None,
    ) -> None:
        self.rewarder = rewarder
        self.base = base
        self.out = Path(out)
        self.settings = settings or PolicySettings()
        self.init_adapter = init_adapter
        self.log_path = self.out / "train_log.jsonl"
        self.model: Any = None

    # -- setup -----------------------------------------------------------------
    def _load(self, adapter: Path | None) -> None:
        """The policy: ``adapter`` (trainable) or a fresh LoRA, plus the frozen ``init_adapter`` as KL reference."""
        import torch
        from peft import PeftModel, get_peft_model

        s = self.settings
        torch.manual_seed(s.seed)
        tokenizer, model, self.resolved = load_pretrained(self.base, device=s.device, dtype=s.dtype)
        device = resolve_device(s.device)
        model.to(device)
        if adapter is not None:
            model = PeftModel.from_pretrained(model, str(adapter), is_trainable=True)
        else:
            model = get_peft_model(model, lora_config(s))
        if self.init_adapter is not None:
            model.load_adapter(str(self.init_adapter), adapter_name=REFERENCE_ADAPTER, is_trainable=False)
            model.set_adapter(POLICY_ADAPTER)
        self.model = model
        self.loaded = LoadedLM(tokenizer, model, device, self.base, s.dtype)
        params = [p for p in model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(params, lr=s.learning_rate, weight_decay=s.weight_decay)

    def load(self) -> None:
        """Load the policy (base + ``init_adapter``, or a fresh LoRA) without a run folder: for evaluation."""
        self._load(self.init_adapter)

    def _start(self, resume: bool) -> int:
        self.out.mkdir(parents=True, exist_ok=True)
        checkpoint = self.last_checkpoint()
        if not resume:
            if checkpoint is not None or self.log_path.exists():
                raise ConfigError(f"{self.out} already holds a training run; pass --resume or use a new --out")
            self._load(self.init_adapter)
            return 0
        if checkpoint is None:
            if self.log_path.exists():
                self.log_path.unlink()  # a run killed before its first checkpoint: start over
            self._load(self.init_adapter)
            return 0
        import torch

        state = json.loads((checkpoint / "state.json").read_text())
        self._load(checkpoint / "adapter")
        self.optimizer.load_state_dict(torch.load(checkpoint / "optimizer.pt", weights_only=True))
        self._trim_log(int(state["steps"]))
        log.info("resuming from %s (%d steps done)", checkpoint, state["steps"])
        return int(state["steps"])

    # -- the loop --------------------------------------------------------------
    async def train(
        self, steps: int, *, resume: bool = False, on_step: Callable[[Mapping[str, Any]], None] | None = None
    ) -> PolicyResult:
        """Run until ``steps`` steps are complete in total (or the budget runs out); see the module docstring."""
        started = time.monotonic()
        done = self._start(resume)
        rewards: list[float] = []
        stopped = "steps"
        while done < steps:
            try:
                record = await self.step(done)
            except VerificationBudgetSpent as exc:
                stopped = "budget"
                log.info("verification budget spent in step %d: %s", done, exc)
                break
            if record is None:
                stopped = "no-prompts"
                break
            done += 1
            rewards.append(float(record["mean_reward"]))
            self._append_log(record)
            if done % self.settings.save_every == 0 or done == steps:
                self.save_checkpoint(done)
            if on_step is not None:
                on_step(record)
        self._append_log({"event": "stopped", "reason": stopped, "steps": done})
        adapter_dir = self.save_final(done, stopped)
        return PolicyResult(adapter_dir, done, stopped, self.log_path, time.monotonic() - started, tuple(rewards))

    async def step(self, step: int, *, update: bool = True) -> dict[str, Any] | None:
        """Sample, score, update (unless ``update`` is False: evaluation); returns the step's log record.

        None when the rewarder has no prompts. The record carries the ideas' rewards under ``"rewards"``
        only when ``update`` is False (evaluation reads the verified scores from them).
        """
        t0 = time.monotonic()
        prompts = await self.rewarder.prompts(step)
        if not prompts:
            return None
        groups = await asyncio.to_thread(self._sample_all, prompts)
        t1 = time.monotonic()
        # Every group's scoring finishes (and is stored) before a budget stop or another error propagates.
        outcomes = await asyncio.gather(
            *(self.rewarder.score(g.prompt, g.texts) for g in groups), return_exceptions=True
        )
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            raise errors[0]
        scored = [o for o in outcomes if not isinstance(o, BaseException)]
        groups = [
            Group(g.prompt, g.prompt_ids, g.completions, g.texts, tuple(r))
            for g, r in zip(groups, scored, strict=False)
        ]
        stats = await self.rewarder.finish_step(step)
        t2 = time.monotonic()
        changed = await asyncio.to_thread(self._update, groups) if update else {}
        t3 = time.monotonic()
        record: dict[str, Any] = {"step": step, **asdict(stats), **changed}
        if not update:
            record["rewards"] = [r for g in groups for r in g.rewards]
        record["step"] = step
        record["policy_tokens"] = sum(len(c) for g in groups for c in g.completions)
        record.update(sample_seconds=t1 - t0, score_seconds=t2 - t1, update_seconds=t3 - t2, seconds=t3 - t0)
        return record

    # -- sampling --------------------------------------------------------------
    def _sample_all(self, prompts: Sequence[PolicyPrompt]) -> list[Group]:
        s, tok = self.settings, self.loaded.tokenizer
        self.model.eval()
        groups = []
        with self.loaded.lock:
            for prompt in prompts:
                ids = encode(tok, chat_prompt(tok, [dict(m) for m in prompt.messages]))
                seeds = [idea_seed(s.seed, prompt.key, i) for i in range(s.generations)]
                samples = sample_texts(
                    self.loaded, ids, seeds, temperature=s.temperature, top_p=s.top_p,
                    max_new_tokens=s.max_completion_length,
                )  # fmt: skip
                eos = tok.eos_token_id
                completions = tuple(x.token_ids + ((eos,) if x.finish_reason == "stop" else ()) for x in samples)
                groups.append(Group(prompt, tuple(ids), completions, tuple(x.text for x in samples)))
        return groups

    # -- the update ------------------------------------------------------------
    def _update(self, groups: Sequence[Group]) -> dict[str, Any]:
        import torch

        s = self.settings
        batch: list[Sequenced] = []
        for g in groups:
            advantages = group_advantages([r.reward for r in g.rewards], eps=ADVANTAGE_EPS)
            if advantages is None and not s.skip_equal_reward_groups:
                advantages = [0.0] * len(g.rewards)
            for ids, adv in zip(g.completions, advantages or [], strict=False):
                if ids:
                    batch.append(Sequenced(g.prompt_ids, ids, adv))
        used = sum(1 for g in groups if group_advantages([r.reward for r in g.rewards], eps=ADVANTAGE_EPS) is not None)
        if not batch:
            return {"loss": None, "kl": None, "groups_used": used, "completions_used": 0}
        chunks = [batch[i : i + s.micro_batch] for i in range(0, len(batch), s.micro_batch)]
        pad = self.loaded.tokenizer.pad_token_id
        with self.loaded.lock, torch.no_grad():
            self.model.eval()
            old = [token_logps(self.model, c, pad, s.temperature)[0] for c in chunks] if s.updates_per_step > 1 else []
            refs = [self._ref_logps(c) for c in chunks] if s.beta > 0 else [None] * len(chunks)
        with self.loaded.lock:
            self.model.train()
            for _ in range(s.updates_per_step):
                loss, kl = self._pass(chunks, old, refs, len(batch))
            self.model.eval()
        return {"loss": loss, "kl": kl, "groups_used": used, "completions_used": len(batch)}

    def _ref_logps(self, chunk: Sequence[Sequenced]) -> Any:
        """Token log-probabilities under the reference policy (see the module docstring)."""
        pad, temperature = self.loaded.tokenizer.pad_token_id, self.settings.temperature
        if self.init_adapter is None:
            with self.model.disable_adapter():
                return token_logps(self.model, chunk, pad, temperature)[0]
        self.model.set_adapter(REFERENCE_ADAPTER)
        try:
            return token_logps(self.model, chunk, pad, temperature)[0]
        finally:
            self.model.set_adapter(POLICY_ADAPTER)  # also makes the policy's LoRA trainable again

    def _pass(self, chunks: Sequence[Sequence[Sequenced]], old: Sequence[Any], refs: Sequence[Any], n: int) -> Any:
        import torch

        s = self.settings
        self.optimizer.zero_grad()
        total, kl_total = 0.0, 0.0
        for i, chunk in enumerate(chunks):
            logp, mask = token_logps(self.model, chunk, self.loaded.tokenizer.pad_token_id, s.temperature)
            advantages = torch.tensor([c.advantage for c in chunk], device=logp.device)
            per_seq, kl = grpo_terms(
                logp, old[i] if old else logp.detach(), refs[i], mask, advantages,
                beta=s.beta, clip_epsilon=s.clip_epsilon,
            )  # fmt: skip
            loss = per_seq.sum() / n
            loss.backward()
            total += float(loss.detach())
            kl_total += float(kl.sum()) / n
        params = [p for p in self.model.parameters() if p.requires_grad]
        torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm)
        self.optimizer.step()
        return total, kl_total

    # -- checkpoints and log ---------------------------------------------------
    def last_checkpoint(self) -> Path | None:
        folder = self.out / "checkpoints"
        found = sorted(folder.glob("step-*"), key=lambda p: int(p.name.split("-")[1])) if folder.is_dir() else []
        return found[-1] if found else None

    def save_checkpoint(self, steps: int) -> Path:
        import torch

        folder = self.out / "checkpoints"
        target = folder / f"step-{steps:06d}"
        tmp = folder / f".tmp-step-{steps:06d}"
        shutil.rmtree(tmp, ignore_errors=True)
        self.model.save_pretrained(tmp / "adapter", selected_adapters=[POLICY_ADAPTER])
        torch.save(self.optimizer.state_dict(), tmp / "optimizer.pt")
        (tmp / "state.json").write_text(json.dumps({"steps": steps, "base": self.base}))
        shutil.rmtree(target, ignore_errors=True)
        tmp.rename(target)
        for old in sorted(folder.glob("step-*"))[: -self.settings.save_total_limit]:
            shutil.rmtree(old, ignore_errors=True)
        return target

    def _append_log(self, record: Mapping[str, Any]) -> None:
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(dict(record)) + "\n")

    def _trim_log(self, steps: int) -> None:
        """Keep only records of steps the checkpoint holds (a step logged but not checkpointed is redone)."""
        if not self.log_path.is_file():
            return
        keep = [
            line
            for line in self.log_path.read_text().splitlines()
            if line.strip() and "event" not in (r := json.loads(line)) and int(r["step"]) < steps
        ]
        self.log_path.write_text("".join(line + "\n" for line in keep))

    def save_final(self, steps: int, stopped: str) -> Path:
        """The final adapter (``out/adapter``) with tokenizer and card: usable as a proposer's ``adapter:``."""
        adapter_dir = self.out / "adapter"
        self.model.save_pretrained(adapter_dir, selected_adapters=[POLICY_ADAPTER])
        self.loaded.tokenizer.save_pretrained(adapter_dir)
        card = {
            "kind": "policy-grpo",
            "base_model": self.base,
            "base_model_path": self.resolved,
            "steps": steps,
            "stopped": stopped,
            "settings": self.settings.model_dump(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (adapter_dir / CARD_JSON).write_text(json.dumps(card, indent=2))
        (adapter_dir / "README.md").write_text(
            f"# verifyless proposer adapter (policy GRPO)\n\n- Base model: `{self.base}`\n- Steps: {steps} "
            f"(stopped: {stopped})\n\nUse it as `roles.models.proposer: {{provider: local, model: {self.base}, "
            f"adapter: <this folder>}}`.\n"
        )
        return adapter_dir


__all__ = ["Group", "PolicyResult", "PolicyTrainer", "idea_seed"]
