"""Competition folders (issue 46, item 9): class probabilities must sum to one, a competition is listed under its
own name, the common MLE-bench metrics grade like their references, and a folder may bring its own ``grade.py``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runs import cli
from competitions import competition, metric_inputs, spooky_text_folder
from scipy import stats
from sklearn import metrics

from verifyless.engine.baseline import check_baseline, failure_source
from verifyless.errors import InvalidSubmission, TaskError
from verifyless.node import Status
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.task.tabular.grading import Grading, grade, metric_def
from verifyless.task.tabular.score import score_workspace
from verifyless.verify import verify


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VERIFYLESS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _public(task, name: str) -> Path:
    return next(p for p in task.public_data if p.name == name)


def test_class_probabilities_that_do_not_sum_to_one_are_an_invalid_submission(tmp_path):
    task = load_task(spooky_text_folder(tmp_path))
    sample = pd.read_csv(_public(task, "sample_submission.csv"), dtype={"id": str})
    outdir = tmp_path / "out"
    outdir.mkdir()
    sample.to_csv(outdir / "submission.csv", index=False)
    assert score_workspace(outdir, list(task.hidden_data))["val_logloss"] == pytest.approx(np.log(3), abs=1e-4)
    halved = sample.assign(**{c: sample[c] / 2 for c in ("EAP", "HPL", "MWS")})
    halved.to_csv(outdir / "submission.csv", index=False)
    with pytest.raises(InvalidSubmission, match=r"row\(s\) .* do not sum to 1 \(e.g. row 1 sums to 0.49"):
        score_workspace(outdir, list(task.hidden_data))


def test_a_competition_is_listed_and_loaded_under_its_own_name(tmp_path):
    root = competition(tmp_path / "DATA", "pizza-requests")  # not an MLE-bench id: its metric is in verifyless.yaml
    out = cli("tasks", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "pizza-requests" in out.stdout and "prepared" not in out.stdout, out.stdout
    inner = load_task(root / "prepared")
    assert inner.name == "pizza-requests" and inner.metric.name == "val_auc"


def test_the_common_mlebench_metrics_grade_like_their_references():
    ids, y, p, labels, guess, value, estimate = metric_inputs()
    cases = {
        "normalized-gini": (y, p, 2 * metrics.roc_auc_score(y, p) - 1),
        "average-precision": (y, p, metrics.average_precision_score(y, p)),
        "matthews-correlation-coefficient": (labels, guess, metrics.matthews_corrcoef(labels, guess)),
        "balanced-accuracy": (labels, guess, metrics.balanced_accuracy_score(labels, guess)),
        "micro-f1": (labels, guess, metrics.f1_score(labels, guess, average="micro")),
        "mean-squared-error": (value, estimate, metrics.mean_squared_error(value, estimate)),
        "median-absolute-error": (value, estimate, metrics.median_absolute_error(value, estimate)),
        "mean-absolute-percentage-error": (value, estimate, metrics.mean_absolute_percentage_error(value, estimate)),
        "pearson-correlation": (value, estimate, stats.pearsonr(value, estimate).statistic),
        "mean-column-wise-spearman": (value, estimate, stats.spearmanr(value, estimate).statistic),
        "smape": (value, estimate, 100 * np.mean(2 * np.abs(estimate - value) / (np.abs(value) + np.abs(estimate)))),
    }
    for name, (truth, pred, expected) in cases.items():
        answers = pd.DataFrame({"id": ids, "y": truth})
        submission = pd.DataFrame({"id": ids[::-1], "y": pred[::-1]})
        assert grade(submission, answers, Grading(metric_def(name).name, "id", ("y",))) == pytest.approx(expected), name


GRADER = """
import pandas as pd


class InvalidSubmissionError(Exception):
    pass


def grade(submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    merged = submission.merge(answers, on="id", suffixes=("_pred", ""))
    if len(merged) != len(answers):
        raise InvalidSubmissionError("ids do not match the answers")
    return float(((merged["label_pred"] > 0.5) == (merged["label"] == 1)).mean())
"""


def own_grader_folder(base: Path, grader: str = GRADER) -> Path:
    root = competition(base)
    (root / "grade.py").write_text(grader)
    (root / "verifyless.yaml").write_text("grader: {name: hit_rate, direction: maximize, output: probability}\n")
    return root


def test_a_folder_brings_its_own_grader(tmp_path):
    task = load_task(own_grader_folder(tmp_path))
    assert task.metric.name == "val_hit_rate" and task.metric.direction == "maximize"
    assert task.test_metrics == ("test_hit_rate",)
    v = verify(task, task.baseline_program, LocalSandbox())
    assert v.status is Status.OK and 0.6 < v.score <= 1 and 0.6 < v.test_score <= 1, v.reason + v.stderr_tail
    spec = json.loads(_public(task, "verifyless_task.json").read_text())
    assert spec["output"] == "probability" and spec["metric"] == "hit_rate"


def test_an_own_grader_s_invalid_submission_error_is_the_candidate_s_contract_violation(tmp_path):
    task = load_task(
        own_grader_folder(tmp_path, GRADER.replace("len(merged) != len(answers)", 'submission["label"].nunique() > 1'))
    )
    v = verify(task, task.baseline_program, LocalSandbox())
    assert v.status is Status.CONTRACT_VIOLATION and "ids do not match the answers" in v.reason, v.reason


def test_an_own_grader_that_fails_on_the_sample_submission_fails_the_task_at_load(tmp_path):
    with pytest.raises(TaskError, match=r"grade.py: grade\(\) fails on the sample submission .*KeyError"):
        load_task(own_grader_folder(tmp_path, GRADER.replace('merged["label"]', 'merged["nope"]')))
    root = competition(tmp_path / "b")
    (root / "grade.py").write_text(GRADER)
    (root / "verifyless.yaml").unlink()
    with pytest.raises(TaskError, match="grader: {direction: maximize or minimize, output:"):
        load_task(root)


SHORT = """
import argparse, json
from pathlib import Path
import pandas as pd
ap = argparse.ArgumentParser(); ap.add_argument("--data"); ap.add_argument("--out"); a = ap.parse_args()
# EVOLVE-BLOCK-START
# EVOLVE-BLOCK-END
data = Path(a.data); spec = json.loads((data / "verifyless_task.json").read_text())
sample = pd.read_csv(data / spec["sample_submission"], dtype={spec["id"]: str})
sample.iloc[:-3].to_csv(Path(a.out) / "submission.csv", index=False)
"""


def test_a_short_submission_is_the_candidate_s_failure_with_its_reason(tmp_path):
    task = load_task(competition(tmp_path))
    v = verify(task, SHORT, LocalSandbox())
    assert v.status is Status.CONTRACT_VIOLATION and "rows; the sample submission has" in v.reason, v.reason
    assert failure_source(task, v) == "program"
    check_baseline(task, v, allow_failed=True)
