"""Reading the YAML files people write (run configs, training configs, scripted models, task sidecars).

``yaml_problem(exc)`` turns a PyYAML error into one line (where, then what); ``read_yaml(path, what)`` parses
a file and raises a ``ConfigError`` with that line, so a typo in a file is one clear error that names the
file, the line and the column, never the parser's multi-line report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from verifyless.errors import ConfigError


def yaml_problem(exc: yaml.YAMLError) -> str:
    """``line L, column C: what went wrong`` (1-based), from the parser's error; its first line where it has no mark."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"line {mark.line + 1}, column {mark.column + 1}: {exc.problem or exc.context or 'syntax error'}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read_yaml(path: Path, what: str) -> Any:
    """The parsed contents of ``path``; a ``ConfigError`` naming ``what`` (e.g. "config file") where it is not
    UTF-8 text or not valid YAML."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {path} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{what} {path} is not valid YAML: {yaml_problem(exc)}; fix the YAML syntax") from None


__all__ = ["read_yaml", "yaml_problem"]
