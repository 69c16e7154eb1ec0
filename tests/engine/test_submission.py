"""The top-K ensemble submission: members re-run, their declared outputs averaged, the average scored once."""

from __future__ import annotations

import random

import numpy as np
import pytest
from competitions import competition
from diabetes_variants import diabetes_variants

from verifyless.engine.submission import ensemble_submission, no_ensemble_reason, submits_ensemble
from verifyless.sandbox.local import LocalSandbox
from verifyless.search.mcgs import MCGSConfig, MCGSStrategy
from verifyless.task import load_task
from verifyless.task.base import Ensemble
from verifyless.verify import verify


def test_top_k_ensemble_submission_averages_the_members_predictions(tmp_path):
    task, members = diabetes_variants()
    assert task.ensemble is not None and task.ensemble.files == ("val_predictions.csv", "test_predictions.csv")
    sandbox = LocalSandbox()
    sub = ensemble_submission(task, members, sandbox)
    assert sub.status == "ok" and sub.combined == ("root", "s", "k")
    assert [r["status"] for r in sub.member_runs] == ["ok"] * 3 and sub.seconds > 0
    # The same average computed here from each member's own prediction file, scored against the hidden targets.
    preds = []
    for i, (_, program) in enumerate(members):
        verify(task, program, sandbox, workspace_root=tmp_path / str(i), keep_workspace=True)
        (ws,) = list((tmp_path / str(i)).iterdir())
        preds.append(np.loadtxt(ws / "out" / "val_predictions.csv"))
    truth = np.loadtxt(next(p for p in task.hidden_data if p.name == "val_targets.csv"), skiprows=1)
    expected = float(np.sqrt(np.mean((np.mean(preds, axis=0) - truth) ** 2)))
    assert sub.score == pytest.approx(expected, rel=1e-6) and sub.metrics["val_rmse"] == sub.score
    assert sub.test_score == sub.test_metrics["test_rmse"] and "test_rmse" not in sub.metrics
    singles = [float(np.sqrt(np.mean((p - truth) ** 2))) for p in preds]
    assert sub.score not in singles  # an average, not one member's score


# ------------------------------------------------------- every task kind that writes predictions (issue 56, item 3)


def test_sunspots_forecasts_combine_on_their_origin_and_year_columns(tmp_path):
    task = load_task("sunspots")
    assert task.ensemble is not None and task.ensemble.key == ("origin", "year") and task.ensemble.opt_in
    base = task.baseline_program
    members = [
        ("root", base),
        ("l8", base.replace("LAGS = 3", "LAGS = 8")),
        ("l16", base.replace("LAGS = 3", "LAGS = 16")),
    ]
    sandbox = LocalSandbox()
    sub = ensemble_submission(task, members, sandbox)
    assert sub.status == "ok", sub.reason
    assert sub.combined == ("root", "l8", "l16") and sub.selection_score is None  # sunspots holds no selection split
    singles = []
    for i, (_, program) in enumerate(members):
        v = verify(task, program, sandbox, workspace_root=tmp_path / str(i))
        singles.append(v.score)
    assert sub.score not in singles and sub.test_score is not None


def test_a_competition_combines_its_submission_by_id_and_scores_the_selection_split_too(tmp_path, monkeypatch):
    monkeypatch.setenv("VERIFYLESS_CACHE_DIR", str(tmp_path / "cache"))
    root = competition(tmp_path)
    (root / "verifyless.yaml").write_text("metric: auc\nsplit: {validation: 0.25, selection: 0.25}\n")
    task = load_task(str(root))
    assert task.ensemble == Ensemble(("submission.csv",), "mean", ("id",), opt_in=True)
    assert task.selection_metric == "sel_auc"
    base = task.baseline_program
    assert "STRENGTH = 1.0" in base
    members = [(f"s{v}", base.replace("STRENGTH = 1.0", f"STRENGTH = {v}")) for v in ("1.0", "300.0", "0.01")]
    sub = ensemble_submission(task, members, LocalSandbox())
    assert sub.status == "ok", sub.reason
    assert sub.score == sub.metrics["val_auc"] and sub.selection_score == sub.test_metrics["sel_auc"]
    assert sub.test_score == sub.test_metrics["test_auc"] and sub.to_dict()["selection_score"] == sub.selection_score


def test_label_competitions_vote_and_tasks_without_predictions_fall_back_with_a_reason():
    from verifyless.task.tabular.competition import _ensemble
    from verifyless.task.tabular.grading import Grading

    labels = Grading("accuracy", "id", ("label",))
    assert labels.definition.output == "label" and _ensemble(labels).combine == "vote"
    circles = load_task("circle_packing")
    assert circles.ensemble is None
    every = MCGSStrategy(random.Random(0), MCGSConfig(ensemble_tasks="all"))
    declared = MCGSStrategy(random.Random(0))
    reason = no_ensemble_reason(every, circles)
    assert reason is not None and "circle_packing" in reason and "final node" in reason
    assert no_ensemble_reason(declared, circles) is None  # a run that did not ask hears nothing
    diabetes, sunspots = load_task("diabetes"), load_task("sunspots")
    assert [submits_ensemble(s, t) for s in (declared, every) for t in (diabetes, sunspots)] == [
        True,
        False,  # an opt-in rule changes no run that did not ask
        True,
        True,
    ]
