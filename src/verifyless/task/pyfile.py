"""Load a function from a task's own Python file on the trusted side (scorers, competition graders)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifyless.errors import TaskError
from verifyless.node import content_hash

__all__ = ["load_function"]

_loaded: dict[tuple[str, int, str], Callable[..., Any]] = {}


def load_function(path: Path, name: str) -> Callable[..., Any]:
    """Import ``name`` from a task's own Python file (a scorer, a grader), cached by path and mtime.

    The file runs in this process (the trusted side); its folder is on ``sys.path`` while it imports, so it may
    import helpers beside it. ``TaskError`` when it cannot be read, imported, or lacks a callable ``name``.
    """
    try:
        key = (str(path.resolve()), path.stat().st_mtime_ns, name)
    except OSError as exc:
        raise TaskError(f"scorer file {path} cannot be read: {exc}") from exc
    if key not in _loaded:
        module_name = f"_verifyless_scorer_{content_hash(key[0])[:12]}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise TaskError(f"scorer file {path} cannot be imported")
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.parent))  # let the scorer import helpers beside it
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise TaskError(f"scorer file {path} failed to import ({type(exc).__name__}: {exc}); fix the task") from exc
        finally:
            sys.path.remove(str(path.parent))
        fn = getattr(module, name, None)
        if not callable(fn):
            raise TaskError(f"scorer file {path} defines no function {name!r}")
        _loaded[key] = fn
    return _loaded[key]
