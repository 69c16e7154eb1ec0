"""Routing: which screened candidates are verified. Pure functions, no I/O.

In the critic paper the screener only *ranks* during search; routing (a
candidate whose critic votes disagree, ``u >= T``, gets a real verification
instead of the critic's reward) belongs to policy training. Search keeps it
as one explicit option, ``engine.verify_uncertain`` (off by default): when on,
candidates whose screener reported **vote-based** uncertainty ``u >= T`` are
verified too (the test itself is ``screen/ranking.route``). Evidence without votes (the random and agentic screeners, a
surrogate before it has learned) carries no uncertainty to route on, so it
never triggers routing, whatever its ``uncertainty`` field says.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from verifyless.node import Evidence, Screening
from verifyless.screen.ranking import route

__all__ = ["Routed", "has_votes", "select"]


def has_votes(evidence: Evidence | None) -> bool:
    """Whether ``evidence`` reports a vote distribution (the only uncertainty routing acts on)."""
    return evidence is not None and bool(evidence.votes)


@dataclass(frozen=True)
class Routed:
    """The outcome of routing one screening: what to verify, and why."""

    to_verify: tuple[str, ...]
    uncertain: tuple[str, ...]  # added by routing (u >= T)
    audited: tuple[str, ...]  # one screened-out candidate verified anyway (``engine.audit_rate``)


def select(
    screening: Screening, *, slots: int, verify_uncertain: bool, threshold: float, audit_rate: float, rng: random.Random
) -> Routed:
    """The screener's choice, plus routed and audited candidates, cut to ``slots`` verifications.

    ``rng`` is the expansion's generator; it is drawn from only when an audit
    is possible, so runs without audits make the same draws as before.
    """
    chosen = list(screening.chosen)
    uncertain: list[str] = []
    if verify_uncertain:
        uncertain = [
            cid
            for cid in screening.ranking
            if cid not in chosen
            and has_votes(screening.evidence.get(cid))
            and route(screening.evidence[cid].uncertainty, threshold)
        ]
    to_verify = chosen + uncertain
    rest = [cid for cid in screening.ranking if cid not in to_verify]
    audited: list[str] = []
    if rest and audit_rate > 0 and rng.random() < audit_rate * len(rest):
        audited = [rng.choice(rest)]
    to_verify = (to_verify + audited)[: max(0, slots)]
    return Routed(
        tuple(to_verify), tuple(c for c in uncertain if c in to_verify), tuple(a for a in audited if a in to_verify)
    )
