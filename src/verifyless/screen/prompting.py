"""Context formatting and tag parsing shared by the LLM screeners.

The screener prompts are package data under ``verifyless/prompts/screen/``,
loaded and rendered by ``verifyless.prompts``; this module formats the
values they are filled with (``metric_line``, ``format_context``).

``parse_choice`` reads the ``[CHOICE] X --- reason`` tag that the pairwise
judge, the arbiter and the final-node judge end with, and the equivalent
forms models commonly use instead (a final JSON object, a ``Winner: X`` last
line); see its docstring for exactly which.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from verifyless.roles.parse import clean_reply
from verifyless.screen.base import ContextNode
from verifyless.task.base import Task


def metric_line(task: Task) -> str:
    better = "higher" if task.metric.direction == "maximize" else "lower"
    return f"{task.metric.name} ({better} is better)"


def format_context_node(i: int, node: ContextNode, with_code: bool = True) -> str:
    """One executed solution: its number, validation score, description and (when known) its program."""
    text = (node.summary or node.idea or "(no description)").strip()
    out = f"### Solution {i} (validation score: {node.score:.6g})\n{text}"
    if with_code and node.program.strip():
        out += f"\n\n```python\n{node.program.rstrip()}\n```"
    return out


def format_context(nodes: Sequence[ContextNode], with_code: bool = True) -> str:
    """Numbered list of executed solutions with their validation scores (and code when known)."""
    if not nodes:
        return "(no executed solutions yet)"
    return "\n\n".join(format_context_node(i, node, with_code) for i, node in enumerate(nodes, 1))


# ------------------------------------------------------------------ tag parsing

# Markdown decoration a model may wrap around a tag or its value.
_DECORATION = re.compile(r"[*`]+|(?<!\w)_+|_+(?!\w)")
_LINE_PREFIX = re.compile(r"^\s*(?:#+|>|[-+•]|\d+[.)])?\s*")
_SEPARATORS = " \t:=-–—|>\"'([.,;"


def clean_line(line: str) -> str:
    """Drop bold/italic/code marks and heading or bullet prefixes from one line."""
    return _LINE_PREFIX.sub("", _DECORATION.sub("", line))


def tag_values(text: str, tag: str) -> list[str]:
    """Text following each occurrence of ``tag`` (e.g. ``CHOICE``), in order.

    Bracketed tags (``[CHOICE]``, any case, spaces allowed inside the brackets)
    may appear anywhere on a line. Only when no bracketed tag exists, a bare
    ``CHOICE:`` at the start of a line is accepted as well. The returned
    strings are the rest of the line after the tag, decoration removed.
    """
    bracketed = re.compile(r"\[\s*" + tag + r"\s*\]", re.IGNORECASE)
    bare = re.compile(r"^" + tag + r"\s*[:：]", re.IGNORECASE)
    found: list[str] = []
    lines = [clean_line(line) for line in text.splitlines()]

    def rest_of(i: int, end: int) -> str:
        rest = lines[i][end:]
        if rest.strip(" \t:=-–—"):
            return rest
        # The value was put on the next non-empty line ("[CHOICE]\nB").
        following = next((line for line in lines[i + 1 :] if line.strip()), "")
        return following

    for i, line in enumerate(lines):
        for match in bracketed.finditer(line):
            found.append(rest_of(i, match.end()))
    if found:
        return found
    for i, line in enumerate(lines):
        head = bare.match(line)
        if head:
            found.append(rest_of(i, head.end()))
    return found


def is_template_echo(rest: str) -> bool:
    """True for a restated format line such as ``A | B`` or ``improve/lose/tie``.

    One slash alone (``N/A``) is a value, not an echo; a pipe after the first
    word, or two slashes, mark a menu of options. So does a pipe anywhere
    before the reason (``---``): a real 0.5B critic wrote ``improve 5% | lose
    20% | tie --- ...``, the menu with numbers, which is no verdict.
    """
    rest = rest.lstrip(" \t:=-–—\"'([")
    head = re.split(r"\s-{2,}|\s[—–]\s", rest, maxsplit=1)[0]
    return (
        re.match(r"^[\w#]+\s*[\])]?\s*\|\s*\w", rest) is not None
        or re.match(r"^\w+\s*/\s*\w+\s*/\s*\w", rest) is not None
        or re.match(r"^[\w#][^|]*\|\s*\w", head) is not None
    )


def split_value(rest: str) -> tuple[str, str]:
    """Split ``rest`` into ``(value word, reason)``; separators between them are dropped."""
    rest = rest.lstrip(_SEPARATORS)
    match = re.match(r"([A-Za-z0-9#][A-Za-z0-9#/.]*)", rest)
    if not match:
        return "", rest.strip()
    value = match.group(1).rstrip(".")
    reason = rest[match.end() :].lstrip(" \t:=-–—|])\"'.,;").strip()
    return value, reason


_CHOICE_FILLERS = {"candidate", "option", "solution", "idea", "number", "no", "no.", "variant"}
_CHOICE_KEYS = ("choice", "winner", "answer", "pick", "selected", "selection", "best")
_AMBIGUOUS = re.compile(r"^\s*(?:(?:or|and|vs\.?|versus|nor)\b|[/&])", re.IGNORECASE)
_LAST_LINE = re.compile(
    r"^(?:my\s+|the\s+)?(?:final\s+)?(?:winner|choice|answer|pick|selection|decision|verdict)"
    r"(?:\s+(?:is|candidate|solution|option))?\s*[:=]\s*(?P<rest>.+)$",
    re.IGNORECASE,
)
# The reply's closing sentence naming the pick ("... Therefore, the choice is A.") and a first line that is the tag's
# value with the tag left out ("A --- Candidate A suggests ..."): both written by Qwen2.5-Coder-1.5B as a judge.
_CLOSING = re.compile(
    r"(?:^|[.!?]\s+)(?:so,?\s+|therefore,?\s+|thus,?\s+|hence,?\s+)?(?:my\s+|the\s+)?(?:final\s+)?"
    r"(?:choice|winner|answer|pick|selection|decision)\s+is\s+(?P<rest>[^.!?\n]+)[.!]?\s*$",
    re.IGNORECASE,
)
_UNTAGGED = re.compile(r"^(?P<rest>[\w#]+)\s*(?:-{2,}|[—–])\s")
_FENCE_END = re.compile(r"\n?[ \t]*(?:`{3,}|~{3,})[ \t]*$")


def final_json(text: str) -> dict | None:
    """The JSON object a reply ends with (bare or in a closing fence), or None.

    Only an object at the very end counts: a JSON example in the middle of the
    reasoning is not a verdict.
    """
    body = _FENCE_END.sub("", clean_reply(text or "").rstrip()).rstrip()
    if not body.endswith("}"):
        return None
    starts = [i for i, ch in enumerate(body) if ch == "{"]
    for start in reversed(starts[-64:]):
        try:
            obj = json.loads(body[start:])
        except ValueError:
            continue
        if isinstance(obj, dict):
            return {str(k).lower(): v for k, v in obj.items()}
    return None


def json_value(obj: Mapping[str, object] | None, keys: Sequence[str]) -> str | None:
    """The first of ``keys`` present in ``obj`` (already lower-cased keys), as text; None if absent."""
    if not obj:
        return None
    for key in keys:
        if key in obj and isinstance(obj[key], (str, int)) and not isinstance(obj[key], bool):
            return str(obj[key])
    return None


def option_word(rest: str, allowed: Mapping[str, str]) -> str | None:
    """The option that ``rest`` names first, or None when it names none or hedges ("A or B")."""
    word, tail = split_value(rest.lstrip(_SEPARATORS))
    if word.lower() in _CHOICE_FILLERS:
        word, tail = split_value(tail)
    if _AMBIGUOUS.match(tail):
        return None
    return allowed.get(word.lstrip("#").lower())


def last_line(text: str) -> str:
    """The last non-empty line of a reply after markdown decoration is removed."""
    lines = [clean_line(line).strip() for line in clean_reply(text or "").splitlines()]
    lines = [line for line in lines if line and not _FENCE_END.fullmatch(line)]
    return lines[-1] if lines else ""


def parse_choice(text: str, options: Sequence[str]) -> str | None:
    """The option a judge reply names, or None. Never guessed from the first letter mentioned.

    ``options`` are the allowed answers (letters ``A``, ``B`` or numbers
    ``1``..``N``); matching ignores case, a leading ``#`` and a filler word
    such as ``Candidate``. Accepted forms, first one present decides:

    1. ``[CHOICE] X`` tags (or a bare ``CHOICE: X`` line when no bracketed tag
       exists). Restated format lines (``A | B``) are skipped; the last tag
       decides, and if its value is not an option, or hedges (``A or B``),
       the reply is unparseable rather than falling back to an earlier tag.
    2. A JSON object that ends the reply, with a ``choice``, ``winner``,
       ``answer``, ``pick``, ``selected``, ``selection`` or ``best`` key.
    3. A last line ``Winner: X`` (also ``Choice``, ``Answer``, ``Final answer``,
       ``Decision``, ``Verdict``, ``Selection``, ``Pick``).
    4. A reply that is nothing but one option (``B``, ``**B**``, ``Candidate 2.``): a real 0.5B judge told to
       "write exactly one letter after the tag" wrote the letter alone.
    5. A last line that ends with a sentence naming the pick (``... Therefore, the choice is A.``).
    6. A reply whose first line is the tag's value without the tag (``A --- Candidate A suggests ...``).
    Forms 5 and 6 are what a real 1.5B judge wrote (tests/fixtures/real_replies.yaml).

    Hidden reasoning (``<think>...</think>``) is ignored.
    """
    allowed = {o.lower(): o for o in options}
    text = clean_reply(text or "")
    values = [v for v in tag_values(text, "CHOICE") if not is_template_echo(v)]
    if values:
        return option_word(values[-1], allowed)
    value = json_value(final_json(text), _CHOICE_KEYS)
    if value is not None:
        return option_word(value, allowed)
    match = _LAST_LINE.match(last_line(text))
    if match and not is_template_echo(match.group("rest")):
        return option_word(match.group("rest"), allowed)
    bare = clean_line(text.strip()).strip(" \t.!:")
    if bare and "\n" not in bare and len(bare.split()) <= 2:
        return option_word(bare, allowed)
    if closing := _CLOSING.search(last_line(text)):
        return option_word(closing.group("rest"), allowed)
    first = clean_line(text.strip().split("\n", 1)[0]).strip()
    if (untagged := _UNTAGGED.match(first)) and untagged.group("rest").lstrip("#").lower() in allowed:
        return option_word(untagged.group("rest"), allowed)
    return None


__all__ = [
    "clean_line",
    "final_json",
    "format_context",
    "format_context_node",
    "json_value",
    "last_line",
    "is_template_echo",
    "metric_line",
    "option_word",
    "parse_choice",
    "split_value",
    "tag_values",
]
