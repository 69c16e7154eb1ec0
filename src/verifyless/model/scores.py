"""Verdict probabilities read from a model (the label-probability critic's one call), provider-neutral parts.

A *verdict probe* asks a model for the distribution of the verdict word right
after ``prefix + "[IMPROVEMENT]"`` in the assistant turn of a critic prompt.
Providers that can answer implement ``verdict_score(messages, prefix, *, role)
-> VerdictScore``: ``LocalModel`` (one forward pass) and ``OpenAIModel`` (an
assistant prefill continued for one token with ``logprobs``; see
``openai_compat``). ``CachedModel`` and ``RecordedModel`` pass probes through
the response cache and the call ledger like any other call.

The probe is identified by the model's request identity for the plain critic
prompt plus ``{"verdict_probe": {prefix, tag, labels}}``; its prompt hash is
the hash of the prompt *with* the prefilled assistant turn, so a probe never
shares a hash (or cache rows) with the critic's sampled critiques.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verifyless.model.base import Message, ModelRequest, Usage

VERDICT_TAG = "[IMPROVEMENT]"
VERDICTS: tuple[str, ...] = ("improve", "tie", "lose")


@dataclass(frozen=True)
class VerdictScore:
    """A verdict distribution (sums to one over ``labels``) and what reading it cost."""

    probs: dict[str, float]
    usage: Usage = Usage()
    model: str = ""
    cached: bool = False


def prefill_text(prefix: str, tag: str = VERDICT_TAG) -> str:
    """The assistant text the probe continues: the reasoning (if any), a newline, then the tag."""
    return prefix.rstrip() + ("\n" if prefix.strip() else "") + tag


def probe_request(messages: Sequence[Message], prefix: str, role: str = "critic") -> ModelRequest:
    """The probe as a request: the critic prompt plus the prefilled assistant turn (greedy, one token)."""
    turn = Message("assistant", prefill_text(prefix))
    return ModelRequest(messages=(*messages, turn), role=role, temperature=0.0, max_tokens=1)


def probe_fields(prefix: str, tag: str = VERDICT_TAG, labels: Sequence[str] = VERDICTS) -> dict[str, Any]:
    return {"verdict_probe": {"prefix": prefix, "tag": tag, "labels": list(labels)}}


def probs_from_top_logprobs(
    top: Sequence[Mapping[str, Any]], labels: Sequence[str] = VERDICTS
) -> dict[str, float] | None:
    """Verdict distribution from one position's ``top_logprobs`` (OpenAI format: ``{token, logprob}``).

    A token counts for a label when its stripped, lower-cased text is a non-empty prefix of that label,
    or starts with the whole label followed by a non-letter (``" improve"``, ``" impro"``,
    ``"improve ---"`` all count for *improve*; tokenizers split and merge words differently).
    The labels must start differently so each token names one label. Returns None when no listed
    token names any label (the model put all its top mass elsewhere).
    """
    mass = dict.fromkeys(labels, 0.0)
    for entry in top:
        word = str(entry.get("token", "")).strip().lower()
        hits = [label for label in labels if word and _names(word, label)]
        if len(hits) == 1:
            mass[hits[0]] += math.exp(float(entry.get("logprob", -math.inf)))
    total = sum(mass.values())
    if total <= 0:
        return None
    return {label: p / total for label, p in mass.items()}


def _names(word: str, label: str) -> bool:
    return label.startswith(word) or (word.startswith(label) and not word[len(label) : len(label) + 1].isalpha())


def uniform(labels: Sequence[str] = VERDICTS) -> dict[str, float]:
    return {label: 1.0 / len(labels) for label in labels}


def find_verdict_scorer(model: Any) -> Any:
    """``model`` itself when it or a model it wraps (``.inner``) reads verdict probabilities natively, else None.

    Wrappers (``CachedModel``, ``RecordedModel``) set ``verdict_probe_via_inner`` and forward probes, so
    the outermost one is returned: probes then go through the cache and the ledger.
    """
    seen = model
    for _ in range(16):
        if seen is None:
            return None
        if callable(getattr(seen, "verdict_score", None)) and not getattr(seen, "verdict_probe_via_inner", False):
            return model
        seen = getattr(seen, "inner", None)
    return None


__all__ = [
    "VERDICTS",
    "VERDICT_TAG",
    "VerdictScore",
    "find_verdict_scorer",
    "prefill_text",
    "probe_fields",
    "probe_request",
    "probs_from_top_logprobs",
    "uniform",
]
