"""Tabular tasks: `verifyless task new` from a CSV, MLE-bench prepared folders, the built-in competitions.

Every test keeps the competition splits in its own cache folder (``VERIFYLESS_CACHE_DIR``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runs import in_process
from competitions import cache, metric_inputs, spooky_folder  # noqa: F401  (cache: autouse)
from sklearn.datasets import load_diabetes, load_iris

from verifyless.byod import new_task
from verifyless.errors import ConfigError, TaskError
from verifyless.node import Status
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import discover_tasks, load_task
from verifyless.task.tabular.competition import MLEBENCH_GRADERS
from verifyless.task.tabular.grading import Grading, grade, metric_def
from verifyless.task.tabular.prepare import Request, prepare_task
from verifyless.task.tabular.score import score_workspace
from verifyless.verify import verify

SANDBOX = LocalSandbox()


def cli(*args: str, env_cache: Path, timeout: int = 400) -> subprocess.CompletedProcess:
    env = {**__import__("os").environ, "VERIFYLESS_CACHE_DIR": str(env_cache)}
    return subprocess.run(
        [sys.executable, "-m", "verifyless", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def penguin_like_csv(path: Path) -> Path:
    """Iris with species names, a categorical feature and missing values: nobody prepared it."""
    data = load_iris(as_frame=True)
    frame = data.frame.drop(columns=["target"])
    frame["species"] = [data.target_names[i] for i in data.target]
    rng = np.random.default_rng(0)
    frame["site"] = rng.choice(["north", "south", "east"], size=len(frame))
    frame.loc[rng.choice(len(frame), 12, replace=False), "sepal width (cm)"] = np.nan
    frame.to_csv(path, index=False)
    return path


def diabetes_csv(path: Path) -> Path:
    load_diabetes(as_frame=True, scaled=False).frame.to_csv(path, index=False)
    return path


# ------------------------------------------------------------------ task new


def test_csv_with_a_categorical_target_becomes_a_task_that_verifies(tmp_path):
    made = new_task(tmp_path / "flowers", Request(penguin_like_csv(tmp_path / "f.csv"), "species"), SANDBOX)
    assert made.prepared.problem == "multiclass" and made.prepared.metric == "logloss"
    assert made.task.kind == "competition" and made.task.metric.name == "val_logloss"
    assert made.baseline.status is Status.OK and made.baseline.test_score is not None
    assert made.anchors.floor > made.anchors.reference > made.anchors.bound == 0  # log loss: lower is better
    sidecar = (tmp_path / "flowers" / "verifyless.yaml").read_text()
    assert "reference: " in sidecar and "floor: " in sidecar
    statement = made.task.statement
    assert "| site | categorical |" in statement and "species" in statement and "val_logloss" in statement
    again = verify(load_task(tmp_path / "flowers"), made.task.baseline_program, SANDBOX)
    assert again.score == pytest.approx(made.baseline.score), "the kept split must give the same score"


def test_csv_with_a_numeric_target_becomes_a_regression_task_that_verifies(tmp_path):
    request = Request(diabetes_csv(tmp_path / "d.csv"), "target", metric="mae", seed=3)
    made = new_task(tmp_path / "diab", request, SANDBOX)
    assert made.prepared.problem == "regression" and made.task.metric.name == "val_mae"
    assert made.baseline.status is Status.OK and made.anchors.reference < made.anchors.floor
    assert made.prepared.train_rows + made.prepared.test_rows == 442
    answers = pd.read_csv(tmp_path / "diab" / "prepared" / "private" / "test.csv")
    assert list(answers.columns) == ["id", "target"] and len(answers) == made.prepared.test_rows
    assert "target" not in pd.read_csv(tmp_path / "diab" / "prepared" / "public" / "test.csv").columns


def test_group_and_time_splits_keep_groups_whole_and_hold_out_the_latest(tmp_path):
    frame = load_diabetes(as_frame=True, scaled=False).frame
    frame["clinic"] = [f"c{i % 11}" for i in range(len(frame))]
    frame["visit"] = range(len(frame))
    frame.to_csv(tmp_path / "d.csv", index=False)
    grouped = prepare_task(tmp_path / "g", Request(tmp_path / "d.csv", "target", group="clinic"))
    train = pd.read_csv(grouped.root / "prepared" / "public" / "train.csv")
    test = pd.read_csv(grouped.root / "prepared" / "public" / "test.csv")
    assert not set(train["clinic"]) & set(test["clinic"])
    timed = prepare_task(tmp_path / "t", Request(tmp_path / "d.csv", "target", time="visit"))
    train = pd.read_csv(timed.root / "prepared" / "public" / "train.csv")
    test = pd.read_csv(timed.root / "prepared" / "public" / "test.csv")
    assert train["visit"].max() < test["visit"].min()
    task = load_task(timed.root)  # the validation rows are the latest public rows too
    kept = pd.read_csv(task.public_data[0])
    held = pd.read_csv(task.hidden_data[0] / "val_answers.csv")
    assert kept["visit"].max() < train.set_index("id").loc[held["id"], "visit"].min()


def _bad_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    ok = diabetes_csv(tmp / "d.csv")
    (tmp / "one.csv").write_text("x,y\n" + "".join(f"{i},same\n" for i in range(30)))
    (tmp / "header.csv").write_text("x,y\n")
    (tmp / "empty.csv").write_text("")
    (tmp / "ones.csv").write_text("x,y\n" + "".join(f"{i},1\n" for i in range(30)))
    (tmp / "semi.csv").write_text("x;y\n" + "".join(f"{i};{i % 3}\n" for i in range(30)))
    return {
        "missing target": (["--data", str(ok), "--target", "nope"], "has no column 'nope'"),
        "one class": (["--data", str(tmp / "one.csv"), "--target", "y"], "has one value ('same')"),
        "no rows": (["--data", str(tmp / "header.csv"), "--target", "y"], "has no rows"),
        "empty file": (["--data", str(tmp / "empty.csv"), "--target", "y"], "is empty"),
        "one number": (["--data", str(tmp / "ones.csv"), "--target", "y"], "has one value (1) in 30 rows"),
        "semicolons": (["--data", str(tmp / "semi.csv"), "--target", "y"], "looks ';'-separated"),
        "metric of the wrong kind": (["--data", str(ok), "--target", "target", "--metric", "auc"], "regression target"),
    }


def test_bad_csv_inputs_give_one_clear_line_and_exit_2(tmp_path):
    for case, (args, message) in _bad_inputs(tmp_path).items():
        out = cli("task", "new", str(tmp_path / case.replace(" ", "_")), *args, env_cache=tmp_path / "cache")
        assert out.returncode == 2, (case, out.stderr)
        assert message in out.stderr and "Traceback" not in out.stderr + out.stdout, (case, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1, (case, out.stderr)
        assert not (tmp_path / case.replace(" ", "_")).exists(), "nothing is written for bad input"


def _misfit_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Issue 54: a --kind the target cannot pose (item 7) and inputs whose messages pointed the wrong way (item 10)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=60), "z": rng.normal(size=60)})
    frame.assign(y=["a", "b", "c"] * 20).to_csv(tmp / "labels.csv", index=False)
    frame.assign(y=[0, 1, 2] * 20).to_csv(tmp / "three.csv", index=False)
    frame.assign(y=rng.normal(size=60)).to_csv(tmp / "numbers.csv", index=False)
    frame[[]].assign(y=[0, 1] * 30).to_csv(tmp / "target_only.csv", index=False)
    pd.DataFrame(rng.normal(size=(30, 40)), columns=[f"c{i}" for i in range(40)]).to_csv(tmp / "wide.csv", index=False)
    return {
        "regression on labels": (["--data", str(tmp / "labels.csv"), "--kind", "regression"], "needs a numeric target"),
        "binary on three classes": (["--data", str(tmp / "three.csv"), "--kind", "binary"], "has 3 distinct values"),
        "multiclass on numbers": (["--data", str(tmp / "numbers.csv"), "--kind", "multiclass"], "not whole"),
        "target only": (["--data", str(tmp / "target_only.csv")], "has no input column besides --target 'y'"),
        "a folder as data": (["--data", str(tmp)], f"--data {tmp} is a folder; pass the CSV file"),
        "many columns": (["--data", str(tmp / "wide.csv")], "its 40 columns are 'c0', 'c1', "),
    }


MISFITS = (
    "regression on labels",
    "binary on three classes",
    "multiclass on numbers",
    "target only",
    "a folder as data",
    "many columns",
)


@pytest.mark.parametrize("case", MISFITS)
def test_task_new_refuses_input_that_cannot_make_the_task_asked_for(tmp_path, monkeypatch, capsys, case):
    args, message = _misfit_inputs(tmp_path)[case]
    folder = tmp_path / "made"
    out = in_process(monkeypatch, capsys, "task", "new", str(folder), *args, "--target", "y")
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert ".partial-" not in out.stderr and not folder.exists()
    if case == "many columns":
        assert "'c29' and 10 more" in out.stderr  # the columns left out are counted, never dropped silently


def test_the_command_line_makes_verifies_and_lists_a_task(tmp_path):
    folder = tmp_path / "tasks" / "flowers"
    made = cli(
        "task",
        "new",
        str(folder),
        "--data",
        str(penguin_like_csv(tmp_path / "f.csv")),
        "--target",
        "species",
        "--metric",
        "accuracy",
        env_cache=tmp_path / "cache",
    )
    assert made.returncode == 0, made.stderr
    assert "multiclass task, metric accuracy" in made.stdout and "baseline val_accuracy" in made.stdout
    checked = cli("verify", str(folder), "--json", env_cache=tmp_path / "cache")
    assert checked.returncode == 0, checked.stderr
    result = json.loads(checked.stdout)
    assert result["status"] == "ok" and 0.5 < result["metrics"]["val_accuracy"] <= 1
    again = cli(
        "task",
        "new",
        str(folder),
        "--data",
        str(tmp_path / "f.csv"),
        "--target",
        "species",
        env_cache=tmp_path / "cache",
    )
    assert again.returncode == 2 and "already exists" in again.stderr
    (found,) = discover_tasks(tmp_path / "tasks")
    assert not isinstance(found, TaskError) and found.name == "flowers" and found.kind == "competition"


# ------------------------------------------------------------------ MLE-bench folders


def test_private_answers_lacking_a_column_name_only_the_missing_ones(tmp_path):
    """Issue 54, item 10: the message listed the present id column as missing too."""
    root = spooky_folder(tmp_path)
    answers = root / "prepared" / "private" / "test.csv"
    pd.read_csv(answers).drop(columns=["HPL"]).to_csv(answers, index=False)
    with pytest.raises(TaskError) as info:
        load_task(root)
    message = str(info.value)
    assert "lack the column(s) 'HPL' (or the label column 'author'); they have 'id', 'EAP', 'MWS'" in message, message


def test_an_mlebench_folder_loads_unchanged_with_the_competitions_grader(tmp_path):
    root = spooky_folder(tmp_path)
    before = sorted((p.relative_to(root), p.read_bytes()) for p in root.rglob("*") if p.is_file())
    task = load_task(root)
    assert task.kind == "competition" and task.metric.name == "val_logloss" and task.metric.direction == "minimize"
    assert metric_def(MLEBENCH_GRADERS["spooky-author-identification"]).name == "logloss"
    assert task.hidden_data[1] == root.resolve() / "prepared" / "private" / "test.csv"
    assert sorted((p.relative_to(root), p.read_bytes()) for p in root.rglob("*") if p.is_file()) == before
    public = {p.name: p for p in task.public_data}
    shown = pd.read_csv(public["test.csv"])
    assert len(shown) == 30 + 12 and len(pd.read_csv(public["train.csv"])) == 48  # 20% of train held out
    outdir = tmp_path / "out"
    outdir.mkdir()
    sample = pd.read_csv(public["sample_submission.csv"])
    sample.to_csv(outdir / "submission.csv", index=False)
    metrics = score_workspace(outdir, list(task.hidden_data))
    assert set(metrics) == {"val_logloss", "test_logloss"} and metrics["test_logloss"] > 0
    sample.iloc[:-3].to_csv(outdir / "submission.csv", index=False)
    with pytest.raises(Exception, match="has 39 rows; the sample submission has 42"):
        score_workspace(outdir, list(task.hidden_data))


def test_a_folder_without_a_known_metric_names_the_fix(tmp_path):
    root = spooky_folder(tmp_path)
    renamed = root.rename(tmp_path / "my-competition")
    with pytest.raises(TaskError, match="add a verifyless.yaml with 'metric: NAME'"):
        load_task(renamed)
    (renamed / "verifyless.yaml").write_text("metric: accuracy\nsplit: {validation: 0.3}\n")
    assert load_task(renamed).metric.name == "val_accuracy"


SUBMITTER = """
import argparse, json
from pathlib import Path
import pandas as pd
ap = argparse.ArgumentParser(); ap.add_argument("--data"); ap.add_argument("--out"); a = ap.parse_args()
data = Path(a.data); spec = json.loads((data / "verifyless_task.json").read_text())
sample = pd.read_csv(data / spec["sample_submission"], dtype={spec["id"]: str})
submission = CHANGE
submission.to_csv(Path(a.out) / "submission.csv", index=False)
"""


@pytest.mark.parametrize(
    "change, reason",
    [
        ("sample", None),
        ("sample.iloc[:-5]", "rows; the sample submission has"),
        ("sample.rename(columns={'malignant': 'prob'})", "lacks the sample submission's column(s) ['malignant']"),
        ("sample.assign(id=sample['id'] + 'x')", "ids differ from the sample submission's"),
        ("sample.assign(malignant=2.0)", "values must lie in [0, 1]"),
        ("pd.read_csv(PRIVATE)", "No such file"),
    ],
)
def test_a_wrong_submission_is_a_contract_violation_with_its_reason(tmp_path, change, reason):
    task = load_task("breast_cancer")
    program = SUBMITTER.replace("CHANGE", change.replace("PRIVATE", repr(str(task.hidden_data[1]))))
    v = verify(task, program, SANDBOX)
    if reason is None:  # the sample submission itself is valid: a constant prediction, AUC 0.5
        assert v.status is Status.OK and v.score == 0.5 and v.test_score == 0.5, v.reason
    elif "PRIVATE" in change:  # the private answers are not there to copy
        if SANDBOX.isolation != "process":
            assert v.status is Status.FAILED and reason in v.reason, v.reason
    else:
        assert v.status is Status.CONTRACT_VIOLATION and v.reason.startswith("invalid submission: "), v.reason
        assert reason in v.reason and v.score is None


# ------------------------------------------------------------------ firewall


CHEAT = """
import os, sys
paths = sys.argv[1:]
for p in paths:
    if os.path.exists(p):
        print("LEAK", p)
found = []
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
    found += [os.path.join(root, f) for f in files if f in ("val_answers.csv", "grading.json")]
print("FOUND", found)
"""


@pytest.mark.skipif(SANDBOX.isolation == "process", reason="process mode does not hide paths")
@pytest.mark.parametrize("kind", ["builtin competition", "task new"])
def test_hidden_answers_are_unreadable_from_the_sandbox(tmp_path, kind):
    if kind == "task new":
        root = prepare_task(tmp_path / "t", Request(diabetes_csv(tmp_path / "d.csv"), "target")).root
        task = load_task(root)
    else:
        task = load_task("diabetes_rmsle")
    secrets = [
        *task.hidden_data,
        task.hidden_data[0] / "val_answers.csv",
        task.root / "prepared" / "public" / "train.csv",
    ]
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "cheat.py").write_text(CHEAT)
    result = SANDBOX.run(
        [sys.executable, "cheat.py", *map(str, secrets)],
        tmp_path / "ws",
        task.limits,
        hide=(task.root, *task.hidden_data),
    )
    assert result.status == "ok", result.reason
    assert "LEAK" not in result.stdout_tail and "FOUND []" in result.stdout_tail, result.stdout_tail


def test_a_submission_linked_to_the_answers_is_a_contract_violation(tmp_path):
    task = load_task("breast_cancer")
    answers = str(task.hidden_data[1])
    linking = SUBMITTER.replace("submission = CHANGE\n", "").replace(
        'submission.to_csv(Path(a.out) / "submission.csv", index=False)',
        f'import os; os.symlink({answers!r}, Path(a.out) / "submission.csv")',
    )
    v = verify(task, linking, SANDBOX)
    assert v.status is Status.CONTRACT_VIOLATION and "symlink" in v.reason


# ------------------------------------------------------------------ built-in competitions and grading


@pytest.mark.parametrize("name", ["breast_cancer", "diabetes_rmsle"])
def test_builtin_competition_runs_a_budget_3_search(tmp_path, name):
    out = cli(
        "run",
        name,
        "--budget",
        "3",
        "--store",
        str(tmp_path / "s.db"),
        "--quiet",
        "engine.candidates=2",
        env_cache=tmp_path / "cache",
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert "verifications" in out.stdout and "returned node (" in out.stdout and "hidden test" in out.stdout, out.stdout


def test_every_mlebench_lite_grader_and_registry_metric_grades_like_scikit_learn():
    from sklearn import metrics

    assert {metric_def(g).name for g in MLEBENCH_GRADERS.values()} <= {
        "auc",
        "logloss",
        "accuracy",
        "rmse",
        "rmsle",
        "qwk",
    }
    ids, y, p, labels, guess, value, estimate = metric_inputs()
    cases = {
        "auc-roc": (y, p, metrics.roc_auc_score(y, p)),
        "log-loss": (y, p, metrics.log_loss(y, p)),
        "accuracy": (labels, guess, metrics.accuracy_score(labels, guess)),
        "f1": (y, (p > 0.5).astype(int), metrics.f1_score(y, p > 0.5)),
        "quadratic-weighted-kappa": (labels, guess, metrics.cohen_kappa_score(labels, guess, weights="quadratic")),
        "root-mean-squared-error": (value, estimate, metrics.root_mean_squared_error(value, estimate)),
        "mean-column-wise-rmsle": (value, estimate, metrics.root_mean_squared_log_error(value, estimate)),
        "mae": (value, estimate, metrics.mean_absolute_error(value, estimate)),
        "r2": (value, estimate, metrics.r2_score(value, estimate)),
    }
    for name, (truth, pred, expected) in cases.items():
        answers = pd.DataFrame({"id": ids, "y": truth})
        submission = pd.DataFrame({"id": ids[::-1], "y": pred[::-1]})  # order does not matter, ids do
        assert grade(submission, answers, Grading(metric_def(name).name, "id", ("y",))) == pytest.approx(expected), name


def test_new_task_refuses_a_folder_in_use(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(ConfigError, match="already exists"):
        prepare_task(tmp_path / "used", Request(diabetes_csv(tmp_path / "d.csv"), "target"))
    shutil.rmtree(tmp_path / "used")


def test_a_labelled_test_file_and_an_id_column_are_kept(tmp_path):
    frame = load_diabetes(as_frame=True, scaled=False).frame
    frame.insert(0, "patient", [f"p{i}" for i in range(len(frame))])
    frame.iloc[:400].to_csv(tmp_path / "train.csv", index=False)
    frame.iloc[400:].to_csv(tmp_path / "test.csv", index=False)
    request = Request(tmp_path / "train.csv", "target", metric="rmsle", id_column="patient", test=tmp_path / "test.csv")
    made = prepare_task(tmp_path / "t", request)
    answers = pd.read_csv(made.root / "prepared" / "private" / "test.csv")
    assert list(answers["patient"]) == [f"p{i}" for i in range(400, 442)] and made.train_rows == 400
    assert load_task(made.root).metric.name == "val_rmsle"
    with pytest.raises(ConfigError, match="has no 'target' column"):
        frame.drop(columns=["target"]).to_csv(tmp_path / "unlabelled.csv", index=False)
        prepare_task(tmp_path / "u", Request(tmp_path / "train.csv", "target", test=tmp_path / "unlabelled.csv"))


def test_verify_prints_the_rejected_submission_in_one_line(tmp_path):
    program = tmp_path / "short.py"
    program.write_text(SUBMITTER.replace("CHANGE", "sample.iloc[:-5]"))
    out = cli("verify", "breast_cancer", str(program), "--strict", env_cache=tmp_path / "cache")
    assert out.returncode == 1 and "Traceback" not in out.stdout + out.stderr
    (line,) = [ln for ln in out.stdout.splitlines() if "contract-violation" in ln]
    assert "invalid submission: submission.csv has" in line and "the sample submission has" in line


def test_a_baseline_below_the_trivial_predictor_is_not_written_as_the_reference_anchor(tmp_path):
    """Noise for a target: the baseline cannot beat predicting the mean, so only floor and bound are kept, and
    the anchors stay ordered (the bench's normalised scores work on the task `task new` made)."""
    from verifyless.offline.scores import bounded_score

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"a": rng.normal(size=60), "b": rng.choice(["x", "y", "z"], size=60), "y": rng.normal(size=60)}
    )
    frame.to_csv(tmp_path / "noise.csv", index=False)
    made = new_task(tmp_path / "noise", Request(tmp_path / "noise.csv", "y"), LocalSandbox())
    task, score = made.task, made.baseline.score
    assert score is not None and task.metric.orient(score) <= task.metric.orient(made.anchors.floor)
    assert made.anchors.reference is None and task.anchors.reference is None and task.anchors.floor is not None
    assert bounded_score(score, task.anchors, task.metric) == 0.0  # ordered anchors: no error, at or under the floor
