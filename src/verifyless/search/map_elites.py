"""A MAP-Elites archive: the best node in each cell of a feature grid.

Features (names in ``features``):

- ``"score"``: fitness, min-max scaled over the members, cut into ``bins`` bins.
- ``"length"``: the program's length in characters (``Node.code_length``; the
  idea text's length only for a node that does not carry it, e.g. one built by
  hand), min-max scaled and binned like ``"score"``, so shorter and longer
  programs of the same island land in different cells.
- ``"tags"``: the node's idea tags, sorted and joined (a categorical axis).
- any other name: that validation metric from ``Node.metrics``, min-max scaled
  and binned like ``"score"`` (missing values count as 0).

Two ways to get an archive, with identical results for the same bounds:
``build_archive(members, bounds=...)`` places every member from scratch (the
reference definition; without ``bounds`` it uses the members' own min and
max), and ``IncrementalArchive`` keeps one up to date under ``add`` and
``remove``. Its bounds are sticky: they cover every value the archive has
ever seen, and when a new value falls outside them they widen to include it
plus ``margin`` times the new span on that side. So removing a node costs the
members of its cell, adding one costs O(1) plus its cell, and only a
widening re-places every member (O(members)); with the margin a steadily
improving score widens them O(log(range)) times, not once per new best.
Ties for a cell go to the earlier member (insertion order).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

from verifyless.node import Node

Cell = tuple[Hashable, ...]
CATEGORICAL = ("tags",)


def node_length(node: Node) -> float:
    """Program size: ``Node.code_length`` when known, else the idea text's length."""
    if node.code_length is not None:
        return float(node.code_length)
    return float(len(node.idea))


def _raw(node: Node, feature: str) -> float:
    if feature == "score":
        return float(node.fitness) if node.fitness is not None else 0.0
    if feature == "length":
        return node_length(node)
    return float(node.metrics.get(feature, 0.0)) if node.metrics else 0.0


def _scaled_bin(value: float, low: float, high: float, bins: int) -> int:
    if high <= low:
        return 0
    return min(bins - 1, int((value - low) / (high - low) * bins))


def _fitness(node: Node) -> float:
    return node.fitness if node.fitness is not None else -math.inf


@dataclass(frozen=True)
class Archive:
    """``elites``: cell -> id of the fittest member in it; ``cell_of``: member id -> cell."""

    elites: dict[Cell, str]
    cell_of: dict[str, Cell]


def _bounds(members: Iterable[Node], scaled: Sequence[str]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for f in scaled:
        values = [_raw(n, f) for n in members]
        out[f] = (min(values), max(values)) if values else (0.0, 0.0)
    return out


def _cell(node: Node, features: Sequence[str], bounds: dict[str, tuple[float, float]], bins: int) -> Cell:
    coords: list[Hashable] = []
    for f in features:
        if f == "tags":
            coords.append("|".join(sorted(node.tags)))
        else:
            low, high = bounds[f]
            coords.append(_scaled_bin(_raw(node, f), low, high, bins))
    return tuple(coords)


def build_archive(
    members: Sequence[Node], features: Sequence[str], bins: int, bounds: dict[str, tuple[float, float]] | None = None
) -> Archive:
    """Place every member in its cell and keep the fittest per cell (earlier member wins ties).

    ``bounds`` (feature -> (low, high)) fixes the scale of the numeric axes;
    by default it is the members' own min and max.
    """
    if bounds is None:
        bounds = _bounds(members, [f for f in features if f not in CATEGORICAL])
    elites: dict[Cell, str] = {}
    best: dict[Cell, float] = {}
    cell_of: dict[str, Cell] = {}
    for node in members:
        cell = _cell(node, features, bounds, bins)
        cell_of[node.id] = cell
        fitness = _fitness(node)
        if cell not in best or fitness > best[cell]:
            best[cell] = fitness
            elites[cell] = node.id
    return Archive(elites=elites, cell_of=cell_of)


class IncrementalArchive:
    """An archive kept up to date under ``add`` / ``remove`` with sticky, widening bounds (see module doc).

    At every step it equals ``build_archive(members, features, bins,
    bounds=self.bounds)``. ``members`` keeps insertion order (re-adding a
    removed id puts it last). Plain data only, so it pickles.
    """

    def __init__(self, features: Sequence[str], bins: int, margin: float = 0.25) -> None:
        self.features = tuple(features)
        self.bins = bins
        self.margin = margin
        self._scaled = tuple(f for f in self.features if f not in CATEGORICAL)
        self.members: dict[str, Node] = {}
        self.bounds: dict[str, tuple[float, float]] = {}
        self.cell_of: dict[str, Cell] = {}
        self.elites: dict[Cell, str] = {}
        self.rebuilds = 0  # how many times every member was re-placed
        self._cells: dict[Cell, list[str]] = {}  # cell -> its members in insertion order

    def __contains__(self, node_id: str) -> bool:
        return node_id in self.members

    def __len__(self) -> int:
        return len(self.members)

    def add(self, node: Node) -> None:
        if node.id in self.members:
            return
        self.members[node.id] = node
        if self._widen(node):
            self._rebuild()
        else:
            self._place(node)

    def remove(self, node_id: str) -> None:
        if self.members.pop(node_id, None) is None:
            return
        cell = self.cell_of.pop(node_id)
        ids = self._cells[cell]
        ids.remove(node_id)
        if not ids:
            del self._cells[cell]
            del self.elites[cell]
        elif self.elites[cell] == node_id:
            self.elites[cell] = self._fittest(ids)

    def snapshot(self) -> Archive:
        return Archive(elites=dict(self.elites), cell_of=dict(self.cell_of))

    # ------------------------------------------------------------------ internals
    def _widen(self, node: Node) -> bool:
        """Stretch the bounds to cover ``node``; True when they changed (and cells must be recomputed)."""
        changed = False
        for f in self._scaled:
            value = _raw(node, f)
            if f not in self.bounds:
                self.bounds[f] = (value, value)
                changed = True
                continue
            low, high = self.bounds[f]
            if low <= value <= high:
                continue
            new_low, new_high = min(low, value), max(high, value)
            pad = self.margin * (new_high - new_low)
            self.bounds[f] = (new_low - pad if value < low else low, new_high + pad if value > high else high)
            changed = True
        return changed

    def _place(self, node: Node) -> None:
        cell = _cell(node, self.features, self.bounds, self.bins)
        self.cell_of[node.id] = cell
        ids = self._cells.setdefault(cell, [])
        ids.append(node.id)
        current = self.elites.get(cell)
        if current is None or _fitness(node) > _fitness(self.members[current]):
            self.elites[cell] = node.id

    def _fittest(self, ids: list[str]) -> str:
        best = ids[0]
        for node_id in ids[1:]:  # strict '>' keeps the earlier member on ties
            if _fitness(self.members[node_id]) > _fitness(self.members[best]):
                best = node_id
        return best

    def _rebuild(self) -> None:
        self.rebuilds += 1
        self.cell_of, self.elites, self._cells = {}, {}, {}
        for node in self.members.values():
            self._place(node)


__all__ = ["Archive", "IncrementalArchive", "build_archive", "node_length"]
