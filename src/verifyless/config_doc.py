"""Generate the reference part of ``docs/configuration.md`` from the configuration models.

``python -m verifyless.config`` rewrites the part between the markers;
``python -m verifyless.config --check`` exits 1 when it is stale (a test runs
the same check). Rendered: every ``RunConfig`` field (with its type, default
and description), the options of each search strategy (their config
dataclasses), and the screener option models when ``verifyless.screen.registry``
exposes them as ``OPTIONS`` (name -> pydantic model or dataclass).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

BEGIN = "<!-- BEGIN GENERATED REFERENCE (python -m verifyless.config) -->"
END = "<!-- END GENERATED REFERENCE -->"
DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _default(value: Any) -> str:
    if isinstance(value, BaseModel):
        return "(section)"
    if dataclasses.is_dataclass(value) or callable(value):
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
        desc = (field.description or "").replace("|", "\\|")
        if sub is not None and issubclass(sub, BaseModel) and sub.__name__ != "Named":
            yield f"| `{key}` | section | | {desc} |"
            yield from _model_rows(sub, f"{key}.")
            continue
        if sub is not None and sub.__name__ == "Named":
            yield f"| `{key}.name` | str | `{json.dumps(default.name)}` | {desc} |"
            yield f"| `{key}.options` | mapping | `{{}}` | options of the chosen {name} (below) |"
            continue
        yield f"| `{key}` | {_type(field.annotation)} | {_default(default)} | {desc} |"


def _dataclass_rows(cls: type) -> Iterator[str]:
    for f in dataclasses.fields(cls):
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else (f.default_factory() if f.default_factory is not dataclasses.MISSING else "required")
        )
        help_text = str(f.metadata.get("help", f.metadata.get("description", ""))).replace("|", "\\|")
        yield f"| `{f.name}` | {_type(f.type)} | {_default(default)} | {help_text} |"


def _options_rows(cls: Any) -> Iterator[str]:
    if isinstance(cls, type) and issubclass(cls, BaseModel):
        yield from _model_rows(cls)
    elif dataclasses.is_dataclass(cls):
        yield from _dataclass_rows(cls)  # type: ignore[arg-type]


def render() -> str:
    """The generated reference (markdown, without the markers)."""
    from verifyless.config import RunConfig
    from verifyless.search.registry import STRATEGIES

    head = "| key | type | default | description |\n|---|---|---|---|"
    out = ["## Reference (generated from `verifyless.config`)", "", head, *_model_rows(RunConfig), ""]
    out += ["### Strategy options (`strategy.options`)", ""]
    for name, (config_cls, _) in sorted(STRATEGIES.items()):
        out += [f"`{name}` ({config_cls.__name__}):", "", head, *_options_rows(config_cls), ""]
    screener_options = _screener_options()
    if screener_options:
        out += ["### Screener options (`screener.options`)", ""]
        for name, cls in sorted(screener_options.items()):
            out += [f"`{name}` ({getattr(cls, '__name__', cls)}):", "", head, *_options_rows(cls), ""]
    return "\n".join(out).rstrip() + "\n"


def _screener_options() -> dict[str, Any]:
    from verifyless.screen import registry

    found = getattr(registry, "OPTIONS", None)
    return dict(found) if isinstance(found, dict) else {}


def updated(text: str) -> str:
    """``text`` with the generated part replaced (appended when the markers are missing)."""
    block = f"{BEGIN}\n\n{render()}\n{END}"
    if BEGIN in text and END in text:
        return text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    return text.rstrip() + "\n\n" + block + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    current = DOC.read_text()
    fresh = updated(current)
    if "--check" in args:
        if fresh != current:
            print(f"{DOC} is stale: run `python -m verifyless.config`", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh)
    print(f"wrote {DOC}")
    return 0
