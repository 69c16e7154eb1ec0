"""What a candidate prompt is scored on: the dev slice, and the two screener targets.

Dev slice (``dev_rows``): by default carved from the ``sft`` and ``grpo``
splits with the data module's own splitter (``split_rows``, grouped by task
and parent program), so a parent's children are all in the dev slice or all
outside it; never from ``bench``. ``dev="NAME"`` uses a whole split instead
(any but ``bench``).

Targets (a prompt template in, a score in [0, 1] out, plus the calls and
tokens it cost, counted by ``CountingModel``):

* ``CriticTarget``: the pointwise critic screens every row on its own (as the
  critic benchmark does, ``offline.benchmark.screen_rows``); the score is Dir-3,
  three-way accuracy over *all* rows (a row whose critiques did not parse is
  wrong).
* ``PairwiseTarget``: pairs of rows with the same parent whose children have
  different three-way outcomes (improve > tie > lose); each pair is one match
  of the tournament's judge (both presentation orders, the tournament's own
  vote and tie rules, ``PairwiseRPM.match``). The score is pairwise accuracy:
  1 for a match the better child wins on votes, 0 when it loses, 0.5 when the
  votes stay tied (the match is settled by a coin, whose side would only add
  noise between candidates). Candidates are shown by summary (datasets hold no
  programs) with no context nodes.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verifyless.critic_data.dataset import split_rows
from verifyless.critic_data.prompt import row_candidate, screen_context
from verifyless.errors import ConfigError
from verifyless.model.base import Model, ModelReply, ModelRequest
from verifyless.offline.benchmark import screen_rows
from verifyless.prompts import Template, check_template, load_template
from verifyless.screen import critic, tournament
from verifyless.screen.prompt_file import load_prompt_file
from verifyless.screen.registry import SCREENERS, build_screener

Row = Mapping[str, Any]
_RANK3 = {"lose": 0, "tie": 1, "improve": 2}


class CountingModel:
    """A ``Model`` that passes requests to ``inner`` and counts calls, samples and tokens."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls = 0
        self.tokens = 0

    async def generate(self, request: ModelRequest) -> ModelReply:
        reply = await self.inner.generate(request)
        self.calls += 1
        self.tokens += reply.usage.prompt_tokens + reply.usage.completion_tokens
        return reply

    def spent(self) -> tuple[int, int]:
        return self.calls, self.tokens


@dataclass(frozen=True)
class Score:
    value: float
    items: int  # rows (critic) or pairs (tournament) scored
    calls: int
    tokens: int


def dev_rows(splits: Mapping[str, Sequence[Row]], *, dev: str | None, fraction: float, seed: int) -> list[dict]:
    """The dev slice (see module docstring); ``ConfigError`` when it would be empty or touch ``bench``."""
    if dev is not None:
        if dev == "bench":
            raise ConfigError("--dev bench is not allowed: the bench split reports the tuned prompt; use sft or grpo")
        if dev not in splits:
            raise ConfigError(f"the dataset has no split {dev!r}; it has {sorted(splits)}")
        rows = [dict(r) for r in splits[dev]]
    else:
        if not 0.0 < fraction <= 1.0:
            raise ConfigError(f"--dev-fraction {fraction} must lie in (0, 1]")
        pool = [{**r, "source": "collect-sft"} for name in ("sft", "grpo") for r in splits.get(name, ())]
        parts, _ = split_rows(pool, seed=seed, bench_fraction=fraction, by="parent", balance_grpo=False)
        rows = parts["bench"]  # split_rows's held-out part: whole parent groups
    if not rows:
        where = f"split {dev!r}" if dev else "the sft and grpo splits"
        raise ConfigError(f"the dev slice is empty ({where} hold no rows); collect more data or pass --dev SPLIT")
    return rows


def outcome_pairs(rows: Sequence[Row], rng: random.Random, max_pairs: int | None = None) -> list[tuple[Row, Row]]:
    """(better, worse) pairs of siblings with different three-way outcomes, at most ``max_pairs`` drawn by ``rng``."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for r in sorted(rows, key=lambda r: str(r["example_id"])):
        groups.setdefault((str(r["task"]), str(r["run_id"]), str(r["parent_id"])), []).append(r)
    pairs = []
    for members in groups.values():
        for x, y in itertools.combinations(members, 2):
            rx, ry = _RANK3[str(x["label3"])], _RANK3[str(y["label3"])]
            if rx != ry:
                pairs.append((x, y) if rx > ry else (y, x))
    if max_pairs is not None and len(pairs) > max_pairs:
        pairs = rng.sample(pairs, max_pairs)
    return pairs


class _TemplateTarget(ABC):
    """What the targets share: their screener built with a candidate template, and the template's check."""

    screener_name: str
    model: CountingModel
    options: dict[str, Any]

    @abstractmethod
    def markers(self) -> tuple[Any, Any]:
        """The screener's (placeholders, markers) that every template must keep."""

    def screener(self, template: Template) -> Any:
        options = SCREENERS.validate(self.screener_name, self.options)
        built = build_screener(
            self.screener_name, models={"default": self.model}, options=SCREENERS.validate(self.screener_name, options)
        )
        built.template = template  # type: ignore[attr-defined]
        return built

    def check(self, template: Template) -> None:
        check_template(template, f"the {self.screener_name} screener", *self.markers())


class CriticTarget(_TemplateTarget):
    """Dir-3 of the pointwise critic with a given template over rows."""

    metric = "Dir-3"
    screener_name = "critic"
    template_name = "critic"

    def __init__(self, model: Model, options: Mapping[str, Any] | None = None, *, seed: int = 0) -> None:
        self.model = CountingModel(model)
        self.options = dict(options or {})
        self.seed = seed

    def baseline(self) -> Template:
        """The template the screener would use with these options (``prompt_file``, else ``prompt``)."""
        if self.options.get("prompt_file"):
            return load_prompt_file(str(self.options["prompt_file"]), "critic", critic.PLACEHOLDERS, critic.MARKERS)
        return load_template(f"screen/{self.options.get('prompt', 'critic')}")

    def markers(self) -> tuple[Any, Any]:
        return critic.PLACEHOLDERS, critic.MARKERS

    async def score(self, template: Template, rows: Sequence[Row]) -> Score:
        before = self.model.spent()
        records, _ = await screen_rows(rows, self.screener(template), seed=self.seed)
        correct = sum(r.correct3 for r in records)
        calls, tokens = (a - b for a, b in zip(self.model.spent(), before, strict=True))
        return Score(correct / len(rows) if rows else 0.0, len(rows), calls, tokens)


class PairwiseTarget(_TemplateTarget):
    """Pairwise accuracy of the tournament's judge with a given template over sibling pairs."""

    metric = "pairwise accuracy"
    screener_name = "tournament"
    template_name = "pairwise"

    def __init__(
        self, model: Model, options: Mapping[str, Any] | None = None, *, seed: int = 0, max_pairs: int | None = 200
    ) -> None:
        self.model = CountingModel(model)
        self.options = {"show": "summary", **dict(options or {})}
        self.seed = seed
        self.max_pairs = max_pairs

    def baseline(self) -> Template:
        """The template the judge would use with these options (``prompt_file``, else ``pairwise``)."""
        if self.options.get("prompt_file"):
            return load_prompt_file(
                str(self.options["prompt_file"]), "tournament", tournament.PLACEHOLDERS, tournament.MARKERS
            )
        return load_template("screen/pairwise")

    def markers(self) -> tuple[Any, Any]:
        return tournament.PLACEHOLDERS, tournament.MARKERS

    def items(self, rows: Sequence[Row]) -> list[tuple[Row, Row]]:
        return outcome_pairs(rows, random.Random(f"{self.seed}:pairs"), self.max_pairs)

    async def score(self, template: Template, rows: Sequence[Row]) -> Score:
        judge = self.screener(template)
        pairs = self.items(rows)
        before = self.model.spent()
        slots = asyncio.Semaphore(4)

        async def one(better: Row, worse: Row) -> float:
            rng = random.Random(f"{self.seed}:{better['example_id']}:{worse['example_id']}")
            a, b = row_candidate(better), row_candidate(worse)
            if rng.random() < 0.5:  # which child is listed first is drawn, not fixed
                a, b = b, a
            async with slots:
                match = await judge.match(screen_context(better, rng), [], a, b, 1, rng.random())
            if match.decided_by == "rng":
                return 0.5
            return 1.0 if match.winner == str(better["example_id"]) else 0.0

        credit = await asyncio.gather(*(one(x, y) for x, y in pairs))
        calls, tokens = (a - b for a, b in zip(self.model.spent(), before, strict=True))
        return Score(sum(credit) / len(pairs) if pairs else 0.0, len(pairs), calls, tokens)


def make_target(
    screener: str, model: Model, options: Mapping[str, Any] | None, *, seed: int, max_pairs: int | None = 200
) -> CriticTarget | PairwiseTarget:
    """The target for ``critic`` or ``tournament``; ``ConfigError`` for any other screener name."""
    if screener == "critic":
        return CriticTarget(model, options, seed=seed)
    if screener == "tournament":
        return PairwiseTarget(model, options, seed=seed, max_pairs=max_pairs)
    raise ConfigError(f"tune screener supports --screener critic or tournament, not {screener!r}")


__all__ = ["CountingModel", "CriticTarget", "PairwiseTarget", "Score", "dev_rows", "make_target", "outcome_pairs"]
