"""Ask for a reply in a format, remind once, and say how it went: ``ask_parsed``.

Real models drift from the asked format (prose around a tag, a tag in another case, an answer cut short).
Before a reply counts as unreadable, the role sends it back with a short reminder in the same conversation;
the outcome (``first``, ``reminder`` or ``never``) is noted on the model (``model.base.note_parse``), which
the run's recorder stores per role. Parsing stays with the caller: it passes ``parse``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from verifyless.model.base import Message, Model, ModelRequest, Usage, note_parse

T = TypeVar("T")


@dataclass(frozen=True)
class Asked(Generic[T]):
    """What ``ask_parsed`` got: the parsed ``value`` (None when no reply parsed), the last reply's ``text``,
    every reply's text in order, what they cost, and the attempt that parsed (0: first; -1: none).
    ``empty``: the last reply had no choices at all (a model failure, not a format problem: not reminded)."""

    value: T | None
    text: str
    texts: tuple[str, ...]
    usage: Usage
    attempt: int
    empty: bool = False


async def ask_parsed(
    model: Model,
    request: ModelRequest,
    parse: Callable[[str], T | None],
    reminder: str | Callable[[str], str],
    *,
    reminders: int = 1,
    reminded: bool = False,
) -> Asked[T]:
    """Send ``request`` (one sample); while ``parse(text)`` is None, send the reply back with ``reminder`` (a
    text, or a function of the failed reply) up to ``reminders`` times. Notes the outcome under
    ``request.role`` (``reminded``: the request already ends with a reminder, so no success counts as
    ``first``). ``ModelUnavailable`` from the model propagates (an infrastructure failure)."""
    conversation = list(request.messages)
    usage = Usage()
    texts: list[str] = []
    for attempt in range(reminders + 1):
        reply = await model.generate(dataclasses.replace(request, messages=tuple(conversation), n=1))
        usage = usage + reply.usage
        text = reply.text
        texts.append(text)
        if not reply.choices:
            note_parse(model, request.role, "never", "the model returned no choices")
            return Asked(None, text, tuple(texts), usage, -1, empty=True)
        value = parse(text)
        if value is not None:
            note_parse(model, request.role, "first" if attempt == 0 and not reminded else "reminder")
            return Asked(value, text, tuple(texts), usage, attempt)
        nudge = reminder(text) if callable(reminder) else reminder
        conversation += [Message("assistant", text), Message("user", nudge)]
    note_parse(model, request.role, "never", f"unreadable reply: {texts[-1][:200]!r}")
    return Asked(None, texts[-1], tuple(texts), usage, -1)
