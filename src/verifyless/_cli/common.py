"""What several command modules share: the console they print to and the warning filter of training commands.

Kept apart so command modules import it and never each other (``train`` mounts ``policy``; neither reaches back).
"""

from __future__ import annotations

import sys
import warnings

from rich.console import Console

console = Console(width=None if sys.stdout.isatty() else 160)


def quiet() -> None:
    """Library deprecation chatter (transformers/TRL FutureWarnings) is not for the person training."""
    warnings.filterwarnings("ignore", category=FutureWarning)


__all__ = ["console", "quiet"]
