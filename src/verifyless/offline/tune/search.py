"""The search over prompt edits, and ``tune_prompt``: dev-slice search, then the bench report.

Search (``hill_climb``): first-improvement hill climbing over ``doc.Edit``s.
From the current best prompt, every edit that changes it (``neighbours``) is
tried in an order drawn from the seeded ``rng``, round-robin over groups of
edits (all section moves; the rewordings of one section), so that a budget
smaller than the neighbourhood still tries every reworded section early
rather than spending itself on the many orderings; the first candidate whose
dev score beats the best by more than ``min_gain`` becomes the new best and
the neighbourhood is rebuilt from it. The search stops when ``budget``
distinct prompts (the baseline included) have been scored, or at a local
optimum (no neighbour improves), or when the best prompt reaches ``ceiling``
(1.0: nothing can beat a perfect dev score). Scores are cached by the rendered
template's hash, so no prompt is scored twice; a candidate that fails the
screener's template check (e.g. a reworded answer section without its tag)
is skipped without a score.

The score is a mean over a small dev slice, so a gain of one row can be
noise: the bench split, which the search never reads, is the honest
measure of the tuned prompt (``tune_prompt`` reports both).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from verifyless.errors import ConfigError
from verifyless.offline.tune.doc import Edit, PromptDoc, Variant, load_variants, neighbours, section_order
from verifyless.offline.tune.evaluate import Score, dev_rows
from verifyless.offline.tune.writer import writer_variants
from verifyless.prompts import Template

log = logging.getLogger(__name__)
ScoreFn = Callable[[Template], Awaitable[Score]]


@dataclass(frozen=True)
class Trial:
    """One scored candidate prompt."""

    step: int
    key: str
    edits: tuple[str, ...]  # the path of edits from the baseline
    score: float
    accepted: bool
    calls: int
    tokens: int
    seconds: float


@dataclass(frozen=True)
class SearchResult:
    baseline: PromptDoc
    best: PromptDoc
    baseline_score: float
    best_score: float
    edits: tuple[Edit, ...]
    trials: tuple[Trial, ...]
    stopped: str  # "budget", "local optimum" or "ceiling"


async def hill_climb(
    baseline: PromptDoc,
    score: ScoreFn,
    variants: Sequence[Variant],
    *,
    budget: int,
    rng: random.Random,
    check: Callable[[Template], None] | None = None,
    min_gain: float = 1e-9,
    ceiling: float | None = 1.0,
) -> SearchResult:
    """First-improvement hill climbing (see module docstring)."""
    if budget < 1:
        raise ConfigError(f"--budget {budget} must be >= 1 (the number of prompts scored, the baseline included)")
    cache: dict[str, float] = {}
    trials: list[Trial] = []

    async def evaluate(doc: PromptDoc, path: tuple[Edit, ...], accepted: bool) -> float:
        started = time.monotonic()
        got = await score(doc.template())
        cache[doc.key()] = got.value
        trials.append(
            Trial(
                len(trials),
                doc.key(),
                tuple(e.describe() for e in path),
                got.value,
                accepted,
                got.calls,
                got.tokens,
                time.monotonic() - started,
            )
        )
        log.info("prompt %d %s: %.4f", len(trials) - 1, doc.key(), got.value)
        return got.value

    best: PromptDoc = baseline
    path: tuple[Edit, ...] = ()
    best_score = await evaluate(baseline, path, True)
    stopped = "budget"
    while len(trials) < budget:
        if ceiling is not None and best_score >= ceiling:
            stopped = "ceiling"
            break
        for edit in interleave(neighbours(best, variants), rng):
            if len(trials) >= budget:
                break
            cand = edit.apply(best)
            if cand.key() in cache or not _valid(cand, check):
                continue
            value = await evaluate(cand, (*path, edit), False)
            if value > best_score + min_gain:
                best, path, best_score = cand, (*path, edit), value
                trials[-1] = _accepted(trials[-1])
                break
        else:
            stopped = "local optimum"
            break
    if ceiling is not None and best_score >= ceiling:
        stopped = "ceiling"
    return SearchResult(baseline, best, trials[0].score, best_score, path, tuple(trials), stopped)


def interleave(edits: Sequence[Edit], rng: random.Random) -> list[Edit]:
    """``edits`` shuffled within groups (the moves; the rewordings of each section), groups in a shuffled order,
    then taken round-robin."""
    groups: dict[tuple[str, str], list[Edit]] = {}
    for edit in edits:
        groups.setdefault((edit.kind, edit.section if edit.kind == "reword" else ""), []).append(edit)
    order = list(groups.values())
    rng.shuffle(order)
    for group in order:
        rng.shuffle(group)
    longest = max((len(g) for g in order), default=0)
    return [g[i] for i in range(longest) for g in order if i < len(g)]


def _valid(doc: PromptDoc, check: Callable[[Template], None] | None) -> bool:
    if check is None:
        return True
    try:
        check(doc.template())
    except ConfigError as exc:
        log.info("candidate %s skipped: %s", doc.key(), exc)
        return False
    return True


def _accepted(trial: Trial) -> Trial:
    return replace(trial, accepted=True)


@dataclass(frozen=True)
class TuneReport:
    """Baseline vs tuned prompt on the dev slice and on the bench split, with what it cost."""

    screener: str
    metric: str
    seed: int
    budget: int
    dev: str  # how the dev slice was chosen
    dev_items: int  # rows (critic) or pairs (tournament)
    bench_items: int
    baseline_dev: float
    tuned_dev: float
    baseline_bench: float | None  # None when the bench split has nothing to score
    tuned_bench: float | None
    edits: tuple[str, ...]
    order: str
    stopped: str
    search_calls: int
    search_tokens: int
    bench_calls: int
    bench_tokens: int
    writer_calls: int
    writer_tokens: int
    variants: int
    seconds: float
    template: Template
    trials: tuple[Trial, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("template")
        return data


async def tune_prompt(
    target: Any,
    load_split: Callable[[str], list[dict[str, Any]]],
    split_names: Sequence[str],
    *,
    budget: int = 40,
    seed: int = 0,
    dev: str | None = None,
    dev_fraction: float = 0.25,
    baseline: Template | None = None,
    writer: Any = None,
    writer_n: int = 2,
) -> TuneReport:
    """Search ``target``'s prompt on the dev slice, then score baseline and tuned prompts on ``bench``.

    ``load_split(name)`` returns a split's rows; ``bench`` is loaded only after
    the search has finished. ``target`` is a ``CriticTarget`` or
    ``PairwiseTarget`` (``evaluate.make_target``); ``writer`` an optional
    ``CountingModel`` for the LLM prompt writer; ``baseline`` a template to
    start from (default: the one the target's options name).
    """
    started = time.monotonic()
    rows = dev_rows(
        {name: load_split(name) for name in split_names if name != "bench"}, dev=dev, fraction=dev_fraction, seed=seed
    )
    if not target_items(target, rows):
        raise ConfigError(
            "the dev slice holds no pair of siblings with different outcomes to judge; "
            "use a dataset with several children per parent, or a larger --dev-fraction"
        )
    doc = PromptDoc.parse(baseline or target.baseline())
    variants = load_variants(target.template_name, doc)
    if writer is not None:
        variants += await writer_variants(writer, doc, sorted({v.section for v in variants}), writer_n)
    before = target.model.spent()

    async def score(template: Template) -> Score:
        return await target.score(template, rows)

    found = await hill_climb(doc, score, variants, budget=budget, rng=random.Random(seed), check=target.check)
    search = _since(target.model.spent(), before)
    before = target.model.spent()
    bench_rows = load_split("bench") if "bench" in split_names else []
    base_bench, tuned_bench = await _bench_scores(target, found, bench_rows)
    bench = _since(target.model.spent(), before)
    return TuneReport(
        screener=target.screener_name,
        metric=target.metric,
        seed=seed,
        budget=budget,
        dev=f"split {dev}" if dev else f"{dev_fraction:g} of sft+grpo by parent",
        dev_items=target_items(target, rows),
        bench_items=target_items(target, bench_rows),
        baseline_dev=found.baseline_score,
        tuned_dev=found.best_score,
        baseline_bench=base_bench,
        tuned_bench=tuned_bench,
        edits=tuple(e.describe() for e in found.edits),
        order=section_order(found.best),
        stopped=found.stopped,
        search_calls=search[0],
        search_tokens=search[1],
        bench_calls=bench[0],
        bench_tokens=bench[1],
        writer_calls=writer.spent()[0] if writer is not None else 0,
        writer_tokens=writer.spent()[1] if writer is not None else 0,
        variants=len(variants),
        seconds=time.monotonic() - started,
        template=found.best.template(),
        trials=found.trials,
    )


def _since(now: tuple[int, int], before: tuple[int, int]) -> tuple[int, int]:
    return now[0] - before[0], now[1] - before[1]


async def _bench_scores(target: Any, found: SearchResult, rows: Sequence[Mapping[str, Any]]) -> tuple:
    """(baseline, tuned) scores on the bench rows; (None, None) when they hold nothing to score."""
    if not target_items(target, rows):
        return None, None
    base = (await target.score(found.baseline.template(), rows)).value
    if found.best.key() == found.baseline.key():
        return base, base  # the same prompt: not scored twice
    return base, (await target.score(found.best.template(), rows)).value


def target_items(target: Any, rows: Sequence[Mapping[str, Any]]) -> int:
    """What the target scores in ``rows``: rows (critic) or sibling pairs (tournament)."""
    items = getattr(target, "items", None)
    return len(items(rows)) if items is not None else len(rows)


__all__ = ["SearchResult", "Trial", "TuneReport", "hill_climb", "interleave", "target_items", "tune_prompt"]
