"""Nodes of a search graph as a screener's context collection sees them (tournament, agentic)."""

from __future__ import annotations

from verifyless.node import Node, Operator, Status


def scored_node(
    nid: str, parent: str | None, score: float | None, *, status: Status = Status.OK, minimise: bool = False
) -> Node:
    """An improvement ``nid`` of ``parent`` with idea ``idea of <nid>``. Its validation ``score`` is kept only when
    ``status`` is OK, and its fitness is that score oriented so higher is better (negated when ``minimise``)."""
    kept = score if status is Status.OK else None
    fitness = None if kept is None else (-kept if minimise else kept)
    return Node(
        id=nid,
        parent_id=parent,
        operator=Operator.IMPROVE,
        status=status,
        score=kept,
        fitness=fitness,
        idea=f"idea of {nid}",
    )
