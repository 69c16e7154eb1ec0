"""OpenAIModel against the loopback test server: tools, n, concurrency, cost, cache replay, key hygiene, config."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.model import (
    CachedModel,
    CallRecord,
    Choice,
    Message,
    ModelConfig,
    ModelRequest,
    OpenAIModel,
    RecordedModel,
    ResponseCache,
    ScriptedModel,
    Tool,
    ToolCall,
    build_model,
    make_config,
    parse_spec,
)
from verifyless.model.testserver import TestServer

KEY = "sk-verifyless-SECRET-4242424242"
USER = (Message("system", "You review ideas."), Message("user", "Compare A and B."))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VERIFYLESS_API_KEY", "OPENAI_API_KEY", "VERIFYLESS_BASE_URL", "VERIFYLESS_MODEL"):
        monkeypatch.delenv(name, raising=False)


def cfg(srv: TestServer, **fields) -> ModelConfig:
    base = dict(model="m", base_url=srv.base_url, backoff_base_s=0.005, timeout_s=5.0)
    base.update(fields)
    return ModelConfig(**base)


def test_plain_call_sends_settings_and_parses_reply() -> None:
    with TestServer(ScriptedModel(replies=["first answer"])) as srv:
        model = OpenAIModel(cfg(srv, temperature=0.7, max_tokens=64, extra_body={"top_k": 20}))
        reply = asyncio.run(model.generate(ModelRequest(messages=USER, top_p=0.9, stop=("</end>",))))
        body = srv.requests[0]
    assert reply.text == "first answer" and reply.model == "m" and not reply.cached
    assert body["temperature"] == 0.7 and body["max_tokens"] == 64 and body["top_p"] == 0.9
    assert body["top_k"] == 20 and body["stop"] == ["</end>"] and body["n"] == 1
    assert "seed" not in body  # unset settings are not sent
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_n_choices_in_one_call_with_usage_and_cost() -> None:
    script = ScriptedModel(replies=["a" * 40, "b" * 80, "c" * 4])
    prices = {"m": {"prompt_per_mtok": 1.0, "completion_per_mtok": 10.0}}
    with TestServer(script) as srv:
        reply = asyncio.run(OpenAIModel(cfg(srv, prices=prices)).generate(ModelRequest(messages=USER, n=3)))
        assert len(srv.requests) == 1
    assert [c.text[0] for c in reply.choices] == ["a", "b", "c"]
    assert reply.usage.completion_tokens == 10 + 20 + 1
    assert reply.usage.prompt_tokens > 0
    expected = (reply.usage.prompt_tokens * 1.0 + reply.usage.completion_tokens * 10.0) / 1e6
    assert reply.usage.cost == pytest.approx(expected)


def test_tool_calls_round_trip_through_http() -> None:
    python = Tool(
        "python",
        "Run Python code in the pilot sandbox.",
        {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    )
    script = ScriptedModel(
        replies=[
            {"tool_calls": [{"name": "python", "arguments": {"code": "print(2 + 2)"}}]},
            "The pilot printed 4.",
        ]
    )
    with TestServer(script) as srv:
        model = OpenAIModel(cfg(srv))
        first = asyncio.run(model.generate(ModelRequest(messages=USER, tools=(python,))))
        call = first.choices[0].tool_calls[0]
        assert first.choices[0].finish_reason == "tool_calls"
        assert call.name == "python" and json.loads(call.arguments) == {"code": "print(2 + 2)"} and call.id
        follow_up = USER + (Message("assistant", "", tool_calls=(call,)), Message("tool", "4\n", tool_call_id=call.id))
        second = asyncio.run(model.generate(ModelRequest(messages=follow_up, tools=(python,))))
    assert second.text == "The pilot printed 4."
    seen = script.calls[1].request
    assert seen.tools[0].name == "python" and seen.tools[0].parameters["required"] == ["code"]
    assert seen.messages[2].tool_calls == (ToolCall(call.id, "python", call.arguments),)

    assert seen.messages[3].tool_call_id == call.id and seen.messages[3].content == "4\n"


def test_tool_calls_left_in_the_text_by_the_server_are_read_as_calls() -> None:
    """llama-cpp-python's server renders the tools into Qwen's template but returns the model's tagged call as
    text; the client reads it as the call the agent acts on, and leaves any other text as it was."""
    python = Tool("python", "Run Python code.", {"type": "object", "properties": {"code": {"type": "string"}}})
    tagged = 'I will check.\n<tool_call>\n{"name": "python", "arguments": {"code": "print(1)"}}\n</tool_call>'
    unknown = '<tool_call>\n{"name": "shell", "arguments": {"cmd": "ls"}}\n</tool_call>'
    script = ScriptedModel(replies=[tagged, unknown, tagged])
    with TestServer(script) as srv:
        model = OpenAIModel(cfg(srv))
        read, kept = (asyncio.run(model.generate(ModelRequest(messages=USER, tools=(python,)))) for _ in range(2))
        plain = asyncio.run(model.generate(ModelRequest(messages=USER)))  # no tools offered: text as it came
    (call,) = read.choices[0].tool_calls
    assert call.name == "python" and json.loads(call.arguments) == {"code": "print(1)"}
    assert read.choices[0].text == "I will check." and read.choices[0].finish_reason == "tool_calls"
    assert kept.choices[0].tool_calls == () and kept.choices[0].text == unknown
    assert plain.choices[0].tool_calls == () and plain.choices[0].text == tagged


def test_concurrency_limit_per_endpoint_is_respected() -> None:
    with TestServer(ScriptedModel(rules=[{"match": ".", "reply": "x"}]), latency_s=0.1) as srv:
        a = OpenAIModel(cfg(srv, concurrency=3))
        b = OpenAIModel(cfg(srv, concurrency=3))  # a second role on the same endpoint shares the limit

        async def burst() -> None:
            await asyncio.gather(*(m.generate(ModelRequest(messages=USER)) for m in [a, b] * 5))

        asyncio.run(burst())
        assert len(srv.requests) == 10
        assert srv.max_in_flight == 3


def test_cache_reuses_samples_and_replays_byte_for_byte(tmp_path: Path) -> None:
    texts = [f"sample {i}: h\u00e9llo \U0001f30d\r\n\t trailing  \u2028{'~' * i}" for i in range(16)]
    db = tmp_path / "run.db"
    request8 = ModelRequest(messages=USER, n=8, temperature=0.7, role="critic")
    request16 = ModelRequest(messages=USER, n=16, temperature=0.7, role="critic")
    with TestServer(ScriptedModel(replies=texts)) as srv:
        cache = ResponseCache(db)
        model = CachedModel(OpenAIModel(cfg(srv, seed=5)), cache)
        first = asyncio.run(model.generate(request8))
        more = asyncio.run(model.generate(request16))
        again = asyncio.run(model.generate(request16))
        bodies = list(srv.requests)
        cache.close()
    assert [c.text for c in first.choices] == texts[:8]
    assert [c.text for c in more.choices] == texts
    assert [b["n"] for b in bodies] == [8, 8]  # the second call drew only samples 8..15
    assert bodies[1]["seed"] == 5 + 8
    assert not more.cached and again.cached and again.usage.completion_tokens == 0
    # Server gone: replay answers from the cache alone, identical bytes.
    replay = CachedModel(
        OpenAIModel(ModelConfig(model="m", base_url=srv.base_url, seed=5)), ResponseCache(db), mode="replay"
    )
    replayed = asyncio.run(replay.generate(request16))
    assert replayed.cached
    assert [c.text.encode("utf-8") for c in replayed.choices] == [t.encode("utf-8") for t in texts]
    with pytest.raises(ModelUnavailable, match="not in the response cache.*replay needs"):
        asyncio.run(replay.generate(ModelRequest(messages=USER, n=17, temperature=0.7)))
    with pytest.raises(ModelUnavailable, match="not in the response cache"):
        asyncio.run(replay.generate(ModelRequest(messages=USER, n=1, temperature=0.2)))


def test_key_never_leaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERIFYLESS_API_KEY", KEY)
    records: list[CallRecord] = []
    db = tmp_path / "store.db"
    with TestServer(ScriptedModel(rules=[{"match": ".", "reply": "fine"}]), api_key=KEY) as srv:
        cache = ResponseCache(db, run_id="run-1")
        model = build_model(cfg(srv), cache=cache, recorder=records.append)
        asyncio.run(model.generate(ModelRequest(messages=USER, n=2)))
        asyncio.run(model.generate(ModelRequest(messages=USER, n=2)))
        # The key was really sent (the server checks it) ...
        assert len(srv.requests) == 1
        monkeypatch.setenv("VERIFYLESS_API_KEY", "sk-other-key-000000000")
        wrong = build_model(cfg(srv), recorder=records.append)
        with pytest.raises(ModelUnavailable) as info:
            asyncio.run(wrong.generate(ModelRequest(messages=USER)))
        cache.close()
    # ... and appears nowhere we keep or show things.
    shown = [repr(model), str(model), repr(wrong), repr(records), str(info.value), repr(cfg(srv))]
    shown.append(json.dumps(cfg(srv).model_dump()))
    for text in shown:
        assert KEY not in text and "sk-other-key-000000000" not in text
    files = [p for p in tmp_path.iterdir() if p.name.startswith("store.db")]
    assert files
    for path in files:
        assert KEY.encode() not in path.read_bytes()
    assert [r.cached for r in records] == [False, True, False]
    assert records[2].error and "check the env var VERIFYLESS_API_KEY" in records[2].error


def test_openai_api_key_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with TestServer(ScriptedModel(replies=["ok"]), api_key=KEY) as srv:
        model = OpenAIModel(cfg(srv))
        assert model.key_env == "OPENAI_API_KEY"
        assert asyncio.run(model.generate(ModelRequest(messages=USER))).text == "ok"


def test_recorded_model_records_each_call() -> None:
    records: list[CallRecord] = []
    model = RecordedModel(ScriptedModel(replies=["one", "two"]), records.append)
    asyncio.run(model.generate(ModelRequest(messages=USER, role="proposer", n=2)))
    with pytest.raises(ModelUnavailable):
        asyncio.run(model.generate(ModelRequest(messages=USER, role="critic")))
    ok, failed = records
    assert (ok.role, ok.n, ok.error, ok.endpoint) == ("proposer", 2, None, "scripted:<inline script>")
    assert ok.usage.completion_tokens == 2 and ok.latency_s >= 0 and len(ok.prompt_hash) == 64
    assert failed.role == "critic" and "ran out of replies" in (failed.error or "")
    with pytest.raises(AttributeError):
        ok.role = "x"  # type: ignore[misc]


def test_specs_and_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="VERIFYLESS_BASE_URL and VERIFYLESS_MODEL"):
        parse_spec("env")
    monkeypatch.setenv("VERIFYLESS_BASE_URL", "http://localhost:8000/v1")
    monkeypatch.setenv("VERIFYLESS_MODEL", "Qwen/Qwen3-8B")
    env = parse_spec("env")
    assert (env.base_url, env.model, env.provider) == ("http://localhost:8000/v1", "Qwen/Qwen3-8B", "openai")
    named = parse_spec("openai:gpt-4o-mini")
    assert named.model == "gpt-4o-mini" and named.base_url == "http://localhost:8000/v1"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"mode": "sequence", "replies": ["hi"]}))
    assert asyncio.run(build_model(f"scripted:{script}").generate(ModelRequest(messages=USER))).text == "hi"
    with pytest.raises(ConfigError, match="scripted:<path.yaml>', 'openai:<model name>' or 'env'"):
        parse_spec("anthropic")
    with pytest.raises(ConfigError, match="does not exist"):
        build_model(f"scripted:{tmp_path / 'missing.yaml'}")


def test_config_validation_names_the_fix() -> None:
    with pytest.raises(ConfigError, match="api_key_env.*NAME of an env var"):
        make_config(model="m", api_key_env="sk-abcdef123456")
    with pytest.raises(ConfigError, match="base_url.*http://"):
        make_config(model="m", base_url="localhost:8000")
    with pytest.raises(ConfigError, match="needs model"):
        make_config(provider="openai")
    with pytest.raises(ConfigError, match="concurrency"):
        make_config(model="m", concurrency=0)
    bare = make_config(model="m", prices={"prompt_per_mtok": 2.0, "completion_per_mtok": 8.0})
    assert bare.price_for("m-2025").completion_per_mtok == 8.0
    assert make_config(model="m").price_for("m").prompt_per_mtok == 0.0
    defaults = make_config(model="m")
    assert (defaults.concurrency, defaults.timeout_s, defaults.max_retries, defaults.retry_budget_s) == (8, 120, 6, 300)


def test_choice_passthrough_type() -> None:
    # A server function may return a Choice with a non-default finish reason.
    with TestServer(lambda request: Choice("cut", finish_reason="length")) as srv:
        reply = asyncio.run(OpenAIModel(cfg(srv)).generate(ModelRequest(messages=USER)))
    assert reply.choices[0] == Choice("cut", finish_reason="length")
