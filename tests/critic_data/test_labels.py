"""Label rules on hand-computed cases (critic paper, Appendix C.3; docs/design/critic-data.md)."""

from __future__ import annotations

import math

import pytest

from verifyless import outcome as O
from verifyless.critic_data import labels as L


def _pairs(parent: str, deltas, parent_fit: float = 1.0):
    """(parent, child, child fitness, parent fitness) rows whose relative Delta is ``deltas``."""
    return [
        (parent, f"{parent}{i}", None if d is None else parent_fit + d * abs(parent_fit), parent_fit)
        for i, d in enumerate(deltas)
    ]


# Parent A: mu = -0.08/6, sigma = 0.24438 (population); z = 1.282, 0.546, 0.259, 0.055, -0.150, -1.991.
#   0.30 > 0.25 -> BigWin; 0.12 > 0.10 -> MediumWin; 0.05 with z 0.259 > 0.2 -> SmallWin;
#   0.00 -> Tie (Delta >= 0); -0.05 with |z| 0.150 <= 0.2 -> Tie; -0.50 -> Lose.
# Parent B: only two improving children -> no five-level labels (three-way kept).
# Parent C: all children equal at 0 -> all tie, dropped from the five-level pool (no wins).
# Parent D: all children equal at +0.05 -> three-way improve, sigma 0 so z 0 -> five-level Tie.
# Parent E: a small Delta 0.08 is BigWin by z (= 3.0 > 2); 0.001 has z -0.31 -> not SmallWin -> Tie.
# Parent F: two infeasible children excluded and counted; three wins (0.2 is not > 0.25, but > 0.10: MediumWin).
CASES = [
    (
        "A",
        [0.30, 0.12, 0.05, 0.0, -0.05, -0.50],
        ["improve", "improve", "improve", "tie", "lose", "lose"],
        ["BigWin", "MediumWin", "SmallWin", "Tie", "Tie", "Lose"],
    ),
    ("B", [0.20, 0.10, 0.0, -0.10], ["improve", "improve", "tie", "lose"], [None] * 4),
    ("C", [0.0, 0.0, 0.0, 0.0], ["tie"] * 4, [None] * 4),
    ("D", [0.05, 0.05, 0.05], ["improve"] * 3, ["Tie"] * 3),
    ("E", [0.08, 0.001, 0.001, 0.001, 0, 0, 0, 0, 0, 0], ["improve"] * 4 + ["tie"] * 6, ["BigWin"] + ["Tie"] * 9),
    ("F", [0.4, None, 0.3, None, 0.2, -0.3], ["improve"] * 3 + ["lose"], ["BigWin", "BigWin", "MediumWin", "Lose"]),
]


@pytest.mark.parametrize("parent,deltas,three,five", CASES, ids=[c[0] for c in CASES])
def test_hand_computed_labels(parent, deltas, three, five) -> None:
    result = L.label_pairs(_pairs(parent, deltas))
    assert [o.three for o in result.outcomes] == three
    assert [o.five for o in result.outcomes] == five
    kept = [d for d in deltas if d is not None]
    assert [o.delta for o in result.outcomes] == pytest.approx(kept)
    assert result.infeasible.get(parent, 0) == sum(d is None for d in deltas)


def test_z_scores_of_parent_a_match_the_hand_computation() -> None:
    deltas = [0.30, 0.12, 0.05, 0.0, -0.05, -0.50]
    mu = sum(deltas) / 6
    sigma = math.sqrt(sum((d - mu) ** 2 for d in deltas) / 6)
    assert sigma == pytest.approx(0.24438, abs=1e-5)
    assert [round((d - mu) / sigma, 3) for d in deltas] == [1.282, 0.546, 0.259, 0.055, -0.15, -1.991]


def test_first_matching_rule_wins() -> None:
    # Delta 0.3 and z 5 satisfy BigWin, MediumWin and SmallWin: BigWin comes first.
    assert O.five_level(0.3, 5.0) == "BigWin"
    # Delta 0.11 with z 3: BigWin by z comes before MediumWin by Delta.
    assert O.five_level(0.11, 3.0) == "BigWin"
    # Negative Delta with z inside the tie band: Tie (the Tie rule precedes Lose).
    assert O.five_level(-0.4, 0.2) == "Tie"
    assert O.five_level(-0.4, -0.21) == "Lose"
    # Delta exactly 0 is never a win, whatever z says.
    assert O.five_level(0.0, 9.0) == "Tie"


def test_tie_tolerance_is_configurable_and_exact_by_default() -> None:
    rows = _pairs("P", [0.001, -0.001, 0.0, 0.5])
    assert [o.three for o in L.label_pairs(rows).outcomes] == ["improve", "lose", "tie", "improve"]
    assert [o.three for o in L.label_pairs(rows, tolerance=0.01).outcomes] == ["tie", "tie", "tie", "improve"]


def test_delta_is_oriented_for_minimised_metrics() -> None:
    # Minimised loss 2.0 -> 1.5 is oriented as fitness -2.0 -> -1.5: Delta = +0.25 (better).
    assert O.relative_delta(-1.5, -2.0) == pytest.approx(0.25)
    assert O.relative_delta(-2.5, -2.0) == pytest.approx(-0.25)
    assert O.relative_delta(0.5, 0.0) == 0.5  # parent fitness 0: absolute difference


def test_parent_without_fitness_is_neither_labelled_nor_counted() -> None:
    result = L.label_pairs([("X", "x1", 1.0, None), ("X", "x2", None, None)])
    assert result.outcomes == () and result.infeasible == {}


def test_label_table_by_task_and_parent() -> None:
    rows = []
    for parent, deltas, _, _ in CASES[:2]:
        for o in L.label_pairs(_pairs(parent, deltas)).outcomes:
            rows.append({"task": "t", "run_id": "r", "parent_id": o.parent_id, "label3": o.three, "label5": o.five})
    table = L.label_table(rows, {("t", "r/A"): 2})
    assert [(r["parent_id"], r["children"], r["infeasible"], r["five_level"]) for r in table] == [
        ("r/A", 6, 2, True),
        ("r/B", 4, 0, False),
    ]
    a = table[0]
    assert (a["improve"], a["tie"], a["lose"]) == (3, 1, 2)
    assert (a["BigWin"], a["MediumWin"], a["SmallWin"], a["Tie"], a["Lose"]) == (1, 1, 1, 2, 1)


def test_dataset_labels_use_the_one_rule() -> None:
    # data.labels keeps only dataset helpers; the rules are verifyless.outcome's, not a second copy.
    assert L.label_children is O.label_children
    assert not hasattr(L, "five_level") and not hasattr(L, "three_way")
