"""Every injected endpoint fault ends in the documented outcome (docs/design/models.md, retry table)."""

from __future__ import annotations

import asyncio
import random
import socket
import time
from email.utils import formatdate

import pytest

from verifyless.errors import ModelUnavailable
from verifyless.model import Message, ModelConfig, ModelRequest, OpenAIModel, ScriptedModel
from verifyless.model.openai_compat import MalformedReply, parse_completion, parse_retry_after
from verifyless.model.testserver import Fault, TestServer

REQ = ModelRequest(messages=(Message("system", "be brief"), Message("user", "say ok")), role="proposer")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VERIFYLESS_API_KEY", "OPENAI_API_KEY", "VERIFYLESS_BASE_URL", "VERIFYLESS_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    with TestServer(ScriptedModel(rules=[{"match": ".", "reply": "ok"}])) as srv:
        yield srv


def model_for(srv: TestServer, **overrides) -> OpenAIModel:
    fields = dict(model="m", base_url=srv.base_url, backoff_base_s=0.005, backoff_max_s=0.02, timeout_s=5.0)
    fields.update(overrides)
    return OpenAIModel(ModelConfig(**fields))


@pytest.mark.parametrize(
    "fault",
    [
        Fault.rate_limit(),
        Fault.server_error(500),
        Fault.server_error(502),
        Fault.server_error(503),
        Fault.truncated(),
        Fault.empty_choices(),
        Fault.garbage(),
    ],
    ids=lambda f: f"{f.kind}-{f.status}",
)
def test_retryable_fault_is_retried_then_succeeds(server: TestServer, fault: Fault) -> None:
    server.inject(fault, fault)
    reply = asyncio.run(model_for(server).generate(REQ))
    assert reply.text == "ok"
    assert len(server.requests) == 3  # two faulty answers, then the good one
    assert server.pending_faults == 0


@pytest.mark.parametrize(
    "fault", [Fault.server_error(500), Fault.garbage(), Fault.empty_choices()], ids=lambda f: f.kind
)
def test_retries_are_bounded_by_max_retries(server: TestServer, fault: Fault) -> None:
    server.inject(*[fault] * 5)
    with pytest.raises(ModelUnavailable) as info:
        asyncio.run(model_for(server, max_retries=2).generate(REQ))
    assert len(server.requests) == 3
    message = str(info.value)
    assert "after 3 attempts" in message and server.base_url in message and "max_retries" in message


def test_retry_after_seconds_is_honoured(server: TestServer) -> None:
    server.inject(Fault.rate_limit(0.3))
    model = model_for(server)
    start = time.monotonic()
    reply = asyncio.run(model.generate(REQ))
    elapsed = time.monotonic() - start
    assert reply.text == "ok"
    # Backoff alone is at most 0.02 s; the wait must come from Retry-After.
    assert elapsed >= 0.3


def test_retry_after_on_503_is_honoured(server: TestServer) -> None:
    server.inject(Fault.server_error(503, retry_after=0.25))
    model = model_for(server)
    start = time.monotonic()
    asyncio.run(model.generate(REQ))
    assert time.monotonic() - start >= 0.25


def test_retry_after_parsing() -> None:
    assert parse_retry_after({"retry-after": "0.2"}) == pytest.approx(0.2)
    assert parse_retry_after({"retry-after-ms": "150"}) == pytest.approx(0.15)
    now = 1_700_000_000.0
    assert parse_retry_after({"retry-after": formatdate(now + 7, usegmt=True)}, now=now) == pytest.approx(7, abs=1)
    assert parse_retry_after({"retry-after": formatdate(now - 50, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_retry_after_beyond_budget_fails_at_once(server: TestServer) -> None:
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    server.inject(Fault.rate_limit(30))
    cfg = ModelConfig(model="m", base_url=server.base_url, retry_budget_s=2.0, timeout_s=5.0)
    with pytest.raises(ModelUnavailable, match="retry_budget_s"):
        asyncio.run(OpenAIModel(cfg, sleep=fake_sleep).generate(REQ))
    assert waits == [], "no wait at all: the 30 s Retry-After is beyond the 2 s budget"
    assert len(server.requests) == 1


def test_backoff_is_exponential_with_full_jitter(server: TestServer) -> None:
    waits: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)

    server.inject(*[Fault.server_error(500)] * 4)
    cfg = ModelConfig(model="m", base_url=server.base_url, backoff_base_s=1.0, backoff_max_s=5.0)
    reply = asyncio.run(OpenAIModel(cfg, sleep=fake_sleep, rng=random.Random(3)).generate(REQ))
    assert reply.text == "ok"
    assert len(waits) == 4
    for k, wait in enumerate(waits):
        assert 0.0 <= wait <= min(5.0, 2.0**k)
    assert len(set(waits)) == 4  # jittered, not a fixed schedule


def test_timeout_is_retried_then_succeeds(server: TestServer) -> None:
    server.inject(Fault.delay(1.5))
    model = model_for(server, timeout_s=0.3)
    start = time.monotonic()
    reply = asyncio.run(model.generate(REQ))
    elapsed = time.monotonic() - start
    assert reply.text == "ok"
    assert elapsed >= 0.3 and len(server.requests) == 2  # gave up on the slow answer and asked again


def test_timeouts_exhaust_into_clear_error(server: TestServer) -> None:
    server.inject(Fault.delay(1.0), Fault.delay(1.0))
    with pytest.raises(ModelUnavailable, match=r"no reply within timeout_s=0\.2"):
        asyncio.run(model_for(server, timeout_s=0.2, max_retries=1).generate(REQ))


def test_unreachable_endpoint_names_the_url() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    cfg = ModelConfig(model="m", base_url=url, backoff_base_s=0.005, max_retries=2, timeout_s=2)
    with pytest.raises(ModelUnavailable) as info:
        asyncio.run(OpenAIModel(cfg).generate(REQ))
    assert f"cannot connect to {url}" in str(info.value)


def test_refused_connection_fails_fast_after_one_retry() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    cfg = ModelConfig(model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=8, timeout_s=2)
    with pytest.raises(ModelUnavailable, match="after 2 attempts") as info:
        asyncio.run(OpenAIModel(cfg, sleep=sleep).generate(REQ))
    assert len(waits) == 1, waits
    assert "refused" in str(info.value) or "cannot connect" in str(info.value)


def test_unknown_host_fails_fast_after_one_retry() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    cfg = ModelConfig(model="m", base_url="http://no-such-host.invalid/v1", max_retries=8, timeout_s=2)
    with pytest.raises(ModelUnavailable, match="after 2 attempts"):
        asyncio.run(OpenAIModel(cfg, sleep=sleep).generate(REQ))
    assert len(waits) == 1, waits


def test_bad_key_is_not_retried_and_names_the_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_LLM_KEY", "sk-wrong-0123456789")
    with TestServer(ScriptedModel(replies=["ok"]), api_key="sk-right-9876543210") as srv:
        model = OpenAIModel(ModelConfig(model="m", base_url=srv.base_url, api_key_env="MY_LLM_KEY"))
        with pytest.raises(ModelUnavailable) as info:
            asyncio.run(model.generate(REQ))
        assert len(srv.requests) == 1
    message = str(info.value)
    assert "HTTP 401" in message and "check the env var MY_LLM_KEY" in message
    assert "sk-wrong-0123456789" not in message  # the server echoed it; we scrubbed it


def test_missing_key_says_to_export_it() -> None:
    with TestServer(ScriptedModel(replies=["ok"]), api_key="sk-right-9876543210") as srv:
        with pytest.raises(ModelUnavailable, match="VERIFYLESS_API_KEY is not set; export it"):
            asyncio.run(model_for(srv).generate(REQ))


def test_injected_401_and_404_are_not_retried(server: TestServer) -> None:
    server.inject(Fault.unauthorized())
    with pytest.raises(ModelUnavailable, match="HTTP 401"):
        asyncio.run(model_for(server).generate(REQ))
    server.inject(Fault.not_found())
    with pytest.raises(ModelUnavailable, match="does not know model 'm'"):
        asyncio.run(model_for(server).generate(REQ))
    assert len(server.requests) == 2


def test_unknown_model_is_named() -> None:
    with TestServer(ScriptedModel(replies=["ok"]), models=["qwen3-8b"]) as srv:
        with pytest.raises(ModelUnavailable) as info:
            asyncio.run(model_for(srv, model="qwen3-80b").generate(REQ))
    assert "'qwen3-80b'" in str(info.value) and "/models" in str(info.value)


def test_server_ignoring_n_is_topped_up_with_more_calls() -> None:
    with TestServer(ScriptedModel(replies=[f"r{i}" for i in range(5)]), ignore_n=True) as srv:
        reply = asyncio.run(model_for(srv, seed=100).generate(ModelRequest(messages=REQ.messages, n=5)))
        seeds = sorted(body["seed"] for body in srv.requests)
    assert sorted(c.text for c in reply.choices) == [f"r{i}" for i in range(5)]
    assert len(srv.requests) == 5
    assert seeds == [100, 101, 102, 103, 104]  # extra draws get distinct seeds
    assert reply.usage.completion_tokens == 5


def test_one_short_reply_is_topped_up() -> None:
    with TestServer(ScriptedModel(replies=[f"r{i}" for i in range(4)])) as srv:
        srv.inject(Fault.ignore_n())
        reply = asyncio.run(model_for(srv).generate(ModelRequest(messages=REQ.messages, n=4)))
    assert [c.text for c in reply.choices][0] == "r0" and len(reply.choices) == 4
    assert len({c.text for c in reply.choices}) == 4


def test_parse_completion_rejects_malformed_bodies() -> None:
    for body in ['{"choices": [', "<html>", '{"choices": []}', '{"id": 1}', '{"choices": [{"index": 0}]}']:
        with pytest.raises(MalformedReply):
            parse_completion(body)
    choices, p, c, model = parse_completion(
        '{"model": "x", "choices": [{"index": 1, "message": {"content": "b"}},'
        ' {"index": 0, "message": {"content": null}, "finish_reason": "length"}]}'
    )
    assert [ch.text for ch in choices] == ["", "b"] and choices[0].finish_reason == "length"
    assert (p, c, model) == (0, 0, "x")


def test_max_n_splits_requests_for_servers_that_reject_n() -> None:
    with TestServer(ScriptedModel(replies=[f"r{i}" for i in range(5)])) as srv:
        reply = asyncio.run(model_for(srv, max_n=2).generate(ModelRequest(messages=REQ.messages, n=5)))
        sent = sorted(body["n"] for body in srv.requests)
    assert len(reply.choices) == 5 and sent == [1, 2, 2]
