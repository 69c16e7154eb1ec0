"""The online audit of a run's screener: how well it predicts the outcomes the run paid for.

Only paid outcomes count: a candidate enters the audit when it was screened
*and* verified. The engine verifies the screener's choice (and, with
``engine.verify_uncertain``, the routed ones) and, with probability
``engine.audit_rate`` per expansion, one random screened-out candidate: that
one is charged like any verification and listed in the screening event's
``audited`` field. The ``adaptive`` screener's own audits (the random half of
each audited pair, ``screen/adaptive.py``) count as audits too. From these the
audit estimates, each with a percentile
bootstrap interval (``BOOTSTRAP`` resamples of the units named below, seeded,
so the same store gives the same numbers):

* ``pairwise``: among verified siblings (same screening) whose outcomes
  differ, the share of pairs the screener ranked in the order of their
  validation fitness (a failed child is below every OK one; two failed
  children, or equal fitnesses, are no pair). Unit: the pair. 0.5 is chance.
* ``advantage``: the selection advantage, the improve rate of the
  screener's first choice minus that of the audited candidate of the same
  screening (``outcome.reward_label``: a failed child is a loss). Unit: the
  screening with an audit. 0 means screening picks no better than chance.
* ``dir3``: three-way accuracy of the verdicts (``metrics.critic``), only
  where the screener gives verdicts (votes). Unit: the verified candidate.
* ``u_ece``: calibration of the uncertainty u = 1 - max vote: the
  count-weighted gap between mean u and the error rate of the plurality
  verdict, in ``U_BINS`` equal-width bins of u (0 is perfectly calibrated).
  Unit: the verified candidate with a verdict.

The candidates the screener chose are a biased sample (selection bias): only
``advantage`` uses the audits, the unbiased sample of its rejections, and
its interval is the one to trust when the others look good. The live
progress line shows an ``adaptive`` run's own evidence instead
(``audit_segment``: the concordance of its scores with paid labels and its
state), which the progress events carry. Limits: the
bootstrap resamples units independently, so pairs of one screening count as
independent; with fewer than 2 units an estimate has no interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from verifyless.events import Screened, ScreenerLearned
from verifyless.metrics.bootstrap import Estimate, bootstrap
from verifyless.metrics.critic import CriticRecord, critic_records_from_store, vote_uncertainty
from verifyless.node import Screening, Status
from verifyless.outcome import pair_outcome, reward_label

BOOTSTRAP = 1000
LEVEL = 0.95
U_BINS = 5

__all__ = [
    "ADAPTIVE_KEYS",
    "BOOTSTRAP",
    "Concordance",
    "Verdicts",
    "concordance",
    "Estimate",
    "ScreenerAudit",
    "SiblingOutcome",
    "adaptive_audit",
    "adaptive_line",
    "adaptive_state",
    "safety_net_state",
    "state_change_lines",
    "state_changes",
    "audit_from_store",
    "audit_line",
    "audit_segment",
    "estimate",
    "pairwise_hits",
    "selection_advantages",
    "u_calibration_gap",
]


@dataclass(frozen=True)
class SiblingOutcome:
    """One screened and verified candidate: its screening, rank, role and paid outcome.

    ``fitness`` is the oriented validation fitness (None for a failed child);
    ``improved`` is ``reward_label == "improve"`` (None when the parent has no
    fitness). ``role`` is ``chosen``, ``routed`` or ``audited``.
    """

    screening: int
    candidate_id: str
    rank: int
    role: str
    fitness: float | None
    improved: bool | None


@dataclass(frozen=True)
class Verdicts:
    """The screener's score (``Evidence.rank_value``) of each verified candidate, split by its paid label."""

    improved: tuple[float, ...] = ()
    other: tuple[float, ...] = ()

    @property
    def n(self) -> int:
        return len(self.improved) + len(self.other)

    def add(self, score: float, won: bool) -> Verdicts:
        if won:
            return Verdicts((*self.improved, score), self.other)
        return Verdicts(self.improved, (*self.other, score))


@dataclass(frozen=True)
class Concordance:
    """How often an improving pick outscored a non-improving one (ties one half), against chance 0.5.

    ``value`` is None without both labels; ``sd`` is its standard deviation under the null (scores independent
    of labels, Mann-Whitney with ties); ``units`` = min(n improved, n other) x the share of untied pairs, the
    evidence it is worth (0 when every pair is tied: a rank-only screener gives no verdict evidence).
    """

    value: float | None
    sd: float
    units: float
    n: int

    @property
    def z(self) -> float:
        return 0.0 if self.value is None or self.sd <= 0 else (self.value - 0.5) / self.sd

    def interval(self) -> tuple[float, float] | None:
        """value +- 1.96 sd (the null's sd), clipped to [0, 1]; None without a value."""
        if self.value is None:
            return None
        return max(0.0, self.value - 1.96 * self.sd), min(1.0, self.value + 1.96 * self.sd)


def concordance(verdicts: Verdicts) -> Concordance:
    """The concordance of scores with paid labels (``Concordance``), exact and deterministic."""
    pos, neg = np.asarray(verdicts.improved, float), np.sort(np.asarray(verdicts.other, float))
    n1, n0 = len(pos), len(neg)
    if n1 == 0 or n0 == 0:
        return Concordance(None, 0.0, 0.0, n1 + n0)
    below, upto = np.searchsorted(neg, pos, "left"), np.searchsorted(neg, pos, "right")
    ties = float(np.sum(upto - below))
    value = float(np.sum(below) + 0.5 * ties) / (n1 * n0)
    n = n1 + n0
    _, counts = np.unique(np.concatenate([pos, neg]), return_counts=True)
    correction = float(np.sum(counts**3 - counts)) / (n * (n - 1))
    var_u = n1 * n0 / 12.0 * ((n + 1) - correction)
    untied = 1.0 - ties / (n1 * n0)
    return Concordance(value, math.sqrt(max(var_u, 0.0)) / (n1 * n0), min(n1, n0) * untied, n)


@dataclass(frozen=True)
class ScreenerAudit:
    """The audit of one run (module docstring)."""

    screenings: int
    verified: int
    audits: int
    pairwise: Estimate
    advantage: Estimate
    dir3: Estimate
    u_ece: Estimate
    adaptive: Mapping[str, Any] | None = None  # an adaptive screener's last decision record (state, reason, p)

    def row(self) -> dict[str, Any]:
        """JSON-ready (``show --json``, the report and the dashboard)."""
        return {
            "screenings": self.screenings,
            "verified": self.verified,
            "audits": self.audits,
            "pairwise": self.pairwise.row(),
            "advantage": self.advantage.row(),
            "dir3": self.dir3.row(),
            "u_ece": self.u_ece.row(),
            "adaptive": None if self.adaptive is None else dict(self.adaptive),
        }


# ---------------------------------------------------------------------- estimators


def estimate(values: Sequence[float], *, statistic: Any = None, resamples: int = BOOTSTRAP, seed: int = 0) -> Estimate:
    """Mean of ``values`` (or ``statistic(array)``) with a percentile bootstrap interval at ``LEVEL``
    (``metrics.bootstrap.bootstrap``; ``value`` None for no values)."""
    return bootstrap(values, statistic, n_boot=resamples, level=LEVEL, seed=seed)


def _by_screening(siblings: Iterable[SiblingOutcome]) -> list[list[SiblingOutcome]]:
    """The siblings grouped by the screening that ranked them (groups in first-seen order)."""
    groups: dict[int, list[SiblingOutcome]] = {}
    for s in siblings:
        groups.setdefault(s.screening, []).append(s)
    return list(groups.values())


def pairwise_hits(siblings: Iterable[SiblingOutcome]) -> list[float]:
    """1.0 / 0.0 per ordered pair of verified siblings with different outcomes (module docstring)."""
    hits: list[float] = []
    for group in _by_screening(siblings):
        group = sorted(group, key=lambda s: s.rank)
        for i, hi in enumerate(group):
            for lo in group[i + 1 :]:
                a, b = _order_key(hi.fitness), _order_key(lo.fitness)
                if a != b:
                    hits.append(1.0 if a > b else 0.0)
    return hits


def selection_advantages(siblings: Iterable[SiblingOutcome]) -> list[float]:
    """Per screening with an audit: improved(first choice) - improved(audited), each in {-1, 0, 1}."""
    out: list[float] = []
    for group in _by_screening(siblings):
        chosen = [s for s in group if s.role == "chosen" and s.improved is not None]
        audited = [s for s in group if s.role == "audited" and s.improved is not None]
        if chosen and audited:
            first = min(chosen, key=lambda s: s.rank)
            out.extend(float(bool(first.improved)) - float(bool(a.improved)) for a in audited)
    return out


def u_calibration_gap(u: np.ndarray, wrong: np.ndarray, bins: int = U_BINS) -> float:
    """Count-weighted mean |mean u - error rate| over equal-width bins of u in [0, 1]."""
    which = np.minimum((np.asarray(u) * bins).astype(int), bins - 1)
    gap = 0.0
    for b in range(bins):
        mask = which == b
        if mask.any():
            gap += mask.sum() * abs(float(np.mean(u[mask])) - float(np.mean(wrong[mask])))
    return gap / len(u)


# ---------------------------------------------------------------------- from a stored run


def audit_from_store(store: Any, run_id: str, *, resamples: int = BOOTSTRAP) -> ScreenerAudit:
    """The audit of a stored run (``RunStoreProtocol``), from its screening events and node rows only."""
    siblings, screenings, audits = _siblings(store, run_id)
    records = [
        r for r in critic_records_from_store(store, run_id) if r.candidate_id in {s.candidate_id for s in siblings}
    ]
    return ScreenerAudit(
        screenings=screenings,
        verified=len(siblings),
        audits=audits,
        pairwise=estimate(pairwise_hits(siblings), resamples=resamples, seed=1),
        advantage=estimate(selection_advantages(siblings), resamples=resamples, seed=2),
        dir3=estimate([float(r.correct3) for r in records], resamples=resamples, seed=3),
        u_ece=_u_ece(records, resamples),
        adaptive=adaptive_state(store, run_id),
    )


ADAPTIVE_KEYS = (
    "state",
    "reason",
    "decided_at",
    "units",
    "canaries",
    "pairs",
    "mean",
    "p_no_help",
    "p_helps",
    "p_not_worse",
)


def adaptive_state(store: Any, run_id: str) -> dict[str, Any] | None:
    """An ``adaptive`` screener's state as its last ``screener_learn`` record has it; None for other screeners."""
    records = [e.record.adaptive for e in store.events(run_id, ScreenerLearned)]
    last = next((r for r in reversed(records) if r), None)
    return None if last is None else {k: last.get(k) for k in ADAPTIVE_KEYS}


def adaptive_line(audit: ScreenerAudit | Mapping[str, Any] | None) -> str:
    """``adaptive screening: <what the evidence says>`` for ``show``, the demo and the report; '' otherwise."""
    row = audit.row() if isinstance(audit, ScreenerAudit) else audit
    state = (row or {}).get("adaptive")
    return f"adaptive screening {state['state']}: {state['reason']}" if state else ""


def state_changes(record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The state decisions (trial -> on, -> off: ``state``, ``reason``, the evidence) an ``adaptive`` screener's
    ``screener_learn`` record holds; none for other records (k changes are not state changes)."""
    decisions = (record.get("adaptive") or {}).get("decisions") or ()
    return [d for d in decisions if "state" in d]


def state_change_lines(record: Mapping[str, Any]) -> list[str]:
    """``safety net: <reason>``, one per ``state_changes`` of the record, for the run's output."""
    return [f"safety net: {d['reason']}" for d in state_changes(record)]


def safety_net_state(state: Mapping[str, Any] | None) -> str:
    """The end-of-run table's cell for ``adaptive_state``: ``off since verification 6``, ``on since ...``,
    ``trial (no decision)``; '' for a run without an adaptive screener."""
    if not state:
        return ""
    if state.get("state") in ("on", "off") and state.get("decided_at") is not None:
        return f"{state['state']} since verification {state['decided_at']}"
    return f"{state.get('state')} (no decision)"


def audit_line(audit: ScreenerAudit | Mapping[str, Any]) -> str:
    """One line for the progress display and ``show``: pairwise, advantage, Dir-3, u calibration, audits."""
    row = audit.row() if isinstance(audit, ScreenerAudit) else audit

    def est(key: str, scale: float = 1.0, digits: int = 2) -> str:
        return Estimate(**row[key]).text(scale, digits)

    return (
        f"screener audit: pairwise {est('pairwise')} · advantage {est('advantage', digits=2)} · "
        f"Dir-3 {est('dir3', 100, 1)} · u gap {est('u_ece')} · audits {row['audits']} of {row['verified']} verified"
    )


def audit_segment(note: Mapping[str, Any] | None) -> str:
    """The live progress line's adaptive segment: `` · adaptive trial: +0.40 on 12 units (p 0.21 / 0.64)``.

    ``note`` is an ``adaptive`` screener's record (``Evidence.detail["adaptive"]`` of a screening, see
    ``screen/adaptive.py``): its state, the mean unit (right minus wrong; 0 is chance) and how many, the
    two anytime p values (no better than random / helps by the margin), what a trial still needs, and k
    where it chooses k. '' without a note; the progress line then shows ``LiveAudit``'s segment, which any
    screener gets.
    """
    if not note:
        return ""
    mean, n = note.get("mean"), note.get("units", 0)
    said = f"- on {n} units" if mean is None else f"{mean:+.2f} on {n} units"
    p = f" (p {float(note.get('p_no_help', 1.0)):.2f} / {float(note.get('p_helps', 1.0)):.2f})"
    needs = f", needs ~{note['needs']} more" if note.get("state") == "trial" and note.get("needs") else ""
    k = f", k {note['k']}" if note.get("k") is not None else ""
    return f" · adaptive {note.get('state', '?')}: {said}{p}{needs}{k}"


class LiveAudit:
    """The progress line's audit for any screener, from the live events alone (no store reads).

    ``screening(payload)`` remembers the score (``rank_value``) of each chosen candidate;
    ``verification(payload)`` adds a verdict unit once a remembered pick is paid: improved when its fitness
    beats its told parent's (strictly; a failed pick counts as not improved, as ``reward_label`` has it).
    ``segment()`` is the concordance of those scores with the paid labels (``concordance`` above; the
    first adaptive rule's evidence), with +- 1.96 sd of the null; '' until both labels have been seen. It is a
    live proxy: ``audit_from_store`` (``show``, the report) gives the full estimates with bootstrap CIs.
    """

    def __init__(self) -> None:
        self.picks: dict[str, float] = {}
        self.verdicts = Verdicts()

    def screening(self, payload: Mapping[str, Any]) -> None:
        evidence = payload.get("evidence") or {}
        for cid in payload.get("to_verify", payload.get("chosen", [])):
            if cid in evidence and evidence[cid].get("rank_value") is not None:
                self.picks[cid] = float(evidence[cid]["rank_value"])

    def verification(self, payload: Mapping[str, Any]) -> None:
        score, parent = self.picks.pop(str(payload.get("node_id")), None), payload.get("parent_fitness")
        if score is None or parent is None:
            return
        fitness = payload.get("fitness")
        self.verdicts = self.verdicts.add(score, fitness is not None and fitness > parent)

    def segment(self) -> str:
        c = concordance(self.verdicts)
        interval = c.interval()
        if c.value is None or interval is None:
            return ""
        return f" · audit: verdicts {c.value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}] n={c.n}"


def _siblings(store: Any, run_id: str) -> tuple[list[SiblingOutcome], int, int]:
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    run = store.run(run_id)
    tie = float((run.config or {}).get("tie_tolerance", 0.0))
    siblings: list[SiblingOutcome] = []
    screenings = audits = 0
    for ev in store.events(run_id, Screened):
        screening = ev.record.screening
        screenings += 1
        chosen, audited = set(screening.chosen), set(ev.record.audited) | adaptive_audit(screening)
        for rank, cid in enumerate(screening.ranking):
            row = rows.get(cid)
            if cid not in (ev.record.to_verify or screening.chosen) or row is None or not _verified(row):
                continue
            audits += cid in audited
            role = "audited" if cid in audited else "chosen" if cid in chosen else "routed"
            siblings.append(SiblingOutcome(ev.seq, cid, rank, role, row.get("fitness"), _improved(rows, row, tie)))
    return siblings, screenings, audits


def adaptive_audit(screening: Screening) -> set[str]:
    """The random half of an ``adaptive`` screener's audited pair (its second choice), when it audited."""
    chosen = list(screening.chosen)
    notes = [(ev.detail or {}).get("adaptive") or {} for ev in screening.evidence.values()]
    return {chosen[1]} if len(chosen) == 2 and any(n.get("audited") for n in notes) else set()


def _verified(row: Mapping[str, Any]) -> bool:
    """Whether the row's status is the outcome of a paid verification (``Status.verified``)."""
    try:
        return Status(row.get("status")).verified
    except ValueError:
        return False


def _improved(rows: Mapping[str, Mapping[str, Any]], row: Mapping[str, Any], tie: float) -> bool | None:
    parent = rows.get(row.get("parent_id") or "")
    parent_fit = None if parent is None else parent.get("fitness")
    label = reward_label(pair_outcome("", str(row["node_id"]), row.get("fitness"), parent_fit, tie=tie))
    return None if label is None else label == "improve"


def _order_key(fitness: float | None) -> float:
    return fitness if fitness is not None and math.isfinite(fitness) else -math.inf


def _u_ece(records: Sequence[CriticRecord], resamples: int) -> Estimate:
    kept = [r for r in records if r.pred3 is not None]
    if not kept:
        return Estimate(None, None, None, 0)
    u = np.array([vote_uncertainty(r.votes) for r in kept], dtype=float)
    wrong = np.array([not r.correct3 for r in kept], dtype=float)
    idx = [float(i) for i in range(len(kept))]
    return estimate(
        idx, statistic=lambda i: u_calibration_gap(u[i.astype(int)], wrong[i.astype(int)]), resamples=resamples, seed=4
    )
