"""Screener prompt templates from a file (``prompt_file`` option of ``critic`` and ``tournament``).

A prompt file has the format of the built-in templates under
``verifyless/roles/prompts/``: a system part, a line reading ``<!-- user -->``,
then the user part, with ``{{name}}`` placeholders. ``verifyless tune
screener`` writes such files; a person may edit them by hand.

``load_prompt_file`` checks the file before any model call and raises one
``ConfigError`` naming what is wrong: the file is missing, lacks the
``<!-- user -->`` line, lacks a placeholder the screener fills (the screener
would otherwise never show the model that input), uses a placeholder the
screener does not fill, or lacks the reply tag the screener parses (e.g.
``[IMPROVEMENT]``; without it the model is never told the answer format).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from verifyless.errors import ConfigError
from verifyless.model.base import Message
from verifyless.screen.prompting import fill

SPLIT = "<!-- user -->"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

Template = tuple[str, str]  # (system, user)


def split_template(text: str, source: str) -> Template:
    """``(system, user)`` of a template text; ``ConfigError`` without the separator line."""
    if SPLIT not in text:
        raise ConfigError(
            f"prompt file {source} lacks the '{SPLIT}' line that separates the system part from the user part; "
            "start from a file written by `verifyless tune screener` or copy verifyless/roles/prompts/critic.md"
        )
    system, user = text.split(SPLIT, 1)
    return system.strip(), user.strip()


def join_template(template: Template) -> str:
    """The file text of a template (inverse of ``split_template``)."""
    return f"{template[0].strip()}\n{SPLIT}\n{template[1].strip()}\n"


def check_template(
    template: Template, source: str, screener: str, placeholders: Sequence[str], markers: Sequence[str] = ()
) -> Template:
    """``template`` when it uses exactly the screener's ``placeholders`` and contains its ``markers``."""
    used = set(_PLACEHOLDER.findall(template[0] + "\n" + template[1]))
    missing = [p for p in placeholders if p not in used]
    unknown = sorted(used - set(placeholders))
    absent = [m for m in markers if m not in template[0] + template[1]]
    wanted = ", ".join("{{" + p + "}}" for p in placeholders)
    if missing:
        raise ConfigError(
            f"prompt file {source} lacks the placeholder(s) {', '.join('{{' + p + '}}' for p in missing)} "
            f"that the {screener} screener fills; it needs all of {wanted}"
        )
    if unknown:
        raise ConfigError(
            f"prompt file {source} uses placeholder(s) {', '.join('{{' + p + '}}' for p in unknown)} "
            f"that the {screener} screener does not fill; it fills {wanted}"
        )
    if absent:
        raise ConfigError(
            f"prompt file {source} never mentions {', '.join(absent)}, the reply tag(s) the {screener} screener "
            "parses; keep the final answer-format section of the original prompt"
        )
    return template


def load_prompt_file(
    path: str | Path, screener: str, placeholders: Sequence[str], markers: Sequence[str] = ()
) -> Template:
    """The checked ``(system, user)`` template in ``path`` (see the module docstring for the checks)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(
            f"prompt file {file} does not exist; write one with `verifyless tune screener --out FILE` "
            "or fix the screener's prompt_file option"
        )
    template = split_template(file.read_text(encoding="utf-8"), str(file))
    return check_template(template, str(file), screener, placeholders, markers)


def render_template(template: Template, **values: str) -> tuple[Message, ...]:
    """System and user messages of ``template`` filled with ``values`` (single pass, as ``prompting.render``)."""
    return (Message("system", fill(template[0], values)), Message("user", fill(template[1], values)))


__all__ = [
    "SPLIT",
    "Template",
    "check_template",
    "join_template",
    "load_prompt_file",
    "render_template",
    "split_template",
]
