"""Idea spaces: render a complete editable band from an assignment.

An *assignment* maps every dimension of an ``IdeaSpace`` to one of its option
names. The space's ``template`` is the band text with ``{{slot}}``
placeholders; a slot is a dimension name (``{{model}}``) or a dimension part
(``{{model.imports}}``) when an option contributes several fragments.
``IdeaSpace.fragments[slot][option]`` holds the code an option puts in a slot.

Rendering rules (a deliberately tiny syntax, so braces in Python code such as
dict literals never need escaping):

- a placeholder alone on its line (only indentation before it) is replaced by
  the fragment with that indentation added to every fragment line; an empty
  fragment removes the line entirely;
- any other placeholder is replaced inline by the fragment text (stripped of a
  trailing newline);
- fragments may themselves contain placeholders, rendered the same way, up to
  ``MAX_DEPTH`` levels (deeper nesting or a cycle raises ``SpaceError``).

This module has no knowledge of files; the loader validates spaces with it and
the offline roles (``verifyless.roles.space``) render children with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from verifyless.task.base import IdeaOption, IdeaSpace

MAX_DEPTH = 4
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?)\s*\}\}")
_ALONE = re.compile(r"^([ \t]*)\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}[ \t]*$")


class SpaceError(ValueError):
    """An assignment or a template cannot be rendered (the message says why)."""


def slots_in(text: str) -> list[str]:
    """Placeholder names used in ``text``, in order of first appearance."""
    seen: dict[str, None] = {}
    for match in PLACEHOLDER.finditer(text):
        seen.setdefault(match.group(1), None)
    return list(seen)


def check_assignment(space: IdeaSpace, assignment: Mapping[str, str]) -> dict[str, str]:
    """A complete, valid copy of ``assignment``; raises ``SpaceError`` otherwise.

    Missing dimensions are an error (an assignment must be full), as are unknown
    dimensions and unknown option names.
    """
    unknown = sorted(set(assignment) - set(space.dimensions))
    if unknown:
        raise SpaceError(f"unknown dimension(s) {unknown}; known: {sorted(space.dimensions)}")
    full: dict[str, str] = {}
    for dim, options in space.dimensions.items():
        if dim not in assignment:
            raise SpaceError(f"assignment has no option for dimension {dim!r}")
        value = str(assignment[dim])
        names = [o.name for o in options]
        if value not in names:
            raise SpaceError(f"dimension {dim!r} has no option {value!r}; options: {names}")
        full[dim] = value
    return full


def render(space: IdeaSpace, assignment: Mapping[str, str]) -> str:
    """The band text for a full assignment (ends with a newline)."""
    full = check_assignment(space, assignment)
    text = _expand(space, space.template, full, depth=0, trail=())
    return text if text.endswith("\n") else text + "\n"


def option(space: IdeaSpace, dim: str, name: str) -> IdeaOption:
    """The ``IdeaOption`` called ``name`` in dimension ``dim``."""
    for opt in space.dimensions.get(dim, ()):
        if opt.name == name:
            return opt
    raise SpaceError(f"dimension {dim!r} has no option {name!r}")


def size(space: IdeaSpace) -> int:
    """Number of full assignments (the product of the option counts)."""
    total = 1
    for options in space.dimensions.values():
        total *= len(options)
    return total


def _fragment(space: IdeaSpace, slot: str, full: Mapping[str, str]) -> str:
    dim = slot.split(".", 1)[0]
    if dim not in full:
        raise SpaceError(f"placeholder {{{{{slot}}}}} names no dimension; known: {sorted(full)}")
    by_option = space.fragments.get(slot)
    if by_option is None:
        raise SpaceError(f"no option of dimension {dim!r} provides code for {{{{{slot}}}}}")
    chosen = full[dim]
    if chosen not in by_option:
        raise SpaceError(f"option {chosen!r} of dimension {dim!r} provides no code for {{{{{slot}}}}}")
    return by_option[chosen]


def _expand(space: IdeaSpace, text: str, full: Mapping[str, str], depth: int, trail: tuple[str, ...]) -> str:
    if depth > MAX_DEPTH:
        raise SpaceError(f"placeholders nest deeper than {MAX_DEPTH} levels: {' -> '.join(trail)}")
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        alone = _ALONE.match(line.rstrip("\r\n"))
        if alone:
            indent, slot = alone.groups()
            if slot in trail:
                raise SpaceError(f"placeholder cycle: {' -> '.join(trail + (slot,))}")
            body = _expand(space, _fragment(space, slot, full), full, depth + 1, trail + (slot,))
            for frag_line in body.splitlines():
                out.append((indent + frag_line if frag_line.strip() else "") + "\n")
            continue

        def inline(match: re.Match[str]) -> str:
            slot = match.group(1)
            if slot in trail:
                raise SpaceError(f"placeholder cycle: {' -> '.join(trail + (slot,))}")
            body = _expand(space, _fragment(space, slot, full), full, depth + 1, trail + (slot,))
            return body.rstrip("\n")

        out.append(PLACEHOLDER.sub(inline, line))
    return "".join(out)


__all__ = ["MAX_DEPTH", "SpaceError", "check_assignment", "option", "render", "size", "slots_in"]
