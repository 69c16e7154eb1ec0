"""ScriptedModel: a real, offline ``Model`` whose answers come from a script.

Three modes, one per constructor argument:

* **sequence** -- ``replies=[...]``: each sample consumes the next reply.
* **rules** -- ``rules=[Rule(...)]``: the first rule whose patterns match the
  request (regex on the last user message and/or the system message, exact
  ``request.role``) and that still has a reply left answers the sample. A rule
  consumes its ``replies`` in order; ``repeat=True`` cycles them forever. An
  exhausted rule stops matching, so a later, more general rule can take over.
* **function** -- ``function=callable(request) -> str | Choice`` (sync or
  async), called once per sample; programmatic only.

A reply is a string, a ``Choice``, or a mapping
``{"text": ..., "tool_calls": [{"name": ..., "arguments": {...}}], "finish_reason": ...}``.

Every call is appended to ``.calls``. Running out of replies raises
``ModelUnavailable`` naming the script, the request's role and the start of its
last user message -- never a silent default. Usage is estimated at about four
characters per token; cost is always 0.

Files (``scripted:<path>``) are YAML or JSON mappings::

    mode: sequence                 # or: rules
    replies: ["first", {"text": "second"}]
    rules:
      - {match: "propose", role: proposer, replies: ["idea A", "idea B"]}
      - {system: "critic", reply: "[IMPROVEMENT] tie --- same"}   # repeats

``ScriptedModel.from_store`` / ``from_pairs`` build replay fixtures that answer
recorded requests with their recorded replies (see those methods).
"""

from __future__ import annotations

import inspect
import json
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.model.base import Choice, Message, ModelReply, ModelRequest, ToolCall, Usage
from verifyless.model.cache import ResponseCache
from verifyless.model.wire import prompt_hash
from verifyless.yamlfile import read_yaml

ReplySpec = str | Choice | Mapping[str, Any]
ScriptFunction = Callable[[ModelRequest], Any]

CHARS_PER_TOKEN = 4


def estimate_tokens(text: str) -> int:
    """Rough token count (~4 characters per token); 0 for empty text."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def last_user_text(request: ModelRequest) -> str:
    for message in reversed(request.messages):
        if message.role == "user":
            return message.content
    return ""


def system_text(request: ModelRequest) -> str:
    return "\n".join(m.content for m in request.messages if m.role == "system")


def to_choice(spec: ReplySpec, *, call_id: Callable[[], str]) -> Choice:
    """Normalise a reply spec into a ``Choice``; tool-call ids come from ``call_id``."""
    if isinstance(spec, Choice):
        return spec
    if isinstance(spec, str):
        return Choice(text=spec)
    if isinstance(spec, Mapping):
        unknown = set(spec) - {"text", "tool_calls", "finish_reason"}
        if unknown:
            raise ConfigError(
                f"scripted reply has unknown keys {sorted(unknown)}; use 'text', 'tool_calls' and 'finish_reason'"
            )
        calls = []
        for raw in spec.get("tool_calls") or ():
            if "name" not in raw:
                raise ConfigError(f"scripted tool call {raw!r} needs a 'name'")
            args = raw.get("arguments", {})
            text_args = args if isinstance(args, str) else json.dumps(args)
            calls.append(ToolCall(id=str(raw.get("id") or call_id()), name=raw["name"], arguments=text_args))
        finish = spec.get("finish_reason") or ("tool_calls" if calls else "stop")
        return Choice(text=str(spec.get("text") or ""), tool_calls=tuple(calls), finish_reason=finish)
    raise ConfigError(f"a scripted reply must be a string or a mapping, got {type(spec).__name__}")


@dataclass
class Rule:
    """One rules-mode entry. Patterns are ``re.search`` regexes; None matches anything."""

    replies: Sequence[ReplySpec]
    match: str | None = None  # on the last user message
    system: str | None = None  # on the concatenated system messages
    role: str | None = None  # exact request.role
    repeat: bool = False
    used: int = 0

    def matches(self, request: ModelRequest) -> bool:
        if self.role is not None and request.role != self.role:
            return False
        if self.match is not None and not re.search(self.match, last_user_text(request), re.S):
            return False
        if self.system is not None and not re.search(self.system, system_text(request), re.S):
            return False
        return self.repeat or self.used < len(self.replies)

    def take(self) -> ReplySpec:
        spec = self.replies[self.used % len(self.replies)]
        self.used += 1
        return spec

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> Rule:
        unknown = set(raw) - {"match", "system", "role", "replies", "reply", "repeat"}
        if unknown:
            raise ConfigError(f"scripted rule has unknown keys {sorted(unknown)}")
        if ("reply" in raw) == ("replies" in raw):
            raise ConfigError(
                f"scripted rule {dict(raw)!r} needs exactly one of 'reply' (repeats) or 'replies' (a list)"
            )
        if "reply" in raw:
            return cls(
                replies=[raw["reply"]],
                match=raw.get("match"),
                system=raw.get("system"),
                role=raw.get("role"),
                repeat=bool(raw.get("repeat", True)),
            )
        replies = raw["replies"]
        if not isinstance(replies, list) or not replies:
            raise ConfigError(f"scripted rule 'replies' must be a non-empty list, got {replies!r}")
        return cls(
            replies=replies,
            match=raw.get("match"),
            system=raw.get("system"),
            role=raw.get("role"),
            repeat=bool(raw.get("repeat", False)),
        )


@dataclass(frozen=True)
class ScriptedCall:
    """One recorded call: the request and the reply given (None when it raised)."""

    request: ModelRequest
    reply: ModelReply | None
    error: str | None = None


@dataclass
class ScriptedModel:
    """An offline ``Model`` answering from a script; see the module docstring."""

    replies: Sequence[ReplySpec] | None = None
    rules: Sequence[Rule] | None = None
    function: ScriptFunction | None = None
    name: str = "scripted"
    source: str = "<inline script>"
    calls: list[ScriptedCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        modes = [m for m in (self.replies, self.rules, self.function) if m is not None]
        if len(modes) != 1:
            raise ConfigError("ScriptedModel needs exactly one of replies= (sequence), rules= or function=")
        if self.rules is not None:
            self.rules = [r if isinstance(r, Rule) else Rule.from_mapping(r) for r in self.rules]
        self._next = 0
        self._ids = 0
        # The test server answers from worker threads; consumption must be atomic.
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"scripted:{self.source}"

    @property
    def mode(self) -> str:
        return "sequence" if self.replies is not None else "rules" if self.rules is not None else "function"

    def __repr__(self) -> str:
        return f"ScriptedModel(mode={self.mode!r}, source={self.source!r}, calls={len(self.calls)})"

    # -- construction -------------------------------------------------------
    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedModel:
        """Load a YAML or JSON script (format in the module docstring)."""
        path = Path(path)
        if not path.is_file():
            raise ConfigError(
                f"scripted model file {str(path)!r} does not exist; pass scripted:<path to .yaml or .json>"
            )
        if path.suffix == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"scripted model file {str(path)!r} is not valid JSON: {exc}") from None
        else:
            data = read_yaml(path, "scripted model file")
        if isinstance(data, list):
            data = {"mode": "sequence", "replies": data}
        if not isinstance(data, dict):
            raise ConfigError(
                f"scripted model file {str(path)!r} must hold a mapping with 'mode' and 'replies' or 'rules'"
            )
        mode = data.get("mode") or ("rules" if "rules" in data else "sequence")
        if mode == "sequence":
            if not isinstance(data.get("replies"), list):
                raise ConfigError(f"{path}: sequence mode needs a 'replies' list")
            return cls(replies=data["replies"], source=str(path), name=str(data.get("name", "scripted")))
        if mode == "rules":
            if not isinstance(data.get("rules"), list):
                raise ConfigError(f"{path}: rules mode needs a 'rules' list")
            rules = [Rule.from_mapping(r) for r in data["rules"]]
            return cls(rules=rules, source=str(path), name=str(data.get("name", "scripted")))
        raise ConfigError(
            f"{path}: unknown mode {mode!r}; use 'sequence' or 'rules' (function mode is programmatic only)"
        )

    @classmethod
    def from_pairs(
        cls,
        pairs: Iterable[tuple[ModelRequest, ModelReply]],
        *,
        name: str = "scripted",
        source: str = "<recorded pairs>",
    ) -> ScriptedModel:
        """A fixture answering each recorded request with its recorded reply.

        Requests are matched on their prompt (messages + tools, see
        ``cache.prompt_hash``); sample ``i`` of a request is choice
        ``i - sample_offset`` of the recorded reply, so asking again for the
        same samples gives byte-identical choices in any call order.
        """
        table: dict[str, dict[int, Choice]] = {}
        for request, reply in pairs:
            slot = table.setdefault(prompt_hash(request), {})
            for i, choice in enumerate(reply.choices):
                slot.setdefault(request.sample_offset + i, choice)
        return cls(function=_ReplayTable(table, source), name=name, source=source)

    @classmethod
    def from_store(cls, db_path: str | Path, run_id: str | None = None) -> ScriptedModel:
        """A fixture built from the ``llm_cache`` entries of a run store DB.

        Uses the ResponseCache entries (not the store's call records, which
        hold hashes and usage but no text). With ``run_id`` only entries that
        run wrote or read are used; ``None`` takes every entry in the file.
        """
        cache = ResponseCache(db_path, create=False)
        try:
            table = cache.samples_by_prompt(run_id)
        finally:
            cache.close()
        if not table:
            which = f"run {run_id!r}" if run_id else "any run"
            raise ConfigError(
                f"{db_path} holds no cached LLM replies for {which}; record a run with the response cache enabled first"
            )
        return cls(function=_ReplayTable(table, f"{db_path}#{run_id or '*'}"), source=f"{db_path}#{run_id or '*'}")

    # -- answering ----------------------------------------------------------
    def _call_id(self) -> str:
        self._ids += 1
        return f"call_{self._ids}"

    def _exhausted(self, request: ModelRequest, detail: str) -> ModelUnavailable:
        head = last_user_text(request)[:80].replace("\n", " ")
        return ModelUnavailable(
            f"scripted model {self.source} ran out of replies ({detail}) for role {request.role!r}, "
            f"last user message starting {head!r}; add replies or a matching rule to the script"
        )

    def _one(self, request: ModelRequest) -> Choice:
        if self.replies is not None:
            if self._next >= len(self.replies):
                raise self._exhausted(request, f"all {len(self.replies)} sequence replies used")
            spec = self.replies[self._next]
            self._next += 1
            return to_choice(spec, call_id=self._call_id)
        if self.rules is not None:
            for rule in self.rules:
                if rule.matches(request):
                    return to_choice(rule.take(), call_id=self._call_id)
            raise self._exhausted(request, f"no rule of {len(self.rules)} matches or has replies left")
        raise AssertionError("function mode is answered in generate")

    def reply(self, request: ModelRequest) -> ModelReply:
        """Synchronous answer for sequence and rules modes (used by the test server)."""
        with self._lock:
            try:
                choices = tuple(self._one(request) for _ in range(request.n))
            except ModelUnavailable as exc:
                self.calls.append(ScriptedCall(request, None, str(exc)))
                raise
            reply = self._finish(request, choices)
            self.calls.append(ScriptedCall(request, reply))
            return reply

    async def generate(self, request: ModelRequest) -> ModelReply:
        if self.function is None:
            return self.reply(request)
        choices = []
        try:
            for i in range(request.n):
                sample = request if request.n == 1 else _sample_request(request, request.sample_offset + i)
                out = self.function(sample)
                if inspect.isawaitable(out):
                    out = await out
                if out is None:
                    raise self._exhausted(request, "the script function returned None")
                choices.append(to_choice(out, call_id=self._call_id))
        except ModelUnavailable as exc:
            self.calls.append(ScriptedCall(request, None, str(exc)))
            raise
        reply = self._finish(request, tuple(choices))
        self.calls.append(ScriptedCall(request, reply))
        return reply

    def _finish(self, request: ModelRequest, choices: tuple[Choice, ...]) -> ModelReply:
        prompt = estimate_tokens("".join(m.content for m in request.messages))
        completion = sum(estimate_tokens(c.text + "".join(t.name + t.arguments for t in c.tool_calls)) for c in choices)
        return ModelReply(choices=choices, usage=Usage(prompt, completion, 0.0), model=self.name)


def _sample_request(request: ModelRequest, index: int) -> ModelRequest:
    """The single-sample request for sample ``index`` (so functions see which sample they draw)."""

    return replace(request, n=1, sample_offset=index)


class _ReplayTable:
    """Function-mode body for replay fixtures: prompt hash -> sample index -> Choice."""

    def __init__(self, table: Mapping[str, Mapping[int, Choice]], source: str) -> None:
        self.table = table
        self.source = source

    def __call__(self, request: ModelRequest) -> Choice:
        key = prompt_hash(request)
        samples = self.table.get(key)
        if samples is None or request.sample_offset not in samples:
            have = 0 if samples is None else len(samples)
            head = last_user_text(request)[:80].replace("\n", " ")
            raise ModelUnavailable(
                f"replay fixture {self.source} has no recorded sample {request.sample_offset} for role "
                f"{request.role!r} (prompt {key[:12]}, {have} samples recorded), last user message starting "
                f"{head!r}; the request differs from the recorded run or asks for more samples than it drew"
            )
        return samples[request.sample_offset]


def message_from_mapping(raw: Mapping[str, Any]) -> Message:
    """Parse an OpenAI chat message dict into a ``Message`` (used by the test server)."""
    calls = tuple(
        ToolCall(id=str(c.get("id", "")), name=c["function"]["name"], arguments=c["function"].get("arguments", ""))
        for c in raw.get("tool_calls") or ()
    )
    content = raw.get("content")
    if isinstance(content, list):  # content parts: keep the text parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return Message(
        role=raw["role"],
        content=content or "",
        tool_calls=calls,
        tool_call_id=raw.get("tool_call_id"),
        name=raw.get("name"),
    )
