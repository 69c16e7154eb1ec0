"""Labels (SPEC section 5) and critic metrics (SPEC section 7) against hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from verifyless import outcome as L
from verifyless.metrics import critic as M

# ---------------------------------------------------------------------- labels


@pytest.mark.parametrize(
    "delta, z, expected",
    [
        (0.30, 0.0, "BigWin"),  # Delta > 0.25
        (0.01, 2.5, "BigWin"),  # z > 2
        (0.30, 1.5, "BigWin"),  # first rule wins over MediumWin
        (0.15, 0.0, "MediumWin"),  # Delta > 0.10
        (0.01, 1.5, "MediumWin"),  # z > 1
        (0.01, 0.5, "SmallWin"),  # Delta > 0 and z > 0.2
        (0.01, 0.1, "Tie"),  # improving but z <= 0.2: Tie through Delta >= 0
        (0.00, -3.0, "Tie"),  # Delta == 0 is a Tie whatever z
        (-0.05, -0.1, "Tie"),  # worse, but within the z band
        (-0.05, 0.2, "Tie"),  # band edge is inclusive
        (-0.05, -0.5, "Lose"),
        (-0.30, 0.5, "Lose"),  # z above the band but Delta < 0
    ],
)
def test_five_level_rule_order(delta, z, expected):
    assert L.five_level(delta, z) == expected


def test_relative_delta_is_oriented_and_relative():
    # RMSE 50 -> 45 on a minimised metric: fitness -50 -> -45, a 10% improvement.
    assert L.relative_delta(-45.0, -50.0) == pytest.approx(0.10)
    assert L.relative_delta(0.8, 0.5) == pytest.approx(0.6)
    assert L.relative_delta(0.3, 0.0) == pytest.approx(0.3)  # parent at 0: absolute difference
    assert [L.three_way(d) for d in (0.1, 0.0, -0.1)] == ["improve", "tie", "lose"]
    assert L.three_way(0.001, tolerance=0.01) == "tie"


def test_parent_five_levels_hand_computed():
    deltas = [-0.2, 0.0, 0.02, 0.04, 0.14]
    # mu = 0, sigma = sqrt(0.0616 / 5) = 0.1110; z = -1.80, 0, 0.18, 0.36, 1.26
    assert L.parent_five_levels(deltas) == ["Lose", "Tie", "Tie", "SmallWin", "MediumWin"]
    assert L.parent_five_levels(deltas, min_improving=4) is None
    assert L.parent_five_levels([0.1, 0.1, 0.1]) == ["Tie", "Tie", "Tie"]  # sigma 0 -> z 0; Delta < 0.25


def test_label_children_excludes_infeasible_and_fits_per_parent():
    rows = [
        ("p", "a", 1.3, 1.0),
        ("p", "b", 1.05, 1.0),
        ("p", "c", 1.02, 1.0),
        ("p", "d", 0.9, 1.0),
        ("p", "x", None, 1.0),  # infeasible child: no label
        ("q", "e", 2.2, 2.0),
        ("q", "f", 1.0, 2.0),  # only one improving child: no five-level labels
    ]
    out = {o.child_id: o for o in L.label_children(rows)}
    assert set(out) == {"a", "b", "c", "d", "e", "f"}
    assert out["a"].five == "BigWin" and out["a"].three == "improve"
    assert out["d"].three == "lose"
    assert out["e"].five is None and out["e"].three == "improve"
    assert L.to_three("MediumWin") == "improve" and L.to_three("Tie") == "tie"
    with pytest.raises(ValueError):
        L.to_three("Great")


# ---------------------------------------------------------------------- prediction from samples


def test_predict_plurality_and_ties():
    assert M.predict(["BigWin", "SmallWin", "SmallWin", "Lose"]) == ("improve", "SmallWin")
    assert M.predict(["Tie", "Lose"]) == ("tie", "Tie")  # tie broken improve > tie > lose
    assert M.predict(["BigWin", "MediumWin", "Lose", "Lose"]) == ("improve", "BigWin")
    assert M.predict([None, None]) == (None, None)
    rec = M.make_record("c", ["BigWin", None, "Lose", "Lose"], "lose")
    assert rec.n_valid == 3 and rec.pred3 == "lose"
    # shares over all k = 4, the unparsed critique voting for nothing (as the router counts; issue #21 gap 2)
    assert rec.votes["lose"] == pytest.approx(2 / 4) and rec.uncertainty == pytest.approx(2 / 4)
    assert M.make_record("d", [None], "lose").uncertainty == 1.0


def test_benchmark_uncertainty_is_the_routers() -> None:
    """12 agreeing and 4 unparsed critiques: the run routes on u = 0.25, and so must the benchmark."""
    from verifyless.screen.critic import evidence_from_critiques
    from verifyless.screen.ranking import route

    agree = "[IMPROVEMENT] improve --- r\n[WINTIER] big --- r"
    evidence = evidence_from_critiques("c", [agree] * 12 + ["I cannot decide."] * 4, threshold=0.25)
    record = M.record_from_evidence(evidence.to_dict(), "improve")
    assert evidence.uncertainty == pytest.approx(0.25) and route(evidence.uncertainty, 0.25)
    assert record is not None and record.uncertainty == pytest.approx(evidence.uncertainty)
    assert dict(record.votes) == pytest.approx(dict(evidence.votes))
    assert M.routing_curve([record], thresholds=(0.25,))[0].routed_fraction == 1.0
    from verifyless.engine import route as engine_route

    assert engine_route(record.uncertainty, 0.25) and not engine_route(record.uncertainty, 0.26)
    # the same from the valid labels alone plus the unparsed count (evidence without sample_labels)
    bare = {**evidence.to_dict(), "detail": {}}
    assert M.record_from_evidence(bare, "improve").uncertainty == pytest.approx(0.25)  # type: ignore[union-attr]


# ---------------------------------------------------------------------- accuracy metrics

PRED = ["improve", "improve", "tie", "lose", None, "lose"]
TRUE = ["improve", "lose", "tie", "improve", "improve", "lose"]


def test_accuracies_and_f1_hand_computed():
    # binary: right on 0 (imp/imp), 2 (tie/tie), 5 (lose/lose); wrong on 1, 3 and the missing 4
    assert M.improve_accuracy(PRED, TRUE) == pytest.approx(3 / 6)
    assert M.dir3_accuracy(PRED, TRUE) == pytest.approx(3 / 6)
    # TP = 1, FP = 1, FN = 2 (rows 3 and 4) -> F1 = 2 / (2 + 1 + 2)
    assert M.f1_improve(PRED, TRUE) == pytest.approx(2 / 5)
    assert M.f1_improve(["lose"], ["tie"]) == 0.0
    assert M.ladder5_accuracy(["BigWin", "Tie", "SmallWin"], ["BigWin", "Lose", "MediumWin"]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        M.dir3_accuracy(["tie"], [])


def test_f1_matches_sklearn():
    from sklearn.metrics import f1_score

    y_true = [t == "improve" for t in TRUE]
    y_pred = [p == "improve" for p in PRED]
    assert M.f1_improve(PRED, TRUE) == pytest.approx(f1_score(y_true, y_pred))


def test_confusion_matrices():
    cm = M.confusion_matrix(PRED, TRUE, L.THREE)
    expected = np.array(
        [
            # pred: improve tie lose invalid
            [1, 0, 1, 1],  # true improve
            [0, 1, 0, 0],  # true tie
            [1, 0, 1, 0],  # true lose
        ]
    )
    assert (cm == expected).all()
    cm5 = M.confusion_matrix(["BigWin", "Lose"], ["SmallWin", "Lose"], L.FIVE)
    assert cm5.shape == (5, 6) and cm5[2, 0] == 1 and cm5[4, 4] == 1 and cm5.sum() == 2


def _records():
    return [
        M.make_record("a", ["BigWin"] * 3 + ["Tie"], "improve", "BigWin", stratum="s1", task="t1"),
        M.make_record("b", ["SmallWin", "SmallWin", "Lose", "Lose"], "lose", "Lose", stratum="s1", task="t1"),
        M.make_record("c", ["Lose"] * 4, "lose", None, stratum="s2", task="t1"),
        M.make_record("d", ["Tie", "Tie", "Tie", "MediumWin"], "improve", "MediumWin", stratum="s2", task="t2"),
    ]


def test_critic_metrics_and_breakdown():
    recs = _records()
    m = M.critic_metrics(recs)
    # predictions: improve(BigWin), improve(SmallWin; tie broken to improve), lose, tie
    assert [r.pred3 for r in recs] == ["improve", "improve", "lose", "tie"]
    assert m.n == 4 and m.n_invalid == 0
    assert m.dir3 == pytest.approx(2 / 4)
    assert m.improve_accuracy == pytest.approx(2 / 4)
    assert m.f1 == pytest.approx(2 * 1 / (2 * 1 + 1 + 1))
    assert m.n_ladder == 3 and m.ladder5 == pytest.approx(
        1 / 3
    )  # a right; b (SmallWin vs Lose), d (Tie vs MediumWin) wrong
    by = M.breakdown(recs, "stratum")
    assert set(by) == {"s1", "s2"} and by["s2"].n == 2 and by["s2"].dir3 == pytest.approx(0.5)
    assert set(M.breakdown(recs, "task")) == {"t1", "t2"}


# ---------------------------------------------------------------------- calibration and uncertainty


def test_calibration_bins():
    recs = _records()  # P(improve) = 0.75, 0.5, 0, 0.25 ; truth improve = 1, 0, 0, 1
    cal = M.calibration(recs, n_bins=4)
    counts = [b.count for b in cal.bins]
    assert counts == [1, 1, 1, 1]
    assert cal.bins[3].mean_predicted == pytest.approx(0.75) and cal.bins[3].fraction_improve == 1.0
    assert cal.ece == pytest.approx((0.0 + 0.75 + 0.5 + 0.25) / 4)
    assert cal.brier == pytest.approx((0.25**2 + 0.5**2 + 0 + 0.75**2) / 4)


def test_auroc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(3)
    y = rng.random(60) < 0.4
    s = np.round(rng.random(60) + 0.3 * y, 1)  # rounding creates ties
    assert M.auroc(s, y) == pytest.approx(roc_auc_score(y, s))
    assert M.auroc([0.1, 0.2], [True, True]) is None


def test_auroc_vs_k_subsamples_seeded():
    recs = [M.make_record(f"p{i}", ["BigWin"] * 12 + ["Lose"] * 4, "improve") for i in range(5)]
    recs += [M.make_record(f"n{i}", ["Lose"] * 12 + ["BigWin"] * 4, "lose") for i in range(5)]
    recs += [M.make_record("short", ["Lose"] * 4, "lose")]
    pts = M.auroc_vs_k(recs, ks=(1, 4, 16, 32), repeats=4, seed=1)
    assert [p.n for p in pts] == [11, 11, 10, 0]
    assert pts[2].auroc == pytest.approx(1.0)  # all 16 samples: perfectly separated
    assert 0.5 < pts[0].auroc < 1.0  # one sample is a noisy vote
    assert pts[3].auroc is None
    assert M.auroc_vs_k(recs, ks=(1, 4), seed=1) == M.auroc_vs_k(recs, ks=(1, 4), seed=1)


def test_routing_curve_hand_computed():
    recs = _records()  # u = 0.25, 0.5, 0, 0.25 ; errors: b and d
    pts = {p.threshold: p for p in M.routing_curve(recs, thresholds=(0.0, 0.25, 0.5, 0.6))}
    assert pts[0.0].routed_fraction == 1.0 and pts[0.0].error_recall == 1.0
    assert pts[0.25].routed_fraction == pytest.approx(3 / 4) and pts[0.25].error_recall == 1.0
    assert pts[0.25].kept_accuracy == 1.0  # only c (correct) is kept
    assert pts[0.5].routed_fraction == pytest.approx(1 / 4) and pts[0.5].error_recall == pytest.approx(1 / 2)
    assert pts[0.6].routed_fraction == 0.0 and pts[0.6].error_recall == 0.0


# ---------------------------------------------------------------------- joining with the store


def _critique(label: str) -> str:
    tier = {"BigWin": "big", "MediumWin": "medium", "SmallWin": "small"}.get(label, "NA")
    word = "improve" if tier != "NA" else label.lower()
    return f"criteria compared.\n[IMPROVEMENT] {word} --- because\n[WINTIER] {tier} --- size"


def test_critic_records_from_store(tmp_path):
    from verifyless.node import Candidate, Idea, Operator, Screening, Status, Verification, content_hash
    from verifyless.screen.critic import evidence_from_critiques
    from verifyless.store import RunStore

    with RunStore(tmp_path / "runs.db") as st:
        run = st.create_run("toy", {"screener": {"name": "critic"}})

        def node(cid, parent, fitness, status=Status.OK):
            prog = f"x = {cid!r}\n"
            st.add_candidate(
                run,
                Candidate(
                    cid, parent, Operator.IMPROVE if parent else Operator.BASELINE, Idea(cid), prog, content_hash(prog)
                ),
                status="implemented",
            )
            if status is not None:
                v = Verification(status, score=fitness if status is Status.OK else None)
                st.add_verification(run, cid, v, fitness if status is Status.OK else None)

        node("root", None, 1.0)
        node("a", "root", 1.3)
        node("b", "root", 0.9)
        node("c", "root", None, status=Status.FAILED)  # infeasible: excluded
        node("d", "root", None, status=None)  # screened out: never verified
        ev = {
            cid: evidence_from_critiques(cid, [_critique(lab) for lab in labs])
            for cid, labs in {
                "a": ["BigWin", "BigWin", "Tie"],
                "b": ["SmallWin", "Lose", "Lose"],
                "c": ["Tie"],
                "d": ["Lose"],
            }.items()
        }
        scr = Screening("critic", ("a", "b", "c", "d"), ("a", "b", "c"), ev)
        st.append(run, "screening", {**scr.to_dict(), "to_verify": ["a", "b", "c"], "round": 1})
        recs = {r.candidate_id: r for r in M.critic_records_from_store(st, run)}
    assert set(recs) == {"a", "b"}
    assert recs["a"].true3 == "improve" and recs["a"].pred3 == "improve" and recs["a"].pred5 == "BigWin"
    assert recs["b"].true3 == "lose" and recs["b"].pred3 == "lose"
    assert recs["a"].true5 is None  # only one improving child: parent has no five-level labels
    assert recs["a"].stratum == "critic" and recs["a"].task == "toy"
    assert recs["a"].delta == pytest.approx(0.3)
    assert not math.isnan(M.critic_metrics(list(recs.values())).dir3)
