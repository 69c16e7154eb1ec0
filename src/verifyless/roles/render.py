"""The pieces of context the role prompts are filled with (clipped text, band views, metric phrases).

The prompts themselves are package data under ``verifyless/prompts/roles/``,
loaded and rendered by ``verifyless.prompts``.
"""

from __future__ import annotations

import dataclasses

from verifyless.program import BandError, split
from verifyless.task.base import Band, Task

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
    "band_for",
    "band_or_program",
    "band_rule",
    "band_view",
    "clip",
    "clip_words",
    "code_lang",
    "direction_phrase",
    "score_text",
]
