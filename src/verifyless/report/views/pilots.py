"""Cheap evidence of one run, for the report and the dashboard: pilot rounds and what smoke runs saved.

Read from the store only (``events``): ``pilot_run`` and ``smoke`` events
(ledger/pilots.py), the ``rounds`` record a ``pilot`` screening keeps on its
first candidate's evidence, and the paid ``verification`` events.

What a smoke run saved is an estimate, stated as such: each smoke stop (a
crash or contract violation at the smoke level) avoided one full
verification, priced at the median seconds of the run's paid full
verifications; ``net_saved_seconds`` subtracts every smoke run's seconds,
passed ones included (None while the run paid no full verification).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from verifyless.events import LowFidelityRan, Screened, SmokeRan, Verified
from verifyless.node import Status
from verifyless.store.protocol import RunStoreProtocol

__all__ = ["LowFidelityView", "PilotLevel", "low_fidelity_view"]

# ledger/pilots.py SMOKE_STOPS (the ledger sits beside report/, not below it)
_STOP_VALUES = frozenset(s.value for s in (Status.FAILED, Status.INVALID_METRIC, Status.OOM, Status.CONTRACT_VIOLATION))


@dataclass(frozen=True)
class PilotLevel:
    """One level of one pilot screening: how many candidates ran there and how many went up."""

    round: int
    level: str
    piloted: int
    survivors: int


@dataclass(frozen=True)
class LowFidelityView:
    """A run's pilot and smoke runs: counts, seconds, pilot rounds per level and the estimated seconds saved."""

    pilot_runs: int
    pilot_seconds: float
    levels: tuple[PilotLevel, ...]
    smoke_runs: int
    smoke_stops: int
    smoke_seconds: float
    full_seconds_median: float | None
    saved_seconds: float | None
    net_saved_seconds: float | None

    @property
    def empty(self) -> bool:
        """True when the run ran no pilot and no smoke run (the report then leaves the section out)."""
        return not (self.pilot_runs or self.smoke_runs)


def low_fidelity_view(store: RunStoreProtocol, run_id: str) -> LowFidelityView:
    """The run's pilots (count, seconds, rounds level by level) and smoke runs (stops, estimated saving)."""
    pilots, smokes, full, levels = [], [], [], []
    for ev in store.events(run_id, LowFidelityRan, SmokeRan, Verified, Screened):
        match ev.record:
            case SmokeRan() as smoke:  # before LowFidelityRan: a smoke run is one of its kind
                smokes.append((smoke.verification.status.value, _seconds(ev.charge)))
            case LowFidelityRan():
                pilots.append(_seconds(ev.charge))
            case Verified() if ev.charge is not None and ev.charge.verifications:
                full.append(float(ev.charge.evaluator_seconds))
            case Screened() as screened:
                levels += _pilot_levels(screened)
    stops = sum(1 for status, _ in smokes if status in _STOP_VALUES)
    smoke_seconds = sum(s for _, s in smokes)
    median = statistics.median(full) if full else None
    saved = None if median is None else stops * median
    return LowFidelityView(
        pilot_runs=len(pilots),
        pilot_seconds=sum(pilots),
        levels=tuple(levels),
        smoke_runs=len(smokes),
        smoke_stops=stops,
        smoke_seconds=smoke_seconds,
        full_seconds_median=median,
        saved_seconds=saved,
        net_saved_seconds=None if saved is None else saved - smoke_seconds,
    )


def _seconds(charge: Any) -> float:
    return float(charge.evaluator_seconds) if charge is not None else 0.0


def _pilot_levels(screened: Screened) -> list[PilotLevel]:
    """The ``rounds`` record of a pilot screening (on one candidate's evidence), as rows; [] for other screenings."""
    for evidence in (screened.screening.evidence or {}).values():
        rounds = (evidence.detail or {}).get("rounds")
        if rounds:
            r = int(screened.round or 0)
            return [PilotLevel(r, str(x["level"]), int(x["piloted"]), int(x["survivors"])) for x in rounds]
    return []
