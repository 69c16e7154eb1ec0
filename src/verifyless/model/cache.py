"""Request identity, the content-addressed response cache, and call records.

* ``prompt_hash(request)`` -- sha256 of the canonical prompt (messages + tools).
* ``ResponseCache`` -- one SQLite row per *sample*, keyed by
  ``sample_key(identity, i)`` = sha256 of canonical JSON of the request
  identity (endpoint, model, messages, tools, temperature, top_p, max_tokens,
  seed, stop, extra_body) plus the sample index ``i``. A reply with n choices
  writes n rows, so a later request for more samples reuses the first ones.
* ``CachedModel`` -- wraps any ``Model``; ``mode="replay"`` never calls the
  inner model and raises ``ModelUnavailable`` on a miss.
* ``CallRecord`` / ``RecordedModel`` -- one frozen record per call for the
  engine to store (no API key ever reaches these: identities are built from the
  request and the endpoint URL only).
* Label probes (``label_score``, the label-probability critic's call; see
  ``verifyless.model.scores``) pass through both wrappers when the wrapped
  model can answer them: the distribution is cached as one sample (index 0,
  its JSON as the choice text, finish reason ``verdict_probs``, the name it
  had when only verdicts were probed) under the probe's own identity
  (``probe_identity``) and prompt hash, and recorded like any call.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.model.base import (
    CacheIdentified,
    Choice,
    Message,
    Model,
    ModelReply,
    ModelRequest,
    ParseRecord,
    ToolCall,
    Usage,
    wrapped,
)
from verifyless.model.scores import LabelScore, find_label_scorer, probe_fields, probe_request
from verifyless.model.wire import canonical_json, messages_to_wire, prompt_hash, sha256, tools_to_wire


def request_identity(model: Model, request: ModelRequest) -> dict[str, Any]:
    """Everything that determines a sample except its index.

    Models may define ``cache_identity(request)`` to add their resolved
    defaults (``OpenAIModel`` fills in config temperature, seed, extra_body, and
    its base URL); other models are identified by ``endpoint`` (or ``name``).
    """
    if isinstance(model, CacheIdentified):
        return model.cache_identity(request)
    return {
        "endpoint": str(getattr(model, "endpoint", model.name)),
        "model": model.name,
        "messages": messages_to_wire(request.messages),
        "tools": tools_to_wire(request.tools),
        "temperature": request.temperature,
        "top_p": request.top_p,
        "max_tokens": request.max_tokens,
        "seed": request.seed,
        "stop": list(request.stop),
        "extra_body": {},
    }


def sample_key(identity: Mapping[str, Any], index: int) -> str:
    return sha256(canonical_json({"request": identity, "sample_index": index}))


def choice_to_json(choice: Choice) -> str:
    return canonical_json(
        {
            "text": choice.text,
            "finish_reason": choice.finish_reason,
            "tool_calls": [{"id": t.id, "name": t.name, "arguments": t.arguments} for t in choice.tool_calls],
        }
    )


def choice_from_json(text: str) -> Choice:
    raw = json.loads(text)
    calls = tuple(ToolCall(id=t["id"], name=t["name"], arguments=t["arguments"]) for t in raw["tool_calls"])
    return Choice(text=raw["text"], tool_calls=calls, finish_reason=raw["finish_reason"])


_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY,
    prompt_hash TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    endpoint TEXT NOT NULL,
    model TEXT NOT NULL,
    reply_model TEXT NOT NULL,
    choice_json TEXT NOT NULL,
    request_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS llm_cache_prompt ON llm_cache(prompt_hash);
CREATE TABLE IF NOT EXISTS llm_cache_runs (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);
"""


@dataclass(frozen=True)
class CachedSample:
    choice: Choice
    reply_model: str


class ResponseCache:
    """Per-sample reply cache in its own tables (``llm_cache``, ``llm_cache_runs``) of a SQLite file.

    Opens its own connection in WAL mode, so it can share the run store's DB
    file. ``run_id`` (optional) tags every entry this process writes or reads,
    which is what ``ScriptedModel.from_store(db, run_id)`` selects on.
    Writes are ``INSERT OR IGNORE``: the first sample stored under a key wins,
    and ``put`` returns the stored choice, so a run and its replay always agree.
    """

    def __init__(self, path: str | Path, *, run_id: str | None = None, create: bool = True) -> None:
        self.path = Path(path)
        self.run_id = run_id
        if not create and not self.path.is_file():
            raise ConfigError(f"response cache database {str(self.path)!r} does not exist; check the run directory")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ConfigError(f"cannot open the response cache {str(self.path)!r}: {exc}") from exc

    def __repr__(self) -> str:
        return f"ResponseCache(path={str(self.path)!r}, run_id={self.run_id!r})"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, keys: list[str]) -> dict[str, CachedSample]:
        if not keys:
            return {}
        marks = ",".join("?" * len(keys))
        with self._lock:
            rows = self._db.execute(
                f"SELECT key, choice_json, reply_model FROM llm_cache WHERE key IN ({marks})", keys
            ).fetchall()
            self._mark_used([r[0] for r in rows])
        return {k: CachedSample(choice_from_json(c), m) for k, c, m in rows}

    def put_many(
        self, identity: Mapping[str, Any], p_hash: str, first_index: int, choices: tuple[Choice, ...], reply_model: str
    ) -> list[CachedSample]:
        """Store samples ``first_index ..`` and return what the cache now holds for them."""
        request_json = canonical_json(identity)
        keys = [sample_key(identity, first_index + i) for i in range(len(choices))]
        now = time.time()
        rows = [
            (
                key,
                p_hash,
                first_index + i,
                str(identity.get("endpoint", "")),
                str(identity.get("model", "")),
                reply_model,
                choice_to_json(choice),
                request_json,
                now,
            )
            for i, (key, choice) in enumerate(zip(keys, choices, strict=False))
        ]
        with self._lock:
            with self._db:  # one transaction
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR IGNORE INTO llm_cache VALUES (?,?,?,?,?,?,?,?,?)", rows)
        stored = self.get_many(keys)
        return [stored[k] for k in keys]

    def _mark_used(self, keys: list[str]) -> None:
        if self.run_id is not None and keys:
            self._db.executemany("INSERT OR IGNORE INTO llm_cache_runs VALUES (?, ?)", [(self.run_id, k) for k in keys])

    def samples_by_prompt(self, run_id: str | None = None) -> dict[str, dict[int, Choice]]:
        """prompt hash -> sample index -> Choice, for one run (or all entries when ``run_id`` is None)."""
        query = "SELECT prompt_hash, sample_index, choice_json FROM llm_cache"
        args: tuple[Any, ...] = ()
        if run_id is not None:
            query += " WHERE key IN (SELECT key FROM llm_cache_runs WHERE run_id = ?)"
            args = (run_id,)
        table: dict[str, dict[int, Choice]] = {}
        with self._lock:
            # Oldest first so that, if one prompt was asked with different
            # settings, each sample index keeps its earliest answer.
            for p_hash, index, choice in self._db.execute(query + " ORDER BY created_at, rowid", args):
                table.setdefault(p_hash, {}).setdefault(index, choice_from_json(choice))
        return table

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM llm_cache").fetchone()[0])


CacheMode = Literal["readwrite", "replay"]


class _Wrapper:
    """A model in front of ``inner``: it answers to the inner model's name and endpoint.

    Label probes look through it to ``inner`` (``label_probe_via_inner``).
    """

    label_probe_via_inner = True

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.endpoint = str(getattr(inner, "endpoint", inner.name))


class CachedModel(_Wrapper):
    """Serve samples from a ``ResponseCache``; ask ``inner`` only for missing ones.

    ``usage`` on the reply counts only what the inner model was paid for in
    this call (hits are free); ``cached`` is True when every sample was a hit.
    In ``replay`` mode a miss raises ``ModelUnavailable`` and the inner model
    is never called.
    """

    def __init__(self, inner: Model, cache: ResponseCache, mode: CacheMode = "readwrite") -> None:
        if mode not in ("readwrite", "replay"):
            raise ConfigError(f"cache mode must be 'readwrite' or 'replay', got {mode!r}")
        super().__init__(inner)
        self.cache = cache
        self.mode = mode

    def __repr__(self) -> str:
        return f"CachedModel({self.inner!r}, {self.cache!r}, mode={self.mode!r})"

    async def generate(self, request: ModelRequest) -> ModelReply:
        identity = request_identity(self.inner, request)
        indices = list(range(request.sample_offset, request.sample_offset + request.n))
        keys = {i: sample_key(identity, i) for i in indices}
        hits = self.cache.get_many(list(keys.values()))
        have = {i: hits[k] for i, k in keys.items() if k in hits}
        missing = [i for i in indices if i not in have]
        p_hash = prompt_hash(request)
        if missing and self.mode == "replay":
            raise ModelUnavailable(
                f"{len(missing)} of {request.n} samples for role {request.role!r} (model {self.name}, prompt "
                f"{p_hash[:12]}) are not in the response cache {self.cache.path}; replay needs the cache written "
                "by a readwrite run with the same prompts, model, endpoint and sampling settings"
            )
        usage = Usage()
        # Ask for each contiguous run of missing indices, so sample numbering stays exact.
        runs: list[list[int]] = []
        for i in missing:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        replies = await asyncio.gather(
            *(self.inner.generate(replace(request, n=len(run), sample_offset=run[0])) for run in runs)
        )
        for run, reply in zip(runs, replies, strict=False):
            if len(reply.choices) != len(run):
                raise ModelUnavailable(
                    f"model {self.name} returned {len(reply.choices)} choices for {len(run)} requested samples; "
                    "a Model must return exactly request.n choices"
                )
            stored = self.cache.put_many(identity, p_hash, run[0], reply.choices, reply.model or self.name)
            have.update(zip(run, stored, strict=False))
            usage = usage + reply.usage
        model = next((s.reply_model for s in have.values() if s.reply_model), self.name)
        return ModelReply(choices=tuple(have[i].choice for i in indices), usage=usage, model=model, cached=not missing)

    async def label_score(
        self, messages: tuple[Message, ...], prefix: str, *, tag: str, labels: Sequence[str], role: str
    ) -> LabelScore:
        """A label probe served from the cache, or asked of the inner model and stored (one sample)."""
        inner = self.inner
        scorer = find_label_scorer(inner)
        if scorer is None:
            raise ModelUnavailable(f"model {self.name} cannot read label probabilities")
        request = probe_request(messages, prefix, tag, role)
        identity = probe_identity(inner, request, prefix, tag, labels)
        key = sample_key(identity, 0)
        p_hash = prompt_hash(request)
        hit = self.cache.get_many([key]).get(key)
        if hit is not None:
            return LabelScore(json.loads(hit.choice.text), Usage(), hit.reply_model, cached=True)
        if self.mode == "replay":
            raise ModelUnavailable(
                f"the label probe for role {role!r} (model {self.name}, prompt {p_hash[:12]}) is not in the "
                f"response cache {self.cache.path}; replay needs the cache written by a readwrite run"
            )
        score = await scorer.label_score(messages, prefix, tag=tag, labels=labels, role=role)
        choice = Choice(canonical_json(score.probs), finish_reason="verdict_probs")
        stored = self.cache.put_many(identity, p_hash, 0, (choice,), score.model or self.name)[0]
        return LabelScore(json.loads(stored.choice.text), score.usage, stored.reply_model)


def probe_identity(model: Any, request: ModelRequest, prefix: str, tag: str, labels: Sequence[str]) -> dict[str, Any]:
    """A label probe's cache identity: the prefilled ``request``'s identity plus ``probe_fields``.

    The request identity is that of the first model along ``model`` and the models it wraps (``.inner``)
    that defines ``cache_identity`` (a provider's resolved defaults), else ``request_identity(model)``.
    """
    owner = next((m for m in wrapped(model) if isinstance(m, CacheIdentified)), None)
    identity = owner.cache_identity(request) if owner is not None else request_identity(model, request)
    return {**identity, **probe_fields(prefix, tag, labels)}


@dataclass(frozen=True)
class CallRecord:
    """One model call as the engine stores it. Holds no prompt text and no credentials."""

    role: str
    model: str
    endpoint: str
    prompt_hash: str
    usage: Usage
    cached: bool
    latency_s: float
    n: int
    error: str | None = None


Recorder = Callable[[CallRecord], None]


_Reply = TypeVar("_Reply", ModelReply, LabelScore)


class RecordedModel(_Wrapper):
    """Wrap a model and hand a ``CallRecord`` to ``recorder`` after every call, failed ones included.

    It is also the ``ParseObserver`` of the models it wraps: the ``ParseRecord`` a role notes after reading a
    reply (``model.base.note_parse``) goes to ``on_parse`` (dropped when there is none).
    """

    def __init__(self, inner: Model, recorder: Recorder, on_parse: Callable[[ParseRecord], None] | None = None) -> None:
        super().__init__(inner)
        self.recorder = recorder
        self.on_parse = on_parse

    def parsed(self, record: ParseRecord) -> None:
        if self.on_parse is not None:
            self.on_parse(record)

    def __repr__(self) -> str:
        return f"RecordedModel({self.inner!r})"

    async def label_score(
        self, messages: tuple[Message, ...], prefix: str, *, tag: str, labels: Sequence[str], role: str
    ) -> LabelScore:
        """Forward a label probe and record it (n=1, the probe's prompt hash, its usage)."""
        scorer = find_label_scorer(self.inner)
        if scorer is None:
            raise ModelUnavailable(f"model {self.name} cannot read label probabilities")
        p_hash = prompt_hash(probe_request(messages, prefix, tag, role))
        call = scorer.label_score(messages, prefix, tag=tag, labels=labels, role=role)
        return await self._recorded(role, p_hash, 1, call)

    async def generate(self, request: ModelRequest) -> ModelReply:
        return await self._recorded(request.role, prompt_hash(request), request.n, self.inner.generate(request))

    async def _recorded(self, role: str, p_hash: str, n: int, call: Awaitable[_Reply]) -> _Reply:
        """Await ``call`` and record it: its model, usage and cache flag, or the error (no usage) when it raises."""
        start = time.monotonic()
        try:
            reply = await call
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            self.recorder(
                CallRecord(role, self.name, self.endpoint, p_hash, Usage(), False, time.monotonic() - start, n, error)
            )
            raise
        self.recorder(
            CallRecord(
                role,
                reply.model or self.name,
                self.endpoint,
                p_hash,
                reply.usage,
                reply.cached,
                time.monotonic() - start,
                n,
            )
        )
        return reply
