"""Label probes: a caller's label probabilities read from a model, provider-neutral parts.

A *label probe* asks a model for the distribution of ``labels`` as the next
token(s) right after ``prefix + tag`` in the assistant turn of a prompt. The
caller names the tag and the labels; this layer knows none (for example the
label-probability critic probes its verdict words after its verdict tag; the
words live in ``verifyless.screen.verdicts``). Providers that can answer
implement ``label_score(messages, prefix, *, tag, labels, role) -> LabelScore``:
``LocalModel`` (one forward pass) and ``OpenAIModel`` (an assistant prefill
continued for one token with ``logprobs``; see ``openai_compat``).
``CachedModel`` and ``RecordedModel`` pass probes through the response cache and
the call ledger like any other call.

The probe is identified by the model's request identity for the prefilled
request plus ``{"verdict_probe": {prefix, tag, labels}}`` (the key keeps the name
it had when only verdicts were probed, so stored caches replay); its prompt hash
is the hash of the prompt *with* the prefilled assistant turn, so a probe never
shares a hash (or cache rows) with the same prompt's sampled replies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verifyless.model.base import Message, ModelRequest, Usage, wrapped


@dataclass(frozen=True)
class LabelScore:
    """A label distribution (sums to one over the probe's labels) and what reading it cost."""

    probs: dict[str, float]
    usage: Usage = Usage()
    model: str = ""
    cached: bool = False


def prefill_text(prefix: str, tag: str) -> str:
    """The assistant text the probe continues: the prefix (if any), a newline, then the tag."""
    return prefix.rstrip() + ("\n" if prefix.strip() else "") + tag


def probe_request(messages: Sequence[Message], prefix: str, tag: str, role: str) -> ModelRequest:
    """The probe as a request: the prompt plus the prefilled assistant turn (greedy, one token)."""
    turn = Message("assistant", prefill_text(prefix, tag))
    return ModelRequest(messages=(*messages, turn), role=role, temperature=0.0, max_tokens=1)


def probe_fields(prefix: str, tag: str, labels: Sequence[str]) -> dict[str, Any]:
    """What a probe adds to its request's identity (the key ``verdict_probe`` is kept for stored caches)."""
    return {"verdict_probe": {"prefix": prefix, "tag": tag, "labels": list(labels)}}


def probs_from_top_logprobs(top: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> dict[str, float] | None:
    """Label distribution from one position's ``top_logprobs`` (OpenAI format: ``{token, logprob}``).

    A token counts for a label when its stripped, lower-cased text is a non-empty prefix of that label,
    or starts with the whole label followed by a non-letter (for a label ``"alpha"``: ``" alpha"``,
    ``" alp"``, ``"alpha ---"`` all count; tokenizers split and merge words differently). The labels
    must be lower case and start differently so each token names one label. Returns None when no
    listed token names any label (the model put all its top mass elsewhere).
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


def uniform(labels: Sequence[str]) -> dict[str, float]:
    return {label: 1.0 / len(labels) for label in labels}


def find_label_scorer(model: Any) -> Any:
    """``model`` itself when it or a model it wraps (``.inner``) reads label probabilities natively, else None.

    Wrappers (``CachedModel``, ``RecordedModel``) set ``label_probe_via_inner`` and forward probes, so
    the outermost one is returned: probes then go through the cache and the ledger.
    """
    native = (
        callable(getattr(m, "label_score", None)) and not getattr(m, "label_probe_via_inner", False)
        for m in wrapped(model)
    )
    return model if any(native) else None


__all__ = [
    "LabelScore",
    "find_label_scorer",
    "prefill_text",
    "probe_fields",
    "probe_request",
    "probs_from_top_logprobs",
    "uniform",
]
