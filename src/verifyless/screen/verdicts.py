"""The critic's verdict words, and its label probabilities read through the model layer's label probe.

A critique ends with ``[IMPROVEMENT] improve | tie | lose`` and, for improve,
``[WINTIER] big | medium | small`` (``screen.critic`` parses the text). The
model layer offers a generic label probe (``verifyless.model.scores``: the
probability of each of ``labels`` right after ``prefix + tag``) and knows none
of these words; the critics pass them down from here:

* ``verdict_score(scorer, messages, prefix)``: one probe of the verdict words
  after ``prefix + VERDICT_TAG`` through a provider's ``label_score`` (cached
  and recorded when ``scorer`` is a cache or recorder wrapper); what the
  label-probability critic (``screen.probcritic``) reads.
* ``verdict_probs(prober, messages, prefix)``: the same distribution from an
  in-process ``probe_labels`` (``LocalModel``; no request, cache or ledger);
  what the pointwise critic's tie-break reads (``critic.label_scorer``).
* ``five_way_probs(prober, messages)``: the five labels (Lose, Tie, SmallWin,
  MediumWin, BigWin): P(lose), P(tie) from the verdict probe, P(improve) split
  by the tiers read at ``TIER_TAG`` after ``"[IMPROVEMENT] improve ---"``. Two
  probes; the five values sum to one.

The tags, labels and prefixes here are part of a probe's cache identity: changing
any of them changes the identity of every stored probe.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from verifyless.model.base import Message
from verifyless.model.scores import LabelScore

VERDICT_TAG = "[IMPROVEMENT]"
VERDICTS: tuple[str, ...] = ("improve", "tie", "lose")
TIER_TAG = "[WINTIER]"
TIERS: tuple[str, ...] = ("big", "medium", "small")
# The assistant text before the tier tag: an improve verdict (the tier only applies to improve).
TIER_PREFIX = f"{VERDICT_TAG} improve ---"
CRITIC_ROLE = "critic"


class LabelProber(Protocol):
    """An in-process label probe (``LocalModel.probe_labels``)."""

    async def __call__(
        self, messages: Sequence[Message], prefix: str, *, tag: str, labels: Sequence[str]
    ) -> dict[str, float]: ...


async def verdict_score(scorer: Any, messages: Sequence[Message], prefix: str = "") -> LabelScore:
    """P(improve|tie|lose) after ``prefix + VERDICT_TAG`` from ``scorer.label_score`` (role ``critic``)."""
    return await scorer.label_score(tuple(messages), prefix, tag=VERDICT_TAG, labels=VERDICTS, role=CRITIC_ROLE)


async def verdict_probs(prober: LabelProber, messages: Sequence[Message], prefix: str = "") -> dict[str, float]:
    """P(improve|tie|lose) after ``prefix + VERDICT_TAG`` from an in-process probe."""
    return await prober(messages, prefix, tag=VERDICT_TAG, labels=VERDICTS)


async def five_way_probs(prober: LabelProber, messages: Sequence[Message]) -> dict[str, float]:
    """The five labels' probabilities (see the module docstring); two in-process probes."""
    three = await verdict_probs(prober, messages)
    tiers = await prober(messages, TIER_PREFIX, tag=TIER_TAG, labels=TIERS)
    win = three["improve"]
    return {
        "Lose": three["lose"],
        "Tie": three["tie"],
        "SmallWin": win * tiers["small"],
        "MediumWin": win * tiers["medium"],
        "BigWin": win * tiers["big"],
    }


__all__ = [
    "CRITIC_ROLE",
    "TIERS",
    "TIER_PREFIX",
    "TIER_TAG",
    "VERDICTS",
    "VERDICT_TAG",
    "LabelProber",
    "five_way_probs",
    "verdict_probs",
    "verdict_score",
]
