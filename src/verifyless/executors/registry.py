"""Build executors by name from config: ``build_executor(name, options, hide=..., capacity=...)``.

``EXECUTORS`` maps each name to its class and its typed options (``LocalExecutorOptions``,
``RayExecutorOptions``, defined beside the classes). ``validate_options`` checks ``executor.options``
when the configuration loads; an unknown name or option, or a bad value, is a one-line
``ConfigError`` naming the fix. ``capacity`` (the engine's ``engine.verify_concurrency``) is used
unless the options set their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from verifyless.errors import ConfigError
from verifyless.executors.base import Executor
from verifyless.executors.local import LocalExecutor, LocalExecutorOptions
from verifyless.executors.ray import RayExecutor, RayExecutorOptions

EXECUTORS: dict[str, tuple[type, type[BaseModel]]] = {
    "local": (LocalExecutor, LocalExecutorOptions),
    "ray": (RayExecutor, RayExecutorOptions),
}


def validate_options(name: str, options: Mapping[str, Any]) -> BaseModel:
    """``executor.options`` of executor ``name`` as its typed options (``ConfigError`` naming what is wrong)."""
    if name not in EXECUTORS:
        raise ConfigError(f"executor.name={name!r} is unknown: use 'local' or 'ray'")
    schema = EXECUTORS[name][1]
    try:
        return schema.model_validate(dict(options))
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            key = ".".join(str(p) for p in err.get("loc", ())) or "(options)"
            if err.get("type") == "extra_forbidden":
                problems.append(f"unknown option {key!r}; valid options are {sorted(schema.model_fields)}")
            else:
                problems.append(f"option {key}={err.get('input')!r}: {err.get('msg')}; fix executor.options.{key}")
        raise ConfigError(f"executor.options for {name!r}: " + "; ".join(problems)) from None


def build_executor(name: str, options: Mapping[str, Any], *, hide: Sequence[Path] = (), capacity: int = 1) -> Executor:
    """The executor registered as ``name`` with validated ``options``; ``hide`` is kept out of its sandboxes."""
    opts = validate_options(name, options).model_dump()
    opts["capacity"] = opts["capacity"] or capacity
    cls = EXECUTORS[name][0]
    return cls(hide=hide, **opts)


__all__ = ["EXECUTORS", "build_executor", "validate_options"]
