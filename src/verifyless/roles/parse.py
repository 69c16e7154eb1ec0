"""Turn LLM replies into structure: code blocks, SEARCH/REPLACE edits, sections.

Pure functions on text, no model and no I/O, so every reply variant can be
tested in a table. Functions that cannot find what they look for either
return ``None`` (the caller decides whether that is a candidate failure) or
raise ``verifyless.errors.ParseError`` with a message written to be shown to
the model as feedback.

Every entry point first normalises line endings (CRLF / CR -> LF) and drops
hidden reasoning (``<think>...</think>``) that some served models prepend.

Code-block policy (``pick_code_block``): among fenced blocks whose language is
Python or unlabelled, take the **longest**; ties go to the later block. A
replacement band is the whole editable region, so it is almost always the
longest block, while snippets before it (the part being changed) or after it
(a usage example) are shorter. Blocks in other languages (``bash``, ``text``)
are used only when there is nothing else. A block equal to ``avoid`` (the
unchanged parent band, often echoed before the new version) is skipped when
another block exists. A missing closing fence (a truncated reply) still yields
the block, running to the end of the reply.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from verifyless.errors import ParseError

_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_PY_LANGS = {"", "python", "py", "python3", "py3", "ipython", "python-repl"}


def clean_reply(text: str) -> str:
    """LF line endings, no hidden reasoning block, no surrounding whitespace."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _THINK.sub("", text)
    if "</think>" in text.lower():  # opening tag cut off by the server: drop the reasoning before it
        text = text[text.lower().rindex("</think>") + len("</think>") :]
    return text.strip("\n")


# ---------------------------------------------------------------- code blocks


@dataclass(frozen=True)
class CodeBlock:
    """One fenced block: its language tag (lower case, may be empty) and body."""

    lang: str
    body: str
    closed: bool = True


def code_blocks(text: str) -> list[CodeBlock]:
    """All fenced blocks (``` or ~~~, any indentation) in reply order.

    A block closes at a bare fence of the same character that is at least as
    long as the opening one; an unclosed block runs to the end of the text.
    The fence's own indentation is removed from body lines that carry it.
    """
    blocks: list[CodeBlock] = []
    lines = clean_reply(text).split("\n")
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent = m.group("fence"), m.group("indent")
        lang = (m.group("info").split() or [""])[0].lower()
        body: list[str] = []
        i += 1
        closed = False
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= len(fence):
                closed = True
                i += 1
                break
            body.append(line[len(indent) :] if indent and line.startswith(indent) else line)
            i += 1
        blocks.append(CodeBlock(lang, "\n".join(body), closed))
    return blocks


def pick_code_block(text: str, avoid: str | None = None) -> str | None:
    """The replacement code in ``text`` by the module's policy, or None if no fence."""
    blocks = code_blocks(text)
    if not blocks:
        return None
    pool = [b for b in blocks if b.lang in _PY_LANGS] or blocks
    if avoid is not None and len(pool) > 1:
        others = [b for b in pool if b.body.strip() != avoid.strip()]
        pool = others or pool
    best = max(enumerate(pool), key=lambda ib: (len(ib[1].body.strip()), ib[0]))[1]
    body = best.body.strip("\n")
    return body if body.strip() else None


def strip_code_blocks(text: str) -> str:
    """``text`` without any fenced block (an unclosed one is cut to the end)."""
    out: list[str] = []
    fence: str | None = None
    for line in clean_reply(text).split("\n"):
        m = _FENCE.match(line)
        if fence is None:
            if m:
                fence = m.group("fence")
            else:
                out.append(line)
        elif line.strip() and set(line.strip()) == {fence[0]} and len(line.strip()) >= len(fence):
            fence = None
    return "\n".join(out)


# ---------------------------------------------------------------- SEARCH/REPLACE


@dataclass(frozen=True)
class Edit:
    """One SEARCH/REPLACE pair (text without the marker lines)."""

    search: str
    replace: str


class EditError(ParseError):
    """A SEARCH block could not be applied; the message names the block and the nearest text."""

    def __init__(self, message: str, index: int = 0) -> None:
        super().__init__(message)
        self.index = index


_SEARCH = re.compile(r"^\s*<{5,9}\s*SEARCH\b.*$", re.I)
_DIVIDER = re.compile(r"^\s*={5,9}\s*$")
_REPLACE = re.compile(r"^\s*>{5,9}\s*REPLACE\b.*$", re.I)


def has_search_replace(text: str) -> bool:
    return any(_SEARCH.match(line) for line in clean_reply(text).split("\n"))


def parse_search_replace(text: str) -> list[Edit]:
    """Every ``<<<<<<< SEARCH / ======= / >>>>>>> REPLACE`` block, in order.

    Fences and prose between blocks are ignored. Returns ``[]`` when the reply
    has no SEARCH marker; raises ``ParseError`` for a block that is opened but
    not finished (missing divider or REPLACE marker).
    """
    lines = clean_reply(text).split("\n")
    edits: list[Edit] = []
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            i += 1
            continue
        n = len(edits) + 1
        j = i + 1
        while j < len(lines) and not _DIVIDER.match(lines[j]):
            if _SEARCH.match(lines[j]) or _REPLACE.match(lines[j]):
                raise ParseError(
                    f"SEARCH block {n} has no '=======' divider before its next marker (reply line {j + 1})"
                )
            j += 1
        if j >= len(lines):
            raise ParseError(
                f"SEARCH block {n} is never divided: add a '=======' line, the new text and '>>>>>>> REPLACE'"
            )
        k = j + 1
        while k < len(lines) and not _REPLACE.match(lines[k]):
            if _SEARCH.match(lines[k]):
                raise ParseError(
                    f"SEARCH block {n} has no '>>>>>>> REPLACE' line before the next SEARCH (reply line {k + 1})"
                )
            k += 1
        if k >= len(lines):
            raise ParseError(f"SEARCH block {n} is not closed: end it with a '>>>>>>> REPLACE' line")
        edits.append(Edit("\n".join(lines[i + 1 : j]), "\n".join(lines[j + 1 : k])))
        i = k + 1
    return edits


def apply_edits(text: str, edits: list[Edit], where: str = "the editable band") -> str:
    """Apply ``edits`` in order to ``text``; raise ``EditError`` for the first that fails.

    Matching is line based and forgiving, in three levels, the first level
    with any match wins: exact lines; lines equal after collapsing runs of
    whitespace and dropping trailing spaces (indentation kept); lines equal
    after stripping all indentation, in which case the replacement is
    re-indented by the difference. Blank lines at either end of a SEARCH text
    are ignored from the second level on. A SEARCH text that matches more than
    one place at its level is rejected as ambiguous rather than guessed. An
    empty SEARCH text is allowed only when ``text`` is blank (it fills it).
    """
    for n, edit in enumerate(edits, start=1):
        text = _apply_one(text, edit, n, len(edits), where)
    return text


def _norm_ws(line: str) -> str:
    indent = line[: len(line) - len(line.lstrip())]
    return indent + " ".join(line.split())


def _norm_all(line: str) -> str:
    return " ".join(line.split())


def _trim_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _find(hay: list[str], needle: list[str]) -> list[int]:
    m = len(needle)
    return [i for i in range(len(hay) - m + 1) if hay[i : i + m] == needle]


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _apply_one(text: str, edit: Edit, n: int, total: int, where: str) -> str:
    ends_nl = text.endswith("\n")
    hay = text.split("\n")
    if ends_nl:
        hay = hay[:-1]
    search = edit.search.split("\n")
    replace = edit.replace.split("\n") if edit.replace.strip() else []
    label = f"SEARCH block {n} of {total}"
    if not _trim_blank(search):
        if text.strip():
            raise EditError(f"{label} is empty; an empty SEARCH is only allowed when {where} is empty", n)
        return "\n".join(replace) + ("\n" if replace else "")

    trimmed = _trim_blank(search)
    levels = (
        ("exact", search, lambda s: s, False),
        ("whitespace-normalised", trimmed, _norm_ws, False),
        ("indentation-insensitive", trimmed, _norm_all, True),
    )
    for level, needle, norm, reindent in levels:
        hits = _find([norm(h) for h in hay], [norm(s) for s in needle])
        if not hits:
            continue
        if len(hits) > 1:
            where_lines = ", ".join(str(h + 1) for h in hits[:6])
            raise EditError(
                f"{label} matches {len(hits)} places in {where} ({level} match at lines {where_lines}); "
                "add surrounding lines to the SEARCH text so it matches exactly one place",
                n,
            )
        start = hits[0]
        new = replace
        if level != "exact":
            new = _trim_blank(replace) if replace else []
        if reindent and new:
            new = _reindent(new, _indent(next(s for s in needle if s.strip())), _indent(hay[start]))
        out = hay[:start] + new + hay[start + len(needle) :]
        return "\n".join(out) + ("\n" if ends_nl and out else "")
    raise EditError(_no_match_message(label, hay, trimmed, where), n)


def _reindent(lines: list[str], old: str, new: str) -> list[str]:
    out = []
    for line in lines:
        if not line.strip():
            out.append("")
        elif line.startswith(old):
            out.append(new + line[len(old) :])
        else:  # less indented than the block's first line: shift by the common difference
            out.append(new + line.lstrip() if len(new) > len(old) else line)
    return out


def _no_match_message(label: str, hay: list[str], needle: list[str], where: str) -> str:
    first = next(s for s in needle if s.strip()).strip()
    msg = (
        f"{label} did not match {where} (tried exact, whitespace-normalised and "
        f"indentation-insensitive matching). Its first line is {first[:80]!r}."
    )
    if not hay:
        return msg + f" {where.capitalize()} is empty."
    width = min(len(needle), len(hay))
    target = "\n".join(_norm_all(s) for s in needle)
    best, best_i = -1.0, 0
    for i in range(len(hay) - width + 1):
        window = "\n".join(_norm_all(h) for h in hay[i : i + width])
        ratio = difflib.SequenceMatcher(None, target, window, autojunk=False).ratio()
        if ratio > best:
            best, best_i = ratio, i
    shown = "\n".join(f"  {best_i + k + 1:>4}| {hay[best_i + k]}" for k in range(width))
    msg += f" The closest text in {where} is lines {best_i + 1}-{best_i + width} (similarity {best:.2f}):\n{shown}\n"
    for k in range(width):
        if k < len(needle) and _norm_all(needle[k]) != _norm_all(hay[best_i + k]):
            msg += f"First difference: SEARCH has {needle[k].strip()[:80]!r} where {where} has {hay[best_i + k].strip()[:80]!r}. "
            break
    return msg + "Copy SEARCH text exactly from the current code."


# ---------------------------------------------------------------- sections

_APPROACH = re.compile(
    r"^(?P<hash>#{1,6}\s*)?(?P<open>\*\*|__|\[)?\s*(?:\d+[.)]\s*)?(?:the\s+|proposed\s+|my\s+)?"
    r"approach\b(?:\s*\([^)\n]*\))?\s*(?P<close>\*\*|__|\])?\s*(?P<colon>[:.\u2014-])?\s*(?:\*\*|__)?\s*(?P<rest>.*)$",
    re.I,
)
_MD_HEADING = re.compile(r"^(#{1,6})\s+\S")
_TAG_LINE = re.compile(r"^\[[A-Z][A-Z0-9 _/-]*\]\s*$")
_BOLD_LINE = re.compile(r"^(?:\*\*|__)(?P<name>[^*_\n]{1,60}?)\s*:?\s*(?:\*\*|__)\s*:?\s*$")
_OTHER_SECTIONS = re.compile(
    r"^(?:expected|rationale|why|risks?|implementation|code|notes?|summary|title|impact|"
    r"changes?|plan|verification|evaluation|next steps?|alternatives?)\b",
    re.I,
)


def _approach_start(line: str) -> str | None:
    """The text after an Approach heading on ``line``, or None if it is no such heading."""
    m = _APPROACH.match(line.strip())
    if not m:
        return None
    rest = m.group("rest").strip()
    decorated = m.group("hash") or m.group("open") or m.group("colon")
    if not decorated and rest:  # "Approach this by ..." is prose, not a heading
        return None
    return rest.strip("*_ ")


def extract_approach(text: str, min_words: int = 5) -> str | None:
    """The Approach section of a proposer reply, without code blocks; None if unusable.

    Accepts ``## Approach``, ``**Approach:**`` (text may follow on the same
    line), ``Approach:``, ``[APPROACH]`` and no heading at all (then the whole
    reply is the approach). The section ends at the next markdown heading of
    the same or a higher level, a ``[TAG]`` line, or a bold line naming
    another section (Rationale, Expected impact, Code, ...). Fewer than
    ``min_words`` words left after cleaning means no usable idea.
    """
    lines = strip_code_blocks(text).split("\n")
    start, level, first = None, 7, ""
    for i, line in enumerate(lines):
        rest = _approach_start(line)
        if rest is not None:
            start, first = i, rest
            hashes = re.match(r"^(#{1,6})", line.strip())
            level = len(hashes.group(1)) if hashes else 7
            break
    if start is None:
        body = lines
    else:
        body = [first] if first else []
        for line in lines[start + 1 :]:
            s = line.strip()
            heading = _MD_HEADING.match(s)
            bold = _BOLD_LINE.match(s)
            if heading and len(heading.group(1)) <= level:
                break
            if _TAG_LINE.match(s):
                break
            if bold and _OTHER_SECTIONS.match(bold.group("name").strip()):
                break
            body.append(line)
    out = re.sub(r"\n{3,}", "\n\n", "\n".join(body)).strip()
    words = re.findall(r"[A-Za-z]{2,}", out)
    return out if len(words) >= min_words else None


_ITEM = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022+])\s+(?P<text>\S.*)$")
_HEAD_END = r"\s*(?:\([^)\n]*\))?\s*(?:\*\*|__|\])?\s*:?\s*(?:\*\*|__)?\s*$"
_CRITERIA_HEAD = re.compile(
    r"^(?:#{1,6}\s*)?(?:\*\*|__|\[)?\s*(?:\d+[.)]\s*)?(?:task[- ]specific\s+|evaluation\s+|review\s+)?criteria\b"
    + _HEAD_END,
    re.I,
)
_UNDERSTANDING_HEAD = re.compile(
    r"^(?:#{1,6}\s*)?(?:\*\*|__|\[)?\s*(?:\d+[.)]\s*)?(?:task\s+)?understanding\b" + _HEAD_END, re.I
)


def parse_brief(text: str, min_criteria: int = 4, max_criteria: int = 10) -> tuple[str, tuple[str, ...]]:
    """``(understanding, criteria)`` from a briefer reply; raises ``ParseError``.

    The criteria are the numbered or bulleted items under every heading that
    names criteria (``[CRITERIA]``, ``## Task-specific criteria``, ...), in
    order, repeats dropped: a real model split its ten criteria over two
    ``[CRITERIA]`` tags, and one that restates the format first gives a block
    with no items. Indented continuation lines join their item. The
    understanding is what precedes the first criteria heading that has items,
    minus its own heading. Fewer than ``min_criteria`` items is an error;
    items past ``max_criteria`` are dropped.
    """
    lines = clean_reply(text).split("\n")
    heads = [i for i, line in enumerate(lines) if _CRITERIA_HEAD.match(line.strip())]
    if not heads:
        raise ParseError("the reply has no criteria heading: expected a '[CRITERIA]' line followed by a numbered list")
    blocks = [(head, _criteria_items(lines[head + 1 :])) for head in heads]
    items: list[str] = []
    for _, found in blocks:
        items += [item for item in found if item not in items]
    head = next((h for h, found in blocks if found), heads[-1])
    before = lines[:head]
    marks = [i for i, line in enumerate(before) if _UNDERSTANDING_HEAD.match(line.strip())]
    if marks:  # drop any preamble and the heading itself
        before = before[marks[0] + 1 :]
    understanding = "\n".join(line for line in before if not _CRITERIA_HEAD.match(line.strip())).strip()
    if len(items) < min_criteria:
        raise ParseError(
            f"found {len(items)} criteria under the criteria heading, need at least {min_criteria}: "
            "write one numbered item per criterion"
        )
    if not understanding:
        raise ParseError("the task understanding before the criteria heading is empty")
    return understanding, tuple(items[:max_criteria])


def _criteria_items(lines: list[str]) -> list[str]:
    """The numbered or bulleted items at the top of ``lines``, up to the next heading or tag line."""
    items: list[str] = []
    for line in lines:
        s = line.strip()
        if _MD_HEADING.match(s) or _TAG_LINE.match(s):
            break
        m = _ITEM.match(line)
        if m:
            items.append(m.group("text").strip())
        elif s and items and (line[:1] in (" ", "\t")):
            items[-1] += " " + s
    return items


def echoes(text: str, prompt: str, n: int = 4, share: float = 0.8) -> bool:
    """True when ``text`` mostly repeats ``prompt``: at least ``share`` of its word ``n``-grams occur in it.

    Small models answer a format instruction by copying it (a real 0.5B proposer replied "## Approach / The
    change, stated concretely, and why it should improve `val_rmse` ..." word for word): such a reply is not
    an answer. Texts shorter than ``n`` words never echo.
    """
    words = lambda s: re.findall(r"[a-z0-9_]+", s.lower())
    mine, theirs = words(text), words(prompt)
    if len(mine) < n:
        return False
    grams = {tuple(theirs[i : i + n]) for i in range(len(theirs) - n + 1)}
    own = [tuple(mine[i : i + n]) for i in range(len(mine) - n + 1)]
    return sum(g in grams for g in own) >= share * len(own)


def clean_summary(text: str) -> str:
    """A summarizer reply without code blocks and without a leading "Summary:" label."""
    text = strip_code_blocks(text).strip()
    label = r"^(?:#{1,6}\s*)?(?:\*\*)?(?:child\s+|solution\s+)?summary(?:\*\*)?\s*:?\s*(?:\*\*)?\s*:?[ \t]*\n?"
    return re.sub(label, "", text, flags=re.I).strip()


def trim_words(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` words, at a sentence end when one is in the second half."""
    words = text.split()
    if len(words) <= limit:
        return text
    cut = " ".join(words[:limit])
    end = cut.rfind(".")
    return cut[: end + 1] if end > len(cut) // 2 else cut + " ..."


__all__ = [
    "CodeBlock",
    "Edit",
    "EditError",
    "apply_edits",
    "clean_reply",
    "clean_summary",
    "code_blocks",
    "extract_approach",
    "has_search_replace",
    "echoes",
    "parse_brief",
    "parse_search_replace",
    "pick_code_block",
    "strip_code_blocks",
    "trim_words",
]
