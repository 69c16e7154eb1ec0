"""Critic-then-judge cascade (``cascade``): a cheap pointwise filter, then a pairwise knockout.

Stage 1, the pointwise critic, scores all N candidates and keeps the top
``m`` by its ranking (mean label rank, then its tie-break), skipping
candidates it confidently calls Lose (lose is their largest vote and
``u < route_threshold``). Stage 2, the pairwise tournament, plays a knockout
among those m and decides the order at the top. When every candidate is a
confident Lose, the critic's first candidate goes on alone (recorded as
``all_confident_lose``): the engine still verifies what it is allowed to, and
the critic's best guess is the least bad one. A single survivor needs no
tournament.

Ranking: the tournament's order of the m, then the other candidates in the
critic's order, the confident Loses last. ``uncertainty``, ``votes`` and
``labels`` are the critic's (vote-based, so the engine's "also verify
uncertain" option applies as for the critic). ``detail`` holds each stage's
evidence for the candidate (``critic``, ``tournament``), its ``stage``
(``tournament``, ``filtered`` or ``dropped-lose``), ``sent_to_tournament`` (the
m ids), ``stage_tokens`` (tokens each stage spent over the whole screening)
and ``replies`` / ``tokens`` summed over both stages (see ``screen/health``).

Pilot stage (``then: pilot``, critic -> pilot -> full): the second stage is
the ``pilot`` screener (screen/pilot.py, options under ``pilot``) instead of
the tournament: the critic's m run at the task's cheaper fidelity levels by
successive halving, and the pilot ranking decides the order at the top. The
detail keys keep their names (``tournament`` holds the second stage's
evidence, ``sent_to_tournament`` the m) and ``second_stage`` names it.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from verifyless.node import Candidate, Evidence, Screening
from verifyless.screen.base import ScreenContext, Screener, choose_top
from verifyless.screen.critic import PointwiseCritic
from verifyless.screen.health import replies_detail, watch
from verifyless.screen.options import HealthOptions
from verifyless.screen.ranking import route
from verifyless.screen.tournament import PairwiseRPM


def confident_lose(evidence: Evidence, threshold: float) -> bool:
    """Lose is the critic's largest vote and its uncertainty is below the routing threshold."""
    votes = evidence.votes or {}
    lose = votes.get("lose", 0.0)
    return lose > 0 and lose >= max(votes.values()) and not route(evidence.uncertainty, threshold)


def _tokens(screening: Screening | None) -> int:
    if screening is None:
        return 0
    return sum(int(ev.detail.get("tokens", 0)) for ev in screening.evidence.values())


def _merge_replies(*evidence: Evidence | None) -> dict[str, Any]:
    """Both stages' ``replies`` for one candidate; ``expected`` is that of the stage with an unparsed example."""
    entries = [(ev.detail.get("replies") or {}) for ev in evidence if ev is not None]
    failing = [r for r in entries if r.get("example")] or entries or [{}]
    return replies_detail(
        sum(int(r.get("parsed", 0)) for r in entries),
        sum(int(r.get("total", 0)) for r in entries),
        str(failing[0].get("expected", "")),
        [str(r["example"]) for r in failing if r.get("example")],
    )


class CascadeOptions(HealthOptions):
    """Options of screener ``cascade`` (``CriticThenJudge``)."""

    m: int = Field(4, ge=1, description="candidates the critic passes on to the tournament")
    drop_confident_lose: bool = Field(
        True,
        description="never pass on a candidate the critic confidently calls "
        "Lose (lose is its top vote and u < engine.uncertainty_threshold)",
    )
    critic: dict[str, Any] = Field(default_factory=dict, description="options of the critic stage (as for 'critic')")
    tournament: dict[str, Any] = Field(default_factory=dict, description="options of the tournament stage")
    then: Literal["tournament", "pilot"] = Field(
        "tournament", description="the second stage: a pairwise tournament, or pilots at cheaper fidelity levels"
    )
    pilot: dict[str, Any] = Field(default_factory=dict, description="options of the pilot stage (then: pilot)")


class CriticThenJudge:
    """The cascade screener; see the module docstring."""

    def __init__(
        self, critic: PointwiseCritic, tournament: PairwiseRPM | Screener, options: CascadeOptions | None = None
    ) -> None:
        """Built from its options whole (``CascadeOptions``; their stage specs were built into ``critic`` and
        ``tournament`` by the registry); the reply-health limits there watch ``health`` (``screen/health.py``)."""
        self.critic = critic
        self.tournament = tournament
        self.stages = [critic, tournament]
        self.options = options or CascadeOptions()
        self.name = self.options.name or "cascade"
        self.health = watch(self)

    def shortlist(self, critic: Screening) -> tuple[list[str], list[str], bool]:
        """``(sent to the tournament, dropped as confident Lose, all were confident Lose)``."""
        threshold = self.critic.route_threshold
        dropped = [
            cid
            for cid in critic.ranking
            if self.options.drop_confident_lose and confident_lose(critic.evidence[cid], threshold)
        ]
        kept = [cid for cid in critic.ranking if cid not in dropped][: self.options.m]
        if kept or not critic.ranking:
            return kept, dropped, False
        return [critic.ranking[0]], [cid for cid in dropped if cid != critic.ranking[0]], True

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        seeds = (ctx.rng.getrandbits(64), ctx.rng.getrandbits(64))  # both drawn before any await
        critic = await self.critic.screen(dataclasses.replace(ctx, rng=random.Random(seeds[0])), candidates)
        sent, dropped, all_lose = self.shortlist(critic)
        by_id = {c.id: c for c in candidates}
        judged: Screening | None = None
        top = list(sent)
        if len(sent) >= 2:
            judged = await self.tournament.screen(
                dataclasses.replace(ctx, rng=random.Random(seeds[1])), [by_id[cid] for cid in sent]
            )
            top = list(judged.ranking)
        ranking = (
            top
            + [c for c in critic.ranking if c not in top and c not in dropped]
            + [c for c in dropped if c not in top]
        )
        stage_tokens = {"critic": _tokens(critic), "tournament": _tokens(judged)}
        evidence = {
            cid: self._evidence(cid, ranking, critic, judged, sent, dropped, stage_tokens, all_lose) for cid in ranking
        }
        return choose_top(self.name, ranking, evidence, self.options.n_verify, ctx, started)

    @staticmethod
    def _evidence(
        cid: str,
        ranking: list[str],
        critic: Screening,
        judged: Screening | None,
        sent: list[str],
        dropped: list[str],
        stage_tokens: dict[str, int],
        all_lose: bool,
    ) -> Evidence:
        c_ev = critic.evidence[cid]
        t_ev = judged.evidence.get(cid) if judged is not None else None
        stage = "tournament" if cid in sent else "dropped-lose" if cid in dropped else "filtered"
        return Evidence(
            candidate_id=cid,
            rank_value=float(len(ranking) - ranking.index(cid)),
            labels=c_ev.labels,
            votes=dict(c_ev.votes),
            uncertainty=c_ev.uncertainty,
            n_valid=c_ev.n_valid + (t_ev.n_valid if t_ev else 0),
            n_invalid=c_ev.n_invalid + (t_ev.n_invalid if t_ev else 0),
            detail={
                "stage": stage,
                "critic": c_ev.to_dict(),
                "tournament": t_ev.to_dict() if t_ev is not None else None,
                "sent_to_tournament": list(sent),
                "second_stage": judged.screener if judged is not None else None,
                "all_confident_lose": all_lose,
                "stage_tokens": dict(stage_tokens),
                "replies": _merge_replies(c_ev, t_ev),
                "tokens": int(c_ev.detail.get("tokens", 0)) + (int(t_ev.detail.get("tokens", 0)) if t_ev else 0),
            },
        )


__all__ = ["CriticThenJudge", "confident_lose"]
