"""Live progress of one run: what a polling view needs to know whether anything changed, and an ETA.

``progress`` is incremental: given its previous result for the same run it reads only the events committed
since. Pure reads of a run store, frozen records of plain values.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from verifyless.events import (
    EventRecord,
    LlmCalled,
    RoundStarted,
    RunStatusChanged,
    Screened,
    StatusChanged,
    Told,
    Verified,
)
from verifyless.report.text import redact
from verifyless.report.views.runs import run_row
from verifyless.store.protocol import RunStoreProtocol

__all__ = ["ETA_WINDOW", "Progress", "eta_seconds", "progress"]


@dataclass(frozen=True)
class Progress:
    """What a live view needs to know whether anything changed and what to print."""

    run_id: str
    status: str
    last_seq: int
    verifications: int
    cap: int | None
    best_score: float | None
    best_node: str | None
    rounds: int
    n_nodes: int
    recent: tuple[tuple[int, str, str, str], ...]  # (seq, kind, node id, short text), newest first
    verified_at: tuple[float, ...] = ()  # commit times of the last ETA_WINDOW paid verifications, oldest first
    eta_s: float | None = None  # seconds until the verification cap at the recent pace; None when unknown


ETA_WINDOW = 8


def eta_seconds(verified_at: Sequence[float], done: int, cap: int | None, status: str) -> float | None:
    """Seconds until ``cap`` verifications at the pace of the recent ones, or None when it cannot be told.

    The pace is the mean gap between the last ``ETA_WINDOW`` verification commits, so a resumed run is not
    slowed by the time it lay dead. Unknown (None) without a cap, before two verifications, or once the run
    is no longer running. A run also stops on other caps (rounds, evaluator seconds, tokens): the estimate
    is an upper bound for those.
    """
    if cap is None or status != "running" or len(verified_at) < 2:
        return None
    pace = (verified_at[-1] - verified_at[0]) / (len(verified_at) - 1)
    return max(0, cap - done) * max(0.0, pace)


def progress(store: RunStoreProtocol, run_id: str, recent: int = 8, since: Progress | None = None) -> Progress:
    """The run's live state; with ``since`` (an earlier result for the same run) only newer events are read."""
    row = run_row(store, run_id)
    last, rounds = (since.last_seq, since.rounds) if since else (0, 0)
    tail = list(reversed(since.recent)) if since else []
    verified_at = list(since.verified_at) if since else []
    for ev in store.events(run_id, kinds=None, after=last):
        last = ev.seq
        if ev.charge is not None and ev.charge.verifications > 0:  # paid ones only: a reuse is instant
            verified_at = [*verified_at, ev.ts][-ETA_WINDOW:]
        if ev.kind in _QUIET:
            continue
        record = ev.record
        if isinstance(record, RoundStarted):
            rounds = max(rounds, int(record.round or 0))
        tail.append((ev.seq, ev.kind, ev.node_id or "", _event_line(record)))
        tail = tail[-recent:]
    return Progress(
        run_id,
        row.status,
        last,
        row.verifications,
        row.cap,
        row.best_score,
        row.best_node,
        rounds,
        row.n_nodes,
        tuple(reversed(tail)),
        tuple(verified_at),
        eta_seconds(verified_at, row.verifications, row.cap, row.status),
    )


# not in the tail (too many: they would push everything else out), nor parsed
_QUIET = frozenset(t.KIND for t in (LlmCalled, Told))


def _event_line(record: EventRecord) -> str:
    """One short line about an event: a verification's status and score, a screening's pick, a status, else the
    record's payload as JSON (redacted, cut at 160 characters)."""
    match record:
        case Verified(verification=v):
            return f"{v.status.value} {v.score if v.score is not None else ''}".strip()
        case Screened() as screened:
            return f"{screened.screening.screener} chose {', '.join(map(str, screened.to_verify))}"
        case StatusChanged(status=status):
            return status.value
        case RunStatusChanged(status=status):
            return str(status)
    text = json.dumps(redact(record.payload()), default=str, ensure_ascii=False)
    return text if len(text) < 160 else text[:157] + "..."
