"""The editable band: find it, replace it, and check a child kept everything else.

A program is plain text. Its *band* is the region an implementer may rewrite:
the lines strictly between a start and an end marker comment, or an explicit
1-based inclusive line range. Everything outside the band is the *fixed
region* and must stay byte-identical between a parent and its child.

Only the first marker pair is used; a program with markers missing, repeated
or out of order raises ``BandError`` (a task-authoring problem, reported by
the loader, or a candidate problem, turned into a status by callers).
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Band:
    """Where the editable region lives in the program file.

    Either marker comments (``start_marker`` / ``end_marker``, the lines strictly
    between them are editable) or explicit 1-based inclusive ``lines``.
    """

    start_marker: str | None = "# EVOLVE-BLOCK-START"
    end_marker: str | None = "# EVOLVE-BLOCK-END"
    lines: tuple[int, int] | None = None


class BandError(ValueError):
    """The band cannot be located in a program."""


@dataclass(frozen=True)
class Split:
    """A program cut into ``head + band + tail`` (each keeps its newlines)."""

    head: str
    band: str
    tail: str

    def join(self, band: str | None = None) -> str:
        body = self.band if band is None else band
        if body and not body.endswith("\n") and self.tail:
            body += "\n"
        return self.head + body + self.tail


def split(program: str, band: Band) -> Split:
    """Cut ``program`` at its band. Raises ``BandError`` with the reason."""
    lines = program.splitlines(keepends=True)
    if band.lines is not None:
        start, end = band.lines
        if not (1 <= start <= end <= len(lines)):
            raise BandError(f"band lines {start}-{end} are outside the program's {len(lines)} lines")
        return Split("".join(lines[: start - 1]), "".join(lines[start - 1 : end]), "".join(lines[end:]))
    if not band.start_marker or not band.end_marker:
        raise BandError("band needs either both markers or a line range")
    starts = [i for i, line in enumerate(lines) if band.start_marker in line]
    ends = [i for i, line in enumerate(lines) if band.end_marker in line]
    if not starts or not ends:
        missing = band.start_marker if not starts else band.end_marker
        raise BandError(f"marker {missing!r} not found in the program")
    if len(starts) > 1 or len(ends) > 1:
        raise BandError(f"markers must appear exactly once (found {len(starts)} start and {len(ends)} end markers)")
    s, e = starts[0], ends[0]
    if e <= s:
        raise BandError("the end marker comes before the start marker")
    return Split("".join(lines[: s + 1]), "".join(lines[s + 1 : e]), "".join(lines[e:]))


def extract(program: str, band: Band) -> str:
    """The editable text of ``program``."""
    return split(program, band).band


def replace(program: str, band: Band, new_band: str) -> str:
    """``program`` with its band replaced by ``new_band`` (fixed regions untouched)."""
    return split(program, band).join(new_band)


def fixed_region_violation(parent: str, child: str, band: Band) -> str | None:
    """None if ``child`` keeps ``parent``'s fixed regions byte-identical, else the reason.

    With a line-range band the range may grow or shrink in the child, so the
    head is compared by its line count and the tail by its text at the end.
    """
    try:
        p = split(parent, band)
    except BandError as exc:
        return f"parent program has no usable band: {exc}"
    if band.lines is not None:
        if not child.startswith(p.head):
            return "the lines before the editable band were changed"
        if p.tail and not child.endswith(p.tail):
            return "the lines after the editable band were changed"
        if len(child) < len(p.head) + len(p.tail):
            return "the child is shorter than the parent's fixed regions"
        return None
    try:
        c = split(child, band)
    except BandError as exc:
        return f"child program broke the band markers: {exc}"
    if c.head != p.head:
        return "the fixed region before the editable band was changed" + _first_diff(p.head, c.head)
    if c.tail != p.tail:
        return "the fixed region after the editable band was changed" + _first_diff(p.tail, c.tail)
    return None


def syntax_error(program: str, filename: str = "program.py") -> str | None:
    """None if ``program`` parses as Python, else ``"line N: message"``."""
    try:
        ast.parse(program, filename=filename)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    return None


def band_diff(parent: str, child: str, band: Band, context: int = 2) -> str:
    """Unified diff of the two bands (for display and for prompts)."""
    a = extract(parent, band).splitlines(keepends=True)
    b = extract(child, band).splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, "parent", "child", n=context))


def _first_diff(a: str, b: str) -> str:
    for i, (x, y) in enumerate(zip(a.splitlines(), b.splitlines(), strict=False), start=1):
        if x != y:
            return f" (first difference at line {i} of that region: {x.strip()[:60]!r} -> {y.strip()[:60]!r})"
    return " (lines were added or removed)"


__all__ = ["BandError", "Split", "band_diff", "extract", "fixed_region_violation", "replace", "split", "syntax_error"]
