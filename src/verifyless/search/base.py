"""SearchStrategy contract: pure ask/tell objects with an injected ``random.Random``.

Strategies see only ``Node`` records (validation fitness, never hidden test
scores), keep their own statistics, and do no I/O. Resume = a fresh strategy
told every stored node in order.
"""

from __future__ import annotations

import random
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


@runtime_checkable
class EnsembleStrategy(SearchStrategy, Protocol):
    """A strategy that can end with a top-K ensemble submission (MCGS; ``engine/submission.py``).

    ``submits_ensemble`` is its option (off: the run submits one program); ``ensemble_tasks`` which task rules it
    admits (``declared``: those without ``opt_in``; ``all``: any); ``ensemble_answer`` whether the ensemble is the
    run's result; ``final_ensemble`` the ids to combine, best first.
    """

    @property
    def submits_ensemble(self) -> bool: ...

    @property
    def ensemble_tasks(self) -> str: ...

    @property
    def ensemble_answer(self) -> bool: ...

    def final_ensemble(self, view: SearchView, k: int | None = None) -> list[str]: ...


@runtime_checkable
class PacedStrategy(SearchStrategy, Protocol):
    """A strategy whose schedules follow the run's budget (MCGS's annealing).

    Before each ask the engine calls ``pace`` with the verified steps the budget allows after the ones that
    ask hands out (``BudgetGate.steps_left``; None: no cap counts steps); ``schedule`` is what the round event
    records (plain numbers: where the schedules stand). A resume replays each logged round's ``pace``.
    ``paces_wall``: the wall-clock cap (``budget.wall_seconds``) counts steps too (``steps_left(wall=True)``).
    """

    @property
    def paces_wall(self) -> bool: ...

    def pace(self, steps_left: int | None) -> None: ...

    def schedule(self) -> dict[str, float | int | None]: ...


class ToldState:
    """The told-node bookkeeping the built-in strategies share (greedy, islands, mcgs).

    ``_seen``: every told node (its last version); ``_order``: node id -> index
    of its first verified tell (the deterministic tie-break); ``_tells`` /
    ``_asks``: tells so far and asks since the last tell, which seed each ask's
    generator (``_ask_rng``) with the one draw ``_seed`` taken from the
    injected ``rng``. With ``verified_draws`` on, the generator follows the
    verified tells only (their count and the asks since the last one), so two
    runs that verified the same nodes draw the same, however many screened-out
    candidates each was told. Plain data: a strategy built on it pickles
    (snapshots).
    """

    verified_draws = False  # set per instance by a strategy's option (a class default: older snapshots lack it)
    _verified_asks = 0  # asks since the last verified tell

    def __init__(self, rng: random.Random) -> None:
        self._seed = rng.getrandbits(64)  # the only draw from the injected rng
        self._seen = SearchView()
        self._order: dict[str, int] = {}
        self._tells = 0
        self._asks = 0

    def _record(self, node: Node) -> bool:
        """See ``node``; True when this is its first verified tell (it then gets its ``_order``)."""
        known = self._seen.nodes.get(node.id)
        self._seen.add(node)
        self._tells += 1
        self._asks = 0
        if not node.status.verified or (known is not None and known.status.verified):
            return False
        self._order[node.id] = len(self._order)
        self._verified_asks = 0
        return True

    def _ask_rng(self) -> random.Random:
        """The generator of this ask: a function of (seed, tells, asks since the last tell), or with
        ``verified_draws`` of (seed, verified tells, asks since the last of them)."""
        if self.verified_draws:
            rng = random.Random(f"{self._seed}:verified {len(self._order)}:{self._verified_asks}")
        else:
            rng = random.Random(f"{self._seed}:{self._tells}:{self._asks}")
        self._asks += 1
        self._verified_asks += 1
        return rng

    def _ranked(self, ids: Iterable[str]) -> list[str]:
        """Fittest first; earlier-told first among equals (deterministic)."""
        return sorted(ids, key=lambda i: (-(self._seen.nodes[i].fitness or 0.0), self._order[i]))

    def final(self, view: SearchView) -> str | None:
        """The best validation node told so far (None before any usable score)."""
        return self._seen.best_id
