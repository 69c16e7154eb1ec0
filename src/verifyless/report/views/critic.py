"""Critic calibration of one run: critic predictions joined with execution outcomes, and the screener's audit.

A thin read over ``verifyless.metrics.critic`` (the numbers) and ``verifyless.screen.audit`` (the online
audit); audits (candidates verified although the screener did not choose them) are listed apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verifyless.events import Screened
from verifyless.metrics.critic import breakdown, calibration, critic_metrics, critic_records_from_store
from verifyless.outcome import FIVE, THREE
from verifyless.screen.audit import ScreenerAudit, audit_from_store
from verifyless.store.protocol import RunStoreProtocol

__all__ = ["AuditRow", "CriticView", "critic_view", "screener_audit_view"]


@dataclass(frozen=True)
class AuditRow:
    candidate_id: str
    predicted: str | None
    truth: str
    votes: Mapping[str, float]


@dataclass(frozen=True)
class CriticView:
    """Critic predictions joined with execution outcomes (see ``verifyless.metrics.critic``)."""

    n: int
    metrics: Mapping[str, Any]
    by_screener: Mapping[str, Mapping[str, Any]]
    labels3: tuple[str, ...]
    confusion3: tuple[tuple[int, ...], ...]
    labels5: tuple[str, ...]
    confusion5: tuple[tuple[int, ...], ...] | None
    bins: tuple[tuple[float, float, int, float | None, float | None], ...]
    ece: float | None
    brier: float | None
    audits: tuple[AuditRow, ...] = field(default_factory=tuple)


def _matrix(m: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(x) for x in row) for row in m)


def critic_view(store: RunStoreProtocol, run_id: str) -> CriticView | None:
    """None when no screened-and-verified candidate has a critic verdict (e.g. random screening).

    Audits (candidates verified although the screener did not choose them) are listed apart: they are the
    unbiased sample of the critic's rejections.
    """
    records = critic_records_from_store(store, run_id)
    if not records:
        return None
    m = critic_metrics(records)
    cal = calibration(records)
    audited = {cid for ev in store.events(run_id, Screened) for cid in ev.record.audited}
    audits = tuple(
        AuditRow(r.candidate_id, r.pred3, r.true3, dict(r.votes)) for r in records if r.candidate_id in audited
    )
    return CriticView(
        n=m.n,
        metrics=m.row(),
        by_screener={k: v.row() for k, v in breakdown(records).items()},
        labels3=THREE,
        confusion3=_matrix(m.confusion3),
        labels5=FIVE,
        confusion5=_matrix(m.confusion5) if m.confusion5 is not None else None,
        bins=tuple((b.low, b.high, b.count, b.mean_predicted, b.fraction_improve) for b in cal.bins),
        ece=cal.ece,
        brier=cal.brier,
        audits=audits,
    )


def screener_audit_view(store: RunStoreProtocol, run_id: str) -> ScreenerAudit | None:
    """The online audit of the run's screener (``screen/audit.py``); None before the first screening."""
    audit = audit_from_store(store, run_id)
    return audit if audit.screenings else None
