"""Generate the reference part of ``docs/configuration.md`` from the configuration models.

``python -m verifyless.config_doc`` rewrites the part between the markers;
``python -m verifyless.config_doc --check`` exits 1 when it is stale (a test runs
the same check). Rendered: every ``RunConfig`` field (with its type, default
and description) and, from ``verifyless.components.COMPONENTS`` (the one map from names to
components), a table of every registered component and the options of every component chosen
by ``KIND.name`` (strategies, executors and screeners: ``StrictOptions`` models, each field's
description).
"""

from __future__ import annotations

import json
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from verifyless import docgen
from verifyless.components import COMPONENTS
from verifyless.config import RunConfig
from verifyless.registry import NOT_ADDED, stored_default

BEGIN = "<!-- BEGIN GENERATED REFERENCE (python -m verifyless.config_doc) -->"
END = "<!-- END GENERATED REFERENCE -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _default(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(section)"
    if callable(value):
        return "-"
    try:
        return f"`{json.dumps(value, default=str)}`"
    except (TypeError, ValueError):
        return f"`{value}`"


def _type(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "")
    return text.replace("|", "or").replace("NoneType", "None")


def _model_rows(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        sub = field.annotation if isinstance(field.annotation, type) else None
        default = field.default if field.default_factory is None else field.default_factory()  # type: ignore[call-arg]
        desc = (field.description or "").replace("|", "\\|") + _stored_note(field)
        if sub is not None and issubclass(sub, BaseModel):
            yield f"| `{key}` | section | | {desc} |"
            yield from _model_rows(sub, f"{key}.")
            continue
        choices = _choices(field.annotation)
        if choices:
            names = ", ".join(choices)
            yield f"| `{key}.name` | one of {names} | `{json.dumps(default.name)}` | {desc} |"
            yield f"| `{key}.options` | mapping | `{{}}` | options of the chosen {name}, checked when loaded (below) |"
            yield from _shared_rows(type(default), key)
            continue
        shown = "(required)" if field.is_required() else _default(default)
        yield f"| `{key}` | {_type(field.annotation)} | {shown} | {desc} |"


def _stored_note(field: FieldInfo) -> str:
    """`` (a run stored before this option: `x`)`` for an option declared with ``added_later``, else ``""``."""
    stored = stored_default(field)
    return "" if stored is NOT_ADDED else f" (a run stored before this option: {_default(stored)})"


def _shared_rows(member: type[BaseModel], key: str) -> Iterator[str]:
    """The rows of a component section's own fields beside ``name`` and ``options`` (``screener.warm_start``)."""
    for name, field in member.model_fields.items():
        if name not in ("name", "options"):
            desc = (field.description or "").replace("|", "\\|") + _stored_note(field)
            yield f"| `{key}.{name}` | {_type(field.annotation)} | {_default(field.default)} | {desc} |"


def _choices(annotation: Any) -> list[str]:
    """The names of a discriminated union of components (``RunConfig.screener``, ``.executor``); [] otherwise."""
    if typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    members = typing.get_args(annotation) if typing.get_origin(annotation) is typing.Union else ()
    return [typing.get_args(m.model_fields["name"].annotation)[0] for m in members if hasattr(m, "model_fields")]


def render() -> str:
    """The generated reference (markdown, without the markers)."""
    head = "| key | type | default | description |\n|---|---|---|---|"
    out = ["## Reference (generated from `verifyless.config`)", "", head, *_model_rows(RunConfig), ""]
    out += ["### Components (`verifyless components`)", "", *_component_rows(), ""]
    for registry in COMPONENTS.values():
        if not registry.options_key.endswith(".options") or not any(c.options for c in registry.components()):
            continue  # no options (providers), or options in a fixed section of the tree (roles.llm), above
        out += [f"### {registry.kind.title()} options (`{registry.options_key}`)", ""]
        for c in sorted(registry.components(), key=lambda c: c.name):
            what = getattr(c.options, "__name__", "no options")
            out += [f"`{c.name}` ({what}): {c.help}.", "", head, *(_model_rows(c.options) if c.options else ()), ""]
    return "\n".join(out).rstrip() + "\n"


def _component_rows() -> Iterator[str]:
    """One row per registered component of ``COMPONENTS``: its kind, name, the key that chooses it and its help."""
    yield "| kind | name | chosen by | description |\n|---|---|---|---|"
    for kind, registry in COMPONENTS.items():
        for c in registry.components():
            help_text = c.help.replace("|", "\\|")
            yield f"| {kind} | `{c.name}` | `{registry.name_key}` | {help_text} |"


def updated(text: str) -> str:
    """``text`` with the generated part replaced (appended when the markers are missing)."""
    return docgen.splice(text, BEGIN, END, render())


def main(argv: list[str] | None = None) -> int:
    return docgen.run(DOC, updated, "verifyless.config_doc", argv)


if __name__ == "__main__":  # python -m verifyless.config_doc [--check]
    sys.exit(main())
