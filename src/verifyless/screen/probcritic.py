"""Label-probability critic: rank and route from the verdict distribution instead of k sampled votes.

The probability of each verdict word right after ``[IMPROVEMENT]`` is read by
a label probe of the verdict words (``screen.verdicts.verdict_score`` over the
model layer's generic ``label_score``, ``verifyless.model.scores``): one forward
pass for a local critic (``provider: local``), or, for an OpenAI-compatible
server (``provider: openai``: vLLM, SGLang), one request that prefills the
assistant turn, continues it for one token and returns ``top_logprobs``. With ``reasoning_samples = 0`` the tag follows
the prompt directly (no critique text: cheapest, but the critic's reasoning is
skipped); with ``r > 0`` the critic first writes ``r`` critiques, each is cut
before its verdict, and the distributions read after each reasoning are
averaged.

* ``votes`` = the averaged distribution ``{"improve": p, "tie": p, "lose": p}`` (sums to one);
* ``uncertainty`` u = 1 - max(votes), routed with the same threshold T as the vote critic;
* ``rank_value`` = 2 P(improve) + P(tie), the expected three-level rank (Lose 0, Tie 1, Improve 2);
* ``detail["label_probs"]`` carries the distribution for tie-breaking by other screeners.

Probes go through the response cache and the call ledger like sampled
critiques (a replay reads them back). Limits: the HTTP probe needs a server
that honours ``continue_final_message`` and ``logprobs`` (OpenAI's hosted API
does not continue assistant turns); over HTTP only the first token of each
verdict word is read from the top 20 candidates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.model.scores import find_label_scorer
from verifyless.node import Candidate, Evidence, Screening
from verifyless.screen.base import ScreenContext, choose_top
from verifyless.screen.critic import TEMPERATURE, CriticOptions, PointwiseCritic, parse_verdict
from verifyless.screen.options import LocalCriticOptions
from verifyless.screen.ranking import order_by_value, route
from verifyless.screen.verdicts import VERDICT_TAG, VERDICTS, verdict_score


def find_scorer(model: Any) -> Any:
    """The outermost model whose chain can answer label probes (so probes are cached and recorded)."""
    found = find_label_scorer(model)
    if found is None:
        raise ConfigError(
            "the label-probability critic needs a critic model that can read verdict probabilities: "
            "provider: local, or provider: openai on a server with logprobs and continue_final_message "
            "(vLLM, SGLang); use screener 'critic' otherwise"
        )
    return found


def reasoning_prefix(critique: str) -> str:
    """The critique up to (not including) its last ``[IMPROVEMENT]`` tag; the whole text if it has none."""
    cut = critique.rfind(VERDICT_TAG)
    return critique[:cut] if cut >= 0 else critique


def evidence_from_probs(
    candidate_id: str, probs: dict[str, float], critiques: Sequence[str], threshold: float, tokens: int = 0
) -> Evidence:
    votes = {v: float(probs.get(v, 0.0)) for v in VERDICTS}
    uncertainty = 1.0 - max(votes.values())
    verdicts = [parse_verdict(c) for c in critiques]
    valid = [v for v in verdicts if v is not None]
    return Evidence(
        candidate_id=candidate_id,
        rank_value=2.0 * votes["improve"] + votes["tie"],
        labels=tuple(v.label for v in valid),
        votes=votes,
        uncertainty=uncertainty,
        n_valid=len(valid),
        n_invalid=len(verdicts) - len(valid),
        detail={
            "label_probs": votes,
            "scoring": "label-probs",
            "critiques": list(critiques),
            "uncertain": route(uncertainty, threshold),
            "route_threshold": threshold,
            "tokens": tokens,
        },
    )


class LabelProbOptions(LocalCriticOptions):
    """Options of screener ``critic-probs`` (``LabelProbCritic``): the one place their defaults are written."""

    reasoning_samples: int = Field(
        0, ge=0, description="critiques written before each verdict probe (0: probe right after the prompt)"
    )
    temperature: float = Field(
        TEMPERATURE, ge=0.0, le=2.0, description=f"sampling temperature of the critiques (paper: {TEMPERATURE})"
    )
    max_tokens: int | None = Field(None, ge=1, description="critique length cap (None: the model's)")
    prompt: str = Field("critic", description="prompt template name under roles/prompts/ (the critic's)")

    def critic_options(self) -> CriticOptions:
        """The pointwise critic these options drive: one sample per reasoning (at least one), same prompt."""
        return CriticOptions(
            k=max(1, self.reasoning_samples),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            prompt=self.prompt,
            n_verify=self.n_verify,
            name=self.name or "critic-probs",
            min_parse_rate=self.min_parse_rate,
            max_unparsed_screenings=self.max_unparsed_screenings,
        )


class LabelProbCritic(PointwiseCritic):
    """The pointwise critic's prompt, scored by verdict probabilities (see the module docstring).

    Built from its options whole (``LabelProbOptions``); ``options`` holds the pointwise critic they drive
    (``LabelProbOptions.critic_options``) and ``probs_options`` the options as given."""

    def __init__(self, model: Any, options: LabelProbOptions | None = None, *, route_threshold: float = 0.25) -> None:
        self.probs_options = options or LabelProbOptions()
        super().__init__(model, self.probs_options.critic_options(), route_threshold=route_threshold)
        self.scorer = find_scorer(model)

    @property
    def reasoning_samples(self) -> int:
        return self.probs_options.reasoning_samples

    async def evidence(self, ctx: ScreenContext, candidate: Candidate) -> Evidence:
        messages = self.messages(ctx, candidate)
        critiques, tokens = await self.sample(ctx, candidate) if self.reasoning_samples else ([], 0)
        prefixes = [reasoning_prefix(c) for c in critiques] or [""]
        scores = [await verdict_score(self.scorer, messages, prefix) for prefix in prefixes]
        tokens += sum(s.usage.prompt_tokens + s.usage.completion_tokens for s in scores)
        mean = {v: sum(s.probs[v] for s in scores) / len(scores) for v in VERDICTS}
        return evidence_from_probs(candidate.id, mean, critiques, self.route_threshold, tokens)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        found = await asyncio.gather(*(self.evidence(ctx, c) for c in candidates))
        evidence = {e.candidate_id: e for e in found}
        ids = [c.id for c in candidates]
        ranking = order_by_value({cid: e.rank_value for cid, e in evidence.items()}, ids, ctx.rng)
        return choose_top(self.name, ranking, evidence, self.options.n_verify, ctx, started)


__all__ = ["LabelProbCritic", "LabelProbOptions", "evidence_from_probs", "find_scorer", "reasoning_prefix"]
