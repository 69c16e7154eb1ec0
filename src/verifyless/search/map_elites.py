"""A MAP-Elites archive: the best node in each cell of a feature grid.

The archive is rebuilt from a list of member nodes whenever it is needed. That
keeps it a pure function of the members (no stale bins when the score range
grows) at O(members) cost, which is small next to one verification.

Features (names in ``features``):

- ``"score"``: fitness, min-max scaled over the members, cut into ``bins`` bins.
- ``"length"``: ``metrics["code_length"]`` when the engine records it, else the
  length of the idea text; binned by ``floor(log2(1 + length))`` capped at
  ``bins - 1`` so that short and very long programs land in different cells.
- ``"tags"``: the node's idea tags, sorted and joined (a categorical axis).
- any other name: that validation metric from ``Node.metrics``, min-max scaled
  and binned like ``"score"`` (missing values go to bin 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Hashable, Sequence

from verifyless.node import Node

Cell = tuple[Hashable, ...]


def node_length(node: Node) -> float:
    """Program size proxy: the ``code_length`` metric if present, else the idea's length."""
    value = node.metrics.get("code_length") if node.metrics else None
    return float(value) if value is not None else float(len(node.idea))


def _scaled_bin(value: float, low: float, high: float, bins: int) -> int:
    if high <= low:
        return 0
    return min(bins - 1, int((value - low) / (high - low) * bins))


def _raw(node: Node, feature: str) -> float:
    if feature == "score":
        return float(node.fitness) if node.fitness is not None else 0.0
    return float(node.metrics.get(feature, 0.0)) if node.metrics else 0.0


@dataclass(frozen=True)
class Archive:
    """``elites``: cell -> id of the fittest member in it; ``cell_of``: member id -> cell."""

    elites: dict[Cell, str]
    cell_of: dict[str, Cell]


def build_archive(members: Sequence[Node], features: Sequence[str], bins: int) -> Archive:
    """Place every member in its cell and keep the fittest per cell (earlier member wins ties)."""
    scaled = [f for f in features if f not in ("length", "tags")]
    bounds = {}
    for f in scaled:
        values = [_raw(n, f) for n in members]
        bounds[f] = (min(values), max(values)) if values else (0.0, 0.0)
    elites: dict[Cell, str] = {}
    best: dict[Cell, float] = {}
    cell_of: dict[str, Cell] = {}
    for node in members:
        coords: list[Hashable] = []
        for f in features:
            if f == "length":
                coords.append(min(bins - 1, int(math.log2(1.0 + node_length(node)))))
            elif f == "tags":
                coords.append("|".join(sorted(node.tags)))
            else:
                low, high = bounds[f]
                coords.append(_scaled_bin(_raw(node, f), low, high, bins))
        cell = tuple(coords)
        cell_of[node.id] = cell
        fitness = node.fitness if node.fitness is not None else -math.inf
        if cell not in best or fitness > best[cell]:
            best[cell] = fitness
            elites[cell] = node.id
    return Archive(elites=elites, cell_of=cell_of)
