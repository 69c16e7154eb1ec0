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

__all__ = [
    "FinalView",
    "NodeScores",
    "SubmissionView",
    "final_view",
    "selection_line",
    "submission_view",
    "transfer_warning",
]


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
    selection_score: float | None = None  # on the task's selection split (None: the task holds none out)


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
        num(record.selection_score),
    )


@dataclass(frozen=True)
class NodeScores:
    """One node's scores on each split: validation (what search saw), the selection split (None without one) and
    the hidden test (reporting only)."""

    node_id: str
    validation: float | None
    selection: float | None
    test: float | None


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
    # The search strategy's own pick with its scores, when a final selection (the selection split, or a judge's
    # ``final_selection``) returned another node; None when the returned node is the strategy's pick.
    strategy_pick: NodeScores | None = None

    @property
    def changed_pick(self) -> bool:
        """Whether the selection split overruled the strategy's pick."""
        held = self.held_out
        return held is not None and bool(held.winner) and held.winner != held.strategy_best

    @property
    def chosen_line(self) -> str | None:
        """How the selection split chose the final node, in one line (``selection_line``); None without one."""
        held = self.held_out
        if held is None:
            return None
        return selection_line(held.winner, held.strategy_best, len(held.pool), len(held.eligible))

    @property
    def transfer_warning(self) -> str | None:
        """One line when the validation gain did not transfer: the returned node beats the baseline on validation
        (what search optimised) but is worse on the hidden test; None otherwise or when a score is missing."""
        return transfer_warning(
            (self.baseline_score, self.baseline_test_score), (self.score, self.test_score), self.maximize
        )


def selection_line(winner: str | None, strategy_best: str | None, pool: int, eligible: int) -> str:
    """One line on how the final node was chosen on the selection split: which node, whether it is the search
    strategy's pick, and what was compared (``pool`` nodes considered: the best on validation and the baseline;
    ``eligible``: those no worse than the baseline on validation, compared on the selection split)."""
    split = "the selection split (training rows held out that search never saw)"
    if winner is None:
        return f"final node: the strategy's pick {strategy_best}; no node had a score on {split} to choose by"
    compared = (
        f"of the {pool} nodes considered (the best on validation and the baseline), {eligible} "
        f"{'was' if eligible == 1 else 'were'} no worse than "
        f"the baseline on validation, and {winner} scored best of them on {split}"
    )
    if winner == strategy_best:
        return f"final node: the strategy's pick {winner}, kept: {compared}"
    return f"final node: {winner}, not the strategy's pick {strategy_best}: {compared}"


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
        _strategy_pick(node_id, held_out, selection, rows, name),
    )


def _strategy_pick(
    returned: str | None,
    held_out: SelectionSplitChosen | None,
    selection: Mapping[str, Any] | None,
    rows: Mapping[str, Mapping[str, Any]],
    name: str | None,
) -> NodeScores | None:
    """The strategy's own pick and its scores when the run returned another node (``FinalView.strategy_pick``)."""
    pick = held_out.strategy_best if held_out is not None else (selection or {}).get("strategy_best")
    if not pick or pick == returned or pick not in rows:
        return None
    row = rows[pick]
    return NodeScores(str(pick), num(row.get("score")), _hidden(row, name), num(row.get("test_score")))


def _hidden(row: Mapping[str, Any], name: str | None) -> float | None:
    return num((row.get("test_metrics") or {}).get(name)) if name else None


def _maximize(row: Mapping[str, Any]) -> bool | None:
    """The metric's direction from a verified row: its fitness is the score oriented so that higher is better."""
    score, fitness = num(row.get("score")), num(row.get("fitness"))
    if score is None or fitness is None or score == 0:
        return None
    return fitness == score
