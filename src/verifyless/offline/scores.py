"""Normalised task scores, applied at reporting time only (never inside search).

Two schemes, both taking raw metric values plus the task's ``Metric`` and
``Anchors``; a failed run (score None or NaN) normalises to 0 in both.

* **AIRS-style** (``airs_score``): ``phi(s) = -log10(|s - s_opt|)`` and
  ``NS = (phi(s) - phi(s_min)) / (phi(s_sota) - phi(s_min))`` with
  ``s_opt = anchors.bound`` and ``s_sota = anchors.sota`` (falling back to
  ``anchors.reference`` when no SOTA is recorded). ``s_min`` is, as AIRS-Bench
  defines it, the worst score observed across all the agents compared on the
  task (``worst_observed``; ``bench compare --scheme airs`` passes it per
  task); ``anchors.floor`` stands in only for a score normalised on its own. The log distance to the optimum makes the last steps towards
  the optimum count as much as the first ones. A score exactly at the
  optimum would give phi = inf, so ``|s - s_opt|`` is floored at ``eps``
  (1e-12). NS is not clipped: below 0 means worse than the floor, above 1
  better than SOTA (``clip=True`` clips to [0, 1]).
* **Bounded** (``bounded_score``): piecewise linear on oriented values,
  floor -> 0, reference -> 0.5, bound -> 1, clipped to [0, 1]. Without a
  reference it is one line from floor to bound; without a bound the
  floor-to-reference slope continues past the reference (then clipped).
  Direction-aware: for a minimised metric a lower raw value is higher.

Missing anchors a scheme needs raise ``TaskError`` naming the anchors to add
to ``task.yaml``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from verifyless.errors import TaskError
from verifyless.task.base import Anchors, Metric

EPS = 1e-12


def _failed(s: float | None) -> bool:
    return s is None or not math.isfinite(float(s))


def phi(s: float, s_opt: float, eps: float = EPS) -> float:
    """-log10 of the distance to the optimum (distance floored at ``eps``)."""
    return -math.log10(max(abs(float(s) - float(s_opt)), eps))


def airs_score(
    s: float | None, anchors: Anchors, *, clip: bool = False, eps: float = EPS, s_min: float | None = None
) -> float:
    """AIRS-Bench normalised score of one raw value (0 for a failed run).

    ``s_min``: the worst score observed across the agents compared (``worst_observed``); None: ``anchors.floor``.
    """
    s_sota = anchors.sota if anchors.sota is not None else anchors.reference
    floor = anchors.floor if s_min is None else s_min
    if anchors.bound is None or floor is None or s_sota is None:
        raise TaskError(
            "the AIRS normalised score needs anchors bound (optimum), sota (or reference) and the worst observed "
            f"score (or the floor anchor); got {anchors}; add them under 'anchors:' in task.yaml"
        )
    if _failed(s):
        return 0.0
    lo, hi = phi(floor, anchors.bound, eps), phi(s_sota, anchors.bound, eps)
    if hi == lo:
        raise TaskError(
            f"the worst score ({floor}) and sota ({s_sota}) are equally far from the optimum; "
            "the AIRS scale is undefined: fix the anchors in task.yaml"
        )
    ns = (phi(s, anchors.bound, eps) - lo) / (hi - lo)  # type: ignore[arg-type]
    return min(1.0, max(0.0, ns)) if clip else ns


def bounded_score(s: float | None, anchors: Anchors, metric: Metric) -> float:
    """Piecewise-linear score in [0, 1]: floor -> 0, reference -> 0.5, bound -> 1 (0 for a failed run)."""
    if anchors.floor is None or (anchors.reference is None and anchors.bound is None):
        raise TaskError(
            "the bounded normalised score needs anchors floor and at least one of reference or bound; "
            f"got {anchors}; add them under 'anchors:' in task.yaml"
        )
    if _failed(s):
        return 0.0
    x = metric.orient(float(s))  # type: ignore[arg-type]
    floor = metric.orient(anchors.floor)
    points = [(floor, 0.0)]
    if anchors.reference is not None:
        points.append((metric.orient(anchors.reference), 0.5))
    if anchors.bound is not None:
        points.append((metric.orient(anchors.bound), 1.0))
    if any(b[0] <= a[0] for a, b in zip(points, points[1:], strict=False)):
        raise TaskError(
            f"anchors {anchors} are not ordered floor < reference < bound in the metric's direction "
            f"({metric.direction}); fix them in task.yaml"
        )
    if x <= floor:
        return 0.0
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    if anchors.bound is not None:
        return 1.0
    (x0, y0), (x1, y1) = points
    return min(1.0, y1 + (y1 - y0) * (x - x1) / (x1 - x0))


Scheme = Literal["bounded", "airs", "raw"]


def worst_observed(scores: Sequence[float | None], metric: Metric) -> float | None:
    """The worst finite raw score in ``scores`` in the metric's direction (AIRS-Bench's s_min; None: none ran)."""
    ok = [float(v) for v in scores if v is not None and math.isfinite(float(v))]
    return min(ok, key=metric.orient) if ok else None


def normalize(
    s: float | None, metric: Metric, anchors: Anchors, scheme: Scheme = "bounded", *, s_min: float | None = None
) -> float:
    """One raw score on the chosen scheme; ``raw`` returns the oriented value (NaN when failed).

    ``s_min`` is the AIRS scheme's worst observed score (``worst_observed`` over every agent on the task).
    """
    if scheme == "bounded":
        return bounded_score(s, anchors, metric)
    if scheme == "airs":
        return airs_score(s, anchors, s_min=s_min)
    if scheme == "raw":
        return math.nan if _failed(s) else metric.orient(float(s))  # type: ignore[arg-type]
    raise ValueError(f"unknown normalisation scheme {scheme!r}; use bounded, airs or raw")


def normalize_all(
    scores: Sequence[float | None], metric: Metric, anchors: Anchors, scheme: Scheme = "bounded"
) -> list[float]:
    return [normalize(s, metric, anchors, scheme) for s in scores]


def best_scheme(anchors: Anchors) -> Scheme:
    """The richest scheme the anchors support: bounded, else raw (AIRS only when asked for)."""
    if anchors.floor is not None and (anchors.reference is not None or anchors.bound is not None):
        return "bounded"
    return "raw"


__all__ = [
    "EPS",
    "Scheme",
    "airs_score",
    "best_scheme",
    "bounded_score",
    "normalize",
    "normalize_all",
    "phi",
    "worst_observed",
]
