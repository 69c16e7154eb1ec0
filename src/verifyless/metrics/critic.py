"""Critic metrics from (predicted label, true label) pairs (SPEC section 7).

A ``CriticRecord`` holds what a critic said about one verified candidate (its
k sampled five-way labels, hence three-way vote shares) and what execution
said (three-way label, and a parent-specific five-level label when the parent
has enough improving children; see ``verifyless.outcome``, the one label rule).
This module sits below ``data`` and ``offline`` (it imports only the outcome
records), so the critic benchmark, reports and offline replays share it.

Votes and uncertainty are computed exactly as the router sees them
(``vote_shares``, ``vote_uncertainty``; ``screen.critic`` builds its
``Evidence`` with the same two functions): shares over ALL k samples, an
unparsed critique being a vote for nothing, and u = 1 - max_y v_y. With 12
agreeing and 4 unparsed critiques of k = 16, u = 0.25, and the record routes
at T = 0.25 as the run does.

Aggregating k samples into one prediction: the three-way prediction is the
plurality of the votes, ties broken in the order improve, tie, lose; the
five-way prediction is the most frequent sampled label among those that agree
with the three-way prediction, ties broken in label order (BigWin first).
A record with no valid sample has no prediction (``pred3 is None``): it counts
as wrong in every accuracy, as a missed positive in F1 when the truth is
improve, and has uncertainty 1.

Metrics (all fractions in [0, 1]):

* ``improve_accuracy``: binary improve vs not-improve accuracy;
* ``dir3``: three-way accuracy;
* ``f1``: F1 of the improve class;
* ``ladder5``: exact five-way accuracy over records that have a five-level truth;
* confusion matrices: rows = true label, columns = predicted label plus a last
  ``invalid`` column for records without a prediction.

Uncertainty analysis: ``auroc_vs_k`` scores each record by its improve vote
share over k samples drawn without replacement from the stored samples
(seeded; records with fewer than k stored samples are left out at that k) and
reports the AUROC against "truly improves" (the share is over the k draws, an
unparsed draw voting for nothing); ``routing_curve`` gives, for each
threshold T, the fraction of records with u >= T (routed to verification) and
the share of all critic errors among them (error recall), u = 1 - max_y v_y.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from verifyless.events import Screened
from verifyless.outcome import FIVE, MIN_IMPROVING, THREE, label_outcomes, pair_outcome, to_three

KS: tuple[int, ...] = (1, 4, 8, 16, 32)
THRESHOLDS: tuple[float, ...] = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)


# ---------------------------------------------------------------------- records


@dataclass(frozen=True)
class CriticRecord:
    """One judged and verified candidate.

    ``samples``: the k sampled five-way labels in sampling order (None = a
    critique that did not parse). ``votes``: three-way shares over all k
    samples (``vote_shares``). ``delta``: signed relative improvement over the parent.
    """

    candidate_id: str
    true3: str
    pred3: str | None
    votes: Mapping[str, float] = field(default_factory=dict)
    true5: str | None = None
    pred5: str | None = None
    samples: tuple[str | None, ...] = ()
    n_valid: int = 0
    task: str = ""
    stratum: str = ""
    parent_id: str = ""
    delta: float = 0.0
    five_way: bool = True  # False: the screener predicts no five-level label (its 5-Ladder is N/A)

    @property
    def p_improve(self) -> float:
        """P(improve) estimated as the improve vote share (0 when nothing parsed)."""
        return float(self.votes.get("improve", 0.0))

    @property
    def uncertainty(self) -> float:
        """u = 1 - max_y v_y over all k samples (``vote_uncertainty``); 1.0 when nothing parsed."""
        return 1.0 if self.n_valid == 0 else vote_uncertainty(self.votes)

    @property
    def correct3(self) -> bool:
        return self.pred3 is not None and self.pred3 == self.true3


EPS = 1e-9  # u >= T compared with slack so that 1 - 12/16 >= 0.25 holds despite float rounding


def vote_shares(samples: Sequence[str | None]) -> dict[str, float]:
    """Three-way vote shares over ALL k samples: an unparsed one (None) is a vote for nothing.

    Five-way labels are collapsed first; all shares are 0 when nothing parsed
    (or k is 0). This is the router's count (``screen.critic``).
    """
    counts = Counter(to_three(s) for s in samples if s is not None)
    k = len(samples)
    return {d: counts[d] / k if k else 0.0 for d in THREE}


def vote_uncertainty(votes: Mapping[str, float]) -> float:
    """u = 1 - max_y v_y; 1.0 when no vote was cast at all."""
    if not votes or not any(votes.values()):
        return 1.0
    return 1.0 - max(votes.values())


def route(uncertainty: float, threshold: float) -> bool:
    """The routing rule: u >= T sends a candidate to verification (with 1e-9 slack for float rounding).

    ``screen.ranking.route`` re-exports this function (the engine, the critic and policy rewards use it),
    so the benchmark's routing curve routes exactly as a run does.
    """
    return uncertainty >= threshold - EPS


def votes_of(samples: Sequence[str | None]) -> dict[str, float]:
    """The record's vote shares: ``vote_shares`` (over all k, as the router counts)."""
    return vote_shares(samples)


def predict(samples: Sequence[str | None]) -> tuple[str | None, str | None]:
    """(three-way, five-way) prediction from sampled labels; see the module docstring for ties."""
    valid = [s for s in samples if s is not None]
    if not valid:
        return None, None
    votes = votes_of(valid)
    top = max(votes.values())
    pred3 = next(d for d in THREE if votes[d] == top)
    five = [s for s in valid if s in FIVE and to_three(s) == pred3]
    if not five:  # samples were three-way labels only
        return pred3, None
    counts = Counter(five)
    best = max(counts.values())
    return pred3, next(lab for lab in FIVE if counts.get(lab) == best)


def make_record(
    candidate_id: str, samples: Sequence[str | None], true3: str, true5: str | None = None, **extra: Any
) -> CriticRecord:
    """A record from the raw sampled labels (votes and predictions derived here)."""
    samples = tuple(samples)
    pred3, pred5 = predict(samples)
    return CriticRecord(
        candidate_id=candidate_id,
        true3=true3,
        pred3=pred3,
        votes=votes_of(samples),
        true5=true5,
        pred5=pred5,
        samples=samples,
        n_valid=sum(s is not None for s in samples),
        **extra,
    )


def record_from_evidence(
    evidence: Mapping[str, Any], true3: str, true5: str | None = None, **extra: Any
) -> CriticRecord | None:
    """A record from an ``Evidence.to_dict()``; None when the screener gave no verdicts (e.g. random).

    Uses ``detail["sample_labels"]`` (every sample, invalid as None) when
    present, else ``labels`` (valid samples) plus ``n_invalid`` unparsed ones,
    else the stored ``votes``.
    """
    detail = evidence.get("detail") or {}
    if isinstance(detail, Mapping) and detail.get("scoring") == "label-probs":
        return record_from_label_probs(evidence, true3, true5, **extra)
    samples = detail.get("sample_labels") if isinstance(detail, Mapping) else None
    if not samples and evidence.get("labels"):
        samples = [*evidence["labels"], *[None] * int(evidence.get("n_invalid") or 0)]
    cid = str(evidence.get("candidate_id", extra.pop("candidate_id", "")))
    if samples:
        return make_record(cid, samples, true3, true5, **extra)
    votes = {k: float(v) for k, v in (evidence.get("votes") or {}).items() if k in THREE}
    if not votes or not any(votes.values()):
        return None
    top = max(votes.values())
    pred3 = next(d for d in THREE if votes.get(d, 0.0) == top)
    return CriticRecord(cid, true3, pred3, votes, true5, None, (), int(evidence.get("n_valid") or 1), **extra)


def record_from_label_probs(
    evidence: Mapping[str, Any], true3: str, true5: str | None = None, **extra: Any
) -> CriticRecord | None:
    """A label-probability screener's record (``critic-probs``): scored on what it ranks and routes on.

    The prediction is the argmax of ``detail["label_probs"]`` (ties: improve, tie, lose order), never the
    sampled reasoning critiques it reads them after; ``votes`` are the probabilities, so ``uncertainty``
    is 1 - max P, the screener's own u. It predicts no five-level label: ``five_way`` is False and the
    5-Ladder is N/A. None when the evidence has no distribution.
    """
    detail = evidence.get("detail") or {}
    probs = {k: float(v) for k, v in (detail.get("label_probs") or evidence.get("votes") or {}).items() if k in THREE}
    if not probs or not any(probs.values()):
        return None
    top = max(probs.values())
    pred3 = next(d for d in THREE if probs.get(d, 0.0) == top)
    cid = str(evidence.get("candidate_id", extra.pop("candidate_id", "")))
    votes = {d: probs.get(d, 0.0) for d in THREE}
    return CriticRecord(cid, true3, pred3, votes, true5, None, (), 1, five_way=False, **extra)


def critic_records_from_store(
    store: Any, run_id: str, *, min_improving: int = MIN_IMPROVING, tolerance: float | None = None
) -> list[CriticRecord]:
    """Join every ``screening`` event's evidence with the later verification of that candidate.

    The truth is the three-way label (``verifyless.outcome.label3``) of the
    child's validation fitness against its parent's, with the run's own
    ``tie_tolerance`` unless ``tolerance`` is given (plus the five-level label
    when the parent has at least ``min_improving`` improving verified children
    in this run).
    Candidates that were never verified, that failed, or whose parent has no
    fitness are left out; so are screeners that produce no verdicts. The
    stratum of a record is the screener's name; the task is the run's task.
    """
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    run = store.run(run_id)
    tie = float((run.config or {}).get("tie_tolerance", 0.0)) if tolerance is None else tolerance
    pairs = []
    for nid, row in rows.items():
        parent = rows.get(row.get("parent_id") or "")
        if parent is not None:
            pairs.append(pair_outcome(parent["node_id"], nid, row.get("fitness"), parent.get("fitness"), tie=tie))
    outcomes = {o.child_id: o for o in label_outcomes(pairs, min_improving=min_improving)}
    task = run.task
    records: dict[str, CriticRecord] = {}
    for event in store.events(run_id, Screened):
        screening = event.record.screening
        for cid, ev in screening.evidence.items():
            out = outcomes.get(cid)
            if out is None:
                continue
            rec = record_from_evidence(
                {**ev.to_dict(), "candidate_id": cid},
                out.three,
                out.five,
                task=task,
                stratum=screening.screener,
                parent_id=out.parent_id,
                delta=out.delta,
            )
            if rec is not None:
                records[cid] = rec
    return list(records.values())


# ---------------------------------------------------------------------- accuracy metrics


def improve_accuracy(pred: Sequence[str | None], true: Sequence[str]) -> float:
    """Binary improve-vs-not accuracy; a missing prediction is wrong."""
    _same_length(pred, true)
    hits = [
        p is not None and (to_three(p) == "improve") == (to_three(t) == "improve")
        for p, t in zip(pred, true, strict=False)
    ]
    return _mean(hits)


def dir3_accuracy(pred: Sequence[str | None], true: Sequence[str]) -> float:
    """Three-way accuracy (five-way inputs are collapsed first)."""
    _same_length(pred, true)
    return _mean([p is not None and to_three(p) == to_three(t) for p, t in zip(pred, true, strict=False)])


def ladder5_accuracy(pred: Sequence[str | None], true: Sequence[str]) -> float:
    """Exact five-way accuracy."""
    _same_length(pred, true)
    return _mean([p is not None and p == t for p, t in zip(pred, true, strict=False)])


def f1_improve(pred: Sequence[str | None], true: Sequence[str]) -> float:
    """F1 of the improve class (scikit-learn's ``f1_score``: 2TP / (2TP + FP + FN)); 0 when there is no positive at all."""
    from sklearn.metrics import f1_score

    _same_length(pred, true)
    if not true:
        return 0.0
    said = np.array([p is not None and to_three(p) == "improve" for p in pred], dtype=bool)
    truth = np.array([to_three(t) == "improve" for t in true], dtype=bool)
    return float(f1_score(truth, said, labels=[True], zero_division=0.0))


def confusion_matrix(pred: Sequence[str | None], true: Sequence[str], labels: Sequence[str]) -> np.ndarray:
    """Counts with rows = true label, columns = predicted label, plus a last column for missing predictions."""
    _same_length(pred, true)
    index = {lab: i for i, lab in enumerate(labels)}
    out = np.zeros((len(labels), len(labels) + 1), dtype=int)
    for p, t in zip(pred, true, strict=False):
        if t not in index:
            raise ValueError(f"true label {t!r} is not one of {list(labels)}")
        out[index[t], index[p] if p is not None and p in index else len(labels)] += 1
    return out


@dataclass(frozen=True)
class CriticMetrics:
    """The four headline numbers, counts, and both confusion matrices (see ``confusion_matrix``)."""

    n: int
    n_invalid: int
    improve_accuracy: float
    dir3: float
    f1: float
    ladder5: float | None
    n_ladder: int
    confusion3: np.ndarray
    confusion5: np.ndarray | None

    def row(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "invalid": self.n_invalid,
            "improve_acc": self.improve_accuracy,
            "dir3": self.dir3,
            "f1": self.f1,
            "ladder5": self.ladder5,
            "n_ladder": self.n_ladder,
        }


def critic_metrics(records: Sequence[CriticRecord]) -> CriticMetrics:
    """Headline metrics over ``records`` (five-way ones over the records that have a five-level truth).

    Accuracies of an empty record list are NaN; ``ladder5`` is None (N/A) when no
    record has both a five-level truth and a screener that predicts five levels (``five_way``).
    """
    pred = [r.pred3 for r in records]
    true = [r.true3 for r in records]
    five = [r for r in records if r.true5 is not None and r.five_way]
    return CriticMetrics(
        n=len(records),
        n_invalid=sum(r.pred3 is None for r in records),
        improve_accuracy=improve_accuracy(pred, true),
        dir3=dir3_accuracy(pred, true),
        f1=f1_improve(pred, true),
        ladder5=ladder5_accuracy([r.pred5 for r in five], [r.true5 for r in five]) if five else None,  # type: ignore[misc]
        n_ladder=len(five),
        confusion3=confusion_matrix(pred, true, THREE),
        confusion5=confusion_matrix([r.pred5 for r in five], [r.true5 for r in five], FIVE) if five else None,  # type: ignore[misc]
    )


def breakdown(
    records: Sequence[CriticRecord], key: Callable[[CriticRecord], str] | str = "stratum"
) -> dict[str, CriticMetrics]:
    """Metrics per group; ``key`` is a record attribute name (``stratum``, ``task``) or a function."""
    get = (lambda r: str(getattr(r, key))) if isinstance(key, str) else key
    groups: dict[str, list[CriticRecord]] = {}
    for r in records:
        groups.setdefault(get(r), []).append(r)
    return {k: critic_metrics(v) for k, v in sorted(groups.items())}


# ---------------------------------------------------------------------- calibration


@dataclass(frozen=True)
class CalibrationBin:
    low: float
    high: float
    count: int
    mean_predicted: float | None  # mean P(improve) in the bin
    fraction_improve: float | None  # observed share of true improves in the bin


@dataclass(frozen=True)
class Calibration:
    """Reliability-diagram bins; ``ece`` = count-weighted |mean predicted - observed|; ``brier`` = mean squared error."""

    bins: tuple[CalibrationBin, ...]
    ece: float | None
    brier: float | None
    n: int


def calibration(records: Sequence[CriticRecord], n_bins: int = 10) -> Calibration:
    """Equal-width bins of P(improve) = improve vote share; records without a prediction are left out.

    ``brier`` is scikit-learn's ``brier_score_loss``; the bins are kept by hand (``calibration_curve`` drops
    empty bins, and the report draws every bin with its count).
    """
    from sklearn.metrics import brier_score_loss

    if n_bins < 1:
        raise ValueError("n_bins must be >= 1")
    kept = [r for r in records if r.pred3 is not None]
    p = np.array([r.p_improve for r in kept], dtype=float)
    y = np.array([r.true3 == "improve" for r in kept], dtype=float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    which = np.minimum(np.searchsorted(edges, p, side="right") - 1, n_bins - 1) if len(p) else np.array([], int)
    bins, ece = [], 0.0
    for b in range(n_bins):
        mask = which == b
        n = int(mask.sum())
        mp = float(p[mask].mean()) if n else None
        fy = float(y[mask].mean()) if n else None
        if n:
            ece += n * abs(mp - fy)  # type: ignore[operator]
        bins.append(CalibrationBin(float(edges[b]), float(edges[b + 1]), n, mp, fy))
    total = len(p)
    brier = float(brier_score_loss(y, p)) if total else None
    return Calibration(tuple(bins), ece / total if total else None, brier, total)


# ---------------------------------------------------------------------- uncertainty


def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve (Mann-Whitney U with mid-ranks for ties); None unless both classes occur.

    Kept by hand rather than scikit-learn's ``roc_auc_score``: the same number in exact arithmetic, but its
    trapezoid sum differs in the last bits for about a quarter of tied inputs, so this keeps every AUROC already
    reported bit-identical.
    """
    from scipy.stats import rankdata

    s = np.asarray(scores, dtype=float)
    y = np.asarray(positives, dtype=bool)
    if s.shape != y.shape:
        raise ValueError(f"scores and labels differ in length ({s.shape} vs {y.shape})")
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


@dataclass(frozen=True)
class AurocPoint:
    """AUROC at k samples: mean and spread over ``repeats`` seeded subsamples; ``n`` records used."""

    k: int
    auroc: float | None
    std: float | None
    n: int


def auroc_vs_k(
    records: Sequence[CriticRecord], ks: Sequence[int] = KS, *, repeats: int = 5, seed: int = 0
) -> list[AurocPoint]:
    """AUROC of the improve vote share over k subsampled stored samples, for each k (see module docstring)."""
    rng = random.Random(seed)
    out = []
    for k in ks:
        usable = [r for r in records if len(r.samples) >= k]
        values = []
        for _ in range(repeats if usable else 0):
            scores = []
            for r in usable:
                scores.append(vote_shares(rng.sample(r.samples, k))["improve"])
            value = auroc(scores, [r.true3 == "improve" for r in usable])
            if value is not None:
                values.append(value)
        out.append(
            AurocPoint(
                int(k),
                float(np.mean(values)) if values else None,
                float(np.std(values)) if values else None,
                len(usable),
            )
        )
    return out


@dataclass(frozen=True)
class RoutePoint:
    """At threshold T: share of records routed (u >= T), share of critic errors among them, accuracy of the rest."""

    threshold: float
    routed_fraction: float
    error_recall: float | None
    n_errors: int
    kept_accuracy: float | None


def routing_curve(records: Sequence[CriticRecord], thresholds: Sequence[float] = THRESHOLDS) -> list[RoutePoint]:
    """Error recall and fraction routed against T; an error is a wrong (or missing) three-way prediction."""
    n = len(records)
    errors = [not r.correct3 for r in records]
    n_err = sum(errors)
    out = []
    for t in thresholds:
        routed = [route(r.uncertainty, t) for r in records]
        caught = sum(e and rt for e, rt in zip(errors, routed, strict=False))
        kept = [not e for e, rt in zip(errors, routed, strict=False) if not rt]
        out.append(
            RoutePoint(
                float(t),
                sum(routed) / n if n else 0.0,
                caught / n_err if n_err else None,
                n_err,
                _mean(kept) if kept else None,
            )
        )
    return out


# ---------------------------------------------------------------------- helpers


def _mean(values: Iterable[bool | float]) -> float:
    vals = list(values)
    return float(sum(vals)) / len(vals) if vals else math.nan


def _same_length(a: Sequence, b: Sequence) -> None:
    if len(a) != len(b):
        raise ValueError(f"predicted and true labels differ in length ({len(a)} vs {len(b)})")


__all__ = [
    "EPS",
    "KS",
    "THRESHOLDS",
    "AurocPoint",
    "Calibration",
    "CalibrationBin",
    "CriticMetrics",
    "CriticRecord",
    "RoutePoint",
    "auroc",
    "auroc_vs_k",
    "breakdown",
    "calibration",
    "confusion_matrix",
    "critic_metrics",
    "critic_records_from_store",
    "dir3_accuracy",
    "f1_improve",
    "improve_accuracy",
    "ladder5_accuracy",
    "make_record",
    "predict",
    "record_from_evidence",
    "record_from_label_probs",
    "route",
    "routing_curve",
    "vote_shares",
    "vote_uncertainty",
    "votes_of",
]
