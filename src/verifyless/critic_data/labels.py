"""Critic-dataset labels: infeasible counts and the per-parent label table (SPEC section 5).

The label rules themselves (relative Delta, three-way with the tie tolerance,
the five-level ladder, the failed-child rule) live in ``verifyless.outcome``,
the one implementation every learner uses. This module adds what only
datasets need: ``label_pairs`` labels harvested pairs and counts, per parent,
the infeasible children it left out (a failed child has no label); and
``label_table`` summarises labels by task and parent for the dataset card.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verifyless.outcome import FIVE, MIN_IMPROVING, THREE, ChildOutcome, label_children


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


__all__ = ["MIN_IMPROVING", "LabelResult", "label_pairs", "label_table"]
