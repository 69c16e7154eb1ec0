"""Data that ships inside the package: the built-in tasks and the committed pool worlds.

Both are plain folders of package data (``tasks/NAME/`` with a ``task.yaml``; ``worlds/NAME.jsonl``),
so a built, non-editable wheel lists, verifies and replays them exactly as a source checkout does.
In the source tree ``builtin/tasks`` is a link to the checkout's top-level ``tasks/`` (where users
read and copy them, and where they are not mistaken for library code); a wheel holds real copies.
The hidden labels of a built-in task sit in its ``hidden/`` folder here; ``verify`` passes that
folder in the sandbox's ``hide`` list, so candidates never see it (docs/design/sandbox.md).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["tasks_dir", "worlds_dir"]

_HERE = Path(__file__).resolve().parent


def tasks_dir() -> Path:
    """The built-in tasks folder (``$VERIFYLESS_TASKS_DIR`` overrides it)."""
    override = os.environ.get("VERIFYLESS_TASKS_DIR")
    return Path(override).resolve() if override else (_HERE / "tasks").resolve()


def worlds_dir() -> Path:
    """The committed pool worlds, one ``TASK.jsonl`` per built-in task that has one."""
    return _HERE / "worlds"
