"""docs/design/store-schema.md's event table is generated from the event records and must not go stale."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from verifyless import events_doc
from verifyless.events import KINDS, EventRecord, _spec, _tuple
from verifyless.train.policy.events import PolicyStep


def test_the_store_schema_event_table_is_up_to_date():
    text = events_doc.DOC.read_text()
    assert events_doc.BEGIN in text and events_doc.END in text, "store-schema.md lost its generated event table"
    assert events_doc.updated(text) == text, "store-schema.md is stale: run `python -m verifyless.events_doc`"
    assert "## Event kinds" in text.split(events_doc.BEGIN)[0], "the hand-written part before the table is gone"
    assert "## Charges and the budget" in text.split(events_doc.END)[1], "the hand-written part after it is gone"


def test_every_kind_has_one_row_with_its_record_node_id_and_effect():
    table = events_doc.render()
    for kind, record in KINDS.items():
        (row,) = [line for line in table.splitlines() if line.startswith(f"| `{kind}` |")]
        assert f"`{record.__name__}`" in row and record.NODE_ID in row
    assert f"| `{PolicyStep.KIND}` | `PolicyStep` |" in table  # the policy kinds are registered too
    verified = next(line for line in table.splitlines() if line.startswith("| `verification` |"))
    assert "`Verification.to_dict()`, `fitness=None`, `reused_from=None`" in verified
    assert "sets status, reason, score" in verified
    assert table.splitlines()[-1].startswith("| anything else | `Unrecognised` |")


def test_every_record_has_a_docstring_whose_first_sentence_fits_a_row():
    for kind, record in KINDS.items():
        own = record.__dict__.get("__doc__") or ""
        assert own and not own.startswith(f"{record.__name__}("), f"{kind}: {record.__name__} has no docstring"
        sentence = events_doc.first_sentence(own)
        assert sentence.endswith(".") and "\n" not in sentence, f"{kind}: {sentence!r}"


def test_the_first_sentence_skips_abbreviations_and_turns_rest_literals_into_markdown():
    assert events_doc.first_sentence("``{a}`` (e.g. ``x``). More here.") == "`{a}` (e.g. `x`)."
    assert events_doc.first_sentence("No full stop") == "No full stop"


def test_a_new_record_changes_the_table_and_the_check_finds_the_doc_stale(tmp_path: Path, monkeypatch):
    doc = tmp_path / "store-schema.md"
    doc.write_text(events_doc.updated("# notes\n"))
    monkeypatch.setattr(events_doc, "DOC", doc)
    assert events_doc.main(["--check"]) == 0

    @dataclass(frozen=True)
    class ProbeHappened(EventRecord):
        """``{who, tags}``: a probe. The rest is not in the table."""

        KIND: ClassVar[str] = "probe_for_events_doc"
        NODE_ID: ClassVar[str] = "candidate id"
        EFFECT: ClassVar[str] = "a | pipe"

        who: str
        tags: tuple[str, ...] = _spec((), convert=_tuple, key="labels")

    try:
        assert events_doc.main(["--check"]) == 1
        row = next(line for line in events_doc.render().splitlines() if "probe_for_events_doc" in line)
        assert row == (
            "| `probe_for_events_doc` | `ProbeHappened` | candidate id | `who`, `tags (labels)=()` | a \\| pipe "
            "| `{who, tags}`: a probe. |"
        )
        assert events_doc.main([]) == 0 and events_doc.main(["--check"]) == 0
    finally:
        del KINDS[ProbeHappened.KIND]
