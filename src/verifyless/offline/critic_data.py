"""Critic training data for free: parent -> child pairs of a pool world, labelled by ``outcome.label3``.

Every point of a pool world (``offline.worlds``) carries its verified score, so
any two points that differ in a few dimensions are a verified parent -> child
outcome without a single new verification. An idea-space child is summarised
from its option descriptions (as ``roles/space`` and ``offline.replay.pool_candidates``
describe it), so no LLM is needed to write the rows either.

* ``world_rows`` -- every ordered pair (parent, child) of OK points at Hamming
  distance 1..``max_moves``, with a compact prompt (``compact_prompt``) and the
  ``label3`` of ``pair_outcome`` at the given tie tolerance (the one label rule;
  failed parents or children have no label and are left out).
* ``balance`` -- the same number of rows per label (the smallest class), seeded.
* ``CriticData`` / ``by_world`` -- the train / bench split by world: the bench
  world's configurations are never seen in training (no pair, and no mirrored
  pair b -> a, leaks across).

Limits: worlds are uniform samples, so pairs within ``max_moves`` are what the
sample happens to hold (hundreds per world at ``max_moves = 3``); a pair and its
mirror carry opposite labels and both stay in one split; the prompt shows option
names and descriptions, never scores.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from verifyless.offline.replay import hamming
from verifyless.offline.worlds import World
from verifyless.outcome import THREE, label3, pair_outcome

SYSTEM = "Judge if the change improves the program's validation score. Answer [IMPROVEMENT] improve, tie or lose."


@dataclass(frozen=True)
class CriticRow:
    """One labelled parent -> child pair of a world (indices into ``World.points``)."""

    world: str
    parent: int
    child: int
    moves: int
    delta: float
    label: str
    prompt: str

    def messages(self) -> list[dict[str, str]]:
        """The chat prompt: the short system rule, then the pair's description."""
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": self.prompt}]


def describe(descriptions: Mapping[str, Mapping[str, str]], dim: str, option: str, words: int = 10) -> str:
    """``option (the first ``words`` words of its description)``; the bare name when the space has none."""
    text = " ".join(descriptions.get(dim, {}).get(option, "").split()[:words]).rstrip(".,;")
    return f"{option} ({text})" if text else option


def compact_prompt(
    world: World, descriptions: Mapping[str, Mapping[str, str]], parent: int, child: int, words: int = 10
) -> str:
    """Task, metric direction, the parent's options by name, each change with the new option's description.

    Descriptions are cut to their first ``words`` words (0: option names only) to keep the prompt short:
    about 110-150 SmolLM2 tokens for three changes with the chat template and ``SYSTEM``.
    """
    pa, ca = world.points[parent].assignment, world.points[child].assignment
    current = ", ".join(f"{d}={pa[d]}" for d in world.dimensions)
    changes = "\n".join(
        f"- {d}: {pa[d]} -> {describe(descriptions, d, ca[d], words)}" for d in world.dimensions if pa[d] != ca[d]
    )
    goal = "lower" if world.direction == "minimize" else "higher"
    return (
        f"Task: {world.task} ({world.metric or 'score'}, {goal} is better).\nProgram: {current}.\nChanges:\n{changes}"
    )


def pair_label(world: World, parent: int, child: int, tie: float) -> tuple[float, str] | None:
    """(Delta, ``label3``) of child vs parent on oriented validation fitness; None when either has no fitness."""
    outcome = pair_outcome(str(parent), str(child), world.fitness(child), world.fitness(parent), tie=tie)
    label, delta = label3(outcome), outcome.delta
    return None if label is None or delta is None else (delta, label)


def world_rows(
    world: World,
    descriptions: Mapping[str, Mapping[str, str]],
    *,
    max_moves: int = 3,
    tie: float = 0.0,
    words: int = 10,
) -> list[CriticRow]:
    """Every labelled ordered pair at Hamming distance 1..``max_moves`` (see the module docstring)."""
    rows = []
    for parent in range(len(world)):
        for child in range(len(world)):
            moves = hamming(world, parent, child) if parent != child else 0
            labelled = pair_label(world, parent, child, tie) if 1 <= moves <= max_moves else None
            if labelled is not None:
                prompt = compact_prompt(world, descriptions, parent, child, words)
                rows.append(CriticRow(world.task, parent, child, moves, labelled[0], labelled[1], prompt))
    return rows


def balance(rows: Sequence[CriticRow], *, seed: int = 0, per_label: int | None = None) -> list[CriticRow]:
    """``per_label`` rows of each label (default and at most: the smallest class), shuffled with ``seed``."""
    rng = random.Random(seed)
    groups = {label: [r for r in rows if r.label == label] for label in THREE}
    size = min(len(g) for g in groups.values())
    size = size if per_label is None else min(size, per_label)
    chosen = [r for g in groups.values() for r in rng.sample(g, size)]
    rng.shuffle(chosen)
    return chosen


@dataclass(frozen=True)
class CriticData:
    """Balanced train and bench rows, and which worlds each came from."""

    train: tuple[CriticRow, ...]
    bench: tuple[CriticRow, ...]
    train_worlds: tuple[str, ...]
    bench_world: str
    tie: float
    max_moves: int


def space_descriptions(space: object) -> dict[str, dict[str, str]]:
    """{dimension: {option: description}} of a task's ``IdeaSpace`` (empty for None)."""
    dims = getattr(space, "dimensions", None) or {}
    return {d: {o.name: o.description for o in opts} for d, opts in dims.items()}


def by_world(
    worlds: Mapping[str, World],
    descriptions: Mapping[str, Mapping[str, Mapping[str, str]]],
    bench_world: str,
    *,
    tie: float,
    max_moves: int = 3,
    train_per_label: int | None = None,
    bench_per_label: int | None = None,
    seed: int = 0,
    words: int = 10,
) -> CriticData:
    """Train on every world but ``bench_world`` (balanced per world), bench on ``bench_world`` (balanced)."""
    train_names = tuple(n for n in worlds if n != bench_world)
    per_world = None if train_per_label is None else max(1, train_per_label // max(1, len(train_names)))

    def rows_of(name: str) -> list[CriticRow]:
        return world_rows(worlds[name], descriptions.get(name, {}), max_moves=max_moves, tie=tie, words=words)

    train = _concat(balance(rows_of(n), seed=seed, per_label=per_world) for n in train_names)
    rows = rows_of(bench_world)
    bench = balance(rows, seed=seed + 1, per_label=bench_per_label)
    random.Random(seed).shuffle(train)
    return CriticData(tuple(train), tuple(bench), train_names, bench_world, tie, max_moves)


def _concat(parts: Iterable[list[CriticRow]]) -> list[CriticRow]:
    return [r for part in parts for r in part]


__all__ = [
    "SYSTEM",
    "CriticData",
    "CriticRow",
    "balance",
    "by_world",
    "compact_prompt",
    "describe",
    "pair_label",
    "space_descriptions",
    "world_rows",
]
