"""Map a policy's free text onto an idea space (offline worlds).

A policy trained on an idea-space task names options in its text ("switch
the model to gbm and the loss to huber"). ``read`` turns such text into the
same kind of ``Idea`` the offline ``SpaceProposer`` makes: the parent's full
assignment with the named dimensions changed, so ``TemplateImplementer``
can render it.

Matching rules (documented in docs/design/training.md, "Policy rewards"):

* An option is mentioned when its name appears as a whole word, any case
  (``_`` and ``-`` count as word characters, so ``a1`` does not match
  inside ``a12`` or ``a1_x``; a full stop may follow a name).
* A name that exists in more than one dimension counts only when written
  qualified, ``dim=name``, ``dim: name`` or ``dim.name``.
* Mentions of the parent's current option change nothing. When several new
  options of one dimension are mentioned, the last one wins ("from a1 to a2,
  or rather a3" -> a3).
* Nothing recognised, or nothing that differs from the parent: ``None``
  (the reward pipeline records the idea as ``invalid``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from verifyless.node import Idea
from verifyless.roles.space import describe_move
from verifyless.task.base import IdeaSpace

_WORD = r"[\w\-]"
_AFTER = r"(?![\w\-]|\.\w)"  # a sentence's full stop may follow a name; "a1.5" is not "a1"


def _mentions(text: str, name: str) -> list[int]:
    """Start offsets of whole-word, case-insensitive mentions of ``name``."""
    pattern = rf"(?<!{_WORD}){re.escape(name)}{_AFTER}"
    return [m.start() for m in re.finditer(pattern, text, re.IGNORECASE)]


def _qualified(text: str, dim: str, name: str) -> list[int]:
    pattern = rf"(?<!{_WORD}){re.escape(dim)}\s*(?:=|:|\.)\s*['\"`]?{re.escape(name)}{_AFTER}"
    return [m.start() for m in re.finditer(pattern, text, re.IGNORECASE)]


def named_options(space: IdeaSpace, text: str) -> dict[str, list[tuple[int, str]]]:
    """dimension -> [(offset, option name)] of every option mentioned in ``text``, in text order."""
    owners: dict[str, list[str]] = {}
    for dim, options in space.dimensions.items():
        for opt in options:
            owners.setdefault(opt.name.lower(), []).append(dim)
    found: dict[str, list[tuple[int, str]]] = {}
    for dim, options in space.dimensions.items():
        for opt in options:
            shared = len(owners[opt.name.lower()]) > 1
            hits = _qualified(text, dim, opt.name) if shared else _mentions(text, opt.name)
            found.setdefault(dim, []).extend((at, opt.name) for at in hits)
    return {dim: sorted(hits) for dim, hits in found.items() if hits}


def read(space: IdeaSpace, parent: Mapping[str, str], text: str) -> Idea | None:
    """The idea ``text`` names on top of ``parent`` (a full assignment), or None when it names no change."""
    child = dict(parent)
    for dim, hits in named_options(space, text or "").items():
        new = [name for _, name in hits if name != parent.get(dim)]
        if new:
            child[dim] = new[-1]
    changed = [d for d in space.dimensions if child.get(d) != parent.get(d)]
    if not changed:
        return None
    return Idea(
        text=describe_move(space, parent, child),
        params={"assignment": child, "changed": changed, "parent_assignment": dict(parent), "policy_text": text[:2000]},
        tags=tuple(changed),
    )


def menu(space: IdeaSpace, current: Mapping[str, str]) -> str:
    """The options a policy may name, one block per dimension, marking the parent's current choice."""
    blocks = []
    for dim, options in space.dimensions.items():
        what = space.descriptions.get(dim) or dim
        lines = [f"Dimension `{dim}` ({what}):"]
        for opt in options:
            mark = " (current)" if current.get(dim) == opt.name else ""
            lines.append(f"- `{opt.name}`{mark}: {opt.description.strip()}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


__all__ = ["menu", "named_options", "read"]
