"""A screener prompt as named sections, and the edits the tuner tries on it.

``PromptDoc.parse`` splits a template (``verifyless.prompts.Template``) into
its system text and its user part's ``## Heading`` sections (text before the first heading,
if any, is a section with an empty title that stays first). The last section
holds the answer format (the reply tags the screener parses) and never moves.

Edits (``Edit``), each turning one document into another:

* ``move``: put one movable section at another position (every section but a
  leading untitled one and the final answer-format section);
* ``reword``: replace the body of a section (or the system text, section
  ``system``) by a named alternative wording. Alternatives come from the
  package data files ``prompts/tune/variants/<template>.md`` (written by us)
  and, optionally, from an LLM prompt writer (``writer.py``). A rewording must
  use the same ``{{placeholders}}`` as the text it replaces; ``load_variants``
  rejects one that does not with the one template checker
  (``prompts.check_template``), as a ``ConfigError`` naming the file.

Variant files: everything before the first marker is commentary; each
variant starts with a line ``<!-- section: TITLE | variant: NAME -->`` and
runs to the next marker.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from verifyless.prompts import Template, check_template, package_text, placeholders, template_text

SYSTEM = "system"
CANDIDATE = "(tuned candidate)"  # name and source of the templates a PromptDoc makes
_HEADING = re.compile(r"^## +(.+?)\s*$", re.MULTILINE)
_MARKER = re.compile(r"^<!--\s*section:\s*(.+?)\s*\|\s*variant:\s*(.+?)\s*-->\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Section:
    title: str  # heading text without the leading '## '; "" for text before the first heading
    body: str

    def text(self) -> str:
        return f"## {self.title}\n{self.body}".rstrip() if self.title else self.body.rstrip()


@dataclass(frozen=True)
class Variant:
    """An alternative wording of one section's body (``section`` = ``system`` for the system text)."""

    section: str
    name: str
    text: str
    source: str = "package"  # "package" (prompts/tune/variants/*.md) or "writer" (an LLM prompt writer)


@dataclass(frozen=True)
class PromptDoc:
    system: str
    sections: tuple[Section, ...]

    @classmethod
    def parse(cls, template: Template) -> PromptDoc:
        system, user = template.text("system"), template.text("user")
        heads = list(_HEADING.finditer(user))
        sections: list[Section] = []
        lead = user[: heads[0].start()] if heads else user
        if lead.strip():
            sections.append(Section("", lead.strip()))
        for i, head in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(user)
            sections.append(Section(head.group(1), user[head.end() : end].strip("\n").rstrip()))
        return cls(system.strip(), tuple(sections))

    def template(self) -> Template:
        user = "\n\n".join(s.text() for s in self.sections)
        return Template(CANDIDATE, CANDIDATE, (("system", self.system), ("user", user)))

    def key(self) -> str:
        """Hash of the template's file text: the cache key of a candidate prompt."""
        return hashlib.sha256(template_text(self.template()).encode("utf-8")).hexdigest()[:16]

    def titles(self) -> list[str]:
        return [s.title for s in self.sections]

    def body(self, title: str) -> str | None:
        if title == SYSTEM:
            return self.system
        return next((s.body for s in self.sections if s.title == title), None)

    def movable(self) -> list[int]:
        """Indices of sections that may move (not a leading untitled one, not the final answer format)."""
        return [i for i, s in enumerate(self.sections[:-1]) if s.title]


@dataclass(frozen=True)
class Edit:
    kind: Literal["move", "reword"]
    section: str
    to: int = 0  # move: the new index
    variant: str = ""  # reword: the variant's name
    text: str = ""  # reword: the new body

    def describe(self) -> str:
        if self.kind == "move":
            return f"move '{self.section}' to position {self.to + 1}"
        return f"reword '{self.section}' as '{self.variant}'"

    def apply(self, doc: PromptDoc) -> PromptDoc:
        if self.kind == "reword" and self.section == SYSTEM:
            return replace(doc, system=self.text.strip())
        sections = list(doc.sections)
        i = doc.titles().index(self.section)
        if self.kind == "reword":
            sections[i] = Section(self.section, self.text.strip())
        else:
            sections.insert(self.to, sections.pop(i))
        return replace(doc, sections=tuple(sections))


def neighbours(doc: PromptDoc, variants: Iterable[Variant]) -> list[Edit]:
    """Every edit that changes ``doc`` into a distinct prompt: section moves among the movable positions
    (swapping neighbours once, not as two moves), then rewordings."""
    edits: list[Edit] = []
    movable = doc.movable()
    for i in movable:
        for j in movable:
            if j not in (i, i - 1):  # moving i up one place is the same prompt as moving i - 1 down one
                edits.append(Edit("move", doc.sections[i].title, to=j))
    for v in variants:
        current = doc.body(v.section)
        if current is not None and current.strip() != v.text.strip():
            edits.append(Edit("reword", v.section, variant=v.name, text=v.text))
    return edits


def parse_variants(
    text: str, baseline: PromptDoc, source: str = "package", where: str = "a variants file"
) -> list[Variant]:
    """The variants in a variants file that fit ``baseline``.

    A variant of a section the baseline lacks (a custom prompt file) is left
    out; one that changes the section's placeholders is a ``ConfigError`` (a
    bug in the variants file, named ``where`` in the error).
    """
    marks = list(_MARKER.finditer(text))
    found = []
    for i, mark in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(text)
        found.append(Variant(mark.group(1), mark.group(2), text[mark.end() : end].strip(), source))
    fitting = [v for v in found if baseline.body(v.section) is not None]
    for v in fitting:
        wanted = sorted(placeholders(baseline.body(v.section) or ""))
        variant = Template(v.name, f"{where} variant {v.name!r}", (("body", v.text),))
        check_template(variant, f"section {v.section!r} of the prompt", wanted, sections=("body",))
    return fitting


def load_variants(template_name: str, baseline: PromptDoc) -> list[Variant]:
    """The package's alternative wordings for the built-in template ``template_name`` (none if no file)."""
    text = package_text(f"tune/variants/{template_name}")
    if text is None:
        return []
    return parse_variants(text, baseline, where=f"prompts/tune/variants/{template_name}.md")


def section_order(doc: PromptDoc) -> str:
    """One line: the section order (for reports)."""
    return " > ".join(t or "(lead)" for t in doc.titles())


__all__ = [
    "Edit",
    "PromptDoc",
    "SYSTEM",
    "Section",
    "Variant",
    "section_order",
    "load_variants",
    "neighbours",
    "parse_variants",
]
