"""``Packed``: a dict of frozen records that a snapshot restores packed and unpacks one record when read.

A 100k-node run state holds ~250k frozen records (candidates, their ideas,
verifications) that a resumed run rarely reads again: the strategy works on
the ``Node`` records of the view, and only the nodes a round touches need
their candidate, idea or verification. Unpickling all of them was about half
of a 100k-node snapshot resume. A ``Packed`` mapping pickles each record on
its own (``__reduce__``), so a restored mapping holds one ``bytes`` object
per key and a record is unpickled on its first read, then kept.

Contract: a ``MutableMapping[str, R]`` with a plain dict's insertion order
(unpacking a record keeps its place); values are frozen records (never
``bytes`` themselves). Reading every value (``items()``, ``values()``)
unpacks every record once, at about the cost the eager load had.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, MutableMapping
from typing import Any, Generic, TypeVar

__all__ = ["Packed"]

R = TypeVar("R")


class Packed(MutableMapping[str, R], Generic[R]):
    """Records by id; those restored from a snapshot stay pickled until first read (see the module docstring)."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, Any] | None = None) -> None:
        self._items: dict[str, Any] = {} if items is None else items  # a value is a record or its pickle

    def __getitem__(self, key: str) -> R:
        value = self._items[key]
        if type(value) is bytes:
            value = self._items[key] = pickle.loads(value)
        return value

    def __setitem__(self, key: str, value: R) -> None:
        self._items[key] = value

    def __delitem__(self, key: str) -> None:
        del self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Packed({len(self._items)} records)"

    def __reduce__(self) -> tuple[Any, ...]:
        packed = {
            k: v if type(v) is bytes else pickle.dumps(v, pickle.HIGHEST_PROTOCOL) for k, v in self._items.items()
        }
        return Packed, (packed,)
