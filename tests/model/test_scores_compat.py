"""The critic's label probes keep the cache identities and prompt hashes stored runs were written with.

The literal values below were recorded with the code before the model layer stopped knowing the verdict
words (main at 16b50e5, where ``model/scores.py`` held ``VERDICT_TAG`` / ``VERDICTS``): the identity
dict, its cache key (``sample_key(identity, 0)``) and the prompt hash of three critic probes (after the
bare prompt, after a reasoning prefix, and the tier probe of the five-way composition) for a scripted
model, an OpenAI-compatible model and the tiny local LM. A change to any of them would make stored
response caches miss on replay.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from verifyless.model import CachedModel, CallRecord, Message, ResponseCache, build_model, make_config
from verifyless.model.cache import RecordedModel, probe_identity, sample_key
from verifyless.model.scores import LabelScore, probe_request
from verifyless.model.scripted import ScriptedModel
from verifyless.model.wire import prompt_hash
from verifyless.screen.verdicts import TIER_PREFIX, TIER_TAG, TIERS, VERDICT_TAG, VERDICTS, verdict_score

USER = (Message("system", "You review ideas."), Message("user", "Compare A and B."))
REASONING = "Criterion 1: the child adds dropout.\n\n"

# name: (prefix, tag, labels) as the critics pass them (from screen.verdicts)
PROBES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "plain": ("", VERDICT_TAG, VERDICTS),
    "reasoning": (REASONING, VERDICT_TAG, VERDICTS),
    "tier": (TIER_PREFIX, TIER_TAG, TIERS),
}
# name: (prefilled assistant turn, {"verdict_probe": ...} fields, prompt hash), as recorded
RECORDED: dict[str, tuple[str, dict[str, Any], str]] = {
    "plain": (
        "[IMPROVEMENT]",
        {"labels": ["improve", "tie", "lose"], "prefix": "", "tag": "[IMPROVEMENT]"},
        "1acbbdea7da1e41083034776f6ea63d979182e3d28ffc316730fd3f8baa6ae0f",
    ),
    "reasoning": (
        "Criterion 1: the child adds dropout.\n[IMPROVEMENT]",
        {
            "labels": ["improve", "tie", "lose"],
            "prefix": "Criterion 1: the child adds dropout.\n\n",
            "tag": "[IMPROVEMENT]",
        },
        "ffc41467e115f37567dd55ab872fb0c35347b19b18153b606e4e3a77ee1f25b7",
    ),
    "tier": (
        "[IMPROVEMENT] improve ---\n[WINTIER]",
        {"labels": ["big", "medium", "small"], "prefix": "[IMPROVEMENT] improve ---", "tag": "[WINTIER]"},
        "5dc7524f8c5c3ce5919424ecc8a542dee78dc62b2584cc935c39a9899f07873a",
    ),
}
REQUEST_FIELDS = {
    "extra_body": {},
    "max_tokens": 1,
    "seed": None,
    "stop": [],
    "temperature": 0.0,
    "tools": [],
    "top_p": None,
}
BASE: dict[str, dict[str, Any]] = {
    "scripted": {"endpoint": "scripted:<inline script>", "model": "scripted", **REQUEST_FIELDS},
    "openai": {"endpoint": "http://127.0.0.1:9/v1", "model": "tiny", **REQUEST_FIELDS},
    "local": {"adapters": [], "dtype": "auto", **REQUEST_FIELDS},  # endpoint and model name the tiny LM's path
}
SAMPLE_KEYS = {
    ("scripted", "plain"): "19a9c66ccf28ac3a0feff84c16fa61c395722f85b574a835b582c04890d206c8",
    ("scripted", "reasoning"): "52c9c834caa82019938906d26eb5fb035dc73983f8493338c2001d2d76585acf",
    ("scripted", "tier"): "3e61e4949ab3b0ba28baeaee0f3758ef4daf6c7e6a224f24228b8f9629fe8047",
    ("openai", "plain"): "7aff6d57a4af65a55c38d4064f80055a3cac95a6c358a2b00636923afc55f726",
    ("openai", "reasoning"): "c97ef516bb9a83031afd70b73afdca084b45b1c067c78d815c7625865a4557fe",
    ("openai", "tier"): "173dca5b52e08dee30361ba71eb21e440235cfd402a4d82390c60feeae5faeb8",
}


def expected_identity(provider: str, probe: str) -> dict[str, Any]:
    turn, fields, _ = RECORDED[probe]
    messages = [{"content": m.content, "role": m.role} for m in USER] + [{"content": turn, "role": "assistant"}]
    return {**BASE[provider], "messages": messages, "verdict_probe": fields}


def identity_and_hash(model: Any, probe: str) -> tuple[dict[str, Any], str]:
    prefix, tag, labels = PROBES[probe]
    request = probe_request(USER, prefix, tag, "critic")
    return probe_identity(model, request, prefix, tag, labels), prompt_hash(request)


def openai_model() -> Any:
    return build_model(make_config(provider="openai", model="tiny", base_url="http://127.0.0.1:9/v1", max_retries=0))


@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize("provider", ["scripted", "openai"])
def test_a_critic_probe_has_the_identity_key_and_prompt_hash_it_was_stored_under(provider: str, probe: str) -> None:
    model = ScriptedModel(replies=[]) if provider == "scripted" else openai_model()
    identity, p_hash = identity_and_hash(model, probe)
    assert identity == expected_identity(provider, probe)
    assert sample_key(identity, 0) == SAMPLE_KEYS[(provider, probe)]
    assert p_hash == RECORDED[probe][2]


class FixedProber:
    """A model that answers label probes with fixed probabilities, named like the scripted model."""

    name = "scripted"
    endpoint = "scripted:<inline script>"

    def __init__(self) -> None:
        self.asked: list[tuple[str, str, tuple[str, ...], str]] = []

    async def generate(self, request: Any) -> Any:
        raise AssertionError("a probe is not a generation")

    async def label_score(self, messages: Any, prefix: str, *, tag: str, labels: Any, role: str) -> LabelScore:
        self.asked.append((prefix, tag, tuple(labels), role))
        return LabelScore({"improve": 0.5, "tie": 0.3, "lose": 0.2}, model="scripted")


@pytest.mark.parametrize("probe", ["plain", "reasoning"])
def test_the_label_probability_critic_stores_and_records_its_probe_under_the_recorded_key(
    probe: str, tmp_path: Path
) -> None:
    inner = FixedProber()
    cache = ResponseCache(tmp_path / "c.db")
    records: list[CallRecord] = []
    model = CachedModel(RecordedModel(inner, records.append), cache)  # type: ignore[arg-type]
    prefix = PROBES[probe][0]
    score = asyncio.run(verdict_score(model, USER, prefix))
    assert inner.asked == [(prefix, "[IMPROVEMENT]", ("improve", "tie", "lose"), "critic")]
    stored = cache.get_many([SAMPLE_KEYS[("scripted", probe)]])
    assert list(stored) == [SAMPLE_KEYS[("scripted", probe)]] and not score.cached
    assert [r.prompt_hash for r in records] == [RECORDED[probe][2]]
    again = asyncio.run(verdict_score(CachedModel(inner, cache, mode="replay"), USER, prefix))  # type: ignore[arg-type]
    assert again.cached and again.probs == score.probs and len(inner.asked) == 1


def test_the_local_models_probes_keep_their_identity_and_cache_key(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    pytest.importorskip("transformers")
    from verifyless.train.tiny import cached_tiny_lm

    tiny = cached_tiny_lm(request.config.cache.mkdir("verifyless-tiny-lm"))
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
    for probe in PROBES:
        identity, p_hash = identity_and_hash(model, probe)
        assert identity == {**expected_identity("local", probe), "endpoint": model.endpoint, "model": model.name}
        assert p_hash == RECORDED[probe][2]
    cache = ResponseCache(tmp_path / "c.db")
    asyncio.run(verdict_score(CachedModel(model, cache), USER, REASONING))
    identity, _ = identity_and_hash(model, "reasoning")
    assert list(cache.get_many([sample_key(identity, 0)])) == [sample_key(identity, 0)]
