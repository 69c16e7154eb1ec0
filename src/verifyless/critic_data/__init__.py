"""Outcome data for critics: collection, labels, teacher critiques, datasets and the critic benchmark.

See docs/design/critic-data.md. Importing this package is cheap: ``datasets`` is
imported only by the functions that read or write datasets.
"""

from __future__ import annotations

from verifyless.critic_data.dataset import load_critic_dataset
from verifyless.critic_data.prompt import critic_messages
from verifyless.critic_data.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "critic_messages", "load_critic_dataset"]
