"""The dashboard's lineage graph: node positions, colours and sizes, islands apart, the returned node's path marked.

``lineage_view(store, run_id)`` returns plain frozen records that the page's
script draws as SVG (with ``textContent`` and attributes only). Layout: one
tidy tree per island (a node whose primary parent is on another island starts
a tree of its own island), islands side by side left to right with a gap, rows
by depth in the whole graph. Colour and radius follow the validation
``fitness`` (oriented, higher is better) scaled over the run's range; a node
without one (screened out, failed, not yet verified) is grey and small. Hidden
test scores are not read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verifyless.report import views

COLUMN = 46  # px between leaf columns
ROW = 80  # px between depths
ISLAND_GAP = 1.5  # columns between islands
MARGIN = 30
# A short viridis ramp (matplotlib's, sampled at 0, 0.25, 0.5, 0.75, 1).
_RAMP = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))


@dataclass(frozen=True)
class LineageNode:
    """One node as drawn: its place in the search, its validation score, and its circle (position, radius, colour)."""

    id: str
    parent_id: str | None
    island: int
    operator: str
    status: str
    round: int
    score: float | None  # validation score (task metric, raw)
    idea: str
    x: float  # px
    y: float  # px
    r: float  # px
    color: str  # "#rrggbb"
    on_path: bool  # on the primary path from a root to the returned node
    final: bool


@dataclass(frozen=True)
class LineageEdge:
    """One drawn edge from parent to child; reference edges carry context only (no credit)."""

    source: str
    target: str
    kind: str  # "primary" or "reference"
    on_path: bool


@dataclass(frozen=True)
class IslandBand:
    """The horizontal band one island's tree occupies."""

    island: int
    x0: float  # px, left edge
    x1: float  # px, right edge


@dataclass(frozen=True)
class LineageView:
    """The laid-out graph: what the page draws, its size in px, the returned node and the fitness range coloured."""

    nodes: tuple[LineageNode, ...]
    edges: tuple[LineageEdge, ...]
    islands: tuple[IslandBand, ...]
    width: float
    height: float
    final_id: str | None
    fitness_range: tuple[float, float] | None


def lineage_view(store: Any, run_id: str) -> LineageView:
    """The whole graph of ``run_id`` laid out for the dashboard (see module docstring)."""
    final_id = views.final.final_view(store, run_id).node_id
    g = views.nodes.graph_view(store, run_id, final_id=final_id)
    by_id = {n.id: n for n in g.nodes}
    columns, bands = _island_columns(g.nodes, by_id)
    path = _path_to(final_id, by_id)
    lo, hi = g.fitness_range or (0.0, 0.0)
    nodes = tuple(
        LineageNode(
            n.id,
            n.parent_id,
            n.island,
            n.operator,
            n.status,
            n.round,
            n.score,
            n.idea,
            MARGIN + columns[n.id] * COLUMN,
            MARGIN + n.depth * ROW,
            *_look(n.fitness, lo, hi),
            n.id in path,
            n.final,
        )
        for n in g.nodes
    )
    edges = tuple(
        LineageEdge(e.source, e.target, e.kind, e.kind == "primary" and e.source in path and e.target in path)
        for e in g.edges
    )
    right = max((b.x1 for b in bands), default=MARGIN)
    return LineageView(
        nodes,
        edges,
        bands,
        right + MARGIN,
        2 * MARGIN + g.depth * ROW,
        final_id,
        g.fitness_range,
    )


def _island_columns(
    nodes: tuple[views.nodes.GraphNode, ...], by_id: Mapping[str, views.nodes.GraphNode]
) -> tuple[dict[str, float], tuple[IslandBand, ...]]:
    """Leaf columns per island (a tidy tree per island, creation order), islands placed left to right."""
    columns: dict[str, float] = {}
    bands = []
    offset = 0.0
    for island in sorted({n.island for n in nodes}):
        members = [n for n in nodes if n.island == island]
        children: dict[str | None, list[str]] = {}
        for n in members:
            up = by_id.get(n.parent_id or "")
            children.setdefault(n.parent_id if up is not None and up.island == island else None, []).append(n.id)
        x: dict[str, float] = {}
        views.nodes._layout(children, x, {})
        width = max(x.values(), default=0.0) + 1
        columns.update({nid: offset + col for nid, col in x.items()})
        bands.append(IslandBand(island, MARGIN + (offset - 0.5) * COLUMN, MARGIN + (offset + width - 0.5) * COLUMN))
        offset += width + ISLAND_GAP
    return columns, tuple(bands)


def _path_to(final_id: str | None, by_id: Mapping[str, views.nodes.GraphNode]) -> set[str]:
    """The returned node and its primary ancestors (cycle-safe)."""
    path: set[str] = set()
    node = final_id
    while node is not None and node in by_id and node not in path:
        path.add(node)
        node = by_id[node].parent_id
    return path


def _look(fitness: float | None, lo: float, hi: float) -> tuple[float, str]:
    """(radius, colour) for a fitness scaled to [0, 1] over the run's range; grey and small without one."""
    if fitness is None:
        return 5.0, "#b8b8b8"
    t = 1.0 if hi <= lo else (fitness - lo) / (hi - lo)
    return 7.0 + 7.0 * t, _ramp(t)


def _ramp(t: float) -> str:
    t = min(1.0, max(0.0, t)) * (len(_RAMP) - 1)
    i = min(int(t), len(_RAMP) - 2)
    f = t - i
    rgb = (round(a + (b - a) * f) for a, b in zip(_RAMP[i], _RAMP[i + 1], strict=True))
    return "#" + "".join(f"{c:02x}" for c in rgb)
