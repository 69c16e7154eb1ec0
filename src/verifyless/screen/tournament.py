"""Inference-only research preference model: a pairwise knockout (RPM paper, SPEC 3.2).

Each match shows an LLM judge the task, two candidates (by default their plan
plus full program, as the paper's judges saw them; ``show="summary"`` for
the neutral summaries) and K context nodes: executed, non-buggy solutions
found by BFS from the parent, each with its program and validation score, as
many as fit ``context_tokens`` (the paper gave as many as fit the judge's
context window), optionally capped at ``context_nodes``. The judge ends with
``[CHOICE] A`` or ``[CHOICE] B`` (or an equivalent form, see ``parse_choice``).

Position bias: with ``both_orders`` every match is asked in both presentation
orders. A candidate wins when it collects more votes; a split or a tie (for
example a judge that always answers "A") draws a second pair of samples, and
if still tied ``ctx.rng`` decides. A purely positional judge therefore
produces coin flips, never a systematic winner.

Ranking: the champion first, then by the round in which a candidate was
eliminated (later is better), equal rounds in an order drawn from ``ctx.rng``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

from pydantic import Field

from verifyless.model.asking import ask_parsed
from verifyless.model.base import Model, ModelRequest
from verifyless.node import Candidate, Evidence, Screening, Status
from verifyless.prompts import Template, load_template, messages, render
from verifyless.screen.base import ContextNode, ScreenContext, choose_top
from verifyless.screen.health import WatchesReplies, replies_detail
from verifyless.screen.options import LLMOptions
from verifyless.screen.prompt_file import load_prompt_file
from verifyless.screen.prompting import format_context, format_context_node, metric_line, parse_choice
from verifyless.screen.ranking import order_by_value

EXPECTED = "[CHOICE] A or [CHOICE] B"
CHARS_PER_TOKEN = 4  # the estimate used for context budgets (no tokenizer is loaded)
DEFAULT_COMPLETION_TOKENS = 1024  # assumed reply length when max_tokens is not set
# What a pairwise prompt template must contain (checked for a prompt_file).
PLACEHOLDERS: tuple[str, ...] = ("task", "metric", "context", "candidate_a", "candidate_b")
MARKERS: tuple[str, ...] = ("[CHOICE]",)


def estimate_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def collect_context(ctx: ScreenContext, k: int | None, token_budget: int | None = None) -> list[ContextNode]:
    """Executed, non-buggy nodes nearest the parent (BFS order): at most ``k`` (None: no cap), and only
    as many as fit ``token_budget`` tokens as the judge will see them (None: no budget).

    The walk follows parent and child edges from ``ctx.parent.id`` through
    every node in ``ctx.nodes`` (buggy ones included, so a good grandchild of a
    crashed node is still reachable) but only collects nodes whose status is
    OK and that have a validation score. The parent itself comes first when
    it qualifies. Summaries come from ``ctx.summaries``, else the node's idea;
    programs from ``ctx.program_of`` when the context has it. The budget stops
    the walk at the first node that would not fit (nearer nodes first).
    """
    k = 10**9 if k is None else k
    if k <= 0 or ctx.parent.id is None or ctx.parent.id not in ctx.nodes:
        return []
    children: dict[str, list[str]] = {}
    for node in ctx.nodes.values():  # insertion order: deterministic neighbour order
        if node.parent_id is not None:
            children.setdefault(node.parent_id, []).append(node.id)
    seen = {ctx.parent.id}
    queue = deque([ctx.parent.id])
    found: list[ContextNode] = []
    used = 0
    while queue and len(found) < k:
        node = ctx.nodes[queue.popleft()]
        if node.status is Status.OK and node.score is not None:
            item = ContextNode(
                node.id, ctx.summaries.get(node.id, node.idea), float(node.score), node.idea, _program(ctx, node.id)
            )
            cost = estimate_tokens(format_context_node(len(found) + 1, item))
            if token_budget is not None and used + cost > token_budget:
                break
            used += cost
            found.append(item)
        neighbours = ([node.parent_id] if node.parent_id else []) + children.get(node.id, [])
        for nid in neighbours:
            if nid in ctx.nodes and nid not in seen:
                seen.add(nid)
                queue.append(nid)
    return found


def _program(ctx: ScreenContext, node_id: str) -> str:
    if ctx.program_of is None:
        return ""
    try:
        return ctx.program_of(node_id) or ""
    except (KeyError, LookupError):  # a node whose program the store does not hold
        return ""


def describe(candidate: Candidate, show: str) -> str:
    """How a candidate is shown to a judge: its summary, or its plan plus full program."""
    if show == "code":
        return f"Plan: {candidate.idea.text.strip()}\n\n```python\n{candidate.program.rstrip()}\n```"
    return (candidate.summary or candidate.idea.text).strip()


@dataclass
class Match:
    """One knockout match; ``samples`` hold every judge call in the order made."""

    round: int
    pair: tuple[str, str]
    samples: list[dict[str, Any]] = field(default_factory=list)
    votes: dict[str, int] = field(default_factory=dict)
    winner: str = ""
    decided_by: Literal["votes", "rng"] = "votes"

    @property
    def tokens(self) -> int:
        return sum(int(s.get("tokens", 0)) for s in self.samples)

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "pair": list(self.pair),
            "samples": list(self.samples),
            "votes": dict(self.votes),
            "winner": self.winner,
            "decided_by": self.decided_by,
        }


class TournamentOptions(LLMOptions):
    """Options of screener ``tournament`` (``PairwiseRPM``)."""

    context_nodes: int | None = Field(
        None, ge=0, description="cap on context nodes K (None: as many as fit context_tokens)"
    )
    context_tokens: int | None = Field(24000, ge=0, description="token budget for context nodes shown in each match")
    both_orders: bool = Field(True, description="ask every match in both presentation orders (cancels position bias)")
    show: Literal["code", "summary"] = Field("code", description="candidates as plan plus code, or as summaries")
    prompt_file: str | None = Field(
        None, description="judge prompt template file (e.g. written by `verifyless tune screener`)"
    )


@dataclass(eq=False, repr=False)
class PairwiseRPM(WatchesReplies):
    """Knockout tournament judged by an LLM over pairs of candidates.

    Built from its options whole (``TournamentOptions``, where the defaults
    live). ``show`` is ``"code"`` (plan + program) or ``"summary"``.
    Context: as many BFS nodes as fit ``context_tokens`` (estimated at 4
    characters per token), capped at ``context_nodes`` when set. ``chosen`` is
    the top ``n_verify`` of the ranking (the options', else ``ctx.n_verify``). The prompt is ``prompts/screen/pairwise.md``,
    or ``prompt_file`` when given (checked by ``load_prompt_file``), or
    ``template``, an in-memory ``prompts.Template``, which wins over both.
    The run's data report (``ctx.data_report``) fills ``{{data_report}}``;
    a prompt file may leave that placeholder out.
    """

    model: Model
    options: TournamentOptions = field(default_factory=TournamentOptions)
    _: KW_ONLY
    template: Template | None = None

    def __post_init__(self) -> None:
        if self.template is None and self.options.prompt_file:
            self.template = load_prompt_file(self.options.prompt_file, "tournament", PLACEHOLDERS, MARKERS)
        super().__post_init__()

    @property
    def name(self) -> str:
        """The name recorded in screening events: ``options.name``, else ``tournament``."""
        return self.options.name or "tournament"

    @property
    def context_tokens(self) -> int | None:
        return self.options.context_tokens

    def messages(self, ctx: ScreenContext, context: Sequence[ContextNode], a: Candidate, b: Candidate):
        values = {
            "task": ctx.task.statement.strip(),
            "metric": metric_line(ctx.task),
            "data_report": ctx.data_report.strip(),
            "context": format_context(context),
            "candidate_a": describe(a, self.options.show),
            "candidate_b": describe(b, self.options.show),
        }
        return messages(self.template or load_template("screen/pairwise"), values)

    async def _ask(self, ctx, context, first: Candidate, second: Candidate, offset: int) -> dict[str, Any]:
        request = ModelRequest(
            messages=self.messages(ctx, context, first, second),
            role="judge",
            temperature=self.options.temperature,
            max_tokens=self.options.max_tokens,
            sample_offset=offset,
        )
        reply = await ask_parsed(
            self.model,
            request,
            lambda text: parse_choice(text, ("A", "B")),
            render("screen/reminders", "pairwise"),
            reminders=self.options.format_reminders,
        )
        letter = reply.value
        picked = {"A": first.id, "B": second.id}.get(letter or "")
        tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens
        return {
            "order": [first.id, second.id],
            "offset": offset,
            "raw": "\n".join(reply.texts),
            "choice": letter,
            "picked": picked,
            "tokens": tokens,
        }

    def context(self, ctx: ScreenContext) -> list[ContextNode]:
        """The context nodes every match of this screening shows."""
        return collect_context(ctx, self.options.context_nodes, self.options.context_tokens)

    def estimate_match_tokens(self, ctx: ScreenContext, a: Candidate, b: Candidate) -> int:
        """Tokens one match between ``a`` and ``b`` costs on its first pass (prompt estimate + reply cap)."""
        prompt = sum(estimate_tokens(m.content) for m in self.messages(ctx, self.context(ctx), a, b))
        calls = 2 if self.options.both_orders else 1
        return calls * (prompt + (self.options.max_tokens or DEFAULT_COMPLETION_TOKENS))

    async def match(
        self,
        ctx: ScreenContext,
        context: Sequence[ContextNode],
        a: Candidate,
        b: Candidate,
        rnd: int,
        coin: float | None = None,
    ) -> Match:
        """Play one match; see the module docstring for the tie rules.

        ``coin`` in [0, 1) settles a final tie (``a`` below 0.5); the tournament
        draws it from ``ctx.rng`` before the round starts, so replies arriving
        in a different order cannot change which tie-break goes to which match.
        """
        if coin is None:
            coin = ctx.rng.random()
        result = Match(round=rnd, pair=(a.id, b.id), votes={a.id: 0, b.id: 0})
        orders = [(a, b), (b, a)] if self.options.both_orders else [(a, b)]
        for offset in (0, 1):  # a first pass, then one more pass only when undecided
            samples = await asyncio.gather(*(self._ask(ctx, context, x, y, offset) for x, y in orders))
            for s in samples:
                result.samples.append(s)
                if s["picked"]:
                    result.votes[s["picked"]] += 1
            if result.votes[a.id] != result.votes[b.id]:
                result.winner = max(result.votes, key=result.votes.__getitem__)
                return result
        result.winner = a.id if coin < 0.5 else b.id
        result.decided_by = "rng"
        return result

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        by_id = {c.id: c for c in candidates}
        context = self.context(ctx)
        alive = [c.id for c in candidates]
        ctx.rng.shuffle(alive)  # seeding of the bracket
        eliminated: dict[str, int] = {}
        matches: list[Match] = []
        rnd = 0
        while len(alive) > 1:
            rnd += 1
            pairs = [(alive[i], alive[i + 1]) for i in range(0, len(alive) - 1, 2)]
            bye = [alive[-1]] if len(alive) % 2 else []
            coins = [ctx.rng.random() for _ in pairs]
            played = await asyncio.gather(
                *(
                    self.match(ctx, context, by_id[x], by_id[y], rnd, coin)
                    for (x, y), coin in zip(pairs, coins, strict=False)
                )
            )
            matches.extend(played)
            for m in played:
                loser = m.pair[0] if m.winner == m.pair[1] else m.pair[1]
                eliminated[loser] = rnd
            alive = [m.winner for m in played] + bye
        for cid in alive:
            eliminated[cid] = rnd + 1  # the champion outlives every round
        ids = [c.id for c in candidates]
        ranking = order_by_value({cid: float(eliminated.get(cid, 0)) for cid in ids}, ids, ctx.rng)
        if alive:  # the champion is first even if equal values were shuffled
            ranking.remove(alive[0])
            ranking.insert(0, alive[0])
        evidence = {cid: self._evidence(cid, eliminated.get(cid, 0), matches, [n.id for n in context]) for cid in ids}
        return choose_top(self.name, ranking, evidence, self.options.n_verify, ctx, started)

    @staticmethod
    def _evidence(cid: str, survived: int, matches: Sequence[Match], context_ids: Sequence[str]) -> Evidence:
        """Per-candidate record: its own matches in full (their union is the bracket).

        ``uncertainty`` is the vote share against the outcome of the candidate's
        last match (0 when unanimous, 0.5 when split and settled by rng, 1.0
        when no judge reply parsed; a bye-only champion has 1.0). ``replies``
        and ``tokens`` count the matches where this candidate was listed first,
        so each match is counted once over the screening.
        """
        own = [m for m in matches if cid in m.pair]
        samples = [s for m in own for s in m.samples]
        n_valid = sum(s["picked"] is not None for s in samples)
        first = [s for m in own if m.pair[0] == cid for s in m.samples]
        uncertainty = 1.0
        if own:
            last = own[-1]
            total = sum(last.votes.values())
            if total:
                uncertainty = 1.0 - last.votes[last.winner] / total
        return Evidence(
            candidate_id=cid,
            rank_value=float(survived),
            uncertainty=uncertainty,
            n_valid=n_valid,
            n_invalid=len(samples) - n_valid,
            detail={
                "rounds_survived": survived,
                "wins": sum(m.winner == cid for m in own),
                "matches": [m.to_dict() for m in own],
                "context_ids": list(context_ids),
                "replies": replies_detail(
                    sum(s["picked"] is not None for s in first),
                    len(first),
                    EXPECTED,
                    (s["raw"] for s in first if s["picked"] is None),
                ),
                "tokens": sum(int(s.get("tokens", 0)) for s in first),
            },
        )


__all__ = [
    "EXPECTED",
    "MARKERS",
    "PLACEHOLDERS",
    "Match",
    "PairwiseRPM",
    "collect_context",
    "describe",
    "estimate_tokens",
]
