"""What several command modules share: the consoles they print to, the read-only store opener, the warning filter.

Kept apart so command modules import it and never each other (``train`` mounts ``policy``; neither reaches back).
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

from rich.console import Console

from verifyless.errors import ConfigError
from verifyless.report.reader import ReadOnlyStore, open_readonly

console = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 160)


def read_store(path: Path) -> ReadOnlyStore:
    """The store opened read-only, for commands that only read; says on stderr (one line) when it is not writable.

    A store on read-only media opens ``immutable`` (see ``verifyless.report.reader``).
    """
    store = open_readonly(path)
    if store.notice:
        err.print(store.notice, highlight=False, soft_wrap=True, markup=False)
    return store


def quiet() -> None:
    """Library deprecation chatter (transformers/TRL FutureWarnings) is not for the person training."""
    warnings.filterwarnings("ignore", category=FutureWarning)


def key_values(items: list[str]) -> dict[str, Any]:
    """``--option KEY=VALUE`` items as a mapping; a VALUE that parses as JSON is taken as JSON, else as text."""
    opts: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--option {item!r} must look like KEY=VALUE")
        key, raw = item.split("=", 1)
        try:
            opts[key] = json.loads(raw)
        except json.JSONDecodeError:
            opts[key] = raw
    return opts


__all__ = ["console", "err", "key_values", "quiet", "read_store"]
