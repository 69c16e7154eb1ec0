"""Final-node selection by a round-robin of LLM judgements (RPM paper, appendix D).

After a run, the top-N nodes by validation fitness form a pool. In each of
``matches`` (paper: 30) matches a random subset of ``min(N, subset)``
(paper: 5) nodes is shown to the judge under shuffled letters, and the judge
names one (``[CHOICE] C``, or an equivalent form ``parse_choice`` accepts),
which earns a point. The node with most points wins. Ties are broken
uniformly at random with ``rng``, as in the paper; ``tie_break="fitness"``
gives them to the higher validation fitness first. A parse rate below
``min_parse_rate`` is logged as a warning (the round-robin runs once, so it
never stops the run). When no reply parsed at all the winner is None (every
node would have zero points and the pick would be a coin), so the engine
keeps the strategy's best node.

Limit: the paper found this rarely beats simply keeping the best validation
score once nodes are executed; it is optional and off by default.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from verifyless import prompts
from verifyless.model.base import Model, ModelRequest
from verifyless.node import Node
from verifyless.screen.health import check_final
from verifyless.screen.prompting import metric_line, parse_choice
from verifyless.task.base import Task

_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class FinalSelection:
    """Outcome: the winner, the pool (best fitness first), points, and every match (raw replies included)."""

    winner: str | None
    pool: tuple[str, ...]
    points: Mapping[str, int] = field(default_factory=dict)
    matches: tuple[Mapping[str, Any], ...] = ()


def _describe(node: Node, summaries: Mapping[str, str]) -> str:
    text = summaries.get(node.id) or node.idea or "(no description)"
    return f"Validation score: {node.score if node.score is not None else 'n/a'}\n{text.strip()}"


async def select_final(
    nodes: Iterable[Node],
    judge_model: Model,
    top_n: int,
    matches: int = 30,
    subset: int = 5,
    rng: random.Random | None = None,
    *,
    task: Task | None = None,
    summaries: Mapping[str, str] | None = None,
    temperature: float | None = None,
    tie_break: str = "random",
    min_parse_rate: float = 0.5,
    data_report: str = "",
) -> FinalSelection:
    """Pick the final node among the ``top_n`` OK nodes by a judged round-robin.

    ``rng`` is required (explicit randomness). ``task`` supplies the statement
    and metric shown to the judge; ``summaries`` maps node id -> neutral
    summary (the node's idea is used otherwise); ``data_report`` (markdown, the
    run's data report) is shown after the metric when not empty. A pool of one needs no judge
    call; an empty pool returns ``winner=None``. Unparseable judge replies
    award no point and are kept in ``matches``.
    """
    if tie_break not in ("random", "fitness"):
        raise ValueError(f"tie_break must be 'random' or 'fitness', got {tie_break!r}")
    if rng is None:
        raise ValueError("select_final needs rng=random.Random(seed): its subsets and ties must be reproducible")
    if subset < 2 or subset > len(_LETTERS):
        raise ValueError(f"subset must be between 2 and {len(_LETTERS)}, got {subset}")
    summaries = summaries or {}
    ok = sorted((n for n in nodes if n.ok), key=lambda n: (-(n.fitness or 0.0), n.id))
    pool = ok[: max(0, top_n)]
    ids = tuple(n.id for n in pool)
    if len(pool) <= 1:
        return FinalSelection(ids[0] if ids else None, ids, {cid: 0 for cid in ids})
    size = min(len(pool), subset)
    draws = [rng.sample(pool, size) for _ in range(matches)]  # sample order = letter order
    statement = task.statement.strip() if task else "(see the solutions)"
    metric = metric_line(task) if task is not None else "the task's main metric"

    async def play(i: int, shown: list[Node]) -> dict[str, Any]:
        letters = _LETTERS[: len(shown)]
        solutions = "\n\n".join(
            f"### Solution {letter}\n{_describe(n, summaries)}" for letter, n in zip(letters, shown, strict=False)
        )
        reply = await judge_model.generate(
            ModelRequest(
                messages=prompts.messages(
                    "screen/final",
                    task=statement,
                    metric=metric,
                    data_report=data_report.strip(),
                    solutions=solutions,
                    letters=", ".join(letters),
                ),
                role="final-judge",
                temperature=temperature,
                sample_offset=i,
            )
        )
        letter = parse_choice(reply.text, tuple(letters))
        picked = shown[letters.index(letter)].id if letter else None
        return {"match": i, "shown": [n.id for n in shown], "raw": reply.text, "choice": letter, "picked": picked}

    played = await asyncio.gather(*(play(i, shown) for i, shown in enumerate(draws)))
    points = {cid: 0 for cid in ids}
    for m in played:
        if m["picked"] is not None:
            points[m["picked"]] += 1
    health = check_final(played, judge_model.name, min_parse_rate)
    fitness = {n.id: (n.fitness or 0.0) if tie_break == "fitness" else 0.0 for n in pool}
    keys = {cid: rng.random() for cid in ids}
    winner = max(ids, key=lambda cid: (points[cid], fitness[cid], keys[cid])) if health.parsed else None
    return FinalSelection(winner, ids, points, tuple(played))


@dataclass(frozen=True)
class HeldOutChoice:
    """The final node chosen on a selection split.

    ``pool``: the nodes considered (top by validation, the baseline, the strategy's pick); ``eligible``: those at
    least as good as the baseline on validation; ``scores``: the pool's selection scores (raw, as the scorer
    returned them); ``winner``: the eligible node best on the selection split, None when none has a score.
    """

    winner: str | None
    pool: tuple[str, ...]
    eligible: tuple[str, ...] = ()
    scores: Mapping[str, float] = field(default_factory=dict)


def choose_on_held_out(
    nodes: Iterable[Node],
    selection: Mapping[str, float],
    orient: Callable[[float], float],
    top_n: int,
    *,
    baseline: str = "root",
    keep: Iterable[str | None] = (),
) -> HeldOutChoice:
    """Among the ``top_n`` OK nodes by validation fitness, the ``baseline`` and the ``keep`` ids, return the one
    best on the selection split (``selection``: node id -> raw score; ``orient`` makes higher better), counting
    only nodes at least as good as the baseline on validation.

    Validation picked the pool, so the pool's best validation score is biased upwards (the more nodes compared,
    the more); the selection split was never optimised, so its score is not, but on a few dozen rows it is noisy
    too. So a candidate replaces the baseline only with two confirmations: not worse on validation, and better on
    the selection split. (Measured on grunfeld: picking on the selection split alone returned a node worse than the
    baseline on validation whose hidden test was 39 % worse.) Ties go to the better validation fitness, then to
    the smaller id. Nodes without a selection score cannot win.
    """
    ok = {n.id: n for n in nodes if n.ok and n.fitness is not None}
    ranked = sorted(ok.values(), key=lambda n: (-(n.fitness or 0.0), n.id))
    ids = [n.id for n in ranked[: max(0, top_n)]]
    ids += [i for i in dict.fromkeys((baseline, *keep)) if i is not None and i in ok and i not in ids]
    base = ok.get(baseline)
    floor = base.fitness if base is not None and base.fitness is not None else float("-inf")
    eligible = tuple(i for i in ids if (ok[i].fitness or 0.0) >= floor)
    scores = {i: float(selection[i]) for i in ids if i in selection}
    contenders = sorted(i for i in eligible if i in scores)
    if not contenders:
        return HeldOutChoice(None, tuple(ids), eligible, scores)
    winner = max(contenders, key=lambda i: (orient(scores[i]), ok[i].fitness or 0.0))  # max keeps the first
    return HeldOutChoice(winner, tuple(ids), eligible, scores)


__all__ = ["FinalSelection", "HeldOutChoice", "choose_on_held_out", "select_final"]
