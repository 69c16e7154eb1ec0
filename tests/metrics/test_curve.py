"""The one best-so-far fold (``verifyless.metrics.curve``): what sets the best, in which order, and the seconds."""

from __future__ import annotations

import math

from verifyless.events import Verified
from verifyless.metrics.curve import best_so_far, verification_seconds
from verifyless.node import Status, Verification


def _v(fitness: float | None, status: Status = Status.OK, seconds: tuple[float, float, float] = (1.0, 0.5, 0.25)):
    run, score, overhead = seconds
    return Verified(
        Verification(status, score=fitness, run_seconds=run, score_seconds=score, overhead_seconds=overhead),
        fitness,
    )


def test_non_finite_and_failed_verifications_never_set_the_best():
    steps = list(
        best_so_far(
            [
                ("a", _v(math.nan), None),
                ("b", _v(math.inf), None),
                ("c", _v(-math.inf), None),
                ("d", _v(5.0, Status.FAILED), None),
                ("e", _v(None), None),
            ]
        )
    )
    assert [s.best_node for s in steps] == [None] * 5
    assert all(math.isnan(s.best_fitness) for s in steps)
    after = list(best_so_far([("a", _v(1.0), None), ("b", _v(math.inf), None), ("c", _v(math.nan), None)]))
    assert [s.best_node for s in after] == ["a", "a", "a"] and after[-1].best_fitness == 1.0


def test_order_counts_and_a_tie_keeps_the_earlier_node():
    steps = list(best_so_far([("a", _v(1.0), None), ("b", _v(3.0), None), ("c", _v(3.0), None), ("d", _v(2.0), None)]))
    assert [s.x for s in steps] == [1, 2, 3, 4]
    assert [s.node_id for s in steps] == ["a", "b", "c", "d"]
    assert [s.best_node for s in steps] == ["a", "b", "b", "b"]
    assert [s.best_fitness for s in steps] == [1.0, 3.0, 3.0, 3.0]
    assert steps[2].best is steps[1].verification
    reverse = list(
        best_so_far([("d", _v(2.0), None), ("c", _v(3.0), None), ("b", _v(3.0), None), ("a", _v(1.0), None)])
    )
    assert [s.best_node for s in reverse] == ["d", "c", "c", "c"]


def test_seconds_are_the_charge_else_run_score_and_overhead():
    assert verification_seconds(_v(1.0), 7.0) == 7.0
    assert verification_seconds(_v(1.0), 0.0) == 0.0  # charged nothing (a reused result) is not "uncharged"
    assert verification_seconds(_v(1.0), None) == 1.75
    steps = list(best_so_far([("a", _v(1.0), 2.0), ("b", _v(None, Status.FAILED), None), ("c", _v(0.5), 4.0)]))
    assert [s.seconds for s in steps] == [2.0, 3.75, 7.75]
