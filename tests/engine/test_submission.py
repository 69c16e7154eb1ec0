"""The top-K ensemble submission: members re-run, their declared outputs averaged, the average scored once."""

from __future__ import annotations

import numpy as np
import pytest
from diabetes_variants import diabetes_variants

from verifyless.engine.submission import ensemble_submission
from verifyless.sandbox.local import LocalSandbox
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
