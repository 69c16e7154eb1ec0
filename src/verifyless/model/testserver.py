"""A real OpenAI-compatible HTTP server on 127.0.0.1, for tests and demos.

Standard library only (``http.server`` in a background thread). Serves
``POST /v1/chat/completions`` and ``GET /v1/models`` from a ``ScriptedModel``
or a plain function ``ModelRequest -> str | Choice | ModelReply``::

    with TestServer(ScriptedModel(replies=["hi"])) as srv:
        cfg = ModelConfig(model="scripted", base_url=srv.base_url)

Faults are queued with ``srv.inject(Fault.rate_limit(0.2), Fault.server_error())``;
each request takes the next queued fault (FIFO) and, when the queue is empty,
is answered normally. Real checks too: with ``api_key=...`` a wrong bearer
token gets 401; with ``models=[...]`` an unknown model gets 404;
``ignore_n=True`` always returns one choice. Counters: ``requests`` (bodies
received), ``max_in_flight``.

A critic of known accuracy: ``TestServer(CriticAtAccuracy(truth, accuracy))``
answers every critic prompt as a pointwise critic whose verdict is the true
outcome (``truth(request)``, which the caller computes from the candidate the
prompt describes) with probability ``accuracy``, else one of the other two
directions; each sample is drawn on its own from a seeded generator. With
``invert=True`` it is a harmful critic: the verdict it gives with
probability ``accuracy`` is the opposite of the truth (improve read as lose
and back, a tie as a tie).

Log-probabilities: with ``logprobs=fn`` (``fn(messages, continue_final, k) ->
([(token, logprob), ...], prompt tokens)``, e.g. ``LocalModel.top_logprobs``),
a request with ``logprobs: true`` is answered with the most likely next token
and its ``top_logprobs`` (OpenAI format), continuing the last assistant message
when it sends vLLM's ``continue_final_message: true`` (with
``add_generation_prompt: false``; both true is a 400, as in vLLM). Without
``logprobs=`` the field is ignored, like a server that does not support it.
With ``raw_logprobs=fn`` (``fn(prompt, k) -> ([(token, logprob), ...], prompt
tokens)``) it also serves ``POST /v1/completions`` in the legacy format
llama.cpp's servers use (``top_logprobs`` as token -> logprob mappings).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from verifyless.model.base import Choice, ModelReply, ModelRequest, Tool, Usage
from verifyless.model.scripted import ScriptedModel, estimate_tokens, message_from_mapping, to_choice

FaultKind = Literal[
    "rate_limit",
    "server_error",
    "delay",
    "truncated",
    "empty_choices",
    "garbage",
    "unauthorized",
    "not_found",
    "ignore_n",
]


@dataclass(frozen=True)
class Fault:
    """One injected misbehaviour, consumed by one request."""

    kind: FaultKind
    status: int = 200
    retry_after: str | None = None
    delay_s: float = 0.0

    @classmethod
    def rate_limit(cls, retry_after: float | str | None = None) -> Fault:
        return cls("rate_limit", 429, None if retry_after is None else str(retry_after))

    @classmethod
    def server_error(cls, status: int = 500, retry_after: float | str | None = None) -> Fault:
        return cls("server_error", status, None if retry_after is None else str(retry_after))

    @classmethod
    def delay(cls, seconds: float) -> Fault:
        """Answer normally, but only after ``seconds`` (longer than the client timeout to force one)."""
        return cls("delay", 200, delay_s=seconds)

    @classmethod
    def truncated(cls) -> Fault:
        return cls("truncated")

    @classmethod
    def empty_choices(cls) -> Fault:
        return cls("empty_choices")

    @classmethod
    def garbage(cls) -> Fault:
        return cls("garbage")

    @classmethod
    def unauthorized(cls) -> Fault:
        return cls("unauthorized", 401)

    @classmethod
    def not_found(cls) -> Fault:
        return cls("not_found", 404)

    @classmethod
    def ignore_n(cls) -> Fault:
        return cls("ignore_n")


Responder = Callable[[ModelRequest], Any]
LogprobSource = Callable[[list[dict[str, Any]], bool, int], tuple[list[tuple[str, float]], int]]
RawLogprobSource = Callable[[str, int], tuple[list[tuple[str, float]], int]]


class CriticAtAccuracy:
    """A responder that answers as a pointwise critic of a set three-way accuracy against the true outcome.

    ``truth(request)`` returns ``improve`` / ``tie`` / ``lose`` for the candidate a
    critic prompt describes (the caller knows the world, e.g. the configuration an
    idea-space child names), or None for any other prompt, which gets ``other``.
    A verdict is the truth with probability ``accuracy``, else one of the two
    other directions uniformly (``accuracy = 1/3`` is chance); every sample is an
    independent draw (no shared misreading: rho = 0). The draw of the j-th
    sample of one prompt is seeded by ``(seed, prompt, j)``, so concurrent
    requests in any order get the same answers. An ``improve`` verdict names
    the tier ``medium``. Replies use the critic paper's tagged lines. ``calls``
    counts the samples answered. Thread-safe.
    """

    DIRECTIONS = ("improve", "tie", "lose")

    INVERSE = {"improve": "lose", "tie": "tie", "lose": "improve"}

    def __init__(
        self,
        truth: Callable[[ModelRequest], str | None],
        accuracy: float,
        *,
        seed: int = 0,
        other: str = "ok",
        invert: bool = False,
    ) -> None:
        if not 0.0 <= accuracy <= 1.0:
            raise ValueError(f"accuracy must lie in [0, 1], got {accuracy}")
        self.truth, self.accuracy, self.other, self.seed, self.invert = truth, accuracy, other, seed, invert
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}  # prompt digest -> samples answered for it
        self.calls = 0

    def __call__(self, request: ModelRequest) -> str:
        true = self.truth(request)
        if true is None:
            return self.other
        if self.invert:  # a harmful critic: its "right" answer is the opposite direction
            true = self.INVERSE[true]
        digest = hashlib.sha256("\n".join(m.content or "" for m in request.messages).encode()).hexdigest()
        with self._lock:
            self.calls += 1
            j = self._seen[digest] = self._seen.get(digest, -1) + 1
        rng = random.Random(f"{self.seed}:{digest}:{j}")
        right = rng.random() < self.accuracy
        verdict = true if right else rng.choice([d for d in self.DIRECTIONS if d != true])
        tier = "medium" if verdict == "improve" else "NA"
        return f"Criteria weighed.\n[IMPROVEMENT] {verdict} --- simulated critic\n[WINTIER] {tier} --- simulated"


def request_from_body(body: dict[str, Any]) -> ModelRequest:
    """Parse an OpenAI chat-completions JSON body into a ``ModelRequest``."""
    tools = tuple(
        Tool(
            name=t["function"]["name"],
            description=t["function"].get("description", ""),
            parameters=t["function"].get("parameters", {}),
        )
        for t in body.get("tools") or ()
    )
    stop = body.get("stop") or ()
    return ModelRequest(
        messages=tuple(message_from_mapping(m) for m in body.get("messages", [])),
        temperature=body.get("temperature"),
        top_p=body.get("top_p"),
        max_tokens=body.get("max_tokens"),
        n=int(body.get("n") or 1),
        seed=body.get("seed"),
        tools=tools,
        stop=(stop,) if isinstance(stop, str) else tuple(stop),
    )


def _choice_json(index: int, choice: Choice) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": choice.text}
    if choice.tool_calls:
        message["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
            for t in choice.tool_calls
        ]
    return {"index": index, "message": message, "finish_reason": choice.finish_reason}


class TestServer:
    """Context manager running the server; ``base_url`` is ``http://127.0.0.1:<port>/v1``."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        responder: ScriptedModel | Responder,
        *,
        api_key: str | None = None,
        models: list[str] | None = None,
        ignore_n: bool = False,
        latency_s: float = 0.0,
        logprobs: LogprobSource | None = None,
        raw_logprobs: RawLogprobSource | None = None,
    ) -> None:
        self.responder = responder
        self.logprobs = logprobs
        self.raw_logprobs = raw_logprobs
        self.api_key = api_key
        self.models = models
        self.ignore_n = ignore_n
        self.latency_s = latency_s
        self.requests: list[dict[str, Any]] = []
        self.max_in_flight = 0
        self._in_flight = 0
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._url: str | None = None

    # -- control -----------------------------------------------------------
    def inject(self, *faults: Fault) -> TestServer:
        with self._lock:
            self._faults.extend(faults)
        return self

    @property
    def pending_faults(self) -> int:
        with self._lock:
            return len(self._faults)

    @property
    def base_url(self) -> str:
        """The server's URL; still readable after ``stop`` (tests point clients at a dead server)."""
        if self._url is None:
            raise RuntimeError("TestServer was never started; use it as a context manager")
        return self._url

    def start(self) -> TestServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.05,), name="verifyless-testserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> TestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- answering -----------------------------------------------------------
    def _next_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.pop(0) if self._faults else None

    def _answer(self, request: ModelRequest) -> ModelReply:
        if isinstance(self.responder, ScriptedModel) and self.responder.function is None:
            return self.responder.reply(request)
        if isinstance(self.responder, ScriptedModel):
            return asyncio.run(self.responder.generate(request))
        choices = []
        for _ in range(request.n):
            out = self.responder(request)
            if isinstance(out, ModelReply):
                return out
            choices.append(to_choice(out, call_id=lambda: f"call_{len(self.requests)}"))
        return ModelReply(tuple(choices), Usage(0, sum(estimate_tokens(c.text) for c in choices)), "function")

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1


class _Handler(BaseHTTPRequestHandler):
    owner: TestServer
    protocol_version = "HTTP/1.1"
    _counted = False  # this request is counted in the owner's in-flight requests (until its reply goes out)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        return

    def _send(
        self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        if self._counted:
            # Leave before the reply goes out: the client may send its next request the moment it has this one.
            self._counted = False
            self.owner._leave()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test); nothing to do

    def _error(self, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()
        self._send(status, body, headers=headers)

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/v1/models":
            return self._error(404, f"no route {self.path}", "not_found")
        names = self.owner.models or ["scripted"]
        data = {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "verifyless"} for m in names]}
        self._send(200, json.dumps(data).encode())

    def do_POST(self) -> None:
        owner = self.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") == "/v1/completions" and owner.raw_logprobs is not None:
            return self._raw_logprob_reply(owner, json.loads(raw))
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._error(404, f"no route {self.path}", "not_found")
        owner._enter()
        self._counted = True
        try:
            self._complete(owner, raw)
        finally:
            if self._counted:
                self._counted = False
                owner._leave()

    def _inject(self, fault: Fault, body: dict[str, Any]) -> bool:
        """Send the reply ``fault`` replaces the completion with; False for faults that only shape it (``delay``)."""
        if fault.kind in ("rate_limit", "server_error"):
            headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
            self._error(fault.status, f"injected {fault.kind}", fault.kind, headers)
        elif fault.kind == "unauthorized":
            self._error(401, "Incorrect API key provided.", "invalid_request_error")
        elif fault.kind == "not_found":
            self._error(404, f"The model `{body.get('model')}` does not exist.", "invalid_request_error")
        elif fault.kind == "garbage":
            self._send(200, b"<html>upstream proxy error</html>", "text/html")
        else:
            if fault.kind == "delay":
                time.sleep(fault.delay_s)
            return False
        return True

    def _complete(self, owner: TestServer, raw: bytes) -> None:
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(400, "request body is not JSON", "invalid_request_error")
        with owner._lock:
            owner.requests.append(body)
        fault = owner._next_fault()
        if owner.latency_s:
            time.sleep(owner.latency_s)
        if fault is not None and self._inject(fault, body):
            return None
        expected = f"Bearer {owner.api_key}" if owner.api_key is not None else None
        if expected is not None and self.headers.get("Authorization") != expected:
            # Echo the key back the way some providers do, so tests can check that clients scrub it.
            given = (self.headers.get("Authorization") or "").removeprefix("Bearer ")
            return self._error(401, f"Incorrect API key provided: {given}.", "invalid_request_error")
        if owner.models is not None and body.get("model") not in owner.models:
            return self._error(404, f"The model `{body.get('model')}` does not exist.", "invalid_request_error")
        if body.get("logprobs") and owner.logprobs is not None:
            return self._logprob_reply(owner, body)
        request = request_from_body(body)
        role = self.headers.get("X-Verifyless-Role")
        if role:  # lets role-based scripted rules answer over HTTP exactly as in-process
            request = replace(request, role=role)
        if owner.ignore_n or (fault is not None and fault.kind == "ignore_n"):
            request = replace(request, n=1)
        try:
            reply = owner._answer(request)
        except Exception as exc:
            # A script that ran out is a test-setup problem: a 400 fails the client fast, with the reason.
            return self._error(400, f"{type(exc).__name__}: {exc}", "script_error")
        choices = (
            []
            if fault is not None and fault.kind == "empty_choices"
            else [_choice_json(i, c) for i, c in enumerate(reply.choices)]
        )
        data = {
            "id": f"chatcmpl-{len(owner.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", reply.model),
            "choices": choices,
            "usage": {
                "prompt_tokens": reply.usage.prompt_tokens,
                "completion_tokens": reply.usage.completion_tokens,
                "total_tokens": reply.usage.prompt_tokens + reply.usage.completion_tokens,
            },
        }
        text = json.dumps(data).encode()
        if fault is not None and fault.kind == "truncated":
            text = text[: len(text) // 2]
        self._send(200, text)

    def _raw_logprob_reply(self, owner: TestServer, body: dict[str, Any]) -> None:
        """A legacy ``/v1/completions`` reply (as llama.cpp serves it): one token and ``top_logprobs`` as
        a list of ``{token: logprob}`` mappings, from ``owner.raw_logprobs(prompt, k)``."""
        with owner._lock:
            owner.requests.append(body)
        assert owner.raw_logprobs is not None
        top, prompt_tokens = owner.raw_logprobs(str(body.get("prompt", "")), int(body.get("logprobs") or 1))
        choice = {
            "index": 0,
            "text": top[0][0],
            "logprobs": {"tokens": [top[0][0]], "top_logprobs": [dict(top)]},
            "finish_reason": "length",
        }
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1}
        data = {"id": "cmpl-1", "object": "text_completion", "choices": [choice], "usage": usage}
        self._send(200, json.dumps({**data, "model": body.get("model", "logprobs")}).encode())

    def _logprob_reply(self, owner: TestServer, body: dict[str, Any]) -> None:
        """One greedy token with its top_logprobs (OpenAI format), from ``owner.logprobs``."""
        continue_final = bool(body.get("continue_final_message"))
        if continue_final and body.get("add_generation_prompt", True):
            return self._error(
                400, "continue_final_message and add_generation_prompt cannot both be true", "invalid_request_error"
            )
        k = max(1, int(body.get("top_logprobs") or 1))
        assert owner.logprobs is not None
        top, prompt_tokens = owner.logprobs(list(body.get("messages") or []), continue_final, k)
        entries = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": top[0][0]},
            "logprobs": {"content": [{**entries[0], "top_logprobs": entries}]},
            "finish_reason": "length",
        }
        data = {
            "id": f"chatcmpl-{len(owner.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "logprobs"),
            "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1, "total_tokens": prompt_tokens + 1},
        }
        self._send(200, json.dumps(data).encode())
