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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from verifyless.node import Idea
from verifyless.offline.replay import hamming, run_sync
from verifyless.offline.worlds import World, make_program
from verifyless.outcome import THREE, label3, pair_outcome
from verifyless.roles.space import DeterministicSummarizer
from verifyless.task.base import Task

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


def labelled_pairs(world: World, *, max_moves: int, tie: float) -> Iterator[tuple[int, int, int, float, str]]:
    """(parent, child, moves, delta, ``label3``) of every ordered pair of points 1..``max_moves`` dimensions apart
    that has a label (both fitnesses known), parents in point order, then children."""
    for parent in range(len(world)):
        for child in range(len(world)):
            moves = hamming(world, parent, child) if parent != child else 0
            labelled = pair_label(world, parent, child, tie) if 1 <= moves <= max_moves else None
            if labelled is not None:
                yield parent, child, moves, *labelled


def world_rows(
    world: World,
    descriptions: Mapping[str, Mapping[str, str]],
    *,
    max_moves: int = 3,
    tie: float = 0.0,
    words: int = 10,
) -> list[CriticRow]:
    """Every labelled ordered pair at Hamming distance 1..``max_moves`` (see the module docstring)."""
    return [
        CriticRow(
            world.task, parent, child, moves, delta, label, compact_prompt(world, descriptions, parent, child, words)
        )
        for parent, child, moves, delta, label in labelled_pairs(world, max_moves=max_moves, tie=tie)
    ]


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


# ------------------------------------------------------------------ text pairs: the critic's own texts, split honestly


@dataclass(frozen=True)
class TextPair:
    """One verified parent -> child outcome as the screening critic reads it.

    ``parent_text`` / ``child_text`` are the texts ``PointwiseCritic.messages`` puts in the prompt (the neutral
    summaries); ``parent_key`` / ``child_key`` name their content (program hashes), ``group`` the run it was paid
    in (a world's points have none: ``""``), ``label`` is ``outcome.label3`` and ``delta`` the relative change.
    """

    task: str
    parent_text: str
    child_text: str
    label: str
    delta: float
    parent_key: str
    child_key: str
    group: str = ""


@dataclass(frozen=True)
class PairSplit:
    """Train and bench pairs with no content in common, and how many pairs the split had to leave out."""

    train: tuple[TextPair, ...]
    bench: tuple[TextPair, ...]
    dropped: int
    how: str

    def keys(self, part: str) -> set[str]:
        rows = self.train if part == "train" else self.bench
        return {k for r in rows for k in (r.parent_key, r.child_key)}


def leaks(split: PairSplit) -> set[str]:
    """Content keys (parents or children) that occur on both sides of ``split``: empty for an honest split."""
    return split.keys("train") & split.keys("bench")


def split_by_run(pairs: Sequence[TextPair], bench_groups: Iterable[str]) -> PairSplit:
    """Train on every run but ``bench_groups``; bench on those runs' pairs whose parent and child content never
    occurs in training (a later run starts from the same baseline and may meet configurations an earlier run
    paid for: those pairs are dropped and counted, never benched)."""
    held = set(bench_groups)
    train = tuple(p for p in pairs if p.group not in held)
    seen = {k for p in train for k in (p.parent_key, p.child_key)}
    later = [p for p in pairs if p.group in held]
    bench = tuple(p for p in later if p.parent_key not in seen and p.child_key not in seen)
    return PairSplit(train, bench, len(later) - len(bench), f"by run: bench {sorted(held)}")


def split_by_region(
    pairs: Sequence[TextPair], region_of: Callable[[str], str], bench_regions: Iterable[str]
) -> PairSplit:
    """Bench on pairs whose two ends both lie in ``bench_regions`` (``region_of(content key)``), train on pairs
    whose two ends both lie outside; a pair that crosses the border is dropped and counted."""
    held = set(bench_regions)
    inside = [(region_of(p.parent_key) in held, region_of(p.child_key) in held) for p in pairs]
    train = tuple(p for p, (a, b) in zip(pairs, inside, strict=True) if not a and not b)
    bench = tuple(p for p, (a, b) in zip(pairs, inside, strict=True) if a and b)
    return PairSplit(train, bench, len(pairs) - len(train) - len(bench), f"by region: bench {sorted(held)}")


def region_split_of(world: World, *, share: float = 0.3, seed: int = 0) -> tuple[str, tuple[str, ...]]:
    """A region of ``world``'s idea space to hold out: (dimension, options) whose points make up closest to
    ``share`` of the OK points, over every dimension and seeded subset of its options (ties: first dimension)."""
    rng = random.Random(seed)
    ok = [p for p in world.points if p.status == "ok"]
    best: tuple[float, str, tuple[str, ...]] | None = None
    for dim, options in world.dimensions.items():
        order = list(options)
        rng.shuffle(order)
        for n in range(1, len(order)):
            chosen = tuple(sorted(order[:n]))
            got = sum(p.assignment[dim] in chosen for p in ok) / max(1, len(ok))
            if best is None or abs(got - share) < best[0]:
                best = (abs(got - share), dim, chosen)
    assert best is not None, "a world needs a dimension with two options"
    return best[1], best[2]


def point_texts(world: World, task: Task) -> list[str]:
    """Each world point's neutral summary as the offline summariser (``roles.space.DeterministicSummarizer``)
    writes it for the point's rendered program: the text a run's critic reads for that configuration."""
    summarizer = DeterministicSummarizer()

    async def all_texts() -> list[str]:
        out = []
        for p in world.points:
            idea = Idea("", {"assignment": dict(p.assignment)})
            out.append(await summarizer.summarize(task, make_program(task, p.assignment), idea))
        return out

    return run_sync(all_texts())


def world_pairs(world: World, texts: Sequence[str], *, max_moves: int = 3, tie: float = 0.0) -> list[TextPair]:
    """Every labelled ordered pair of OK points 1..``max_moves`` dimensions apart, as ``TextPair``s keyed by the
    points' program hashes (``texts``: ``point_texts``)."""
    return [
        TextPair(
            world.task, texts[parent], texts[child], label, delta, point_key(world, parent), point_key(world, child)
        )
        for parent, child, _, delta, label in labelled_pairs(world, max_moves=max_moves, tie=tie)
    ]


def run_pairs(world: World, verified: Sequence[int], texts: Sequence[str], *, group: str, tie: float) -> list[TextPair]:
    """The labelled outcomes a greedy run paid for: each verified point after the first against the incumbent
    it was proposed from (the best OK point verified before it), as ``TextPair``s of ``group``."""
    out, best = [], verified[0]
    for child in verified[1:]:
        labelled = pair_label(world, best, child, tie)
        if labelled is not None:
            key = point_key(world, best), point_key(world, child)
            out.append(TextPair(world.task, texts[best], texts[child], labelled[1], labelled[0], *key, group))
        fit, best_fit = world.fitness(child), world.fitness(best)
        if fit is not None and (best_fit is None or fit > best_fit):
            best = child
    return out


def point_key(world: World, index: int) -> str:
    """The content key of a world point: its program hash (``w<index>`` for a point stored without one)."""
    return world.points[index].program_hash or f"{world.task}/w{index}"


__all__ = [
    "SYSTEM",
    "CriticData",
    "CriticRow",
    "PairSplit",
    "TextPair",
    "balance",
    "by_world",
    "compact_prompt",
    "describe",
    "leaks",
    "pair_label",
    "point_key",
    "point_texts",
    "region_split_of",
    "run_pairs",
    "space_descriptions",
    "split_by_region",
    "split_by_run",
    "world_pairs",
    "world_rows",
]
