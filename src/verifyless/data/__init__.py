"""Outcome data for critics: collection, labels, teacher critiques, datasets and the critic benchmark.

See docs/design/data.md. Importing this package is cheap: ``datasets`` is
imported only by the functions that read or write datasets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verifyless.data.schema import SCHEMA_VERSION


def load_critic_dataset(path: Any) -> Any:
    """Load a critic ``DatasetDict`` (see ``verifyless.data.dataset.load_critic_dataset``)."""
    from verifyless.data.dataset import load_critic_dataset as _load

    return _load(path)


def critic_messages(row: Mapping[str, Any], prompt: str = "critic") -> list[dict[str, str]]:
    """The critic's chat prompt for one row (see ``verifyless.data.prompt.critic_messages``)."""
    from verifyless.data.prompt import critic_messages as _messages

    return _messages(row, prompt)


__all__ = ["SCHEMA_VERSION", "critic_messages", "load_critic_dataset"]
