"""Pointwise idea-level critic (the "verify less" critic paper, SPEC 3.1).

The critic reads the task, a neutral summary of the parent and of one child,
and the task brief (understanding + fixed criteria). It compares the two
criterion by criterion, weighs the criteria itself, and ends with two tagged
lines::

    [IMPROVEMENT] improve | lose | tie --- reason
    [WINTIER] big | medium | small | NA --- reason

``parse_verdict`` turns one critique into a five-way label
(BigWin > MediumWin > SmallWin > Tie > Lose). ``PointwiseCritic`` draws k
critiques per candidate, ranks candidates by the mean label rank and measures
disagreement u = 1 - max three-way vote share, which ``route`` compares to a
threshold T to send uncertain candidates to real verification.

Parser decisions (documented in docs/design/screening.md):

* Tags: bracketed ``[IMPROVEMENT]`` / ``[WINTIER]`` in any case, with spaces
  inside the brackets, anywhere on a line, after markdown decoration
  (bold, code, headings, bullets) is removed. A bare ``IMPROVEMENT:`` at a
  line start counts only when no bracketed tag exists.
* Separators between value and reason: ``---``, ``--``, dashes, colons or
  plain whitespace.
* Repetition: the last occurrence of each tag decides. Restated format lines
  (``improve | lose | tie``) are not occurrences. If the last occurrence has
  an unknown value the critique is invalid (no fallback to earlier drafts).
* Words: the three verdict words are strict, but simple inflections are
  accepted (improve/improves/improved, lose/loses/lost/loss, tie/ties/tied);
  synonyms such as "better", "worse" or "same" are not. Tiers accept
  big/medium/small, optionally followed by "win" (``BigWin``, ``big win``),
  and NA as ``NA``, ``N/A``, ``n.a.`` or ``none``.
* NA rule: improve needs a tier; improve with NA or with no WINTIER line is
  invalid. For tie and lose the tier is ignored (a stray tier or a missing
  WINTIER line does not invalidate the verdict).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

from verifyless.model.base import Model, ModelRequest
from verifyless.node import Candidate, Evidence, Screening
from verifyless.screen.base import ScreenContext
from verifyless.screen.prompting import is_template_echo, metric_line, render, split_value, tag_values

# Index = rank value used for averaging (Lose=0 ... BigWin=4).
LABELS: tuple[str, ...] = ("Lose", "Tie", "SmallWin", "MediumWin", "BigWin")
LABEL_RANK: Mapping[str, int] = {label: i for i, label in enumerate(LABELS)}
DIRECTIONS: tuple[str, ...] = ("improve", "tie", "lose")
_TIER_LABEL = {"big": "BigWin", "medium": "MediumWin", "small": "SmallWin"}

_IMPROVEMENT_WORDS = {
    "improve": "improve", "improves": "improve", "improved": "improve", "improvement": "improve",
    "lose": "lose", "loses": "lose", "lost": "lose", "loss": "lose",
    "tie": "tie", "ties": "tie", "tied": "tie",
}
_TIER_WORDS = {
    "big": "big", "bigwin": "big", "medium": "medium", "mediumwin": "medium",
    "small": "small", "smallwin": "small",
    "na": "na", "n/a": "na", "n.a": "na", "none": "na",
}

# With this many spare digits, u >= T is not flipped by float rounding (1 - 12/16 is exact, 1 - 0.7 is not).
_EPS = 1e-9


@dataclass(frozen=True)
class Verdict:
    """One parsed critique."""

    improvement: Literal["improve", "tie", "lose"]
    tier: Literal["big", "medium", "small"] | None
    reason: str = ""
    tier_reason: str = ""

    @property
    def label(self) -> str:
        """Five-way label: BigWin, MediumWin, SmallWin, Tie or Lose."""
        if self.improvement == "improve":
            assert self.tier is not None
            return _TIER_LABEL[self.tier]
        return "Tie" if self.improvement == "tie" else "Lose"

    @property
    def rank(self) -> int:
        return LABEL_RANK[self.label]


def _last_value(text: str, tag: str) -> tuple[str, str] | None:
    """(normalised value word, reason) of the last real occurrence of ``tag``."""
    values = [v for v in tag_values(text, tag) if not is_template_echo(v)]
    if not values:
        return None
    word, reason = split_value(values[-1])
    word = word.lower()
    # "Big Win" / "big-win": join the tier word with a following "win".
    joined = re.match(r"^[\s\-]*win\b[\s.:\-–—]*", reason, re.IGNORECASE)
    if word in {"big", "medium", "small"} and joined:
        word, reason = word + "win", reason[joined.end():]
    return word, reason.strip()


def parse_verdict(text: str) -> Verdict | None:
    """Parse a critique's ``[IMPROVEMENT]`` and ``[WINTIER]`` lines; None if invalid.

    See the module docstring for every leniency rule and the NA rule.
    """
    if not text:
        return None
    improvement = _last_value(text, "IMPROVEMENT")
    if improvement is None:
        return None
    direction = _IMPROVEMENT_WORDS.get(improvement[0])
    if direction is None:
        return None
    tier_found = _last_value(text, "WINTIER")
    if direction != "improve":
        reason = tier_found[1] if tier_found else ""
        return Verdict(direction, None, improvement[1], reason)  # type: ignore[arg-type]
    if tier_found is None:
        return None
    tier = _TIER_WORDS.get(tier_found[0])
    if tier is None or tier == "na":
        return None
    return Verdict("improve", tier, improvement[1], tier_found[1])  # type: ignore[arg-type]


def route(evidence: Evidence, threshold: float = 0.25) -> bool:
    """True when the critic is too unsure: ``u(a) >= T`` sends the candidate to real verification."""
    return evidence.uncertainty >= threshold - _EPS


def evidence_from_critiques(candidate_id: str, critiques: Sequence[str], threshold: float = 0.25) -> Evidence:
    """Aggregate k raw critiques of one candidate into its ``Evidence``.

    Rank value: mean label rank over valid critiques (Lose=0 ... BigWin=4);
    -1.0 when none parsed, which sorts the candidate after every candidate
    with a valid critique. Votes: three-way shares over valid critiques.
    Uncertainty: ``1 - max(votes)``, or 1.0 when nothing parsed.
    """
    verdicts = [parse_verdict(c) for c in critiques]
    valid = [v for v in verdicts if v is not None]
    n_invalid = len(verdicts) - len(valid)
    if valid:
        rank_value = sum(v.rank for v in valid) / len(valid)
        votes = {d: sum(v.improvement == d for v in valid) / len(valid) for d in DIRECTIONS}
        uncertainty = 1.0 - max(votes.values())
    else:
        rank_value, votes, uncertainty = -1.0, {d: 0.0 for d in DIRECTIONS}, 1.0
    return Evidence(
        candidate_id=candidate_id,
        rank_value=rank_value,
        labels=tuple(v.label for v in valid),
        votes=votes,
        uncertainty=uncertainty,
        n_valid=len(valid),
        n_invalid=n_invalid,
        detail={
            "critiques": list(critiques),
            "sample_labels": [v.label if v else None for v in verdicts],
            "n_invalid": n_invalid,
            "uncertain": uncertainty >= threshold - _EPS,
            "route_threshold": threshold,
        },
    )


def order_by_value(values: Mapping[str, float], ids: Sequence[str], rng) -> list[str]:
    """Ids sorted by value, highest first; equal values in an order drawn from ``rng``."""
    keys = {cid: rng.random() for cid in ids}  # drawn in input order: reproducible for a seed
    return sorted(ids, key=lambda cid: (-values[cid], keys[cid]))


class PointwiseCritic:
    """Rank candidates by the mean five-way label of k sampled critiques.

    ``k`` critiques per candidate (paper: 16 at temperature 0.7) are requested
    as ``n=k`` in one request, or in chunks of ``samples_per_request`` with
    increasing ``sample_offset``; all candidates run concurrently. The top
    ``n_verify`` (this object's, else ``ctx.n_verify``) are chosen; with
    ``verify_uncertain`` every candidate whose ``u >= route_threshold`` is
    chosen too (after the top ones, in ranking order), including candidates
    for which no critique parsed.
    """

    def __init__(
        self,
        model: Model,
        k: int = 16,
        temperature: float = 0.7,
        route_threshold: float = 0.25,
        verify_uncertain: bool = False,
        n_verify: int | None = None,
        *,
        samples_per_request: int | None = None,
        max_tokens: int | None = None,
        prompt: str = "critic",
        name: str = "critic",
    ) -> None:
        if k < 1:
            raise ValueError(f"critic k must be >= 1, got {k}")
        if samples_per_request is not None and samples_per_request < 1:
            raise ValueError("samples_per_request must be >= 1 (or None for one request of n=k)")
        self.model = model
        self.k = k
        self.temperature = temperature
        self.route_threshold = route_threshold
        self.verify_uncertain = verify_uncertain
        self.n_verify = n_verify
        self.samples_per_request = samples_per_request
        self.max_tokens = max_tokens
        self.prompt = prompt
        self.name = name

    def route(self, evidence: Evidence) -> bool:
        return route(evidence, self.route_threshold)

    def messages(self, ctx: ScreenContext, candidate: Candidate):
        """The critic prompt for one candidate (public for inspection and replay)."""
        brief = ctx.brief
        if brief is not None and (brief.understanding or brief.criteria):
            understanding = brief.understanding.strip() or "(not provided)"
            criteria = "\n".join(f"{i}. {c}" for i, c in enumerate(brief.criteria, 1)) or "(none provided)"
        else:
            understanding = "(not provided: rely on the task statement)"
            criteria = (
                "(none provided: first derive from the task statement the few factors that most "
                "affect the metric, then use them as your criteria)"
            )
        parent = ctx.parent.summary or (ctx.parent.idea.text if ctx.parent.idea else "") or "(the baseline program)"
        child = candidate.summary or candidate.idea.text
        return render(
            self.prompt,
            task=ctx.task.statement.strip(),
            metric=metric_line(ctx.task),
            parent=parent.strip(),
            child=child.strip(),
            understanding=understanding,
            criteria=criteria,
        )

    async def critiques(self, ctx: ScreenContext, candidate: Candidate) -> list[str]:
        """k raw critique texts for one candidate."""
        messages = self.messages(ctx, candidate)
        chunk = self.samples_per_request or self.k
        offsets = range(0, self.k, chunk)
        replies = await asyncio.gather(
            *(
                self.model.generate(
                    ModelRequest(
                        messages=messages,
                        role="critic",
                        temperature=self.temperature,
                        max_tokens=self.max_tokens,
                        n=min(chunk, self.k - start),
                        sample_offset=start,
                    )
                )
                for start in offsets
            )
        )
        return [choice.text for reply in replies for choice in reply.choices]

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        texts = await asyncio.gather(*(self.critiques(ctx, c) for c in candidates))
        evidence = {
            c.id: evidence_from_critiques(c.id, t, self.route_threshold) for c, t in zip(candidates, texts)
        }
        ids = [c.id for c in candidates]
        ranking = order_by_value({cid: e.rank_value for cid, e in evidence.items()}, ids, ctx.rng)
        n_verify = self.n_verify if self.n_verify is not None else ctx.n_verify
        chosen = ranking[: max(0, n_verify)]
        if self.verify_uncertain:
            chosen += [cid for cid in ranking if cid not in chosen and self.route(evidence[cid])]
        return Screening(
            screener=self.name,
            ranking=tuple(ranking),
            chosen=tuple(chosen),
            evidence=evidence,
            seconds=time.monotonic() - started,
        )


__all__ = [
    "DIRECTIONS",
    "LABELS",
    "LABEL_RANK",
    "PointwiseCritic",
    "Verdict",
    "evidence_from_critiques",
    "order_by_value",
    "parse_verdict",
    "route",
]
