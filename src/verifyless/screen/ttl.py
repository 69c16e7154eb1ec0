"""Test-time learning of a local critic inside a run (screener ``critic-ttl``, SPEC section 6).

This module is the screener: it screens with a pointwise critic, keeps the pairs to learn from, builds
each pair's prompts and labels, and records and restores adapter versions. The torch update (model
loading, the SDFT / TT-GRPO step, writing and reading adapter files) is its injected ``AdapterLearner``
(``verifyless.train.ttl_learner.LoRALearner``; the composition root passes it to the registry).

The backbone stays frozen; one LoRA adapter learns from outcomes the run has
already paid for. It starts (paper §4.2) from ``init_adapter`` when given, else
from the critic model's configured ``adapter:`` (e.g. the SFT/GRPO critic), else
a fresh LoRA (rank 32 by default). The engine calls ``learn(outcomes, round)``
once per round boundary; screening always uses the current adapter.

``pairs_per_update`` (None by default; ``verifyless.config.RunConfig`` sets it to the
strategy's ``n_islands`` under ``islands``, the paper's OpenEvolve round of one
new pair per island) switches from engine rounds to pair counts: new pairs
accumulate, an SDFT step runs once ``pairs_per_update`` are pending and a
TT-GRPO step once ``every * pairs_per_update`` are (paper: 3 and 6).

* ``mode: sdft`` (TT-SDFT): for each new verified pair the student (critic +
  adapter) samples a critique for the plain prompt; the teacher is the same
  model without gradient -- the frozen starting adapter (``teacher: frozen``,
  the paper's Table 14) or the adapter being trained (``teacher: current``) --
  whose prompt also carries the measured parent and child scores and the label
  (privileged context). The loss is the
  token-level reverse KL, KL(student || teacher) over the full vocabulary,
  averaged over the critique's tokens; one optimizer step per round (or per
  ``pairs_per_update`` new pairs).
* ``mode: grpo`` (TT-GRPO): pairs accumulate; every ``every`` rounds (default
  2) each pending pair gets ``rollouts`` critiques (default 16), reward +1 when
  the parsed verdict matches the label else -1, group-normalised advantages,
  groups with equal rewards skipped; one on-policy policy-gradient step.

Each update writes adapter version ``v`` (``adapter_model.safetensors`` plus
``optimizer.pt``) to ``<adapter_root>/v0001`` ... and returns
``{"adapter_version", "adapter_dir", "adapter_origin", "loss", "pairs", "mode"}``
(``adapter_origin``: the starting adapter's ``<folder>@<weights hash>``, None for
a fresh LoRA; every version chains from it), which the
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
from typing import Any, Literal

from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.model.local import adapter_tag
from verifyless.node import Candidate, Idea, Operator, Screening
from verifyless.outcome import Outcome, label3
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import ScreenContext
from verifyless.screen.critic import TEMPERATURE, CriticOptions, K, PointwiseCritic, parse_verdict
from verifyless.screen.health import watch
from verifyless.screen.learner import AdapterLearner, Lesson
from verifyless.screen.options import LocalCriticOptions
from verifyless.screen.reward import recorded_critic


# ------------------------------------------------------------------ options
class TestTimeCriticOptions(LocalCriticOptions):
    """Options of screener ``critic-ttl`` (the LoRA fields are handed to its learner)."""

    __test__ = False  # not a pytest test class, despite the name

    mode: Literal["sdft", "grpo"] = Field(
        "sdft",
        description="sdft (TT-SDFT, reverse KL to a privileged teacher) "
        "or grpo (TT-GRPO, verdict-matches-label rewards)",
    )
    k: int = Field(K, ge=1, description=f"critiques sampled per candidate (paper: {K})")
    temperature: float = Field(
        TEMPERATURE, ge=0.0, le=2.0, description=f"critique sampling temperature (paper: {TEMPERATURE})"
    )
    max_tokens: int = Field(256, ge=1, description="critique length cap (screening and learning)")
    lora_r: int = Field(32, ge=1, description="LoRA rank of the test-time adapter")
    lora_alpha: int = Field(64, ge=1, description="LoRA alpha of the test-time adapter")
    learning_rate: float = Field(1e-5, gt=0, description="AdamW learning rate of the adapter")
    every: int = Field(2, ge=1, description="grpo: update every this many rounds")
    rollouts: int = Field(16, ge=1, description="grpo: critiques sampled per pending pair")
    init_adapter: str | None = Field(
        None, description="adapter folder to start from (default: the critic model's configured adapter)"
    )
    teacher: Literal["frozen", "current"] = Field(
        "frozen",
        description="sdft teacher: the frozen starting adapter (paper, Table 14) or the current, drifting one",
    )
    pairs_per_update: int | None = Field(
        None,
        ge=1,
        description="update per this many new pairs (grpo: every times this many) instead of per engine round; "
        "default: the islands strategy's n_islands (one pair per island), else per round",
    )
    adapter_root: str | None = Field(None, description="folder of the adapter versions (keep it beside the store)")
    seed: int | None = Field(None, description="seed of the learning draws (default: the run's seed)")

    def critic_options(self) -> CriticOptions:
        """The pointwise critic that screens: its k samples at the learner's temperature and length."""
        return CriticOptions(
            k=self.k,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            n_verify=self.n_verify,
            name=self.name or "critic-ttl",
        )

    def learner_options(self) -> dict[str, Any]:
        """The keyword arguments of the learner (``LEARNER_OPTIONS``, plus the sampling both share)."""
        return {k: getattr(self, k) for k in (*LEARNER_OPTIONS, "temperature", "max_tokens")}


LEARNER_OPTIONS = (
    "lora_r",
    "lora_alpha",
    "learning_rate",
    "init_adapter",
    "adapter_root",
    "rollouts",
    "teacher",
)  # learner only


# ------------------------------------------------------------------ the labels
def group_advantages(rewards: Sequence[float], eps: float = 0.0) -> list[float] | None:
    """GRPO's group-normalised advantages ``(r - mean) / (std + eps)`` (population std); None when all
    rewards are equal (no signal: the group is skipped).

    The one definition for TT-GRPO (here, ``eps=0``: plain ``(r - mean) / std``) and policy GRPO
    (``train.policy.loss.ADVANTAGE_EPS``, as TRL adds to the std).
    """
    mean = sum(rewards) / len(rewards)
    var = sum((r - mean) ** 2 for r in rewards) / len(rewards)
    if var == 0:
        return None
    return [(r - mean) / (var**0.5 + eps) for r in rewards]


def privileged_note(outcome: Outcome, label: str) -> str:
    """The teacher's privileged context: the measured raw scores and the label (``verifyless.outcome.label3``)."""
    better = "higher" if outcome.higher_is_better else "lower"
    return (
        f"\n\n## Measured outcome (known to you only)\nParent score: {outcome.parent_score:.6g}. "
        f"Child score: {outcome.child_score:.6g} ({better} is better). Outcome: {label}."
    )


# ------------------------------------------------------------------ the screener
class TestTimeCritic:
    """Screener ``critic-ttl``: a local pointwise critic whose adapter (``learner``) learns during the run."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        critic: PointwiseCritic,
        learner: AdapterLearner,
        options: TestTimeCriticOptions | None = None,
        *,
        seed: int = 0,
        task: Any = None,
    ) -> None:
        """``critic`` screens (its model is the one ``learner`` trains an adapter of; both were built from these
        ``options``, ``critic_options`` and the ``LEARNER_OPTIONS``) and names the screenings; ``seed`` is the
        run's, used unless the options set one; the options' reply-health limits watch ``health``."""
        self.options = options or TestTimeCriticOptions()
        self.name, self.mode, self.every = critic.name, self.options.mode, self.options.every
        self.seed = self.options.seed if self.options.seed is not None else seed
        self.pairs_per_update = self.options.pairs_per_update
        self.learner = learner
        self.critic = critic
        self.pending: list[Outcome] = []
        self._ctx: ScreenContext | None = None
        self.task = task  # prompts before the first screening (e.g. learning right after a resume)
        self.health = watch(self)

    @property
    def version(self) -> int:
        """The adapter version screening uses now (0: the initial adapter)."""
        return self.learner.version

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

    def lesson(self, outcome: Outcome) -> Lesson:
        """A labelled pair as the learner takes it: the plain prompt, the prompt with the measured scores."""
        label = str(label3(outcome))
        messages = self.messages_for(outcome)
        teacher = [dict(m) for m in messages]
        teacher[-1]["content"] += privileged_note(outcome, label)
        return Lesson(messages, teacher, label)

    # -- learning ---------------------------------------------------------------
    async def learn(self, outcomes: Sequence[Outcome], round: int) -> dict[str, Any] | None:
        """Learn from the round's compared outcomes; a failed child has no label and is skipped (``label3``)."""
        usable = [o for o in outcomes if label3(o) is not None]
        if self.pairs_per_update is not None:
            self.pending += usable
            wanted = self.pairs_per_update * (self.every if self.mode == "grpo" else 1)
            if len(self.pending) < wanted:
                return self._record(None) if usable else None
            batch, self.pending = self.pending, []
        elif self.mode == "grpo":
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
        lessons = [self.lesson(o) for o in batch]
        return self.learner.update(lessons, self.mode, self.seed * 100_003 + round, _verdict_word)

    # -- versions ---------------------------------------------------------------
    def _record(self, loss: float | None, pairs: int = 0) -> dict[str, Any]:
        record: dict[str, Any] = {
            "adapter_version": self.version,
            "mode": self.mode,
            "loss": loss,
            "pairs": pairs,
            "adapter_dir": str(self.learner.folder(self.version)) if self.version else None,
            "adapter_origin": self.learner.origin,
        }
        if self.mode == "grpo" or self.pairs_per_update is not None:
            record["pending"] = [o.to_dict() for o in self.pending]
        return record

    def restore(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Reload the adapter (and optimizer, pending pairs) named by the last stored record."""
        if not records:
            return
        last = records[-1]
        self.pending = [Outcome.from_dict(p) for p in last.get("pending") or []]
        version = int(last.get("adapter_version") or 0)
        if version:
            self.learner.load(version, Path(str(last["adapter_dir"])))


def _verdict_word(text: str) -> str | None:
    """The improve / tie / lose word of a sampled critique (None when it does not parse)."""
    verdict = parse_verdict(text)
    return None if verdict is None else verdict.improvement


def run_adapters(config: Mapping[str, Any], learned: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The adapters a run screened with, for ``show`` and the report: configured ones, a reward-model critic's
    head (``screen.reward.recorded_critic``) and the test-time chain.

    ``config``: the run's stored config; ``learned``: its ``screener_learn`` payloads in order. A configured
    model adapter gives ``{"role", "folder", "tag"}`` (``tag``: ``<folder>@<weights hash>`` read from the folder
    now, None when it is gone); test-time learning gives ``{"role": "critic-ttl", "origin", "version"}``: the
    recorded starting adapter and the last version it stored.
    """
    out: list[dict[str, Any]] = []
    models = ((config.get("roles") or {}).get("models") or {}) if isinstance(config, Mapping) else {}
    for role, spec in sorted(models.items()):
        adapter = spec.get("adapter") if isinstance(spec, Mapping) else None
        for folder in [adapter] if isinstance(adapter, str) else list(adapter or []):
            try:
                tag: str | None = adapter_tag(folder)
            except ConfigError:
                tag = None
            out.append({"role": role, "folder": str(folder), "tag": tag})
    out.extend(recorded_critic(config))
    ttl = [r for r in (_adapter_record(r) for r in learned) if r is not None]
    if ttl:
        origin = next((r.get("adapter_origin") for r in ttl if "adapter_origin" in r), None)
        out.append({"role": "critic-ttl", "origin": origin, "version": int(ttl[-1].get("adapter_version") or 0)})
    return out


def _adapter_record(record: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The test-time critic's part of a ``screener_learn`` record: the record itself, or its ``inner`` one when a
    wrapper (``adaptive``) forwarded it; None for a screener that keeps no adapter (the surrogate, ``adaptive``)."""
    if "adapter_version" in record:
        return record
    inner = record.get("inner")
    return _adapter_record(inner) if isinstance(inner, Mapping) else None


__all__ = [
    "LEARNER_OPTIONS",
    "TestTimeCritic",
    "TestTimeCriticOptions",
    "group_advantages",
    "privileged_note",
    "run_adapters",
]
