"""Prompt templates: one file format, one loader, one render function, one checker.

Every prompt the package sends is package data under
``verifyless/prompts/<owner>/<name>.md`` (owners: ``roles``, ``screen``,
``data``, ``guards``, ``policy``, ``tune``) and is loaded by its key,
``load_template("screen/critic")``. User prompt files (the ``prompt_file``
option of ``critic`` and ``tournament``, and what ``verifyless tune
screener`` writes) have the same format.

The format:

* A line ``<!-- section: NAME -->`` (NAME: lower-case letters, digits, ``_``)
  opens a section that runs to the next such line; text before the first one
  is ignored. ``system`` and ``user`` make the two opening messages; other
  sections are fragments (retry feedback, optional blocks, instructions).
  Each section's text is trimmed of surrounding blank lines.
* ``{{name}}`` is a placeholder (``name``: letters, digits, ``_``, not
  starting with a digit). Single braces are ordinary text, so code and JSON
  examples need no escaping; a literal ``{{word}}`` cannot be written.

Rendering (``render``) is a single pass: braces inside inserted values are
never read as placeholders. A placeholder without a value raises
``TemplateError`` naming the template and the missing names. A line holding
nothing but a placeholder whose value is blank disappears, and the runs of
blank lines around it collapse to one; this touches the template's text only,
never the inserted values. The result is trimmed of surrounding blank lines.

``check_template`` is the one checker for templates that come from outside
the package's own prompts (user files, tuned candidates, tuner variants): it
names the file and the fix for missing or unknown sections, missing or
unknown placeholders and absent reply tags, as one ``ConfigError``.

This module sits beside ``roles`` in the layers: it imports only records and
``model.base``, so roles, guards, screeners, data and training all use it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from verifyless.errors import ConfigError
from verifyless.model.base import Message

SECTION = re.compile(r"^<!--\s*section:\s*([a-z_][a-z0-9_]*)\s*-->\s*$", re.M)
PLACEHOLDER = re.compile(r"\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}")
_ALONE = re.compile(r"\s*\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}\s*")
MESSAGES = ("system", "user")
# Placeholders a checked template may use or leave out: every user of ``check_template`` fills them
# (``data_report``: the run's data report, '' when it has none, so a line holding only it disappears).
OPTIONAL = frozenset({"data_report"})


class TemplateError(KeyError):
    """A template names a placeholder nobody filled, or a section that does not exist (a bug in the caller)."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


def placeholders(text: str) -> set[str]:
    """Names of the ``{{name}}`` placeholders in ``text``."""
    return set(PLACEHOLDER.findall(text))


@dataclass(frozen=True)
class Template:
    """One prompt: its key or file name, where it came from, its sections and the placeholders they use."""

    name: str  # "screen/critic" for package prompts, the file name for user files
    source: str  # where the text came from, for error messages ("prompts/screen/critic.md", a file path)
    sections: tuple[tuple[str, str], ...]  # (section name, text) in file order
    declared: frozenset[str] = field(init=False)  # every placeholder any section uses

    def __post_init__(self) -> None:
        object.__setattr__(self, "declared", frozenset().union(*(placeholders(t) for _, t in self.sections)))

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.sections)

    def text(self, section: str) -> str:
        """The raw text of ``section``; ``TemplateError`` when the template has no such section."""
        for name, text in self.sections:
            if name == section:
                return text
        raise TemplateError(f"{self.source} has no section {section!r} (has: {', '.join(sorted(self.names()))})")

    def with_text(self, section: str, text: str) -> Template:
        """The same template with ``section`` replaced (or appended when absent)."""
        kept = [(n, t) for n, t in self.sections if n != section]
        index = self.names().index(section) if section in self.names() else len(kept)
        kept.insert(index, (section, text.strip("\n")))
        return Template(self.name, self.source, tuple(kept))


def parse_template(text: str, name: str, source: str) -> Template:
    """The sections of a template file's ``text``; ``ConfigError`` when it has none."""
    parts = SECTION.split(text)
    sections = tuple((parts[i], parts[i + 1].strip("\n")) for i in range(1, len(parts) - 1, 2))
    if not sections:
        raise ConfigError(
            f"{source} has no '<!-- section: NAME -->' lines; a prompt file opens its system part with "
            "'<!-- section: system -->' and its user part with '<!-- section: user -->'"
        )
    return Template(name, source, sections)


def template_text(template: Template) -> str:
    """The file text of ``template`` (``parse_template`` reads it back unchanged)."""
    return "\n\n".join(f"<!-- section: {name} -->\n{text}" for name, text in template.sections) + "\n"


def package_text(key: str) -> str | None:
    """The text of the package data file ``prompts/<key>.md`` (``key`` like ``tune/variants/critic``), or None."""
    path = resources.files("verifyless.prompts").joinpath(*key.split("/")[:-1], f"{key.split('/')[-1]}.md")
    return path.read_text(encoding="utf-8") if path.is_file() else None


@cache
def load_template(key: str) -> Template:
    """The package prompt ``prompts/<key>.md``, e.g. ``load_template("roles/propose")``."""
    text = package_text(key)
    if text is None:
        raise TemplateError(f"prompt prompts/{key}.md is missing from the verifyless package")
    return parse_template(text, key, f"prompts/{key}.md")


def _template(template: Template | str) -> Template:
    return load_template(template) if isinstance(template, str) else template


def fill(text: str, values: Mapping[str, object], where: str = "template") -> str:
    """Fill the placeholders of one text (see the module docstring for the rules)."""
    missing = sorted(placeholders(text) - set(values))
    if missing:
        raise TemplateError(f"{where} needs values for {', '.join(missing)}")
    kept = []
    for line in text.split("\n"):
        alone = _ALONE.fullmatch(line)
        if alone and not str(values[alone.group(1)]).strip():
            continue
        kept.append(line)
    tidy = re.sub(r"\n{3,}", "\n\n", "\n".join(kept))
    return PLACEHOLDER.sub(lambda m: str(values[m.group(1)]), tidy).strip("\n")


def render(template: Template | str, section: str, values: Mapping[str, object] | None = None) -> str:
    """One section of ``template`` (a ``Template`` or a package key) filled with ``values``."""
    template = _template(template)
    return fill(template.text(section), values or {}, where=f"{template.source} section {section!r}")


def messages(
    template: Template | str, values: Mapping[str, object] | None = None, /, **named: object
) -> tuple[Message, Message]:
    """The system and user messages of ``template``, filled with ``values`` and the ``named`` ones."""
    filled = {**(values or {}), **named}
    return Message("system", render(template, "system", filled)), Message("user", render(template, "user", filled))


def block(template: Template | str, section: str, items: Sequence[str], **values: object) -> str:
    """An optional section listing ``items`` (placeholder ``{{items}}``); empty when there are none."""
    if not items:
        return ""
    return render(template, section, {"items": "\n".join(items), **values})


def _listed(names: Iterable[str]) -> str:
    return ", ".join("{{" + n + "}}" for n in names)


def template_problems(
    template: Template, user: str, wanted: Sequence[str], markers: Sequence[str], sections: Sequence[str]
) -> list[str]:
    """What is wrong with ``template`` for ``user`` (see ``check_template``), one sentence each."""
    names = template.names()
    used = template.declared
    body = "\n".join(text for _, text in template.sections)
    problems = []
    if lacking := [s for s in sections if s not in names]:
        problems.append(f"lacks the section(s) {', '.join(lacking)}; open each with '<!-- section: NAME -->'")
    if unknown_sections := [s for s in names if s not in sections]:
        problems.append(
            f"has section(s) {', '.join(unknown_sections)} that {user} never reads; it reads {', '.join(sections)}"
        )
    if missing := [p for p in wanted if p not in used]:
        problems.append(
            f"lacks the placeholder(s) {_listed(missing)} that {user} fills; it needs all of {_listed(wanted)}"
        )
    if unknown := sorted(used - set(wanted) - OPTIONAL):
        problems.append(f"uses placeholder(s) {_listed(unknown)} that {user} does not fill; it fills {_listed(wanted)}")
    if absent := [m for m in markers if m not in body]:
        problems.append(
            f"never mentions {', '.join(absent)}, the reply tag(s) {user} parses; "
            "keep the final answer-format section of the original prompt"
        )
    return problems


def check_template(
    template: Template,
    user: str,
    wanted: Sequence[str],
    markers: Sequence[str] = (),
    sections: Sequence[str] = MESSAGES,
) -> Template:
    """``template`` when it fits ``user`` (e.g. "the critic screener"), else one ``ConfigError`` naming the file.

    It fits when it has exactly the ``sections`` it reads, uses exactly the
    ``wanted`` placeholders (a missing one would never show the model that
    input; an unknown one could never be filled) and mentions every reply tag
    in ``markers`` (without it the model is never told the answer format).
    A placeholder in ``OPTIONAL`` may be used or not.
    """
    problems = template_problems(template, user, wanted, markers, sections)
    if problems:
        raise ConfigError(f"prompt file {template.source} " + "; it ".join(problems))
    return template


__all__ = [
    "MESSAGES",
    "OPTIONAL",
    "PLACEHOLDER",
    "SECTION",
    "Template",
    "TemplateError",
    "block",
    "check_template",
    "fill",
    "load_template",
    "messages",
    "package_text",
    "parse_template",
    "placeholders",
    "render",
    "template_problems",
    "template_text",
]
