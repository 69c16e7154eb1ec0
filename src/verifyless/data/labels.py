"""Execution-derived labels for parent/child pairs (SPEC section 5).

Two label spaces:

* **Three-way** (``improve`` / ``tie`` / ``lose``): the child's validation
  fitness against its parent's. ``tolerance`` (default 0) widens "equal" to
  ``|Delta| <= tolerance`` for metrics with float noise.
* **Five-level, parent-specific** (``BigWin`` > ``MediumWin`` > ``SmallWin`` >
  ``Tie`` > ``Lose``): all executed children of one parent share the parent's
  mean ``mu_p`` and standard deviation ``sigma_p`` of Delta; each child gets
  ``z = (Delta - mu_p) / sigma_p`` and the FIRST rule that holds:

  ===========  ==========================================
  BigWin       Delta > 0 and (Delta > 0.25 or z > 2)
  MediumWin    Delta > 0 and (Delta > 0.10 or z > 1)
  SmallWin     Delta > 0 and z > 0.2
  Tie          Delta >= 0 or -0.2 <= z <= 0.2
  Lose         otherwise
  ===========  ==========================================

  A parent with fewer than ``min_improving`` (default 3) improving children
  (Delta > 0) gets no five-level labels (its children keep their three-way
  label). The five-level rules always use the paper's exact thresholds; the
  three-way ``tolerance`` does not change them.

Delta is the signed *relative* improvement ``(f_child - f_parent) / |f_parent|``
on oriented fitness (higher is better, so the sign already says "better").
When the parent's fitness is exactly 0 a relative change is undefined and the
absolute difference is used instead. Infeasible children (no fitness) get no
label at all. ``sigma_p`` is the population standard deviation (ddof=0, as an
empirical Gaussian fit); when it is 0 every z is 0.

This module is the one implementation of these rules: ``verifyless.offline.labels``
re-exports it for the measurement code. ``label_pairs`` additionally counts
the infeasible children it left out, and ``label_table`` summarises labels by
task and parent.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

THREE: tuple[str, ...] = ("improve", "tie", "lose")
FIVE: tuple[str, ...] = ("BigWin", "MediumWin", "SmallWin", "Tie", "Lose")
_FIVE_TO_THREE = {"BigWin": "improve", "MediumWin": "improve", "SmallWin": "improve", "Tie": "tie", "Lose": "lose"}

BIG_DELTA, MEDIUM_DELTA = 0.25, 0.10
BIG_Z, MEDIUM_Z, SMALL_Z, TIE_Z = 2.0, 1.0, 0.2, 0.2
MIN_IMPROVING = 3


def relative_delta(child_fitness: float, parent_fitness: float) -> float:
    """Signed relative improvement of a child over its parent (positive = better)."""
    diff = float(child_fitness) - float(parent_fitness)
    return diff if parent_fitness == 0 else diff / abs(float(parent_fitness))


def three_way(delta: float, tolerance: float = 0.0) -> str:
    """``improve`` if Delta > tolerance, ``lose`` if Delta < -tolerance, else ``tie``."""
    if delta > tolerance:
        return "improve"
    if delta < -tolerance:
        return "lose"
    return "tie"


def five_level(delta: float, z: float) -> str:
    """The first five-level rule (module table) that holds for this Delta and z."""
    if delta > 0 and (delta > BIG_DELTA or z > BIG_Z):
        return "BigWin"
    if delta > 0 and (delta > MEDIUM_DELTA or z > MEDIUM_Z):
        return "MediumWin"
    if delta > 0 and z > SMALL_Z:
        return "SmallWin"
    if delta >= 0 or -TIE_Z <= z <= TIE_Z:
        return "Tie"
    return "Lose"


def to_three(label: str | None) -> str | None:
    """Collapse a five-level label (or pass a three-way one through); None stays None."""
    if label is None:
        return None
    if label in _FIVE_TO_THREE:
        return _FIVE_TO_THREE[label]
    low = label.lower()
    if low in THREE:
        return low
    raise ValueError(f"unknown label {label!r}; expected one of {FIVE + THREE}")


def parent_five_levels(deltas: Sequence[float], *, min_improving: int = MIN_IMPROVING) -> list[str] | None:
    """Five-level labels for one parent's children (same order), or None if the parent is dropped.

    ``deltas`` are the Deltas of every executed (feasible) child of the parent.
    """
    values = [float(d) for d in deltas]
    if sum(d > 0 for d in values) < min_improving:
        return None
    mu = sum(values) / len(values)
    sigma = math.sqrt(sum((d - mu) ** 2 for d in values) / len(values))
    return [five_level(d, (d - mu) / sigma if sigma > 0 else 0.0) for d in values]


@dataclass(frozen=True)
class ChildOutcome:
    """One feasible child with its execution-derived labels (``five`` None when the parent was dropped)."""

    parent_id: str
    child_id: str
    delta: float
    three: str
    five: str | None = None


def label_children(
    pairs: Iterable[tuple[str, str, float | None, float | None]],
    *,
    min_improving: int = MIN_IMPROVING,
    tolerance: float = 0.0,
) -> list[ChildOutcome]:
    """Label ``(parent_id, child_id, child_fitness, parent_fitness)`` rows.

    Rows with a missing child or parent fitness (infeasible child, failed
    parent) are left out. Five-level labels are fitted per parent over all
    remaining children of that parent. Output keeps input order.
    """
    kept: list[tuple[str, str, float]] = []
    for parent_id, child_id, child_fit, parent_fit in pairs:
        if child_fit is None or parent_fit is None or not math.isfinite(child_fit) or not math.isfinite(parent_fit):
            continue
        kept.append((parent_id, child_id, relative_delta(child_fit, parent_fit)))
    by_parent: dict[str, list[int]] = {}
    for i, (parent_id, _, _) in enumerate(kept):
        by_parent.setdefault(parent_id, []).append(i)
    five: dict[int, str] = {}
    for idx in by_parent.values():
        labels = parent_five_levels([kept[i][2] for i in idx], min_improving=min_improving)
        if labels is not None:
            five.update(zip(idx, labels, strict=False))
    return [ChildOutcome(p, c, d, three_way(d, tolerance), five.get(i)) for i, (p, c, d) in enumerate(kept)]


@dataclass(frozen=True)
class LabelResult:
    """Labelled feasible children plus, per parent, how many infeasible children were left out."""

    outcomes: tuple[ChildOutcome, ...]
    infeasible: Mapping[str, int]

    def by_child(self) -> dict[str, ChildOutcome]:
        return {o.child_id: o for o in self.outcomes}


def label_pairs(
    pairs: Iterable[tuple[str, str, float | None, float | None]],
    *,
    min_improving: int = MIN_IMPROVING,
    tolerance: float = 0.0,
) -> LabelResult:
    """``label_children`` that also counts, per parent, the children it excluded as infeasible.

    A child is infeasible when its fitness is missing or not finite while its
    parent's fitness is known; pairs whose parent has no fitness are neither
    labelled nor counted.
    """
    rows = list(pairs)
    infeasible: Counter[str] = Counter()
    for parent_id, _, child_fit, parent_fit in rows:
        parent_ok = parent_fit is not None and math.isfinite(parent_fit)
        if parent_ok and (child_fit is None or not math.isfinite(child_fit)):
            infeasible[parent_id] += 1
    outcomes = label_children(rows, min_improving=min_improving, tolerance=tolerance)
    return LabelResult(tuple(outcomes), dict(infeasible))


def label_table(
    rows: Iterable[Mapping[str, Any]], infeasible: Mapping[tuple[str, str], int] | None = None
) -> list[dict[str, Any]]:
    """One summary row per (task, parent): child counts per three-way and five-level label.

    ``rows`` are example mappings with ``task``, ``parent_id``, ``label3`` and
    ``label5`` (None when the parent was dropped from the five-level pool); a
    row with a ``run_id`` is keyed by ``"<run_id>/<parent_id>"`` (node ids
    repeat across runs). ``infeasible`` maps (task, parent key) to excluded
    infeasible children.
    Output is sorted by task, then parent id; ``five_level`` says whether the
    parent is in the five-level pool.
    """
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        key = f"{row['run_id']}/{row['parent_id']}" if row.get("run_id") else str(row["parent_id"])
        groups.setdefault((str(row["task"]), key), []).append(row)
    keys = set(groups) | set(infeasible or {})
    table = []
    for task, parent in sorted(keys):
        members = groups.get((task, parent), [])
        three = Counter(str(r["label3"]) for r in members)
        five = Counter(str(r["label5"]) for r in members if r.get("label5") is not None)
        table.append(
            {
                "task": task,
                "parent_id": parent,
                "children": len(members),
                "infeasible": int((infeasible or {}).get((task, parent), 0)),
                **{lab: three.get(lab, 0) for lab in THREE},
                "five_level": bool(five),
                **{lab: five.get(lab, 0) for lab in FIVE},
            }
        )
    return table


__all__ = [
    "FIVE",
    "MIN_IMPROVING",
    "THREE",
    "ChildOutcome",
    "LabelResult",
    "five_level",
    "label_children",
    "label_pairs",
    "label_table",
    "parent_five_levels",
    "relative_delta",
    "three_way",
    "to_three",
]
