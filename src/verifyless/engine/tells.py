"""The tell queue: outcomes reach the learners in a fixed order, never in completion order.

Each node recorded in a round is queued with an ordering class and a
position inside that class. At a round boundary the engine takes the round's
nodes sorted by (class, position) and tells them as one logged batch, so the
strategy, the memory and learning screeners see the same sequence whatever
the timing of the verifications was.
"""

from __future__ import annotations

import enum

__all__ = ["TellOrder", "TellQueue"]

Position = tuple[int | str, ...]


class TellOrder(enum.IntEnum):
    """Ordering classes of a round's tell batch, first told first."""

    VERIFIED = 0  # verification chains: by place in the screening's to_verify list, then repair attempt
    SCREENED_OUT = 1  # by screening rank
    DUPLICATE = 2  # by candidate id
    FAILED = 3  # made but failed before screening (parse, guard, model error): by candidate id
    RESTORED = 5  # resume: recorded after the last logged batch, by log order
    INTERRUPTED = 6  # resume: made but never screened or verified, by candidate id


class TellQueue:
    """Nodes waiting for their round's batch, keyed by round."""

    def __init__(self) -> None:
        self._pending: dict[int, list[tuple[tuple, str]]] = {}

    def add(self, round: int, order: TellOrder, position: Position, node_id: str) -> None:
        self._pending.setdefault(round, []).append(((int(order), *_comparable(position)), node_id))

    def rounds(self, upto: int) -> list[int]:
        """Rounds <= ``upto`` with queued nodes, ascending."""
        return sorted(r for r in self._pending if r <= upto)

    def take(self, round: int) -> list[str]:
        """Remove and return the round's node ids in tell order."""
        return [nid for _, nid in sorted(self._pending.pop(round, []), key=lambda kv: kv[0])]


def _comparable(position: Position) -> tuple:
    """Numbers before strings at each place, so mixed positions never compare int with str."""
    return tuple((0, x) if isinstance(x, (int, float)) else (1, str(x)) for x in position)
