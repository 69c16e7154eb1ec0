"""Pointwise idea-level critic (the "verify less" critic paper, SPEC 3.1).

The critic reads the task, a neutral summary of the parent and of one child,
and the task brief (understanding + fixed criteria). It compares the two
criterion by criterion, weighs the criteria itself, and ends with two tagged
lines::

    [IMPROVEMENT] improve | lose | tie --- reason
    [WINTIER] big | medium | small | NA --- reason

``parse_verdict`` turns one critique into a five-way label
(BigWin > MediumWin > SmallWin > Tie > Lose). ``PointwiseCritic`` draws k
critiques per candidate and ranks candidates by the mean label rank.

Vote accounting (the paper's definition): ``v_y`` is the share of *all* k
critiques predicting direction y, an unparsed critique counting in the
denominator as a vote for nothing, and ``u = 1 - max_y v_y`` (12 agreeing and
4 unparsed of 16 give u = 0.25). In the mean rank an unparsed critique counts
as the lowest label (Lose = 0), so one parsed BigWin among 15 unparsed
critiques (mean 0.25) cannot outrank 16 Ties (mean 1.0); a candidate with no
parsed critique at all gets -1.0 and ranks last. ``route`` compares u to a
threshold T to send uncertain candidates to real verification.

Ties in the mean rank are broken by a finer signal (``tie_break``, see
``order_by_evidence``): the share of higher tiers, the label-probability mass
when the evidence carries ``label_probs``, or a pairwise match among the tied
candidates; ``none`` keeps the paper's plain mean rank with random ties.

Parser decisions (documented in docs/design/screening.md):

* Tags: bracketed ``[IMPROVEMENT]`` / ``[WINTIER]`` (also ``[WIN TIER]``) in
  any case, with spaces inside the brackets, anywhere on a line, after
  markdown decoration (bold, code, headings, bullets) is removed. A bare
  ``Improvement: lose`` / ``Win tier: NA`` at a line start counts only when
  no bracketed tag exists. Hidden reasoning (``<think>``) is ignored.
* Without any IMPROVEMENT tag, a JSON object that ends the reply with an
  ``improvement`` (or ``verdict`` / ``direction``) key and a ``wintier`` (or
  ``win_tier`` / ``tier``) key is read with the same word rules.
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
* Answer in place of the tag: without any IMPROVEMENT tag, a line that starts
  with one verdict word in brackets (``[tie] tie | lose | tie --- ...``, as
  Qwen2.5-Coder-1.5B wrote it) gives that word; a line that starts with a
  bracketed tier word (``[small]``) gives the tier when no WINTIER tag does.
  What follows the bracket on the line is ignored (often the menu echoed).
* NA rule: improve needs a tier; improve with NA or with no WINTIER line is
  invalid. For tie and lose the tier is ignored (a stray tier or a missing
  WINTIER line does not invalidate the verdict).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import random
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, Literal

from pydantic import Field

from verifyless.metrics.critic import vote_shares, vote_uncertainty
from verifyless.model.asking import ask_parsed
from verifyless.model.base import Message, Model, ModelRequest, note_parse, wrapped
from verifyless.node import Candidate, Evidence, Screening
from verifyless.prompts import Template, load_template, messages, render
from verifyless.roles.parse import clean_reply
from verifyless.screen.base import ScreenContext, choose_top
from verifyless.screen.health import WatchesReplies, replies_detail
from verifyless.screen.options import LLMOptions
from verifyless.screen.prompt_file import load_prompt_file
from verifyless.screen.prompting import (
    final_json,
    is_template_echo,
    json_value,
    metric_line,
    split_value,
    tag_values,
)
from verifyless.screen.ranking import order_by_value, route
from verifyless.screen.tournament import PairwiseRPM, TournamentOptions
from verifyless.screen.verdicts import TIER_TAG, VERDICT_TAG, VERDICTS, verdict_probs

# Index = rank value used for averaging (Lose=0 ... BigWin=4).
LABELS: tuple[str, ...] = ("Lose", "Tie", "SmallWin", "MediumWin", "BigWin")
LABEL_RANK: Mapping[str, int] = {label: i for i, label in enumerate(LABELS)}
DIRECTIONS: tuple[str, ...] = VERDICTS
TIE_BREAKS: tuple[str, ...] = ("auto", "none", "votes", "probs", "pairwise")
EXPECTED = "[IMPROVEMENT] improve|lose|tie and [WINTIER] big|medium|small|NA"
_TIER_LABEL = {"big": "BigWin", "medium": "MediumWin", "small": "SmallWin"}
_WINTIER = r"WIN[ _\-]?TIER"
# What a critic prompt template must contain (checked for a prompt_file).
PLACEHOLDERS: tuple[str, ...] = ("task", "metric", "parent", "child", "understanding", "criteria")
MARKERS: tuple[str, ...] = (VERDICT_TAG, TIER_TAG)

_IMPROVEMENT_WORDS = {
    "improve": "improve",
    "improves": "improve",
    "improved": "improve",
    "improvement": "improve",
    "lose": "lose",
    "loses": "lose",
    "lost": "lose",
    "loss": "lose",
    "tie": "tie",
    "ties": "tie",
    "tied": "tie",
}
_TIER_WORDS = {
    "big": "big",
    "bigwin": "big",
    "medium": "medium",
    "mediumwin": "medium",
    "small": "small",
    "smallwin": "small",
    "na": "na",
    "n/a": "na",
    "n.a": "na",
    "none": "na",
}


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


def _word_and_reason(value: str) -> tuple[str, str]:
    """(normalised value word, reason) of one tag value; "Big Win" / "big-win" join into one word."""
    word, reason = split_value(value)
    word = word.lower()
    joined = re.match(r"^[\s\-]*win\b[\s.:\-–—]*", reason, re.IGNORECASE)
    if word in {"big", "medium", "small"} and joined:
        word, reason = word + "win", reason[joined.end() :]
    return word, reason.strip()


def _last_value(text: str, tag: str) -> tuple[str, str] | None:
    """(normalised value word, reason) of the last real occurrence of ``tag``."""
    values = [v for v in tag_values(text, tag) if not is_template_echo(v)]
    return _word_and_reason(values[-1]) if values else None


def _verdict(improvement: tuple[str, str] | None, tier_found: tuple[str, str] | None) -> Verdict | None:
    if improvement is None:
        return None
    direction = _IMPROVEMENT_WORDS.get(improvement[0])
    if direction is None:
        return None
    if direction != "improve":
        reason = tier_found[1] if tier_found else ""
        return Verdict(direction, None, improvement[1], reason)  # type: ignore[arg-type]
    if tier_found is None:
        return None
    tier = _TIER_WORDS.get(tier_found[0])
    if tier is None or tier == "na":
        return None
    return Verdict("improve", tier, improvement[1], tier_found[1])  # type: ignore[arg-type]


_ANSWER_IN_TAG = re.compile(r"^\s*\[\s*([A-Za-z/.]+)\s*\]", re.MULTILINE)


def _answer_in_tag(text: str, words: Mapping[str, str]) -> tuple[str, str] | None:
    """(word, "") of the last line that starts with one of ``words`` in brackets, the answer written where the
    tag belongs; None when no line does."""
    found = [m.group(1).lower() for m in _ANSWER_IN_TAG.finditer(text) if m.group(1).lower() in words]
    return (found[-1], "") if found else None


def parse_verdict(text: str) -> Verdict | None:
    """Parse a critique's ``[IMPROVEMENT]`` and ``[WINTIER]`` lines; None if invalid.

    See the module docstring for every leniency rule, the JSON form and the NA rule.
    """
    text = clean_reply(text or "")
    if not text:
        return None
    improvement = _last_value(text, "IMPROVEMENT")
    if improvement is not None:
        return _verdict(improvement, _last_value(text, _WINTIER))
    if (improvement := _answer_in_tag(text, _IMPROVEMENT_WORDS)) is not None:
        return _verdict(improvement, _last_value(text, _WINTIER) or _answer_in_tag(text, _TIER_WORDS))
    obj = final_json(text)
    word = json_value(obj, ("improvement", "verdict", "direction"))
    if word is None:
        return None
    tier = json_value(obj, ("wintier", "win_tier", "win tier", "tier"))
    return _verdict(_word_and_reason(word), _word_and_reason(tier) if tier is not None else None)


def evidence_from_critiques(
    candidate_id: str,
    critiques: Sequence[str],
    threshold: float = 0.25,
    *,
    label_probs: Mapping[str, float] | None = None,
    tokens: int = 0,
) -> Evidence:
    """Aggregate k raw critiques of one candidate into its ``Evidence``.

    Rank value: mean label rank over all k critiques, an unparsed one counting
    as Lose (0); -1.0 when none parsed. Votes: three-way shares over all k
    (unparsed = a vote for nothing). Uncertainty: ``1 - max(votes)``.
    ``label_probs`` (a model's probability per five-way label, where one can
    score labels) is stored in ``detail`` for tie-breaking; ``tokens`` is what
    the k critiques cost.
    """
    verdicts = [parse_verdict(c) for c in critiques]
    valid = [v for v in verdicts if v is not None]
    k = len(verdicts)
    n_invalid = k - len(valid)
    votes = vote_shares([v.improvement if v else None for v in verdicts])  # the critic benchmark counts the same
    uncertainty = vote_uncertainty(votes)
    rank_value = sum(v.rank for v in valid) / k if valid else -1.0
    detail: dict[str, Any] = {
        "critiques": list(critiques),
        "sample_labels": [v.label if v else None for v in verdicts],
        "n_invalid": n_invalid,
        "uncertain": route(uncertainty, threshold),
        "route_threshold": threshold,
        "replies": replies_detail(
            len(valid), k, EXPECTED, (c for c, v in zip(critiques, verdicts, strict=False) if v is None)
        ),
        "tokens": tokens,
    }
    if label_probs:
        detail["label_probs"] = {str(label): float(p) for label, p in label_probs.items()}
    return Evidence(
        candidate_id=candidate_id,
        rank_value=rank_value,
        labels=tuple(v.label for v in valid),
        votes=votes,
        uncertainty=uncertainty,
        n_valid=len(valid),
        n_invalid=n_invalid,
        detail=detail,
    )


# ------------------------------------------------------------------ tie-breaking


def tier_shares(evidence: Evidence) -> tuple[float, ...]:
    """Shares of BigWin, MediumWin, SmallWin and Tie over all k critiques (unparsed ones included)."""
    k = len(evidence.labels) + evidence.n_invalid
    if not k:
        return (0.0,) * 4
    return tuple(evidence.labels.count(label) / k for label in reversed(LABELS[1:]))


def expected_label_rank(label_probs: Mapping[str, float]) -> float:
    """Probability-weighted label rank (Lose=0 ... BigWin=4) of a five-way ``label_probs`` mapping."""
    mass = sum(max(0.0, float(p)) for lab, p in label_probs.items() if lab in LABEL_RANK)
    if mass <= 0:
        return -1.0
    return sum(LABEL_RANK[lab] * max(0.0, float(p)) for lab, p in label_probs.items() if lab in LABEL_RANK) / mass


def probability_signal(label_probs: Mapping[str, float]) -> tuple[float, ...]:
    """Higher-is-better key from label probabilities: the expected rank over the five labels when they are
    given, else the mass on ``improve`` then on ``tie`` (a three-way verdict distribution, as a local
    model scores it at the ``[IMPROVEMENT]`` tag)."""
    if any(lab in LABEL_RANK for lab in label_probs):
        return (expected_label_rank(label_probs),)
    mass = sum(max(0.0, float(p)) for p in label_probs.values()) or 1.0
    return tuple(max(0.0, float(label_probs.get(d, 0.0))) / mass for d in ("improve", "tie"))


def label_scorer(model: object) -> Any:
    """An async ``messages -> {label: probability}`` for the tie-break from ``model`` or a model it wraps.

    Along ``model`` and its ``.inner`` chain, the first of: an async ``label_probs(messages)`` (the
    contract, three- or five-way keys), or an in-process ``probe_labels`` (``LocalModel``), read as
    ``verdicts.verdict_probs`` (P(improve|tie|lose) after the verdict tag). Else None.
    """
    for seen in wrapped(model):
        scorer = getattr(seen, "label_probs", None)
        if callable(scorer):
            return scorer
        prober = getattr(seen, "probe_labels", None)
        if callable(prober):
            return functools.partial(verdict_probs, prober)
    return None


def finer_signal(evidence: Evidence, tie_break: str) -> tuple[float, ...]:
    """The key that orders candidates with equal mean rank, higher first.

    ``none``: nothing (random order). ``votes`` and ``pairwise``: tier shares
    (BigWin share first, then MediumWin, SmallWin, Tie). ``probs``:
    ``probability_signal`` of ``detail["label_probs"]``, then the tier shares.
    ``auto``: ``probs`` where the evidence has label probabilities, else ``votes``.
    """
    if tie_break == "none":
        return ()
    probs = evidence.detail.get("label_probs") if tie_break in ("probs", "auto") else None
    if probs:
        return probability_signal(probs) + tier_shares(evidence)
    return tier_shares(evidence)


def order_by_evidence(
    evidence: Mapping[str, Evidence], ids: Sequence[str], rng: random.Random, tie_break: str = "auto"
) -> list[str]:
    """Ids by mean rank, then the finer signal of ``tie_break``, then a key drawn from ``rng``.

    One key per id is drawn in input order whatever the rule, so the rule does
    not change what later draws from ``rng`` return. Mean ranks are compared
    rounded to 9 decimals, so equal label counts always tie.
    """
    keys = {cid: rng.random() for cid in ids}

    def key(cid: str) -> tuple:
        ev = evidence[cid]
        return (-round(ev.rank_value, 9), tuple(-x for x in finer_signal(ev, tie_break)), keys[cid])

    return sorted(ids, key=key)


def top_tied(evidence: Mapping[str, Evidence], ranking: Sequence[str]) -> list[str]:
    """The leading ids of ``ranking`` that share the first one's mean rank."""
    if not ranking:
        return []
    best = round(evidence[ranking[0]].rank_value, 9)
    return [cid for cid in ranking if round(evidence[cid].rank_value, 9) == best]


def group_that_fits(n: int, match_tokens: int, budget: int) -> int:
    """How many tied candidates a knockout can include within ``budget`` tokens (n - 1 matches for n)."""
    if match_tokens <= 0:
        return n
    return max(0, min(n, 1 + budget // match_tokens))


# The paper's sampling: k critiques per candidate at this temperature (the one place these defaults are written).
K = 16
TEMPERATURE = 0.7


def parent_text(ctx: ScreenContext) -> str:
    """What the critic reads about the parent: its neutral summary, else its idea, else "(the baseline program)"."""
    return ctx.parent.summary or (ctx.parent.idea.text if ctx.parent.idea else "") or "(the baseline program)"


def child_text(candidate: Candidate) -> str:
    """What the critic reads about a candidate: its neutral summary, else its idea text."""
    return candidate.summary or candidate.idea.text


class CriticOptions(LLMOptions):
    """Options of screener ``critic`` (``PointwiseCritic``)."""

    k: int = Field(K, ge=1, description=f"critiques sampled per candidate (paper: {K})")
    temperature: float | None = Field(
        TEMPERATURE, ge=0.0, le=2.0, description=f"critique sampling temperature (paper: {TEMPERATURE})"
    )
    samples_per_request: int | None = Field(None, ge=1, description="split the k samples into requests of this n")
    prompt: str = Field("critic", description="prompt template name under roles/prompts/")
    prompt_file: str | None = Field(
        None, description="prompt template file (e.g. written by `verifyless tune screener`); overrides prompt"
    )
    tie_break: Literal["auto", "none", "votes", "probs", "pairwise"] = Field(
        "auto",
        description="order of equal mean ranks: auto (label probabilities where present, else tier "
        "shares), none (random, the paper's plain mean rank), votes, probs, pairwise (a knockout among the tied)",
    )
    tie_break_model: str | None = Field(
        None,
        description="model key judging pairwise tie-breaks (default: 'judge' if configured, else the critic's model)",
    )
    tie_break_tokens: int = Field(20000, ge=0, description="estimated token budget of one pairwise tie-break")


@dataclass(eq=False, repr=False)
class PointwiseCritic(WatchesReplies):
    """Rank candidates by the mean five-way label of k sampled critiques.

    Built from its options whole (``CriticOptions``: the defaults live there
    only). ``k`` critiques per candidate (paper: 16 at temperature 0.7) are
    requested as ``n=k`` in one request, or in chunks of ``samples_per_request``
    with increasing ``sample_offset``; all candidates run concurrently. The top
    ``n_verify`` (the options', else ``ctx.n_verify``) are chosen. Evidence
    with ``u >= route_threshold`` (the engine's ``engine.uncertainty_threshold``
    when built from config) is marked ``uncertain``; sending it to verification
    is the engine's one routing switch, ``engine.verify_uncertain``.

    ``tie_break`` orders candidates with equal mean rank (``order_by_evidence``);
    ``pairwise`` additionally plays a knockout among the candidates tied for
    first place, judged by ``judge`` (else the critic's model), with as many of
    them as fit ``tie_break_tokens`` (estimated before any call). When the
    model (or the model a cache wraps) has an async
    ``label_probs(messages) -> {label: probability}`` method, or an in-process
    label probe (the local model provider; the verdict words are read at the
    ``[IMPROVEMENT]`` tag, ``label_scorer``), its output is stored as
    ``label_probs`` and used by ``auto`` and ``probs``.

    The prompt is the template named ``prompt`` under ``prompts/screen/``, or,
    when given, ``prompt_file`` (checked by ``load_prompt_file``: a
    ``ConfigError`` when a placeholder or the verdict tags are missing), or
    ``template``, an in-memory ``prompts.Template`` (what the prompt tuner
    scores). ``template`` wins over ``prompt_file``, which wins over ``prompt``.
    The run's data report (``ctx.data_report``) fills ``{{data_report}}``; a
    prompt file may leave that placeholder out (it is optional, never required).
    """

    model: Model
    options: CriticOptions = dataclasses.field(default_factory=CriticOptions)
    _: KW_ONLY
    route_threshold: float = 0.25
    judge: Model | None = None
    template: Template | None = None
    default_name: ClassVar[str] = "critic"

    def __post_init__(self) -> None:
        if self.template is None and self.options.prompt_file:
            self.template = load_prompt_file(self.options.prompt_file, "critic", PLACEHOLDERS, MARKERS)
        super().__post_init__()

    @property
    def name(self) -> str:
        """The name recorded in screening events: ``options.name``, else the screener's own."""
        return self.options.name or self.default_name

    @property
    def k(self) -> int:
        return self.options.k

    @property
    def tie_break(self) -> str:
        return self.options.tie_break

    def route(self, evidence: Evidence) -> bool:
        return route(evidence.uncertainty, self.route_threshold)

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
        parent, child = parent_text(ctx), child_text(candidate)
        values = {
            "task": ctx.task.statement.strip(),
            "metric": metric_line(ctx.task),
            "data_report": ctx.data_report.strip(),
            "parent": parent.strip(),
            "child": child.strip(),
            "understanding": understanding,
            "criteria": criteria,
        }
        return messages(self.template or load_template(f"screen/{self.options.prompt}"), values)

    async def sample(self, ctx: ScreenContext, candidate: Candidate) -> tuple[list[str], int]:
        """k raw critique texts for one candidate and the tokens they cost."""
        messages = self.messages(ctx, candidate)
        chunk = self.options.samples_per_request or self.options.k
        replies = await asyncio.gather(
            *(
                self.model.generate(
                    ModelRequest(
                        messages=messages,
                        role="critic",
                        temperature=self.options.temperature,
                        max_tokens=self.options.max_tokens,
                        n=min(chunk, self.options.k - start),
                        sample_offset=start,
                    )
                )
                for start in range(0, self.options.k, chunk)
            )
        )
        tokens = sum(r.usage.prompt_tokens + r.usage.completion_tokens for r in replies)
        texts = [choice.text for reply in replies for choice in reply.choices]
        reminded = await asyncio.gather(*(self._remind(messages, i, text) for i, text in enumerate(texts)))
        tokens += sum(t for _, t in reminded)
        return [text for text, _ in reminded], tokens

    async def _remind(self, messages: tuple[Message, ...], index: int, text: str) -> tuple[str, int]:
        """Sample ``index``'s text, sent back with the format reminder while it has no verdict; its extra tokens.

        The reminded conversation keeps the sample's index, so each sample is cached and replayed on its own.
        """
        if parse_verdict(text) is not None:
            note_parse(self.model, "critic", "first")
            return text, 0
        if self.options.format_reminders == 0:
            note_parse(self.model, "critic", "never", f"no verdict: {text[-200:]!r}")
            return text, 0
        reminder = render("screen/reminders", "critic")
        request = ModelRequest(
            messages=(*messages, Message("assistant", text), Message("user", reminder)),
            role="critic",
            temperature=self.options.temperature,
            max_tokens=self.options.max_tokens,
            sample_offset=index,
        )
        reminders = self.options.format_reminders - 1
        asked = await ask_parsed(self.model, request, parse_verdict, reminder, reminders=reminders, reminded=True)
        used = asked.usage.prompt_tokens + asked.usage.completion_tokens
        # The first reply's reasoning and the reminded verdict together are the critique.
        return (text + "\n" + asked.text if asked.value is not None else text), used

    async def critiques(self, ctx: ScreenContext, candidate: Candidate) -> list[str]:
        """k raw critique texts for one candidate."""
        return (await self.sample(ctx, candidate))[0]

    async def _evidence(self, ctx: ScreenContext, candidate: Candidate) -> Evidence:
        texts, tokens = await self.sample(ctx, candidate)
        probs = None
        scorer = label_scorer(self.model) if self.options.tie_break in ("auto", "probs") else None
        if scorer is not None:
            probs = await scorer(self.messages(ctx, candidate))
        return evidence_from_critiques(candidate.id, texts, self.route_threshold, label_probs=probs, tokens=tokens)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        found = await asyncio.gather(*(self._evidence(ctx, c) for c in candidates))
        evidence = {c.id: e for c, e in zip(candidates, found, strict=False)}
        ids = [c.id for c in candidates]
        ranking = order_by_evidence(evidence, ids, ctx.rng, self.options.tie_break)
        if self.options.tie_break == "pairwise":
            ranking, evidence = await self._pairwise(ctx, candidates, evidence, ranking)
        return choose_top(self.name, ranking, evidence, self.options.n_verify, ctx, started)

    async def _pairwise(
        self, ctx: ScreenContext, candidates: Sequence[Candidate], evidence: dict[str, Evidence], ranking: list[str]
    ) -> tuple[list[str], dict[str, Evidence]]:
        """Reorder the candidates tied for first by a knockout within ``tie_break_tokens``."""

        group = top_tied(evidence, ranking)
        if len(group) < 2:
            return ranking, evidence
        by_id = {c.id: c for c in candidates}
        judge = PairwiseRPM(
            self.judge or self.model,
            TournamentOptions(
                show="summary",
                context_tokens=self.options.tie_break_tokens // 4,
                max_tokens=self.options.max_tokens,
                name=f"{self.name}-tie-break",
            ),
        )
        per_match = judge.estimate_match_tokens(ctx, by_id[group[0]], by_id[group[1]])
        fits = group_that_fits(len(group), per_match, self.options.tie_break_tokens)
        played = group[:fits] if fits >= 2 else []
        info: dict[str, Any] = {"rule": "pairwise", "tied": group, "played": played, "match_tokens_estimate": per_match}
        if len(played) < 2:
            return ranking, {cid: _with_tie_break(ev, info) for cid, ev in evidence.items()}
        sub = await judge.screen(
            dataclasses.replace(ctx, rng=random.Random(ctx.rng.getrandbits(64))), [by_id[c] for c in played]
        )
        order = list(sub.ranking) + [c for c in ranking if c not in played]
        out = {}
        for cid, ev in evidence.items():
            match = sub.evidence.get(cid)
            out[cid] = _with_tie_break(ev, {**info, "match": match.to_dict() if match else None})
        return order, out


def _with_tie_break(ev: Evidence, info: Mapping[str, Any]) -> Evidence:
    """``ev`` with the tie-break record in ``detail``; the judge's replies and tokens join its own."""
    detail = dict(ev.detail)
    match = info.get("match") or {}
    extra = (match.get("detail") or {}) if match else {}
    if extra.get("replies"):
        mine, more = dict(detail.get("replies") or {}), extra["replies"]
        mine["parsed"] = mine.get("parsed", 0) + more.get("parsed", 0)
        mine["total"] = mine.get("total", 0) + more.get("total", 0)
        if "example" not in mine and more.get("example"):
            mine["example"] = more["example"]
        detail["replies"] = mine
    detail["tokens"] = detail.get("tokens", 0) + extra.get("tokens", 0)
    detail["tie_break"] = dict(info)
    return ev.replace(detail=detail)


__all__ = [
    "DIRECTIONS",
    "EXPECTED",
    "LABELS",
    "LABEL_RANK",
    "MARKERS",
    "PLACEHOLDERS",
    "CriticOptions",
    "PointwiseCritic",
    "TIE_BREAKS",
    "Verdict",
    "child_text",
    "evidence_from_critiques",
    "expected_label_rank",
    "finer_signal",
    "label_scorer",
    "order_by_evidence",
    "order_by_value",
    "parent_text",
    "parse_verdict",
    "probability_signal",
    "route",
    "tier_shares",
    "top_tied",
]
