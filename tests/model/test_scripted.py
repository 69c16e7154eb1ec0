"""ScriptedModel modes, loud exhaustion, script files, and replay fixtures from recorded calls or the cache."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.model import (
    CachedModel,
    Choice,
    Message,
    Model,
    ModelReply,
    ModelRequest,
    ResponseCache,
    Rule,
    ScriptedModel,
    build_model,
)


def ask(model: Model, user: str, *, system: str = "", role: str = "default", n: int = 1) -> ModelReply:
    messages = ((Message("system", system),) if system else ()) + (Message("user", user),)
    return asyncio.run(model.generate(ModelRequest(messages=messages, role=role, n=n)))


def test_sequence_mode_in_order_with_n_and_usage() -> None:
    model = ScriptedModel(replies=["one", "two", "three", "x" * 41])
    assert ask(model, "a").text == "one"
    pair = ask(model, "b", n=2)
    assert [c.text for c in pair.choices] == ["two", "three"]
    last = ask(model, "1234567890")
    assert last.usage.completion_tokens == 11 and last.usage.prompt_tokens == 3 and last.usage.cost == 0
    assert [len(c.request.messages) for c in model.calls] == [1, 1, 1]
    assert model.calls[1].reply == pair


def test_exhaustion_is_loud_and_says_where() -> None:
    model = ScriptedModel(replies=["only"], source="fixtures/critic.yaml")
    ask(model, "first")
    long_prompt = "Please judge this candidate carefully. " * 5
    with pytest.raises(ModelUnavailable) as info:
        ask(model, long_prompt, role="critic")
    message = str(info.value)
    assert "fixtures/critic.yaml" in message and "'critic'" in message
    assert long_prompt[:80] in message and long_prompt[:81] not in message
    assert model.calls[-1].reply is None and model.calls[-1].error == message


def test_n_beyond_remaining_replies_fails() -> None:
    with pytest.raises(ModelUnavailable, match="all 2 sequence replies used"):
        ask(ScriptedModel(replies=["a", "b"]), "q", n=3)


def test_rules_first_match_wins_lists_are_consumed_then_fall_through() -> None:
    model = ScriptedModel(
        rules=[
            Rule(replies=["idea A", "idea B"], match=r"propose", role="proposer"),
            {"system": "critic", "reply": "[IMPROVEMENT] tie --- same"},
            {"match": r"summar", "replies": ["s1", "s2"], "repeat": True},
            {"match": ".", "reply": "fallback"},
        ]
    )
    assert ask(model, "please propose", role="proposer").text == "idea A"
    assert ask(model, "please propose", role="implementer").text == "fallback"  # role must match
    assert ask(model, "please propose", role="proposer").text == "idea B"
    assert ask(model, "please propose", role="proposer").text == "fallback"  # list used up
    for _ in range(3):
        assert ask(model, "x", system="You are a critic").text.startswith("[IMPROVEMENT] tie")
    assert [ask(model, "summarise").text for _ in range(3)] == ["s1", "s2", "s1"]


def test_rules_without_a_match_fail_loudly() -> None:
    model = ScriptedModel(rules=[{"match": "^only this$", "replies": ["x"]}], source="rules.yaml")
    with pytest.raises(ModelUnavailable, match="rules.yaml.*no rule of 1 matches.*'something else'"):
        ask(model, "something else")


def test_function_mode_sync_async_and_choices() -> None:
    seen: list[int] = []

    def answer(request: ModelRequest) -> str:
        seen.append(request.sample_offset)
        return f"sample {request.sample_offset} for {request.role}"

    reply = ask(ScriptedModel(function=answer), "q", role="critic", n=3)
    assert [c.text for c in reply.choices] == [f"sample {i} for critic" for i in range(3)]
    assert seen == [0, 1, 2]

    async def slow(request: ModelRequest) -> Choice:
        await asyncio.sleep(0)
        return Choice("async", finish_reason="length")

    assert ask(ScriptedModel(function=slow), "q").choices[0] == Choice("async", finish_reason="length")
    with pytest.raises(ModelUnavailable, match="returned None"):
        ask(ScriptedModel(function=lambda r: None), "q")


def test_tool_call_replies() -> None:
    model = ScriptedModel(
        replies=[
            {
                "text": "running",
                "tool_calls": [
                    {"name": "bash", "arguments": {"cmd": "ls"}},
                    {"name": "submit_solution", "arguments": '{"findings": "x"}'},
                ],
            },
        ]
    )
    choice = ask(model, "go").choices[0]
    assert choice.text == "running" and choice.finish_reason == "tool_calls"
    assert [t.name for t in choice.tool_calls] == ["bash", "submit_solution"]
    assert json.loads(choice.tool_calls[0].arguments) == {"cmd": "ls"}
    assert choice.tool_calls[1].arguments == '{"findings": "x"}'
    assert len({t.id for t in choice.tool_calls}) == 2


def test_script_files_yaml_json_and_errors(tmp_path: Path) -> None:
    yaml_file = tmp_path / "script.yaml"
    yaml_file.write_text(
        "mode: rules\nrules:\n  - match: critique\n    reply: verdict\n  - role: proposer\n    replies: [p1, p2]\n"
    )
    model = build_model(f"scripted:{yaml_file}")
    assert ask(model, "critique this").text == "verdict"
    assert ask(model, "anything", role="proposer").text == "p1"
    json_file = tmp_path / "seq.json"
    json_file.write_text(json.dumps(["a", {"text": "b"}]))
    assert [ask(build_model(f"scripted:{json_file}"), "q").text] == ["a"]
    bad = tmp_path / "bad.yaml"
    for text, fix in [
        ("mode: rules\nrules:\n  - match: x\n", "exactly one of 'reply'"),
        ("mode: poetry\n", "unknown mode 'poetry'"),
        ("mode: sequence\nreplies: [{txt: hi}]\n", "unknown keys"),
        ("replies: [unclosed\n", "not valid YAML: line 2, column 1"),
    ]:
        bad.write_text(text)
        with pytest.raises(ConfigError, match=fix):
            ask(build_model(f"scripted:{bad}"), "q")
    with pytest.raises(ConfigError, match="exactly one of"):
        ScriptedModel()


def test_from_pairs_answers_recorded_requests_in_any_order() -> None:
    original = ScriptedModel(function=lambda r: f"answer to {r.messages[-1].content} #{r.sample_offset}")
    replies = [ask(original, q, n=2) for q in ("alpha", "beta")]
    fixture = ScriptedModel.from_pairs((c.request, c.reply) for c in original.calls if c.reply)
    assert ask(fixture, "beta", n=2) == ModelReply(replies[1].choices, fixture.calls[0].reply.usage, "scripted")
    assert ask(fixture, "alpha").text == replies[0].text
    with pytest.raises(ModelUnavailable, match="no recorded sample 2"):
        ask(fixture, "alpha", n=3)
    with pytest.raises(ModelUnavailable, match="differs from the recorded run"):
        ask(fixture, "gamma")


def test_from_store_uses_the_response_cache_of_a_run(tmp_path: Path) -> None:
    db = tmp_path / "run.db"
    texts = iter(f"reply {i} \u2713" for i in range(100))
    source = ScriptedModel(function=lambda r: next(texts))
    with ResponseCache(db, run_id="run-1") as cache:
        model = CachedModel(source, cache)
        first = ask(model, "propose an idea", role="proposer", n=3)
        second = ask(model, "critique it", role="critic")
    with ResponseCache(db, run_id="run-2") as cache:  # a later run reuses one entry and adds one
        model = CachedModel(source, cache)
        reused = ask(model, "critique it", role="critic")
        fresh = ask(model, "summarise", role="summarizer")
    assert reused.cached and reused.text == second.text
    fixture = ScriptedModel.from_store(db, "run-1")
    assert ask(fixture, "propose an idea", n=3).choices == first.choices
    assert ask(fixture, "critique it").text == second.text
    with pytest.raises(ModelUnavailable):
        ask(fixture, "summarise")
    run2 = ScriptedModel.from_store(db, "run-2")
    assert ask(run2, "critique it").text == second.text and ask(run2, "summarise").text == fresh.text
    with pytest.raises(ConfigError, match="no cached LLM replies for run 'run-9'"):
        ScriptedModel.from_store(db, "run-9")
    with pytest.raises(ConfigError, match="does not exist"):
        ScriptedModel.from_store(tmp_path / "nope.db")


def test_cache_writes_one_entry_per_sample_and_first_write_wins(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.db") as cache:
        model = CachedModel(ScriptedModel(replies=[f"r{i}" for i in range(6)]), cache)
        assert [c.text for c in ask(model, "q", n=2).choices] == ["r0", "r1"]
        assert len(cache) == 2
        # Ask for samples 0..3: only 2..3 are drawn.
        assert [c.text for c in ask(model, "q", n=4).choices] == ["r0", "r1", "r2", "r3"]
        assert len(cache) == 4
        assert ask(model, "other").text == "r4"
        assert model.inner.calls[1].request.sample_offset == 2  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="'readwrite' or 'replay'"):
        CachedModel(ScriptedModel(replies=[]), ResponseCache(tmp_path / "c.db"), mode="write")  # type: ignore[arg-type]


def test_capabilities_are_found_through_any_stack_of_wrappers(tmp_path):
    from verifyless.model.base import WRAP_DEPTH, CacheIdentified, wrapped
    from verifyless.model.cache import CachedModel, ResponseCache, probe_identity, request_identity

    class Identified(ScriptedModel):
        def cache_identity(self, request: ModelRequest) -> dict:
            return {"endpoint": "resolved-defaults", "model": self.name}

    inner = Identified(["x"], name="m")
    outer = CachedModel(CachedModel(inner, ResponseCache(tmp_path / "a.db")), ResponseCache(tmp_path / "b.db"))
    assert list(wrapped(outer)) == [outer, outer.inner, inner]
    assert isinstance(inner, CacheIdentified) and not isinstance(outer, CacheIdentified)
    request = ModelRequest(messages=(Message("user", "hi"),))
    assert request_identity(inner, request)["endpoint"] == "resolved-defaults"
    # a probe's identity is the wrapped model's own, however deep it sits
    assert probe_identity(outer, request, "", "verdict", ("a", "b"))["endpoint"] == "resolved-defaults"
    assert probe_identity(ScriptedModel(["x"], name="m"), request, "", "verdict", ("a",))["model"] == "m"

    class Loop:  # a wrapper that (wrongly) wraps itself: the walk still ends
        def __init__(self) -> None:
            self.inner = self

    assert len(list(wrapped(Loop()))) == WRAP_DEPTH
