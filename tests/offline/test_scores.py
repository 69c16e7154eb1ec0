"""Scores, selection statistics, bootstrap / probability of improvement, curves, plots, tables and the bench CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm, pearsonr, spearmanr

from verifyless.errors import TaskError
from verifyless.metrics.bootstrap import bootstrap
from verifyless.offline import compare as C
from verifyless.offline import scores as S
from verifyless.offline import selection as SEL
from verifyless.screen.audit import estimate
from verifyless.task.base import Anchors, Metric

RMSE = Metric("val_rmse", "minimize", lower=0)
ACC = Metric("acc", "maximize", 0, 1)
DIABETES = Anchors(floor=73.82, reference=50.79, bound=0.0)


# ---------------------------------------------------------------------- normalised scores


def test_bounded_score_at_anchors_minimise():
    assert S.bounded_score(73.82, DIABETES, RMSE) == pytest.approx(0.0)
    assert S.bounded_score(50.79, DIABETES, RMSE) == pytest.approx(0.5)
    assert S.bounded_score(0.0, DIABETES, RMSE) == pytest.approx(1.0)
    assert S.bounded_score((73.82 + 50.79) / 2, DIABETES, RMSE) == pytest.approx(0.25)
    assert S.bounded_score(25.395, DIABETES, RMSE) == pytest.approx(0.75)
    assert S.bounded_score(90.0, DIABETES, RMSE) == 0.0  # worse than the floor
    assert S.bounded_score(None, DIABETES, RMSE) == 0.0  # failed run
    assert S.bounded_score(float("nan"), DIABETES, RMSE) == 0.0


def test_bounded_score_maximise_and_partial_anchors():
    a = Anchors(floor=0.5, reference=0.8, bound=1.0)
    assert [S.bounded_score(v, a, ACC) for v in (0.5, 0.8, 1.0, 0.9)] == pytest.approx([0, 0.5, 1, 0.75])
    no_bound = Anchors(floor=0.5, reference=0.7)
    assert S.bounded_score(0.8, no_bound, ACC) == pytest.approx(0.75)  # slope continues past the reference
    assert S.bounded_score(2.0, no_bound, ACC) == 1.0
    assert S.bounded_score(0.75, Anchors(floor=0.5, bound=1.0), ACC) == pytest.approx(0.5)
    with pytest.raises(TaskError, match="anchors"):
        S.bounded_score(0.7, Anchors(floor=0.5), ACC)
    with pytest.raises(TaskError, match="ordered"):
        S.bounded_score(0.7, Anchors(floor=0.9, reference=0.8), ACC)


def test_airs_score_at_anchors():
    a = Anchors(floor=0.5, bound=1.0, sota=0.99)
    assert S.phi(0.99, 1.0) == pytest.approx(2.0)
    assert S.airs_score(0.5, a) == pytest.approx(0.0)
    assert S.airs_score(0.99, a) == pytest.approx(1.0)
    # phi(0.9) = 1, phi(0.5) = log10(2): NS = (1 - 0.30103) / (2 - 0.30103)
    assert S.airs_score(0.9, a) == pytest.approx((1 - math.log10(2)) / (2 - math.log10(2)))
    assert S.airs_score(None, a) == 0.0
    assert S.airs_score(0.999, a) > 1.0 and S.airs_score(0.999, a, clip=True) == 1.0
    assert math.isfinite(S.airs_score(1.0, a))  # at the optimum: distance floored, no inf
    # minimised metric, SOTA falls back to the reference anchor
    assert S.airs_score(50.79, DIABETES) == pytest.approx(1.0)
    with pytest.raises(TaskError):
        S.airs_score(0.7, Anchors(floor=0.5))
    assert S.normalize(40.0, RMSE, DIABETES, "raw") == -40.0
    assert S.normalize_all([73.82, None], RMSE, DIABETES) == [pytest.approx(0.0), 0.0]


def test_airs_s_min_is_the_worst_score_observed_across_agents():
    """AIRS-Bench: s_min is the worst score any compared agent reached, not a fixed anchor (issue 47, item 7)."""
    a = Anchors(floor=0.5, bound=1.0, sota=0.99)
    finals = [0.9, 0.8, None, 0.95]  # a failed agent is not a score: it scores 0 and sets no s_min
    worst = S.worst_observed(finals, ACC)
    assert worst == 0.8 and S.worst_observed([None], ACC) is None
    assert S.airs_score(0.8, a, s_min=worst) == pytest.approx(0.0)  # the worst agent scores 0
    assert S.airs_score(0.99, a, s_min=worst) == pytest.approx(1.0)
    assert S.normalize(0.9, ACC, a, "airs", s_min=worst) == pytest.approx(
        (1 - math.log10(5)) / (2 - math.log10(5))  # phi(0.8) = log10(5)
    )
    assert S.worst_observed([40.0, 73.8, 55.0], RMSE) == 73.8  # minimised: the largest error is the worst


# ---------------------------------------------------------------------- selection statistics


def test_selection_advantage_and_normalised():
    pool = [1.0, 2.0, 3.0, 6.0]  # mean 3
    assert SEL.selection_advantage(6.0, pool) == pytest.approx(3.0)
    assert SEL.normalized_advantage(6.0, pool) == pytest.approx(1.0)  # oracle
    assert SEL.normalized_advantage(3.0, pool) == pytest.approx(0.0)  # the mean = random in expectation
    assert SEL.normalized_advantage(1.0, pool) == pytest.approx(-2 / 3)
    assert SEL.normalized_advantage(2.0, [2.0, 2.0]) == 0.0  # max == mean: defined as 0
    # the average pick over all candidates is exactly random
    assert np.mean([SEL.selection_advantage(s, pool) for s in pool]) == pytest.approx(0.0)


def test_pool_stats_fill_failures_and_summary():
    pools = [
        SEL.Pool("p1", {"a": 1.0, "b": 3.0, "c": None}, chosen="b", rank_values={"a": 0, "b": 2, "c": 1}),
        SEL.Pool("p2", {"a": 5.0, "b": 5.0}, chosen="a", rank_values={"a": 1, "b": 0}),
        SEL.Pool("p3", {"a": None}, chosen="a"),
    ]
    assert SEL.fill_failures(pools[0].scores) == {"a": 1.0, "b": 3.0, "c": 1.0}
    assert SEL.fill_failures(pools[0].scores, "drop") == {"a": 1.0, "b": 3.0}
    s = SEL.summarize_selection(pools)
    assert s.n_pools == 2 and s.n_degenerate == 1  # p3 has nothing that worked
    assert s.pools[0].advantage == pytest.approx(3.0 - 5.0 / 3)
    assert s.normalized == pytest.approx(1.0)  # p2 (all equal) is left out
    assert s.top1 == 1.0 and s.regret == 0.0


def test_pairwise_accuracy_drops_near_ties():
    pool = SEL.Pool(
        "p", {"a": 0.0, "b": 1.0, "c": 1.005, "d": 0.5}, rank_values={"a": 3.0, "b": 2.0, "c": 1.0, "d": 2.0}
    )
    res = SEL.pairwise_accuracy([pool])
    # range 1.005: (b, c) differ by 0.5% of it -> dropped. Of the other 5 pairs the selector prefers the
    # worse one in (a,b), (a,c), (a,d), (c,d) and ranks b and d equally (half a point).
    assert res.n_dropped == 1 and res.n_pairs == 5
    assert res.accuracy == pytest.approx(0.5 / 5)
    flipped = SEL.Pool("p", pool.scores, rank_values={k: -v for k, v in pool.rank_values.items()})
    assert SEL.pairwise_accuracy([flipped]).accuracy == pytest.approx(4.5 / 5)
    assert SEL.pairwise_accuracy([SEL.Pool("z", {"a": 1.0, "b": 1.0}, rank_values={"a": 1, "b": 0})]).accuracy is None


def test_correlation_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=20)
    y = 0.5 * x + rng.normal(size=20)
    c = SEL.correlation(x, y)
    assert c.pearson == pytest.approx(pearsonr(x, y).statistic)
    assert c.spearman == pytest.approx(spearmanr(x, y).statistic)
    assert SEL.correlation([1, 2], [3, 4]).pearson is None
    assert SEL.correlation([1, 1, 1], [3, 4, 5]).spearman is None


# ---------------------------------------------------------------------- bootstrap and probability of improvement


def test_bootstrap_ci_covers_the_mean_and_is_seeded():
    x = np.random.default_rng(1).normal(2.0, 1.0, size=400)
    est = C.bootstrap_ci(x, seed=3)
    assert est.low < 2.0 < est.high and est.high - est.low < 0.3
    assert C.bootstrap_ci(x, seed=3) == est
    assert C.bootstrap_ci([1.0]).low is None
    med = C.bootstrap_ci(x, np.median, n_boot=300, seed=0)
    assert med.low < med.value < med.high


def test_probability_of_improvement_two_normals():
    delta = 0.5
    truth = norm.cdf(delta / math.sqrt(2))  # P(X > Y) for X ~ N(delta, 1), Y ~ N(0, 1)
    rng = np.random.default_rng(7)
    a = {f"t{i}": rng.normal(delta, 1.0, size=150) for i in range(3)}
    b = {f"t{i}": rng.normal(0.0, 1.0, size=150) for i in range(3)}
    est = C.probability_of_improvement(a, b, n_boot=500, seed=0)
    assert est.low < truth < est.high
    assert abs(est.value - truth) < 0.05
    rev = C.probability_of_improvement(b, a, n_boot=500, seed=0)
    assert rev.value == pytest.approx(1 - est.value)


def test_probability_of_improvement_identical_arms_and_ties():
    a = {"t1": [0.1, 0.5, 0.9], "t2": [0.3, 0.4]}
    est = C.probability_of_improvement(a, a, n_boot=200)
    assert est.value == pytest.approx(0.5)
    assert C.probability_of_improvement({"t": [1.0]}, {"t": [1.0]}).value == 0.5
    assert C.probability_of_improvement({"t": [2.0]}, {"t": [1.0], "u": [3.0]}).value == 1.0  # shared tasks only
    with pytest.raises(ValueError):
        C.probability_of_improvement({"t": [1.0]}, {"u": [1.0]})


def test_arm_score_is_mean_of_task_means():
    est = C.arm_score({"t1": [0.0, 1.0], "t2": [0.5]}, n_boot=300)
    assert est.value == pytest.approx(0.5) and est.n == 3
    assert est.low <= est.value <= est.high


# ---------------------------------------------------------------------- curves


def _events(fits):
    return [
        {
            "payload": {"status": "ok" if f is not None else "failed", "fitness": f, "test_score": None},
            "charge": {"evaluator_seconds": 2.0},
        }
        for f in fits
    ]


def test_curve_and_reach():
    c = C.curve_from_events("r", "t", _events([None, 1.0, 0.5, 2.0, 1.5]))
    assert list(c.verifications) == [1, 2, 3, 4, 5]
    assert np.isnan(c.best[0]) and list(c.best[1:]) == [1.0, 1.0, 2.0, 2.0]
    assert list(c.seconds) == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert C.reach(c, 1.5) == C.Reach(1.5, 4, 8.0)
    assert C.reach(c, 3.0).verifications is None
    other = C.curve_from_events("s", "t", _events([0.2, 1.0]))
    assert C.reach_final(c, other).verifications == 2


def test_curve_band_forward_fills_shorter_runs():
    a = C.curve_from_events("a", "t", _events([1.0, 2.0, 3.0]))
    b = C.curve_from_events("b", "t", _events([1.0]))
    band = C.curve_band([a, b], "arm", n_boot=100)
    assert list(band.x) == [1, 2, 3]
    assert list(band.mean) == pytest.approx([1.0, 1.5, 2.0])
    assert list(band.n) == [2, 2, 2]
    assert (band.low <= band.mean).all() and (band.mean <= band.high).all()


# ---------------------------------------------------------------------- store, plots, tables, CLI


def _add_toy_candidate(st, run: str, cid: str) -> None:
    """Record ``cid`` in ``run`` as implemented: the root when it is ``root``, else an improvement of the root; its
    program names it."""
    from verifyless.node import Candidate, Idea, Operator, content_hash

    prog = f"x = {cid!r}\n"
    parent = None if cid == "root" else "root"
    st.add_candidate(
        run, Candidate(cid, parent, Operator.IMPROVE, Idea(cid), prog, content_hash(prog)), status="implemented"
    )


def _store_with_runs(path):
    from verifyless.node import Screening, Status, Verification
    from verifyless.screen.critic import evidence_from_critiques
    from verifyless.store import RunStore

    crit = {"improve": "[IMPROVEMENT] improve --- r\n[WINTIER] big --- r", "lose": "[IMPROVEMENT] lose --- r"}
    st = RunStore(path)
    runs = []
    for seed, (screener, fits) in enumerate(
        [
            ("critic", [1.0, 1.2, 1.5]),
            ("critic", [1.0, 1.4, 0.9]),
            ("random", [1.0, 0.9, 1.1]),
            ("random", [1.0, 1.05, 0.8]),
        ]
    ):
        run = st.create_run("toy", {"screener": {"name": screener}}, seed=seed)
        ids = ["root", "c1", "c2"]
        for cid, fit in zip(ids, fits, strict=False):
            _add_toy_candidate(st, run, cid)
            st.add_verification(
                run, cid, Verification(Status.OK, score=fit, test_score=fit - 0.1, run_seconds=1.0), fit
            )
        votes = {"c1": ["improve"] * 3 + ["lose"], "c2": ["lose", "lose", "improve", "improve"]}
        ev = {cid: evidence_from_critiques(cid, [crit[v] for v in vs]) for cid, vs in votes.items()}
        scr = Screening(screener, ("c1", "c2"), ("c1", "c2"), ev if screener == "critic" else {})
        st.append(run, "screening", {**scr.to_dict(), "round": 1})
        st.append(run, "final", {"node_id": max(zip(fits, ids, strict=False))[1]})
        runs.append(run)
    return st, runs


def test_curve_and_pools_from_store(tmp_path):
    st, runs = _store_with_runs(tmp_path / "s.db")
    with st:
        c = C.curve_from_store(st, runs[0])
        assert c.task == "toy" and list(c.best) == [1.0, 1.2, 1.5] and c.seconds[-1] == pytest.approx(3.0)
        pools = SEL.pools_from_store(st, runs[0])
        assert len(pools) == 1 and pools[0].chosen == "c1" and pools[0].scores == {"c1": 1.2, "c2": 1.5}
        test_pools = SEL.pools_from_store(st, runs[0], target="test")
        assert test_pools[0].scores["c2"] == pytest.approx(1.4)


def test_plots_and_markdown(tmp_path):
    from verifyless.metrics import critic as M
    from verifyless.offline import plots, tables

    recs = [
        M.make_record(str(i), ["BigWin"] * (i % 4) + ["Lose"] * (4 - i % 4), "improve" if i % 2 else "lose")
        for i in range(12)
    ]
    a = C.curve_from_events("a", "t", _events([1.0, 2.0]))
    paths = [
        plots.plot_curves([C.curve_band([a], "arm", n_boot=50)], tmp_path / "c.png"),
        plots.plot_reliability(M.calibration(recs), tmp_path / "r.png"),
        plots.plot_auroc_vs_k({"critic": M.auroc_vs_k(recs, ks=(1, 4))}, tmp_path / "k.png"),
        plots.plot_routing(M.routing_curve(recs), tmp_path / "u.png"),
    ]
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from verifyless.plotting import pyplot

    assert pyplot().get_fignums() == [], "a saved figure was left open"
    md = tables.critic_table({"all": M.critic_metrics(recs)})
    assert md.startswith("| group |") and md.count("\n") == 3
    assert tables.markdown_table(["a"], [["x|y"]]).splitlines()[2] == "| x\\|y |"
    assert tables.fmt(None) == "—" and tables.fmt(0.1234, percent=True) == "12.3"


def test_bench_cli_commands(tmp_path):
    from typer.testing import CliRunner

    from verifyless._cli.bench import app

    st, runs = _store_with_runs(tmp_path / "s.db")
    st.close()
    runner = CliRunner()
    out = tmp_path / "out"
    res = runner.invoke(app, ["critic", runs[0], runs[1], "--store", str(tmp_path / "s.db"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "critic metrics" in res.output and (out / "reliability.png").exists()
    assert "Improve acc" in (out / "critic.md").read_text()
    assert (out / "auroc_k.png").exists() and (out / "routing.png").exists()
    res = runner.invoke(
        app,
        [
            "compare",
            *runs,
            "--store",
            str(tmp_path / "s.db"),
            "--target",
            "validation",
            "--scheme",
            "raw",
            "--n-boot",
            "200",
            "--out",
            str(out),
            "--label",
            f"guided={runs[0]}",
        ],
    )
    assert res.exit_code == 0, res.output
    text = (out / "compare.md").read_text()
    assert "guided" in text and "critic" in text and "random" in text and "P(A > B)" in text
    assert (out / "curves_toy_verifications.png").exists()
    res = runner.invoke(app, ["selection", *runs, "--store", str(tmp_path / "s.db")])
    assert res.exit_code == 0, res.output
    assert "Pearson" in res.output
    for command in ("compare", "curves"):  # no runs is a usage error, not an empty table
        res = runner.invoke(app, [command, "--store", str(tmp_path / "s.db"), "--out", str(tmp_path / command)])
        assert res.exit_code == 2 and "give run ids" in res.output, res.output


def _minimise_store(path, *, second_verified: bool):
    """Two runs (arms critic and random) of an unloadable minimise task: fitness = -score; one pool each."""
    from verifyless.node import Screening, Status, Verification
    from verifyless.store import RunStore

    st = RunStore(path)
    runs = []
    for seed, (screener, rmses) in enumerate([("critic", [60.0, 50.79, 55.0]), ("random", [60.0, 58.0, 57.0])]):
        run = st.create_run("toy_rmse", {"screener": {"name": screener}}, seed=seed)
        for cid, rmse in zip(["root", "c1", "c2"], rmses, strict=True):
            _add_toy_candidate(st, run, cid)
            if cid != "c2" or second_verified:
                st.add_verification(run, cid, Verification(Status.OK, score=rmse, run_seconds=1.0), -rmse)
        st.append(run, "screening", {**Screening(screener, ("c1", "c2"), ("c1",), {}).to_dict(), "round": 1})
        runs.append(run)
    st.close()
    return runs


def test_compare_warns_on_one_run_per_arm_and_shows_targets_in_metric_units(tmp_path):
    from typer.testing import CliRunner

    from verifyless._cli.bench import app

    runs = _minimise_store(tmp_path / "s.db", second_verified=True)
    args = ["compare", *runs, "--store", str(tmp_path / "s.db"), "--target", "validation", "--scheme", "raw"]
    res = CliRunner().invoke(app, [*args, "--n-boot", "50", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "n = 1" in text, "P(A > B) of single runs must say so"
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in res.output.splitlines() if "/1" in line]
    reach_row = next(r for r in rows if r[1:3] == ["random", "critic"])  # target: the critic run's final RMSE
    assert float(reach_row[3]) == pytest.approx(50.79), "the reach target is in the metric's units, not negated"
    assert "n = 1" in (tmp_path / "out" / "compare.md").read_text()


def test_selection_says_why_a_run_has_no_pools(tmp_path):
    from typer.testing import CliRunner

    from verifyless._cli.bench import app

    runs = _minimise_store(tmp_path / "s.db", second_verified=False)
    res = CliRunner().invoke(app, ["selection", runs[0], "--store", str(tmp_path / "s.db")])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "2 or more verified candidates" in text
    for hint in ("oracle", "verify_per_expansion", "audit_rate"):
        assert hint in text


def test_subtree_labels_credit_a_candidate_for_what_was_built_on_it(tmp_path):
    """RPM Section 4.2: a sibling is labelled by the best test score in its subtree (issue 47, item 7)."""
    from verifyless.node import Candidate, Idea, Operator, Verification, content_hash
    from verifyless.node import Status as S
    from verifyless.store import RunStore

    with RunStore(tmp_path / "t.db") as st:
        run = st.create_run("toy", {"screener": {"name": "critic"}}, seed=0)
        tree = [("root", None, 1.0), ("c1", "root", 1.2), ("c2", "root", 1.5), ("c1a", "c1", 1.3), ("c1aa", "c1a", 2.0)]
        tree.append(("c2x", "c2", None))  # a failed child adds nothing to c2's subtree
        for cid, parent, score in tree:
            prog = f"x = {cid!r}\n"
            st.add_candidate(
                run, Candidate(cid, parent, Operator.IMPROVE, Idea(cid), prog, content_hash(prog)), status="implemented"
            )
            v = Verification(S.OK, score=score, test_score=score - 0.1) if score else Verification(S.FAILED, "x")
            st.add_verification(run, cid, v, score)
        st.append(run, "screening", {"screener": "critic", "ranking": ["c2", "c1"], "chosen": ["c2"], "round": 1})
        own = SEL.pools_from_store(st, run, target="test")[0].scores
        below = SEL.pools_from_store(st, run, target="subtree")[0].scores
    assert own == pytest.approx({"c1": 1.1, "c2": 1.4})
    assert below == pytest.approx({"c1": 1.9, "c2": 1.4})  # c1's grandchild reached 2.0 (test 1.9)
    assert SEL.pairwise_accuracy([SEL.Pool("p", below, "c2", {"c2": 1.0, "c1": 0.0})]).accuracy == 0.0


def test_bench_compare_airs_takes_s_min_from_every_agent_on_the_task(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from verifyless._cli import bench

    toy = SimpleNamespace(metric=Metric("score", "maximize"), anchors=Anchors(floor=0.0, bound=2.0, sota=1.9))
    monkeypatch.setattr(bench, "_task", lambda name: toy)
    st, runs = _store_with_runs(tmp_path / "s.db")  # finals 1.5, 1.4, 1.1, 1.05 over four runs (two "agents")
    with st:
        worst = bench._worst_by_task(st, runs, "validation")
        assert worst == {"toy": 1.05}
        scores = [bench._final_score(st, r, "validation", "airs", worst["toy"]) for r in runs]
    assert scores[-1] == pytest.approx(0.0) and all(0.0 < v < 1.0 for v in scores[:-1])


def test_one_bootstrap_serves_the_audit_and_the_arm_comparisons():
    x = np.random.default_rng(7).normal(size=25)
    rng = np.random.default_rng(3)  # row i of the one draw is the i-th resample of a loop of draws
    loop = [float(np.median(x[rng.integers(0, x.size, x.size)])) for _ in range(300)]
    lo, hi = np.quantile(loop, [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2])
    assert bootstrap(x, np.median, n_boot=300, seed=3) == C.Estimate(float(np.median(x)), lo, hi, 25)
    assert estimate(list(x), resamples=2000, seed=4) == C.bootstrap_ci(x, seed=4)
    assert estimate([]).value is None and estimate([]).text() == "- n=0"
