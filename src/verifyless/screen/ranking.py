"""Two small rules every ranking screener and the engine share: the routing test and the ranking order.

``route(u, T)`` (defined in ``metrics.critic``, the lowest layer that needs it): a candidate whose screener is too unsure (vote-based uncertainty ``u >= T``) goes to
real verification. ``u`` and ``T`` are compared with ``EPS`` of slack, so ``1 - 12/16 >= 0.25`` holds
despite float rounding (``1 - 12/16`` is exact, ``1 - 0.7`` is not). ``order_by_value``: ids sorted
by value, ties in an order drawn from the screening's generator. Pure functions, no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from verifyless.metrics.critic import EPS, route  # the one routing rule lives with the critic metrics


def order_by_value(values: Mapping[str, float], ids: Sequence[str], rng: random.Random) -> list[str]:
    """Ids sorted by value, highest first; equal values in an order drawn from ``rng``."""
    keys = {cid: rng.random() for cid in ids}  # drawn in input order: reproducible for a seed
    return sorted(ids, key=lambda cid: (-values[cid], keys[cid]))


__all__ = ["EPS", "order_by_value", "route"]
