"""The node a run returned: its validation outcome, the hidden test score (reporting only), the final
selection and the ensemble submission, when the run made one.

Pure reads of a run store (same rules as ``verifyless.report.views.runs``); the hidden test score is only here
and on node pages, never in curves, rounds or the tree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verifyless.events import Finalised, FinalSelected, SelectionSplitChosen, Submitted
from verifyless.report.text import num, number
from verifyless.store.protocol import RunStoreProtocol

__all__ = ["FinalView", "SubmissionView", "final_view", "submission_view", "transfer_warning"]


def _best(rows: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    ok = [r for r in rows if r.get("fitness") is not None]
    return max(ok, key=lambda r: r["fitness"]) if ok else None


@dataclass(frozen=True)
class SubmissionView:
    """The top-K ensemble submission (MCGS, ``submit_ensemble``) a run made after choosing its final node.

    ``members``: the nodes asked for, best first; ``combined``: those whose re-run worked and went into the
    combination (``combine``, e.g. mean); ``seconds``: the evaluator seconds it was charged; ``test_score``:
    hidden, reporting only.
    """

    members: tuple[str, ...]
    combined: tuple[str, ...]
    combine: str
    status: str
    reason: str
    score: float | None
    test_score: float | None
    seconds: float
    beats_final: bool | None = None  # validation: better than the final node (None: unknown, e.g. an older run)


def submission_view(record: Submitted) -> SubmissionView:
    """A ``submission`` event's record as a ``SubmissionView``."""
    return SubmissionView(
        tuple(str(m) for m in record.members),
        tuple(str(m) for m in record.combined),
        record.combine,
        record.status,
        record.reason,
        num(record.score),
        num(record.test_score),
        num(record.seconds) or 0.0,
        record.beats_final if isinstance(record.beats_final, bool) else None,
    )


@dataclass(frozen=True)
class FinalView:
    """The node the run returned, its validation outcome, and the hidden test score (reporting only)."""

    node_id: str | None
    stopped: str
    score: float | None
    metrics: Mapping[str, Any]
    test_score: float | None
    test_metrics: Mapping[str, Any]
    baseline_score: float | None
    baseline_test_score: float | None
    selection: Mapping[str, Any] | None = None
    submission: SubmissionView | None = None  # the ensemble submission, when the run made one
    maximize: bool | None = None  # the metric's direction, read from the baseline's oriented fitness (None: unknown)
    # The task's selection split (hidden from search): its metric, the returned node's and the baseline's score on
    # it, and the ``selection_split`` choice (pool, scores, winner, strategy_best) when the run made one.
    selection_metric: str | None = None
    selection_score: float | None = None
    baseline_selection_score: float | None = None
    held_out: SelectionSplitChosen | None = None

    @property
    def changed_pick(self) -> bool:
        """Whether the selection split overruled the strategy's pick."""
        held = self.held_out
        return held is not None and bool(held.winner) and held.winner != held.strategy_best

    @property
    def transfer_warning(self) -> str | None:
        """One line when the validation gain did not transfer: the returned node beats the baseline on validation
        (what search optimised) but is worse on the hidden test; None otherwise or when a score is missing."""
        return transfer_warning(
            (self.baseline_score, self.baseline_test_score), (self.score, self.test_score), self.maximize
        )


def transfer_warning(
    baseline: tuple[float | None, float | None], final: tuple[float | None, float | None], maximize: bool | None
) -> str | None:
    """The warning of ``FinalView.transfer_warning`` from (validation, hidden test) pairs of the baseline and the
    returned node."""
    (base_val, base_test), (val, test) = baseline, final
    if maximize is None or base_val is None or base_test is None or val is None or test is None:
        return None
    sign = 1.0 if maximize else -1.0
    if sign * (val - base_val) <= 0 or sign * (test - base_test) >= 0:
        return None
    worse = f", {abs(test - base_test) / abs(base_test):.0%} worse" if base_test else ""
    return (
        f"the validation gain did not transfer: the returned node beats the baseline on validation "
        f"({number(base_val, 6)} -> {number(val, 6)}) but is worse on the hidden test ({number(base_test, 6)} -> "
        f"{number(test, 6)}{worse}); it may overfit the validation split: check it before you use it"
    )


def final_view(store: RunStoreProtocol, run_id: str) -> FinalView:
    """From the ``final`` event (or, while running, the best validation node so far)."""
    final: Finalised | None = None
    selection = None
    submission = None
    held_out = None
    for ev in store.events(run_id, Finalised, FinalSelected, Submitted, SelectionSplitChosen):
        match ev.record:
            case Finalised() as record:
                final = record
            case Submitted() as record:
                submission = submission_view(record)
            case SelectionSplitChosen() as record:
                held_out = record
            case FinalSelected() as record:
                selection = {
                    "winner": record.winner,
                    "pool": list(record.pool),
                    "points": dict(record.points),
                    "strategy_best": record.strategy_best,
                    "matches": len(record.matches),
                }
    rows = {r["node_id"]: r for r in store.node_rows(run_id)}
    node_id = final.node_id if final else (_best(rows.values()) or {}).get("node_id")
    row = rows.get(node_id or "", {})
    root = rows.get("root", {})
    name = (final.selection_metric if final else None) or (held_out.metric if held_out else None)
    return FinalView(
        node_id,
        final.stopped if final else "(running: best so far)",
        num(row.get("score")),
        dict(row.get("metrics") or {}),
        num(row.get("test_score")),
        dict(row.get("test_metrics") or {}),
        num(root.get("score")),
        num(root.get("test_score")),
        selection,
        submission,
        _maximize(root),
        name,
        _hidden(row, name),
        _hidden(root, name),
        held_out,
    )


def _hidden(row: Mapping[str, Any], name: str | None) -> float | None:
    return num((row.get("test_metrics") or {}).get(name)) if name else None


def _maximize(row: Mapping[str, Any]) -> bool | None:
    """The metric's direction from a verified row: its fitness is the score oriented so that higher is better."""
    score, fitness = num(row.get("score")), num(row.get("fitness"))
    if score is None or fitness is None or score == 0:
        return None
    return fitness == score
