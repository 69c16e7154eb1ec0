"""Generate the event table of ``docs/design/store-schema.md`` from the event records.

``python -m verifyless.events_doc`` rewrites the part between the markers; ``python -m verifyless.events_doc
--check`` exits 1 when it is stale (``tests/test_events_doc.py`` runs the same check). One row per registered
kind (``verifyless.events.KINDS``, the policy kinds of ``train/policy/events.py`` included): its kind string,
record class, what its node id is (``NODE_ID``), its payload fields with the value a key takes when an older
store lacks it, its effect on the store's ``nodes`` view (``EFFECT``) and the first sentence of the record's
docstring. The rest of the note is hand-written.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

import verifyless.train.policy.events  # noqa: F401  (registers the policy kinds in KINDS)
from verifyless import docgen
from verifyless.events import KINDS, EventRecord, Unrecognised

BEGIN = "<!-- BEGIN GENERATED EVENT TABLE (python -m verifyless.events_doc) -->"
END = "<!-- END GENERATED EVENT TABLE -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "design" / "store-schema.md"


def _cell(text: str) -> str:
    """``text`` fit for one table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def first_sentence(doc: str | None) -> str:
    """The first sentence of a docstring (up to the first full stop, not that of ``e.g.`` or ``i.e.``, followed by
    a capital letter, a quote or the end), its reST literals (double backquotes) as markdown's single ones."""
    text = " ".join((doc or "").split()).replace("``", "`")
    match = re.search(r"(?<!e\.g)(?<!i\.e)\.(\s+(?=[A-Z`(])|$)", text)
    return text[: match.start() + 1] if match else text


def _default(f: Any) -> str:
    if f.default_factory is not MISSING:
        return repr(f.default_factory())
    return repr(f.default)


def field_list(record: type[EventRecord]) -> str:
    """The record's payload fields: ``name`` when required, ``name=default`` (what an older store's missing key
    reads as) otherwise; a spread record (``flat``) as ``Type.to_dict()``; a renamed key as ``field (key)``."""
    out = []
    for f in fields(record):
        if f.name == "extra":
            continue
        flat = f.metadata.get("flat")
        if flat is not None:
            out.append(f"`{flat.__name__}.to_dict()`")
            continue
        key = f.metadata.get("key")
        name = f"{f.name} ({key})" if key and key != f.name else f.name
        required = f.default is MISSING and f.default_factory is MISSING
        out.append(f"`{name}`" if required else f"`{name}={_default(f)}`")
    return ", ".join(out) if out else "free (kept in `extra`)"


def rows() -> Iterator[str]:
    """One table row per registered kind, in the order the records were defined, then the unclaimed kinds' row."""
    for kind, record in KINDS.items():
        yield (
            f"| `{kind}` | `{record.__name__}` | {record.NODE_ID} | {_cell(field_list(record))} "
            f"| {_cell(record.EFFECT)} | {_cell(first_sentence(record.__doc__))} |"
        )
    yield (
        f"| anything else | `{Unrecognised.__name__}` | {Unrecognised.NODE_ID} | any JSON object "
        f"| {_cell(Unrecognised.EFFECT)} | {_cell(first_sentence(Unrecognised.__doc__))} |"
    )


def render() -> str:
    """The generated table (markdown, without the markers)."""
    head = "| kind | record | node_id | fields (default when an older store lacks the key) | effect | description |"
    return "\n".join([head, "| --- | --- | --- | --- | --- | --- |", *rows()]) + "\n"


def updated(text: str) -> str:
    """``text`` with the generated part replaced (appended when the markers are missing)."""
    return docgen.splice(text, BEGIN, END, render())


def main(argv: list[str] | None = None) -> int:
    return docgen.run(DOC, updated, "verifyless.events_doc", argv)


if __name__ == "__main__":  # python -m verifyless.events_doc [--check]
    sys.exit(main())
