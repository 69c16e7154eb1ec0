"""The shared mechanics of the generated parts of the docs (``config_doc``, ``events_doc``).

A generated part sits between two marker comments in a hand-written markdown file; ``splice`` puts a fresh
body there and ``run`` is the ``python -m`` entry point both generators share: it rewrites the file, or with
``--check`` exits 1 (writing nothing) when the file is stale.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path


def splice(text: str, begin: str, end: str, body: str) -> str:
    """``text`` with the part between ``begin`` and ``end`` replaced by ``body`` (appended when a marker is
    missing)."""
    block = f"{begin}\n\n{body}\n{end}"
    if begin in text and end in text:
        return text[: text.index(begin)] + block + text[text.index(end) + len(end) :]
    return text.rstrip() + "\n\n" + block + "\n"


def run(doc: Path, updated: Callable[[str], str], module: str, argv: list[str] | None = None) -> int:
    """Rewrite ``doc`` as ``updated`` makes it, or with ``--check`` in ``argv`` return 1 when that would change
    it (0 otherwise); ``module`` names the generator in the message."""
    args = sys.argv[1:] if argv is None else argv
    current = doc.read_text()
    fresh = updated(current)
    if "--check" in args:
        if fresh != current:
            print(f"{doc} is stale: run `python -m {module}`", file=sys.stderr)
            return 1
        return 0
    doc.write_text(fresh)
    print(f"wrote {doc}")
    return 0
