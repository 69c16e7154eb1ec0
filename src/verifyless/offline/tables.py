"""Markdown tables for the measurement library.

Each function returns a GitHub-flavoured markdown table (a string ending in a
newline). ``table_rows`` is the shared form the CLI also prints with rich:
a header list and rows of already formatted cells.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from verifyless.metrics.critic import AurocPoint, CriticMetrics, RoutePoint
from verifyless.offline.compare import Estimate, Reach
from verifyless.offline.selection import SelectionSummary
from verifyless.outcome import FIVE, THREE


def fmt(value: Any, digits: int = 3, percent: bool = False) -> str:
    """A table cell: None/NaN as an em dash, floats rounded (as percentages when asked)."""
    if value is None:
        return "—"
    if isinstance(value, Estimate):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            return "—"
        return f"{100 * value:.1f}" if percent else f"{value:.{digits}f}"
    return str(value)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table; cells are formatted with ``fmt`` and pipes escaped."""

    def cell(v: Any) -> str:
        return (v if isinstance(v, str) else fmt(v)).replace("|", "\\|")

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


CRITIC_HEADERS = ["group", "n", "invalid", "Improve acc %", "Dir-3 %", "F1 %", "5-Ladder %", "n (5-level)"]


def critic_rows(groups: Mapping[str, CriticMetrics]) -> list[list[str]]:
    return [
        [
            name,
            fmt(m.n),
            fmt(m.n_invalid),
            fmt(m.improve_accuracy, percent=True),
            fmt(m.dir3, percent=True),
            fmt(m.f1, percent=True),
            fmt(m.ladder5, percent=True),
            fmt(m.n_ladder),
        ]
        for name, m in groups.items()
    ]


def critic_table(groups: Mapping[str, CriticMetrics]) -> str:
    """Headline critic metrics (percent) per group (overall, per stratum, per task)."""
    return markdown_table(CRITIC_HEADERS, critic_rows(groups))


def confusion_table(matrix: np.ndarray, labels: Sequence[str] | None = None) -> str:
    """Rows = true label, columns = predicted label (+ invalid)."""
    labels = list(labels or (THREE if matrix.shape[0] == 3 else FIVE))
    headers = ["true \\ predicted", *labels, "invalid"]
    return markdown_table(headers, [[lab, *map(int, row)] for lab, row in zip(labels, matrix, strict=False)])


def auroc_rows(points: Sequence[AurocPoint]) -> list[list[str]]:
    return [[fmt(p.k), fmt(p.auroc), fmt(p.std), fmt(p.n)] for p in points]


def auroc_table(points: Sequence[AurocPoint]) -> str:
    return markdown_table(["k", "AUROC", "std", "records"], auroc_rows(points))


def routing_rows(points: Sequence[RoutePoint]) -> list[list[str]]:
    return [
        [
            fmt(p.threshold, 2),
            fmt(p.routed_fraction, percent=True),
            fmt(p.error_recall, percent=True),
            fmt(p.n_errors),
            fmt(p.kept_accuracy, percent=True),
        ]
        for p in points
    ]


def routing_table(points: Sequence[RoutePoint]) -> str:
    return markdown_table(["T", "routed %", "error recall %", "errors", "accuracy of kept %"], routing_rows(points))


SELECTION_HEADERS = [
    "selector",
    "pools",
    "advantage",
    "normalised (rand 0, oracle 1)",
    "regret",
    "top-1 %",
    "pairwise %",
    "pairs (dropped)",
]


def selection_rows(summaries: Mapping[str, SelectionSummary]) -> list[list[str]]:
    return [
        [
            name,
            fmt(s.n_pools),
            fmt(s.advantage, 4),
            fmt(s.normalized),
            fmt(s.regret, 4),
            fmt(s.top1, percent=True),
            fmt(s.pairwise.accuracy, percent=True),
            f"{s.pairwise.n_pairs} ({s.pairwise.n_dropped})",
        ]
        for name, s in summaries.items()
    ]


def selection_table(summaries: Mapping[str, SelectionSummary]) -> str:
    return markdown_table(SELECTION_HEADERS, selection_rows(summaries))


def arm_rows(scores: Mapping[str, Estimate]) -> list[list[str]]:
    return [[arm, fmt(e.value), fmt(e.low), fmt(e.high), fmt(e.n)] for arm, e in scores.items()]


def arm_table(scores: Mapping[str, Estimate], level: float = 0.95) -> str:
    """Final normalised score per arm with its bootstrap interval."""
    pct = f"{100 * level:g}%"
    return markdown_table(["arm", "final score", f"{pct} low", f"{pct} high", "runs"], arm_rows(scores))


def poi_rows(poi: Mapping[tuple[str, str], Estimate]) -> list[list[str]]:
    return [[a, b, fmt(e.value), fmt(e.low), fmt(e.high)] for (a, b), e in poi.items()]


def poi_table(poi: Mapping[tuple[str, str], Estimate]) -> str:
    """Probability of improvement P(A > B) with the task-stratified interval."""
    return markdown_table(["A", "B", "P(A > B)", "low", "high"], poi_rows(poi))


def reach_rows(rows: Sequence[tuple[str, str, str, Sequence[Reach]]]) -> list[list[str]]:
    out = []
    for task, a, b, reaches in rows:
        got = [r for r in reaches if r.verifications is not None]
        out.append(
            [
                task,
                a,
                b,
                fmt(reaches[0].target if reaches else None, 4),
                f"{len(got)}/{len(reaches)}",
                fmt(float(np.median([r.verifications for r in got])) if got else None, 1),
                fmt(float(np.median([r.seconds for r in got])) if got else None, 1),
            ]
        )
    return out


def reach_table(rows: Sequence[tuple[str, str, str, Sequence[Reach]]]) -> str:
    """Per task: how many runs of A reached B's final best, and the median verifications / seconds it took."""
    return markdown_table(
        ["task", "A", "B", "target (B final)", "reached", "median verifications", "median seconds"], reach_rows(rows)
    )


__all__ = [
    "arm_table",
    "auroc_table",
    "confusion_table",
    "critic_table",
    "fmt",
    "markdown_table",
    "poi_table",
    "reach_table",
    "routing_table",
    "selection_table",
]
