"""The Model contract: one async verb, ``generate(request) -> reply``.

Providers move text; they never render prompts or parse replies (roles do).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as the model produced it


@dataclass(frozen=True)
class Message:
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class Tool:
    """A function the model may call (OpenAI ``tools`` format)."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema


@dataclass(frozen=True)
class ModelRequest:
    messages: tuple[Message, ...]
    role: str = "default"  # which role is asking (for accounting and routing)
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    n: int = 1
    seed: int | None = None
    tools: tuple[Tool, ...] = ()
    stop: tuple[str, ...] = ()
    sample_offset: int = 0  # first sample index (for cache keys when drawing more later)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.cost + other.cost,
        )


@dataclass(frozen=True)
class Choice:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str = "stop"


@dataclass(frozen=True)
class ModelReply:
    choices: tuple[Choice, ...]  # exactly request.n of them
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    cached: bool = False

    @property
    def text(self) -> str:
        return self.choices[0].text if self.choices else ""


@runtime_checkable
class Model(Protocol):
    name: str

    async def generate(self, request: ModelRequest) -> ModelReply: ...


@runtime_checkable
class CacheIdentified(Protocol):
    """A model that names its own cache identity (its resolved defaults: ``OpenAIModel``, ``LocalModel``)."""

    def cache_identity(self, request: ModelRequest) -> dict[str, Any]: ...


WRAP_DEPTH = 16  # more wrappers than any stack of cache, recorder and counting wrappers builds


def wrapped(model: object) -> Iterator[object]:
    """``model``, then each model it wraps, outermost first.

    Wrappers (the response cache, the call recorder, counting and adapting wrappers) keep the model they
    wrap as ``inner``; a capability (a cache identity, label probes, in-process weights) is looked up along
    this chain, so wrapping a model never hides what it can do. Stops after ``WRAP_DEPTH`` models.
    """
    seen: object | None = model
    for _ in range(WRAP_DEPTH):
        if seen is None:
            return
        yield seen
        seen = getattr(seen, "inner", None)


ParseOutcome = Literal["first", "reminder", "never"]


@dataclass(frozen=True)
class ParseRecord:
    """Whether a role could read the reply it asked ``model`` for: on the ``first`` reply, after a format
    ``reminder``, or ``never`` (``reason`` says why). Holds no reply text."""

    role: str
    model: str
    outcome: ParseOutcome
    reason: str = ""


@runtime_checkable
class ParseObserver(Protocol):
    """A model wrapper that takes ``ParseRecord``s (``RecordedModel``, which hands them to the run log)."""

    def parsed(self, record: ParseRecord) -> None: ...


def note_parse(model: object, role: str, outcome: ParseOutcome, reason: str = "") -> None:
    """Tell the first ``ParseObserver`` along ``model``'s wrapper chain how a reply parsed; a no-op without one."""
    for m in wrapped(model):
        if isinstance(m, ParseObserver):
            m.parsed(ParseRecord(role, str(getattr(model, "name", "")), outcome, " ".join(reason.split())[:300]))
            return
