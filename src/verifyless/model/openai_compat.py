"""OpenAIModel: any OpenAI-compatible chat-completions endpoint.

Built on the official ``openai`` SDK with the SDK's own retries switched off
(``max_retries=0``) so that one policy, ours, applies everywhere:

* retried with exponential backoff and full jitter: 429 (waiting at least the
  ``Retry-After`` / ``retry-after-ms`` the server asks for), 408, 409, 5xx,
  timeouts, dropped connections, and malformed replies (non-JSON, truncated
  JSON, no choices). Bounded by ``max_retries`` retries *and* ``retry_budget_s``
  seconds in total; when either runs out: ``ModelUnavailable``.
* retried once, then ``ModelUnavailable``: a connection that could not be made
  (refused, unknown host), which waiting seldom mends (``FAST_FAIL_RETRIES``).
* not retried: 400, 401, 403, 404, 422 -> ``ModelUnavailable`` naming the fix.

The API key is read from the environment once, at construction, and handed to
the SDK client; this object keeps no other copy, and every error text is
scrubbed of it. The ``openai`` package is imported lazily (it takes ~1 s).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import os
import random
import re
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from verifyless.errors import ModelUnavailable
from verifyless.model.base import Choice, Message, ModelReply, ModelRequest, ToolCall, Usage
from verifyless.model.config import OPENAI_URL, cap_tokens
from verifyless.model.scores import LabelScore, probe_request, probs_from_top_logprobs, uniform
from verifyless.model.templates import render_raw_prompt
from verifyless.model.wire import messages_to_wire, tool_calls_in_text, tools_to_wire

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from verifyless.model.config import ModelConfig


class MalformedReply(Exception):
    """The endpoint answered 2xx but the body is not a usable chat completion."""


def _json_body(text: str) -> Any:
    """The reply body as JSON; ``MalformedReply`` quoting its start when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise MalformedReply(f"body is not JSON ({exc}); starts {text[:60]!r}") from None


def parse_completion(text: str) -> tuple[list[Choice], int, int, str]:
    """Parse a chat-completion body into (choices in index order, prompt tokens, completion tokens, model)."""
    data = _json_body(text)
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise MalformedReply(f"body has no 'choices' list; starts {text[:60]!r}")
    if not data["choices"]:
        raise MalformedReply("reply has an empty 'choices' list")
    raw_choices = sorted(data["choices"], key=lambda c: c.get("index", 0) if isinstance(c, dict) else 0)
    choices = []
    for raw in raw_choices:
        message = raw.get("message") if isinstance(raw, dict) else None
        if not isinstance(message, dict):
            raise MalformedReply("a choice has no 'message' object")
        calls = []
        for call in message.get("tool_calls") or ():
            fn = call.get("function") or {}
            args = fn.get("arguments", "")
            calls.append(
                ToolCall(
                    id=str(call.get("id", "")),
                    name=str(fn.get("name", "")),
                    arguments=args if isinstance(args, str) else json.dumps(args),
                )
            )
        choices.append(
            Choice(
                text=message.get("content") or "",
                tool_calls=tuple(calls),
                finish_reason=raw.get("finish_reason") or "stop",
            )
        )
    raw_usage = data.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    return (
        choices,
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        str(data.get("model") or ""),
    )


PROBE_TOP_LOGPROBS = 20  # the most OpenAI and vLLM (default --max-logprobs) return per position
PROBE_EXTRA = {"continue_final_message": True, "add_generation_prompt": False}  # vLLM / SGLang chat extras


def _calls_from_text(choice: Choice, names: set[str]) -> Choice:
    text, calls = tool_calls_in_text(choice.text, names)
    return Choice(text=text, tool_calls=calls, finish_reason="tool_calls") if calls else choice


def parse_label_probe(text: str, labels: Sequence[str]) -> tuple[dict[str, float] | None, int, int, str]:
    """(label distribution or None, prompt tokens, completion tokens, model) from a probe's reply body.

    Reads ``choices[0].logprobs.content[0].top_logprobs``: the candidates for the first token after the
    prefilled tag. A reply without them means the server ignored ``logprobs`` (not retried).
    """
    data = _json_body(text)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("reply has no choices")
    content = (choices[0].get("logprobs") or {}).get("content") or []
    top = content[0].get("top_logprobs") if content and isinstance(content[0], dict) else None
    if not isinstance(top, list):
        raise ModelUnavailable(
            "the endpoint returned no top_logprobs for a label probe; label probes (the label-probability "
            "critic's call) need a server that continues a prefilled assistant turn and returns logprobs "
            "(vLLM, SGLang); use screener 'critic' for other endpoints"
        )
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return (
        probs_from_top_logprobs(top, labels),
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        str(data.get("model") or ""),
    )


def parse_completion_probe(text: str, labels: Sequence[str]) -> tuple[dict[str, float] | None, int, int, str]:
    """Like ``parse_label_probe`` for a ``/v1/completions`` reply: ``choices[0].logprobs.top_logprobs[0]``
    is a mapping from token to log-probability (the legacy completions format)."""
    data = _json_body(text)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise MalformedReply("reply has no choices")
    top = (choices[0].get("logprobs") or {}).get("top_logprobs") or []
    if not top or not isinstance(top[0], dict):
        raise ModelUnavailable(
            "the endpoint returned no top_logprobs for a /v1/completions label probe; the label-probability "
            "critic needs a server that returns logprobs (llama.cpp, vLLM); use screener 'critic' for others"
        )
    entries = [{"token": token, "logprob": logprob} for token, logprob in top[0].items()]
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    return (
        probs_from_top_logprobs(entries, labels),
        int(usage.get("prompt_tokens") or 0),
        int(usage.get("completion_tokens") or 0),
        str(data.get("model") or ""),
    )


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date); None if absent."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


_KEYLIKE = re.compile(r"\b(sk|key|tok)-[A-Za-z0-9_\-*.]{6,}")


FAST_FAIL_RETRIES = 1  # retries for a connection that could not be made (refused, unknown host)


def _never_connected(exc: BaseException) -> bool:
    """True when no connection was made (refused, DNS failure): httpx's ``ConnectError`` under the SDK's error.

    Matched by class name, since the SDK may ship its own copy of httpx. A connect *timeout* is
    ``APITimeoutError`` and a connection dropped mid-reply is a ``ReadError`` or
    ``RemoteProtocolError``; both keep the full backoff.
    """
    return any(cls.__name__ == "ConnectError" for cls in type(exc.__cause__).__mro__)


@functools.cache
def _ssl_context() -> Any:
    """One TLS context per process: building one costs ~0.1 s, and each event loop needs a pool."""
    import ssl

    cafile = os.environ.get("SSL_CERT_FILE")
    if not cafile:
        try:
            import certifi

            cafile = certifi.where()
        except ImportError:
            cafile = None
    return ssl.create_default_context(cafile=cafile)


def _http_client(timeout_s: float) -> Any:
    import openai

    return openai.DefaultAsyncHttpxClient(timeout=timeout_s, verify=_ssl_context())


class _Limiters:
    """One semaphore per (event loop, endpoint): the first model to use an endpoint sets its limit."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Semaphore]] = (
            weakref.WeakKeyDictionary()
        )

    def get(self, endpoint: str, limit: int) -> asyncio.Semaphore:
        table = self._by_loop.setdefault(asyncio.get_running_loop(), {})
        return table.setdefault(endpoint, asyncio.Semaphore(limit))


ENDPOINT_LIMITS = _Limiters()

_NOT_RETRYABLE = {
    400: "rejected the request",
    401: "rejected the API key",
    403: "refused access",
    404: "does not know",
    422: "could not process the request",
}


class OpenAIModel:
    """``Model`` for an OpenAI-compatible endpoint; see the module docstring for the retry policy.

    ``sleep`` and ``rng`` are injectable so tests can observe backoff without waiting.
    Samples: ``n`` is sent as is (capped at ``max_n`` when set); if the server
    returns fewer choices, the rest are drawn with further concurrent calls. When ``seed`` is set, a call whose first
    sample index is ``j`` sends ``seed + j`` so that extra draws differ.
    """

    def __init__(self, config: ModelConfig, *, sleep: Any = asyncio.sleep, rng: random.Random | None = None) -> None:
        import openai

        if not config.model:
            raise ModelUnavailable("no model name configured; set model: <name> (or VERIFYLESS_MODEL)")
        self.config = config
        self.name = config.model
        self.endpoint = config.base_url or OPENAI_URL
        self.key_env = config.resolved_key_env()
        key = os.environ.get(self.key_env) if self.key_env else None
        self._key_missing = not key
        # Local servers (vLLM, Ollama, llama.cpp) accept any key; the SDK insists on one.
        self._client = openai.AsyncOpenAI(
            api_key=key or "not-set",
            base_url=self.endpoint,
            max_retries=0,
            timeout=config.timeout_s,
            http_client=_http_client(config.timeout_s),
        )
        self._loop_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._sleep = sleep
        self._rng = rng or random.Random()

    def __repr__(self) -> str:
        return f"OpenAIModel(model={self.name!r}, endpoint={self.endpoint!r}, key_env={self.key_env!r})"

    # -- identity for the response cache -------------------------------------
    def _resolved(self, request: ModelRequest) -> dict[str, Any]:
        c = self.config
        return {
            "temperature": request.temperature if request.temperature is not None else c.temperature,
            "top_p": request.top_p if request.top_p is not None else c.top_p,
            "max_tokens": cap_tokens(request.max_tokens, c.max_tokens),
            "seed": request.seed if request.seed is not None else c.seed,
        }

    def cache_identity(self, request: ModelRequest) -> dict[str, Any]:
        identity = {
            "endpoint": self.endpoint.rstrip("/"),
            "model": self.name,
            "messages": messages_to_wire(request.messages),
            "tools": tools_to_wire(request.tools),
            "stop": list(request.stop),
            "extra_body": dict(self.config.extra_body),
            **self._resolved(request),
        }
        prefilled = bool(request.messages) and request.messages[-1].role == "assistant"
        if prefilled and self.config.label_probe == "completions":  # a probe read another way is another sample
            identity["probe_api"] = {"completions": self.config.probe_template}
        return identity

    # -- calling ---------------------------------------------------------------
    def _client_for_loop(self) -> Any:
        # An httpx connection pool belongs to the event loop that opened it;
        # each loop gets its own pool (the key stays inside the SDK client).
        loop = asyncio.get_running_loop()
        client = self._loop_clients.get(loop)
        if client is None:
            client = self._client.copy(http_client=_http_client(self.config.timeout_s))
            self._loop_clients[loop] = client
        return client

    def _payload(self, request: ModelRequest, n: int, first_index: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.name, "messages": messages_to_wire(request.messages), "n": n}
        for name, value in self._resolved(request).items():
            if value is not None:
                body[name] = value + first_index if name == "seed" else value
        if request.stop:
            body["stop"] = list(request.stop)
        if request.tools:
            body["tools"] = tools_to_wire(request.tools)
        return body

    async def generate(self, request: ModelRequest) -> ModelReply:
        if request.n < 1:
            raise ValueError(f"request.n must be >= 1, got {request.n}")
        first = request.sample_offset
        ask = min(request.n, self.config.max_n or request.n)
        got, prompt_tokens, completion_tokens, model = await self._call(
            self._payload(request, ask, first), request.role
        )
        choices = got[: request.n]
        # The server may cap or ignore n: draw the rest concurrently in chunks of
        # the size it did return. Each call yields >= 1 choice, so this ends.
        chunk = min(len(got), ask)
        while len(choices) < request.n:
            starts = range(len(choices), request.n, chunk)
            results = await asyncio.gather(
                *(
                    self._call(self._payload(request, min(chunk, request.n - s), first + s), request.role)
                    for s in starts
                )
            )
            for more, p, c, _ in results:
                choices += more
                prompt_tokens += p
                completion_tokens += c
                chunk = min(chunk, len(more))
            choices = choices[: request.n]
        if request.tools:  # a server with no tool-call parser for the model leaves the calls in the text
            names = {t.name for t in request.tools}
            choices = [c if c.tool_calls else _calls_from_text(c, names) for c in choices]
        prices = self.config.price_for(model or self.name)
        cost = (prompt_tokens * prices.prompt_per_mtok + completion_tokens * prices.completion_per_mtok) / 1e6
        return ModelReply(tuple(choices), Usage(prompt_tokens, completion_tokens, cost), model or self.name)

    # -- label probes (the label-probability critic's call) ---------------------
    async def label_score(
        self, messages: Sequence[Message], prefix: str, *, tag: str, labels: Sequence[str], role: str
    ) -> LabelScore:
        """P(label) of the next token after ``prefix + tag``, prefilled as the assistant turn.

        One greedy one-token request with ``logprobs``, ``top_logprobs=20`` and vLLM/SGLang's
        ``continue_final_message``. Labels are matched on the 20 candidates (see
        ``probs_from_top_logprobs``); when none of them is a label the distribution is uniform
        (for three labels u = 2/3, routed as uncertain). OpenAI's hosted API does not continue
        assistant turns.
        """
        request = probe_request(messages, prefix, tag, role)
        if self.config.label_probe == "completions":
            prompt = render_raw_prompt(request.messages, self.config.probe_template)
            body = {"model": self.name, "prompt": prompt, "max_tokens": 1, "temperature": 0.0}
            body["logprobs"] = PROBE_TOP_LOGPROBS
            probs, prompt_tokens, completion_tokens, model = await self._call(
                body, role, parse=functools.partial(parse_completion_probe, labels=labels), api="completions"
            )
        else:
            body = self._payload(request, 1, 0)
            body.update(logprobs=True, top_logprobs=PROBE_TOP_LOGPROBS)
            probs, prompt_tokens, completion_tokens, model = await self._call(
                body, role, parse=functools.partial(parse_label_probe, labels=labels), extra=PROBE_EXTRA
            )
        if probs is None:
            log.warning("model %s: no label among the top %d tokens; using uniform", self.name, PROBE_TOP_LOGPROBS)
        prices = self.config.price_for(model or self.name)
        cost = (prompt_tokens * prices.prompt_per_mtok + completion_tokens * prices.completion_per_mtok) / 1e6
        return LabelScore(probs or uniform(labels), Usage(prompt_tokens, completion_tokens, cost), model or self.name)

    async def _call(
        self,
        body: dict[str, Any],
        role: str = "default",
        *,
        parse: Callable[[str], Any] = parse_completion,
        extra: Mapping[str, Any] | None = None,
        api: Literal["chat", "completions"] = "chat",
    ) -> Any:
        """One logical call with retries. Returns ``parse(body text)``: by default
        (choices, prompt tokens, completion tokens, model).

        The asking role travels as the ``X-Verifyless-Role`` header: servers ignore it, while
        logging proxies and the scripted test server can use it.
        """
        import openai

        cfg = self.config
        client = self._client_for_loop()
        limiter = ENDPOINT_LIMITS.get(self.endpoint, cfg.concurrency)
        start = time.monotonic()
        retries = 0
        limit = cfg.max_retries
        while True:
            hint: float | None = None
            try:
                create = (client.chat.completions if api == "chat" else client.completions).with_raw_response.create
                async with limiter:
                    raw = await create(
                        **body,
                        extra_body={**cfg.extra_body, **(extra or {})} or None,
                        timeout=cfg.timeout_s,
                        extra_headers={"X-Verifyless-Role": role},
                    )
                    text = raw.text
                return parse(text)
            except MalformedReply as exc:
                problem = f"malformed reply: {exc}"
            except openai.APITimeoutError:
                problem = f"no reply within timeout_s={cfg.timeout_s:g}"
            except openai.APIConnectionError as exc:
                problem = f"cannot connect to {self.endpoint} ({self._scrub(str(exc.__cause__ or exc))})"
                limit = min(limit, FAST_FAIL_RETRIES) if _never_connected(exc) else limit
            except openai.APIStatusError as exc:
                status = exc.status_code
                if status in _NOT_RETRYABLE or (400 <= status < 500 and status not in (408, 409, 429)):
                    raise self._fatal(status, exc) from None
                hint = parse_retry_after(exc.response.headers)
                problem = f"HTTP {status}: {self._scrub(exc.message)}"
            elapsed = time.monotonic() - start
            delay = self._rng.uniform(0.0, min(cfg.backoff_max_s, cfg.backoff_base_s * 2.0**retries))
            if hint is not None:
                delay = max(delay, hint)
            if retries >= limit or elapsed + delay > cfg.retry_budget_s:
                why = (
                    f"after {retries + 1} attempts"
                    if retries >= limit
                    else f"the next wait ({delay:.1f} s) would exceed retry_budget_s={cfg.retry_budget_s:g}"
                )
                raise ModelUnavailable(
                    f"model {self.name} at {self.endpoint} failed {why} over {elapsed:.1f} s; last error: {problem}. "
                    "Check that the server is up and reachable, or raise max_retries / retry_budget_s / timeout_s"
                ) from None
            retries += 1
            log.info("model %s at %s: %s; retry %d in %.1f s", self.name, self.endpoint, problem, retries, delay)
            await self._sleep(delay)

    def _fatal(self, status: int, exc: Any) -> ModelUnavailable:
        detail = self._scrub(exc.message)
        if status == 401:
            fix = (
                f"the env var {self.key_env} is not set; export it"
                if self._key_missing
                else f"check the env var {self.key_env}"
            )
            return ModelUnavailable(f"{self.endpoint} rejected the API key (HTTP 401); {fix}. Server said: {detail}")
        if status == 403:
            return ModelUnavailable(
                f"{self.endpoint} refused access to model {self.name!r} (HTTP 403); check that the key in "
                f"{self.key_env} may use this model. Server said: {detail}"
            )
        if status == 404:
            return ModelUnavailable(
                f"{self.endpoint} does not know model {self.name!r} (HTTP 404); check the model name "
                f"(GET {self.endpoint.rstrip('/')}/models lists them) and that base_url ends in /v1. "
                f"Server said: {detail}"
            )
        return ModelUnavailable(
            f"{self.endpoint} {_NOT_RETRYABLE.get(status, 'rejected the request')} for model {self.name!r} "
            f"(HTTP {status}); check sampling settings, tools and extra_body. Server said: {detail}"
        )

    def _scrub(self, text: str) -> str:
        key = self._client.api_key
        if isinstance(key, str) and len(key) >= 4:
            text = text.replace(key, "***")
        return _KEYLIKE.sub("***", text)

    async def aclose(self) -> None:
        """Close the per-loop connection pool of the running loop (optional; pools also die with their loop)."""
        client = self._loop_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
