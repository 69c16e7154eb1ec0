"""What several command modules share: the console they print to and the warning filter of training commands.

Kept apart so command modules import it and never each other (``train`` mounts ``policy``; neither reaches back).
"""

from __future__ import annotations

import json
import sys
import warnings
from typing import Any

from rich.console import Console

from verifyless.errors import ConfigError

console = Console(width=None if sys.stdout.isatty() else 160)


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


__all__ = ["console", "key_values", "quiet"]
