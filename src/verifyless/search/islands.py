"""Island model with a MAP-Elites archive per island (OpenEvolve-style).

Counters come from tells only: ``t`` is the number of verified non-baseline
nodes told, and ``generations[i]`` the number of them made on island ``i``
(one per island-round: in the critic paper's setup each island verifies one
selected idea per round).

- ``ask(view, k)``: the j-th expansion goes to island ``(t + j) % n_islands``,
  so islands take turns. The parent is drawn from that island with
  probability ``exploration_ratio`` uniformly from its members, with
  ``exploitation_ratio`` uniformly from its archive elites (one per occupied
  cell), and otherwise (``elite_ratio``) it is the island's best member.
  Inspirations: about half from the island's fittest elites, the rest from
  other (diverse) cells, topped up from the global top when the island is small.
- Only nodes with a usable score join an island; failures are data but are
  not repaired here (OpenEvolve discards them too).
- Archive: each island keeps an ``IncrementalArchive`` over its members with
  the ``features`` axes (default: score and program length in characters,
  from ``Node.code_length``), updated on every join, eviction and migration,
  never rebuilt from scratch on a tell.
- Migration (OpenEvolve's rule): when the most advanced island is
  ``migration_interval`` island-rounds past the last migration
  (``max(generations) - last_migration >= M``), every island copies its top
  ``max(1, floor(migration_rate * size))`` members to its ring neighbours:
  both ``i - 1`` and ``i + 1`` (``migration_targets="both"``, OpenEvolve's
  default) or only ``i + 1`` (``"next"``). With the critic paper's 3 islands
  and M = 4 that is after island-rounds 4, 8, 12, ... Each copy is recorded
  in ``migrations``.
- Capacity: an island over ``island_capacity`` members drops its weakest
  member that is neither an archive elite nor the global best; the best
  verified program is never dropped.

The per-ask random generator is seeded from ``(seed, tells, asks since the
last tell)``, with ``seed`` drawn once from the injected ``random.Random``.
All state is plain data (picklable).
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from verifyless.node import Node, Operator
from verifyless.registry import StrictOptions
from verifyless.search.base import Expansion, SearchView, ToldState
from verifyless.search.map_elites import IncrementalArchive


class IslandsConfig(StrictOptions):
    """Constants of the island model (paper defaults where the critic paper gives them)."""

    n_islands: int = Field(3, ge=1, description="islands evolving semi-independently (critic paper: 3)")
    migration_interval: int = Field(4, ge=1, description="island-rounds between migrations (critic paper: 4)")
    migration_rate: float = Field(
        0.1, ge=0.0, le=1.0, description="share of an island's members copied to each ring neighbour"
    )
    migration_targets: Literal["both", "next"] = Field(
        "both", description="copy to 'both' ring neighbours (OpenEvolve) or only to the 'next' one"
    )
    exploration_ratio: float = Field(
        0.2, ge=0.0, description="chance a parent is any island member; the three ratios sum to 1"
    )
    exploitation_ratio: float = Field(0.7, ge=0.0, description="chance a parent is an archive elite of the island")
    elite_ratio: float = Field(0.1, ge=0.0, description="chance a parent is the island's best member")
    features: tuple[str, ...] = Field(
        ("score", "length"), min_length=1, description="MAP-Elites axes (see search/map_elites.py)"
    )
    bins: int = Field(10, ge=1, description="MAP-Elites bins per numeric axis")
    n_inspirations: int = Field(3, ge=0, description="inspiration ids attached to each expansion")
    island_capacity: int = Field(
        100, ge=1, description="members kept per island before the weakest non-elite is dropped"
    )
    draws: Literal["tells", "verified"] = Field(
        "tells",
        description="what seeds each ask's draws of parents and inspirations besides the run's seed: tells = every "
        "node told so far, screened-out ones included; verified = the verified ones only, so screening arms "
        "that verified the same nodes draw the same (the critic paper's arms differ only in screening)",
    )

    @model_validator(mode="after")
    def _ratios_sum_to_one(self) -> IslandsConfig:
        ratios = (self.exploration_ratio, self.exploitation_ratio, self.elite_ratio)
        if abs(sum(ratios) - 1.0) > 1e-6:
            raise ValueError(f"exploration_ratio + exploitation_ratio + elite_ratio must sum to 1, got {ratios}")
        return self


@dataclass(frozen=True)
class Migration:
    """One copy of ids from island ``source`` to island ``target`` after round ``round``."""

    round: int
    source: int
    target: int
    ids: tuple[str, ...]


class IslandsStrategy(ToldState):
    """Islands + MAP-Elites + ring migration (see module docstring); ``final`` is the best verified
    program (``ToldState.final``; eviction never drops it, whatever the capacity)."""

    name = "islands"

    def __init__(self, rng: random.Random, config: IslandsConfig | None = None) -> None:
        self.config = config or IslandsConfig()
        super().__init__(rng)
        self.verified_draws = self.config.draws == "verified"
        n = self.config.n_islands
        self.members: list[list[str]] = [[] for _ in range(n)]
        self.archives = [IncrementalArchive(self.config.features, self.config.bins) for _ in range(n)]
        self.generations = [0] * n
        self.last_migration = 0
        self.migrations: list[Migration] = []
        self._ok_ranked: list[tuple[float, int, str]] = []  # (-fitness, order, id) of every usable node
        self._root_id: str | None = None
        self.t = 0

    # ------------------------------------------------------------------ tell
    def tell(self, node: Node) -> None:
        if not self._record(node):
            return
        if node.ok:
            bisect.insort(self._ok_ranked, (-(node.fitness or 0.0), self._order[node.id], node.id))
        if node.operator is Operator.BASELINE:
            self._root_id = self._root_id or node.id
            if node.ok:  # the baseline seeds every island
                for island in range(self.config.n_islands):
                    self._join(island, node.id)
            return
        self.t += 1
        island = node.island % self.config.n_islands
        self.generations[island] += 1
        if node.ok:
            self._join(island, node.id)
        if max(self.generations) - self.last_migration >= self.config.migration_interval:
            self._migrate(max(self.generations))

    def _join(self, island: int, node_id: str) -> None:
        if node_id in self.archives[island]:
            return
        self.members[island].append(node_id)
        self.archives[island].add(self._seen.nodes[node_id])
        if len(self.members[island]) > self.config.island_capacity:
            self._evict(island)

    def _evict(self, island: int) -> None:
        ids = self.members[island]
        protected = set(self.archives[island].elites.values()) | {self._seen.best_id}
        pool = [i for i in ids if i not in protected] or [i for i in ids if i != self._seen.best_id]
        worst = min(pool, key=lambda i: (self._seen.nodes[i].fitness, -self._order[i]))
        ids.remove(worst)
        self.archives[island].remove(worst)

    def _migrate(self, generation: int) -> None:
        self.last_migration = generation
        n = self.config.n_islands
        if n < 2:
            return
        outgoing = []
        for island in range(n):
            ranked = self._ranked(self.members[island])
            count = max(1, int(self.config.migration_rate * len(ranked))) if ranked else 0
            outgoing.append(ranked[:count])
        for island, ids in enumerate(outgoing):
            targets = [(island + 1) % n]
            if self.config.migration_targets == "both" and (island - 1) % n not in targets:
                targets.append((island - 1) % n)
            for target in targets:
                moved = tuple(i for i in ids if i not in self.archives[target])
                for node_id in moved:
                    self._join(target, node_id)
                self.migrations.append(Migration(generation, island, target, moved))

    # ------------------------------------------------------------------- ask
    def ask(self, view: SearchView, k: int) -> list[Expansion]:
        """Return ``k`` expansions on islands taken in turn (reads only told state)."""
        rng = self._ask_rng()
        out = []
        for j in range(k):
            island = (self.t + j) % self.config.n_islands
            members = self.members[island]
            if not members:
                parent = self._seen.best_id or self._root_id
                op = Operator.IMPROVE if parent is not None else Operator.DRAFT
                out.append(Expansion(parent, op, island=island, note="empty island"))
                continue
            elites = self._elites(island)
            parent, mode = self._sample_parent(rng, members, elites)
            inspirations = self._inspirations(rng, parent, elites)
            out.append(Expansion(parent, Operator.IMPROVE, island=island, inspiration_ids=inspirations, note=mode))
        return out

    def _elites(self, island: int) -> list[str]:
        """The island's archive elites, in the order they were first told (deterministic)."""
        return sorted(self.archives[island].elites.values(), key=self._order.__getitem__)

    def _sample_parent(self, rng: random.Random, members: list[str], elites: list[str]) -> tuple[str, str]:
        roll = rng.random()
        if roll < self.config.exploration_ratio:
            return rng.choice(members), "exploration"
        if roll < self.config.exploration_ratio + self.config.exploitation_ratio:
            return rng.choice(elites), "exploitation"
        return self._ranked(members)[0], "elite"

    def _inspirations(self, rng: random.Random, parent: str, elites: list[str]) -> tuple[str, ...]:
        want = self.config.n_inspirations
        ranked = [i for i in self._ranked(elites) if i != parent]
        chosen = ranked[: math.ceil(want / 2)]
        rest = [i for i in ranked if i not in chosen]
        rng.shuffle(rest)  # diverse cells: any other occupied cell, at random
        chosen += rest[: want - len(chosen)]
        for _, _, node_id in self._ok_ranked:  # top up from the global top, best first
            if len(chosen) >= want:
                break
            if node_id != parent and node_id not in chosen:
                chosen.append(node_id)
        return tuple(chosen)
