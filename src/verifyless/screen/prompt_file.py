"""Screener prompt templates from a file (``prompt_file`` option of ``critic`` and ``tournament``).

A prompt file has the format of the built-in templates (``verifyless.prompts``;
copy ``verifyless/prompts/screen/critic.md`` or ``pairwise.md``): a line
``<!-- section: system -->`` opens the system part, a line
``<!-- section: user -->`` the user part, and ``{{name}}`` marks a
placeholder. ``verifyless tune screener`` writes such files; a person may
edit them by hand.

Files in the older format (system part, a line reading ``<!-- user -->``, user
part, same ``{{name}}`` placeholders) still load: each part is trimmed of
surrounding whitespace as before, and a ``FutureWarning`` says how to convert
the file. Support for them will be removed.

``load_prompt_file`` checks the file before any model call with the one
template checker (``prompts.check_template``) and raises one ``ConfigError``
naming the file and what is wrong: it is missing, lacks a section or has one
the screener never reads, lacks a placeholder the screener fills (the
screener would otherwise never show the model that input), uses a
placeholder the screener does not fill, or lacks the reply tag the screener
parses (e.g. ``[IMPROVEMENT]``; without it the model is never told the
answer format).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path

from verifyless.errors import ConfigError
from verifyless.prompts import SECTION, Template, check_template, parse_template

LEGACY_SPLIT = "<!-- user -->"


def read_prompt_text(text: str, name: str, source: str) -> Template:
    """The template in a prompt file's ``text``, in either format (the older one with a ``FutureWarning``)."""
    if SECTION.search(text) or LEGACY_SPLIT not in text:
        return parse_template(text, name, source)
    warnings.warn(
        f"prompt file {source} uses the old '{LEGACY_SPLIT}' format, which will stop loading in a later release; "
        f"put a line '<!-- section: system -->' before the system part and replace '{LEGACY_SPLIT}' by "
        "'<!-- section: user -->' (placeholders stay {{name}})",
        FutureWarning,
        stacklevel=3,
    )
    system, user = text.split(LEGACY_SPLIT, 1)
    return Template(name, source, (("system", system.strip()), ("user", user.strip())))


def load_prompt_file(
    path: str | Path, screener: str, placeholders: Sequence[str], markers: Sequence[str] = ()
) -> Template:
    """The checked template in ``path`` (see the module docstring for the checks)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(
            f"prompt file {file} does not exist; write one with `verifyless tune screener --out FILE` "
            "or fix the screener's prompt_file option"
        )
    template = read_prompt_text(file.read_text(encoding="utf-8"), file.name, str(file))
    return check_template(template, f"the {screener} screener", placeholders, markers)


__all__ = ["LEGACY_SPLIT", "load_prompt_file", "read_prompt_text"]
