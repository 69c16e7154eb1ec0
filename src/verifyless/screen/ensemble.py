"""Ensembles of screeners (RPM paper, SPEC 3.2): majority vote and an LLM arbiter.

``MajorityVote`` runs every member screener ``rollouts`` times (paper: several
models x 3 rollouts). Each run's top candidate is one vote; the ranking is by
vote count, ties broken uniformly at random with ``ctx.rng`` as in the paper
(``tie_break="position"`` breaks them by mean position across all runs
first, this project's earlier rule).

``Arbiter`` runs each member ``rollouts`` times (paper: 3), shows an arbiter
model their anonymised reasoning next to the payload they judged (the task, the
data report, the context nodes and each candidate's plan and program;
``show="summary"`` gives neutral summaries instead) and lets it pick
(``[CHOICE] <candidate number>``). When the arbiter's reply does not parse, the majority of the
members' top choices decides and the fallback is recorded.

Reply health: each candidate's ``detail["replies"]`` and ``detail["tokens"]``
sum its members' entries over all runs (the arbiter's own reply is counted on
the first candidate), so ``screen.health.reply_stats`` sees every reply once.

Every member run gets its own ``random.Random`` seeded from ``ctx.rng`` in a
fixed order, so concurrent members never race on one generator and a run is
reproducible from the seed.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from verifyless import prompts
from verifyless.model.asking import ask_parsed
from verifyless.model.base import Model, ModelRequest
from verifyless.node import Candidate, Evidence, Screening
from verifyless.screen.base import ScreenContext, Screener, choose_top
from verifyless.screen.health import WatchesReplies, model_names, replies_detail
from verifyless.screen.options import HealthOptions
from verifyless.screen.prompting import format_context, metric_line, parse_choice
from verifyless.screen.ranking import order_by_value
from verifyless.screen.tournament import collect_context, describe


async def run_members(
    ctx: ScreenContext, candidates: Sequence[Candidate], members: Sequence[Screener], rollouts: int
) -> list[tuple[int, int, Screening]]:
    """``(member index, rollout, screening)`` for every member x rollout, run concurrently."""
    jobs = [(i, r) for i in range(len(members)) for r in range(rollouts)]
    seeds = [ctx.rng.getrandbits(64) for _ in jobs]  # drawn before any await: fixed order
    results = await asyncio.gather(
        *(
            members[i].screen(dataclasses.replace(ctx, rng=random.Random(seed)), candidates)
            for (i, _), seed in zip(jobs, seeds, strict=False)
        )
    )
    return [(i, r, s) for (i, r), s in zip(jobs, results, strict=False)]


TIE_BREAKS = ("random", "position")


def tally(
    ids: Sequence[str], ballots: Sequence[Screening], rng: random.Random, tie_break: str = "random"
) -> tuple[list[str], dict[str, int], dict[str, float]]:
    """Ranking by top-choice votes; equal votes in ``rng`` order (``"random"``, the paper's rule)
    or by mean ranking position first (``"position"``), then ``rng``.

    Returns ``(ranking, votes, mean_position)``; positions are 0-based and a
    candidate missing from a ballot counts as last on it. ``rng`` draws one
    key per candidate in input order under either rule.
    """
    votes = {cid: 0 for cid in ids}
    positions = {cid: 0.0 for cid in ids}
    for ballot in ballots:
        if ballot.ranking and ballot.ranking[0] in votes:
            votes[ballot.ranking[0]] += 1
        place = {cid: p for p, cid in enumerate(ballot.ranking)}
        for cid in ids:
            positions[cid] += place.get(cid, len(ids))
    mean_position = {cid: positions[cid] / max(1, len(ballots)) for cid in ids}
    if tie_break == "position":  # mean position, scaled below one vote, breaks vote ties before rng
        value = {cid: votes[cid] - mean_position[cid] / (len(ids) + 1) for cid in ids}
    else:
        value = {cid: float(votes[cid]) for cid in ids}
    return order_by_value(value, ids, rng), votes, mean_position


def member_replies(cid: str, runs: Sequence[tuple[int, int, Screening]]) -> tuple[dict[str, Any], int]:
    """``(replies entry, tokens)`` for one candidate summed over every member run."""
    parsed = total = tokens = 0
    expected, examples = "", []
    for _, _, s in runs:
        detail = s.evidence[cid].detail if cid in s.evidence else {}
        r = detail.get("replies") or {}
        parsed += int(r.get("parsed", 0))
        total += int(r.get("total", 0))
        expected = expected or str(r.get("expected", ""))
        if r.get("example"):
            examples.append(str(r["example"]))
        tokens += int(detail.get("tokens", 0))
    return replies_detail(parsed, total, expected, examples), tokens


@dataclass(frozen=True)
class Poll:
    """Every member run on one candidate set, tallied: the first step of both ensembles.

    ``ranking`` orders the candidates by top-choice votes (``tally``);
    ``started`` is when the poll began, for the screening's wall time.
    """

    ids: list[str]
    runs: list[tuple[int, int, Screening]]
    ranking: list[str]
    votes: dict[str, int]
    mean_position: dict[str, float]
    started: float

    @classmethod
    async def take(
        cls,
        ctx: ScreenContext,
        candidates: Sequence[Candidate],
        members: Sequence[Screener],
        rollouts: int,
        tie_break: str,
    ) -> Poll:
        started = time.monotonic()
        runs = await run_members(ctx, candidates, members, rollouts)
        ids = [c.id for c in candidates]
        ranking, votes, mean_position = tally(ids, [s for _, _, s in runs], ctx.rng, tie_break)
        return cls(ids, runs, ranking, votes, mean_position, started)

    def share(self, cid: str) -> float:
        """The share of member runs whose top choice is ``cid``."""
        return self.votes[cid] / len(self.runs)

    def split(self, cid: str) -> float:
        """How split the runs are about ``cid`` being the best: ``1 - max(share, 1 - share)``."""
        return 1.0 - max(self.share(cid), 1.0 - self.share(cid))

    def detail(self, cid: str) -> dict[str, Any]:
        """The vote count, mean position and every member's evidence for ``cid``."""
        return {
            "top_votes": self.votes[cid],
            "mean_position": self.mean_position[cid],
            "members": [s.evidence[cid].to_dict() for _, _, s in self.runs if cid in s.evidence],
        }


class PollOptions(HealthOptions):
    """What an ensemble or an arbiter polls its members with (its ``members`` are built by the registry)."""

    rollouts: int = Field(3, ge=1, description="runs per member (paper: 3)")
    tie_break: Literal["random", "position"] = Field(
        "random", description="equal votes: random (the paper) or mean position first"
    )


class MembersOptions(PollOptions):
    """Options shared by ``ensemble`` (``MajorityVote``) and ``arbiter`` (``Arbiter``): the poll, and the members."""

    members: list[str | dict[str, Any]] = Field(
        ..., min_length=1, description="model keys (each built as `member`) or {screener: name, ...options} specs"
    )
    member: str = Field("tournament", description="screener built for each model key in members")
    member_options: dict[str, Any] = Field(default_factory=dict, description="options for members given as keys")


class EnsembleOptions(MembersOptions):
    pass


class ArbiterSettings(PollOptions):
    """What the ``Arbiter`` itself reads: the poll, its model key and how it shows the members' reasoning."""

    model: str | None = Field(None, description="model key of the arbiter (default: 'arbiter', else 'default')")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="arbiter sampling temperature")
    max_tokens: int | None = Field(None, ge=1, description="arbiter reply length cap")
    context_nodes: int | None = Field(None, ge=0, description="cap on context nodes shown to the arbiter")
    context_tokens: int | None = Field(8000, ge=0, description="token budget for the arbiter's context nodes")
    show: Literal["code", "summary"] = Field(
        "code",
        description="candidates and context nodes as the members' judges saw them, plan plus program (the RPM "
        "paper's arbiter payload), or as neutral summaries",
    )


class ArbiterOptions(MembersOptions, ArbiterSettings):
    pass


class _Members(WatchesReplies):
    """What both ensembles check when built: a member list (field ``_member_field``); then ``WatchesReplies``
    builds their reply ``health`` tracker from their options' limits (``screen/health.py``)."""

    _member_field: ClassVar[str] = "members"
    default_name: ClassVar[str] = "ensemble"
    if TYPE_CHECKING:  # each ensemble declares its options field, in its own place
        options: PollOptions

    def __post_init__(self) -> None:
        members = list(getattr(self, self._member_field))
        if not members:
            raise ValueError(f"{type(self).__name__} needs at least one member screener")
        setattr(self, self._member_field, members)
        super().__post_init__()

    @property
    def name(self) -> str:
        """The name recorded in screening events: ``options.name``, else the screener's own."""
        return self.options.name or self.default_name


@dataclass(eq=False, repr=False)
class MajorityVote(_Members):
    """Majority vote over member screeners x rollouts; ties broken uniformly at random with ``ctx.rng``.

    Members are any screeners (for "several models" build one ``PairwiseRPM``
    or ``PointwiseCritic`` per model). ``chosen`` is the top ``n_verify``.
    Evidence per candidate: ``votes={"top": share of ballots}``, uncertainty
    ``1 - max(share, 1 - share)`` (how split the members are about this
    candidate being the best), and every ballot's ranking in ``detail``.
    """

    _member_field: ClassVar[str] = "screeners"
    screeners: Sequence[Screener]
    options: PollOptions = field(default_factory=PollOptions)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        poll = await Poll.take(ctx, candidates, self.screeners, self.options.rollouts, self.options.tie_break)
        ballots = [{"member": i, "rollout": r, "ranking": list(s.ranking)} for i, r, s in poll.runs]
        evidence = {}
        for cid in poll.ids:
            replies, tokens = member_replies(cid, poll.runs)
            evidence[cid] = Evidence(
                candidate_id=cid,
                rank_value=float(len(poll.ids) - poll.ranking.index(cid)),
                votes={"top": poll.share(cid)},
                uncertainty=poll.split(cid),
                n_valid=sum(s.evidence[cid].n_valid for _, _, s in poll.runs if cid in s.evidence),
                n_invalid=sum(s.evidence[cid].n_invalid for _, _, s in poll.runs if cid in s.evidence),
                detail={**poll.detail(cid), "ballots": ballots, "replies": replies, "tokens": tokens},
            )
        return choose_top(self.name, poll.ranking, evidence, self.options.n_verify, ctx, poll.started)


# ------------------------------------------------------------------ arbiter


def _member_names(member: Screener) -> list[str]:
    """Names that could reveal which model a member is (stripped before the arbiter sees text)."""
    return [n for n in model_names(member) if len(n) > 1]


def reasoning_text(screening: Screening, numbers: dict[str, int], max_chars: int = 4000) -> str:
    """A member's reasoning as readable text, candidates referred to as ``#n``.

    Critics contribute their critiques of the member's top choice; tournaments
    contribute every match the top choice played, with the letters mapped
    back to candidate numbers. Each block is cut at ``max_chars``.
    """
    top = screening.ranking[0] if screening.ranking else None
    order = ", ".join(f"#{numbers[cid]}" for cid in screening.ranking if cid in numbers)
    lines = [f"Ranking: {order}"]
    if top is None or top not in screening.evidence:
        return "\n".join(lines)
    detail = screening.evidence[top].detail
    for text in list(detail.get("critiques", []))[:3]:
        lines.append(f"Critique of #{numbers[top]}:\n{str(text)[:max_chars]}")
    for match in detail.get("matches", []):
        for sample in match.get("samples", []):
            first, second = sample["order"]
            lines.append(
                f"Comparison (A = #{numbers.get(first, '?')}, B = #{numbers.get(second, '?')}):\n"
                f"{str(sample['raw'])[:max_chars]}"
            )
    return "\n\n".join(lines)


def anonymise(text: str, names: Sequence[str]) -> str:
    """Replace every model name (as a whole token) with a neutral word, longest names first."""
    for name in sorted(set(names), key=len, reverse=True):
        text = re.sub(r"(?<![\w.-])" + re.escape(name) + r"(?![\w-])", "a reviewer", text, flags=re.IGNORECASE)
    return text


@dataclass(eq=False, repr=False)
class Arbiter(_Members):
    """An LLM arbiter that reads the members' anonymised reasoning and picks one candidate.

    Each member runs ``rollouts`` times (paper: 3), and the arbiter reads
    every rollout's reasoning. Ranking: the arbiter's pick first, then the
    rest in majority-vote order (ties as in ``MajorityVote``).
    ``uncertainty`` is the members' split about each candidate being the best
    (as in ``MajorityVote``); the arbiter's own reply is stored raw.
    On an unparseable arbiter reply the majority order is used unchanged and
    ``detail["fallback"]`` is True on every candidate's evidence.
    """

    default_name: ClassVar[str] = "arbiter"
    model: Model
    members: Sequence[Screener]
    options: ArbiterSettings = field(default_factory=ArbiterSettings)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        poll = await Poll.take(ctx, candidates, self.members, self.options.rollouts, self.options.tie_break)
        numbers = {cid: n for n, cid in enumerate(poll.ids, 1)}
        names = [self.model.name] + [n for m in self.members for n in _member_names(m)]
        reviews = "\n\n".join(
            f"### Reviewer {k}\n{anonymise(reasoning_text(s, numbers), names)}"
            for k, (_, _, s) in enumerate(poll.runs, 1)
        )
        candidates_text = "\n\n".join(
            f"### Candidate {numbers[c.id]}\n{describe(c, self.options.show)}" for c in candidates
        )
        context = collect_context(ctx, self.options.context_nodes, self.options.context_tokens)
        messages = prompts.messages(
            "screen/arbiter",
            task=ctx.task.statement.strip(),
            metric=metric_line(ctx.task),
            data_report=ctx.data_report.strip(),
            context=format_context(context, with_code=self.options.show == "code"),
            candidates=candidates_text,
            reviews=reviews,
        )
        reply = await ask_parsed(
            self.model,
            ModelRequest(
                messages=messages,
                role="arbiter",
                temperature=self.options.temperature,
                max_tokens=self.options.max_tokens,
            ),
            lambda text: parse_choice(text, [str(n) for n in numbers.values()]),
            prompts.render("screen/reminders", "arbiter"),
            reminders=self.options.format_reminders,
        )
        pick = reply.value
        by_number = {str(n): cid for cid, n in numbers.items()}
        ranking = list(poll.ranking)
        fallback = pick is None
        if pick is not None:
            ranking.remove(by_number[pick])
            ranking.insert(0, by_number[pick])
        shared: dict[str, Any] = {
            "arbiter_raw": "\n".join(reply.texts),
            "arbiter_pick": by_number.get(pick or ""),
            "fallback": fallback,
        }
        own_tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens
        evidence = {cid: self._evidence(cid, poll, ranking, numbers, shared, own_tokens) for cid in poll.ids}
        return choose_top(self.name, ranking, evidence, self.options.n_verify, ctx, poll.started)

    @staticmethod
    def _evidence(
        cid: str,
        poll: Poll,
        ranking: Sequence[str],
        numbers: dict[str, int],
        shared: dict[str, Any],
        own_tokens: int,
    ) -> Evidence:
        """One candidate's record; the arbiter's own reply and tokens are counted on the first candidate."""
        fallback = shared["fallback"]
        replies, tokens = member_replies(cid, poll.runs)
        if cid == poll.ids[0]:
            examples = [shared["arbiter_raw"]] if fallback else []
            replies = replies_detail(
                replies["parsed"] + (0 if fallback else 1),
                replies["total"] + 1,
                replies.get("expected") or "[CHOICE] <candidate number>",
                examples + ([replies["example"]] if replies.get("example") else []),
            )
            tokens += own_tokens
        return Evidence(
            candidate_id=cid,
            rank_value=float(len(poll.ids) - ranking.index(cid)),
            votes={"top": poll.share(cid)},
            uncertainty=poll.split(cid),
            n_valid=0 if fallback else 1,
            n_invalid=1 if fallback else 0,
            detail={**shared, "number": numbers[cid], **poll.detail(cid), "replies": replies, "tokens": tokens},
        )


__all__ = [
    "Arbiter",
    "ArbiterOptions",
    "ArbiterSettings",
    "EnsembleOptions",
    "MajorityVote",
    "MembersOptions",
    "Poll",
    "PollOptions",
    "TIE_BREAKS",
    "anonymise",
    "member_replies",
    "reasoning_text",
    "run_members",
    "tally",
]
