"""Prompt templates (package data) and the pieces of context they are filled with.

A prompt file ``roles/prompts/<name>.md`` is split into named sections by
lines of the form ``<!-- section: NAME -->``; ``system`` and ``user`` make the
two opening messages, other sections are fragments (retry feedback, optional
blocks, operator instructions). Placeholders are ``{identifier}``; ``{{`` and
``}}`` stand for literal braces. Rendering is a single pass, so braces inside
inserted values (programs with f-strings, dict literals) are never read as
placeholders, and a placeholder without a value raises ``TemplateError``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources

from verifyless.model.base import Message
from verifyless.program import BandError, split
from verifyless.task.base import Band, Task

_SECTION = re.compile(r"^<!--\s*section:\s*([a-z_][a-z0-9_]*)\s*-->\s*$", re.M)
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TemplateError(KeyError):
    """A template names a placeholder nobody filled, or a section that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


@cache
def load_prompt(name: str) -> Mapping[str, str]:
    """The sections of ``prompts/<name>.md`` (text trimmed of surrounding blank lines)."""
    path = resources.files("verifyless.roles").joinpath("prompts", f"{name}.md")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TemplateError(f"prompt file prompts/{name}.md is missing from the verifyless package") from exc
    parts = _SECTION.split(text)
    sections = {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts) - 1, 2)}
    if not sections:
        raise TemplateError(f"prompts/{name}.md has no '<!-- section: NAME -->' lines")
    return sections


def placeholders(template: str) -> set[str]:
    """Names of the placeholders in ``template``."""
    return {m.group(1) for m in _PLACEHOLDER.finditer(template) if m.group(1)}


def render(template: str, values: Mapping[str, object], where: str = "template") -> str:
    """Fill ``template``; raise ``TemplateError`` naming every missing placeholder."""
    missing = sorted(placeholders(template) - set(values))
    if missing:
        raise TemplateError(f"{where} needs values for {', '.join(missing)}")

    # A line holding only an optional block that is empty disappears, and the
    # blank lines around it collapse; this tidying touches the template text
    # only, never the inserted values (code keeps its blank lines).
    kept = []
    for line in template.split("\n"):
        m = re.fullmatch(r"\s*\{([A-Za-z_][A-Za-z0-9_]*)\}\s*", line)
        if m and not str(values[m.group(1)]).strip():
            continue
        kept.append(line)
    template = re.sub(r"\n{3,}", "\n\n", "\n".join(kept))

    def fill(m: re.Match[str]) -> str:
        if m.group(0) == "{{":
            return "{"
        if m.group(0) == "}}":
            return "}"
        return str(values[m.group(1)])

    return _PLACEHOLDER.sub(fill, template)


def section(prompt: str, name: str, values: Mapping[str, object] | None = None) -> str:
    """Render one section of a prompt file."""
    sections = load_prompt(prompt)
    if name not in sections:
        raise TemplateError(f"prompts/{prompt}.md has no section {name!r} (has: {', '.join(sorted(sections))})")
    return render(sections[name], values or {}, where=f"prompts/{prompt}.md section {name!r}").strip("\n")


def messages(prompt: str, values: Mapping[str, object]) -> tuple[Message, Message]:
    """The system and user messages of a prompt file."""
    return Message("system", section(prompt, "system", values)), Message("user", section(prompt, "user", values))


def block(prompt: str, name: str, items: list[str] | tuple[str, ...], **values: object) -> str:
    """An optional section listing ``items``; empty when there are none."""
    if not items:
        return ""
    return section(prompt, name, {"items": "\n".join(items), **values})


# ---------------------------------------------------------------- context pieces


def clip(text: str, limit: int, keep: str = "start") -> str:
    """``text`` cut to about ``limit`` characters, marking the cut; ``keep`` is "start" or "end"."""
    if len(text) <= limit:
        return text
    if keep == "end":
        return "[... earlier part omitted ...]\n" + text[-limit:]
    return text[:limit] + "\n[... rest omitted ...]"


def clip_words(text: str, limit: int) -> str:
    words = text.split()
    return text.strip() if len(words) <= limit else " ".join(words[:limit]) + " ..."


def code_lang(task: Task) -> str:
    """The fence language for the task's program file."""
    suffix = task.program_file.rsplit(".", 1)[-1].lower() if "." in task.program_file else ""
    return {"py": "python", "sh": "bash", "r": "r", "jl": "julia", "cpp": "cpp", "c": "c", "js": "javascript"}.get(
        suffix, suffix
    )


def direction_phrase(task: Task) -> str:
    return "higher is better" if task.metric.direction == "maximize" else "lower is better"


def score_text(score: float | None) -> str:
    return "not measured" if score is None else f"{score:.6g}"


def band_for(task: Task, program: str) -> Band:
    """The band of ``program``, valid for descendants of the baseline too.

    Marker bands travel with the text. A line-range band describes the
    baseline only; since every descendant keeps the baseline's fixed head and
    tail byte-identical, the child's range is recomputed from their line counts.
    """
    band = task.band
    if band.lines is None:
        return band
    try:
        base = split(task.baseline_program, band)
    except BandError:
        return band
    head_n = len(base.head.splitlines(keepends=True))
    tail_n = len(base.tail.splitlines(keepends=True))
    total = len(program.splitlines(keepends=True))
    if total - tail_n <= head_n:
        return band
    return dataclasses.replace(band, lines=(head_n + 1, total - tail_n))


@dataclasses.dataclass(frozen=True)
class BandView:
    """The band of one program as prompts show it."""

    band: str
    head: str
    tail: str
    first_line: int  # 1-based line of the band's first line in the file
    last_line: int


def band_view(task: Task, program: str) -> BandView:
    """Split ``program`` for display; raises ``BandError`` if it has no band."""
    parts = split(program, band_for(task, program))
    first = len(parts.head.splitlines()) + 1
    return BandView(parts.band, parts.head, parts.tail, first, first + max(len(parts.band.splitlines()), 1) - 1)


def band_or_program(task: Task, program: str, limit: int = 12000) -> str:
    """The band of ``program`` if it has one, else the whole program, clipped."""
    try:
        return clip(band_view(task, program).band, limit).rstrip("\n")
    except BandError:
        return clip(program, limit).rstrip("\n")


def band_rule(task: Task) -> str:
    """One sentence saying where the band is, for prompts."""
    b = task.band
    if b.lines is not None:
        return f"lines {b.lines[0]}-{b.lines[1]} of the baseline file (the range moves with edits)"
    return f"the lines strictly between `{b.start_marker}` and `{b.end_marker}`"


__all__ = [
    "BandView",
    "TemplateError",
    "band_for",
    "band_or_program",
    "band_rule",
    "band_view",
    "block",
    "clip",
    "clip_words",
    "code_lang",
    "direction_phrase",
    "load_prompt",
    "messages",
    "placeholders",
    "render",
    "score_text",
    "section",
]
