"""SearchStrategy contract: pure ask/tell objects with an injected ``random.Random``.

Strategies see only ``Node`` records (validation fitness, never hidden test
scores), keep their own statistics, and do no I/O. Resume = a fresh strategy
told every stored node in order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from verifyless.node import Node, Operator


@dataclass(frozen=True)
class Expansion:
    """One request to make children: which parent, how, and with what context.

    ``reference_ids`` become information-only edges of the children;
    ``inspiration_ids`` are shown to the proposer as summaries (islands).
    """

    parent_id: str | None
    operator: Operator
    island: int = 0
    reference_ids: tuple[str, ...] = ()
    inspiration_ids: tuple[str, ...] = ()
    note: str = ""


class SearchView:
    """Read-only-for-strategies index of the nodes told so far (O(1) updates)."""

    def __init__(self, nodes: Iterable[Node] = ()) -> None:
        self.nodes: dict[str, Node] = {}
        self.children: dict[str | None, list[str]] = {}
        self.best_id: str | None = None
        for n in nodes:
            self.add(n)

    def add(self, node: Node) -> None:
        first = node.id not in self.nodes
        self.nodes[node.id] = node
        if first:
            self.children.setdefault(node.parent_id, []).append(node.id)
        if node.ok and (self.best_id is None or node.fitness > self.nodes[self.best_id].fitness):  # type: ignore[operator]
            self.best_id = node.id

    @property
    def best(self) -> Node | None:
        return self.nodes[self.best_id] if self.best_id else None

    def __len__(self) -> int:
        return len(self.nodes)


@runtime_checkable
class SearchStrategy(Protocol):
    name: str

    def ask(self, view: SearchView, k: int) -> list[Expansion]: ...

    def tell(self, node: Node) -> None: ...

    def final(self, view: SearchView) -> str | None: ...
