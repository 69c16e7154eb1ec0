"""The verified data report: computed in the sandbox on the public data, deterministic, cached, rendered."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from verifyless import datareport
from verifyless.datareport import DataReport, compute_data_report, data_report, parse_report, render_markdown
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.task.base import Band, Limits, Metric, Target, Task

SANDBOX = LocalSandbox()
ISOLATED = SANDBOX.isolation != "process"
needs_isolation = pytest.mark.skipif(not ISOLATED, reason="namespaces unavailable: process mode hides nothing")


class Spy:
    """Delegates to a real sandbox and records every call's arguments."""

    name = "spy"

    def __init__(self, inner=SANDBOX):
        self.inner, self.calls = inner, []

    def run(self, argv, workdir, limits, *, env=None, hide=(), expose=()):
        self.calls.append({"argv": list(argv), "limits": limits, "hide": list(hide)})
        return self.inner.run(argv, workdir, limits, env=env, hide=hide, expose=expose)


def small_task(tmp_path: Path, train: str, others: dict[str, str] | None = None, target: bool = True) -> Task:
    root = tmp_path / "task"
    (root / "public").mkdir(parents=True)
    (root / "hidden").mkdir()
    (root / "hidden" / "labels.csv").write_text("label\nSECRET\n")
    (root / "public" / "train.csv").write_text(train)
    for name, text in (others or {}).items():
        (root / "public" / name).write_text(text)
    public = tuple(sorted((root / "public").iterdir()))
    return Task(
        name="small",
        root=root,
        kind="native",
        statement="",
        program_file="solution.py",
        baseline_program="",
        band=Band(),
        metric=Metric("acc", "maximize"),
        public_data=public,
        hidden_data=(root / "hidden" / "labels.csv",),
        limits=Limits(wall_seconds=20, memory_mb=1024),
        target=Target("y", "classification", (root / "public" / "train.csv",)) if target else None,
    )


def test_diabetes_regression_report(tmp_path):
    report = compute_data_report(load_task("diabetes"), SANDBOX, workspace_root=tmp_path)
    assert report.unavailable == ()
    files = {f.name: f for f in report.files}
    assert sorted(files) == ["test_inputs.csv", "train.csv", "val_inputs.csv"]
    assert (files["train.csv"].rows, len(files["train.csv"].columns), files["train.csv"].duplicate_rows) == (282, 11, 0)
    assert all(c.type == "numeric" and c.missing == 0 for c in files["train.csv"].columns)
    assert report.target is not None and report.target.kind == "regression" and report.target.classes == ()
    assert (
        report.target.distribution["min"] <= report.target.distribution["median"] <= report.target.distribution["max"]
    )
    assert len(report.associations) == 10 and {a.measure for a in report.associations} == {"abs_pearson_r"}
    scores = [a.score for a in report.associations]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    assert {a.feature for a in report.associations[:2]} == {"bmi", "s5"}  # the two known strongest predictors
    assert {(s.file, s.reference) for s in report.shifts} == {
        ("val_inputs.csv", "train.csv"),
        ("test_inputs.csv", "train.csv"),
    }
    assert len(report.shifts) == 20 and "target" not in {s.column for s in report.shifts}


def test_affairs_classification_report(tmp_path):
    report = compute_data_report(load_task("affairs_gbm"), SANDBOX, workspace_root=tmp_path)
    assert report.target is not None and report.target.kind == "classification"
    assert [label for label, _ in report.target.classes] == ["0", "1"]
    assert sum(n for _, n in report.target.classes) == 2000
    assert {a.measure for a in report.associations} == {"anova_f"} and report.associations[0].feature == "rate_marriage"
    assert {f.name: f.duplicate_rows for f in report.files}["train.csv"] == 190
    text = render_markdown(report)
    assert "Class balance: 0: 1363 (68.2%), 1: 637 (31.9%)" in text and "| rate_marriage |" in text


def test_an_openevolve_folder_says_what_it_could_not_compute(tmp_path):
    report = data_report(load_task("circle_packing"), SANDBOX, workspace_root=tmp_path)
    assert report.files == () and report.target is None
    assert len(report.unavailable) == 1 and report.unavailable[0].startswith("no public data")
    assert "### Not computed" in render_markdown(report) and "duplicate rows were not computed" in render_markdown(
        report
    )


def test_a_task_without_a_declared_target_says_so(tmp_path):
    report = compute_data_report(load_task("sunspots"), SANDBOX, workspace_root=tmp_path)
    assert [f.name for f in report.files] == ["history.csv", "test_context.csv"] and report.target is None
    assert any("declares no data.target" in reason for reason in report.unavailable)
    assert report.associations == () and report.shifts == ()


def test_types_missing_values_duplicates_and_shift_of_a_small_table(tmp_path):
    train = "a,colour,note,y\n" + "".join(
        f"{i if i % 10 else ''},{'red' if i % 2 else 'blue'},note {i},{i % 2}\n" for i in range(40)
    )
    train += "7,red,dup,1\n7,red,dup,1\n"  # one duplicate of a new row
    val = "a,colour,note\n" + "".join(f"{i + 100},red,n{i}\n" for i in range(40))
    report = compute_data_report(small_task(tmp_path, train, {"val_inputs.csv": val}), SANDBOX, workspace_root=tmp_path)
    columns = {c.name: c for c in {f.name: f for f in report.files}["train.csv"].columns}
    assert (columns["a"].type, columns["a"].missing) == ("numeric", 4)
    assert (columns["colour"].type, columns["colour"].distinct) == ("categorical", 2)
    assert columns["note"].type == "text" and columns["colour"].mean is None
    assert {f.name: f.duplicate_rows for f in report.files}["train.csv"] == 1
    assert report.target.classes == (("0", 20), ("1", 22))
    assert [(s.column, s.smd is not None and s.smd > 2) for s in report.shifts] == [("a", True)]  # shifted by +100
    assert "Missing values in train.csv: a (4)" in render_markdown(report)


def test_the_report_is_deterministic_and_round_trips(tmp_path):
    task = load_task("diabetes")
    first = compute_data_report(task, SANDBOX, workspace_root=tmp_path)
    second = compute_data_report(task, SANDBOX, workspace_root=tmp_path)
    assert first.to_json() == second.to_json()
    assert json.loads(first.to_json()) == json.loads(json.dumps(json.loads(first.to_json()), sort_keys=True))
    assert DataReport.from_json(first.to_json()) == first
    assert first.content_hash == datareport.task_data_hash(task) and len(first.content_hash) == 64


def test_computed_once_per_content_hash_and_stored_as_a_blob(tmp_path, monkeypatch):
    monkeypatch.setattr(datareport, "_cache", {})
    task = small_task(tmp_path, "x,y\n1,0\n2,1\n3,0\n")
    spy, blobs = Spy(), []
    first = data_report(task, spy, blobs.append, workspace_root=tmp_path)
    second = data_report(task, spy, blobs.append, workspace_root=tmp_path)
    assert first is second and len(spy.calls) == 1 and blobs == [first.to_json()] * 2
    (task.root / "public" / "train.csv").write_text("x,y\n1,0\n2,1\n")  # new content: a new report
    third = data_report(task, spy, workspace_root=tmp_path)
    assert len(spy.calls) == 2 and third.content_hash != first.content_hash and third.files[0].rows == 2


def test_the_script_runs_in_the_sandbox_under_the_tasks_restrictions(tmp_path):
    task = small_task(tmp_path, "x,y\n1,0\n2,1\n")
    spy = Spy()
    compute_data_report(task, spy, workspace_root=tmp_path)
    (call,) = spy.calls
    assert call["limits"] == task.limits
    assert task.root in call["hide"] and task.hidden_data[0] in call["hide"]


@needs_isolation
def test_the_script_cannot_see_the_hidden_labels(tmp_path):
    task = small_task(tmp_path, "x,y\n1,0\n2,1\n")
    assert compute_data_report(task, SANDBOX, workspace_root=tmp_path / "a").hidden_visible == ()
    # the check can fail: without isolation the hidden file is visible and the report says so
    exposed = compute_data_report(task, LocalSandbox(isolation="process"), workspace_root=tmp_path / "b")
    assert str(task.hidden_data[0]) in exposed.hidden_visible
    assert "**Warning:** the sandbox did not hide" in render_markdown(exposed)


def test_a_failing_script_run_is_reported_not_raised(tmp_path):
    # three open files: the interpreter cannot even import its standard library
    task = dataclasses.replace(small_task(tmp_path, "x,y\n1,0\n"), limits=Limits(wall_seconds=20, open_files=3))
    report = compute_data_report(task, SANDBOX, workspace_root=tmp_path)
    assert report.files == () and report.unavailable[0].startswith("the data report script failed in the sandbox")


def test_malformed_script_output_is_rejected():
    good = {"files": [], "associations": [], "shifts": [], "unavailable": [], "visible": [], "target": None}
    assert parse_report(good, "t", "h") == DataReport("t", "h")
    with pytest.raises(ValueError, match="field rows"):
        parse_report({**good, "files": [{"name": "a.csv", "rows": -1, "columns": [], "duplicate_rows": 0}]}, "t", "h")
    with pytest.raises(ValueError, match="field measure"):
        parse_report({**good, "associations": [{"feature": "a", "measure": "magic", "score": 1.0}]}, "t", "h")


def test_show_counts_public_files_that_are_not_tables_apart_from_real_gaps():
    import dataclasses

    from verifyless.datareport import NOT_A_TABLE, SCRIPT, status_line
    from verifyless.events import DataReported

    assert NOT_A_TABLE in SCRIPT.read_text()  # the sandboxed script writes exactly this text
    payload = DataReported(
        files=("train.csv", "test.csv"),
        unavailable=(f"description.md: {NOT_A_TABLE}", "target y: not in train.csv"),
        seconds=0.1,
    )
    line = status_line(payload)
    assert "1 other file(s) not tables (description.md)" in line
    assert line.endswith("; not computed: target y: not in train.csv") and "description.md: not a CSV" not in line
    assert "not computed" not in status_line(dataclasses.replace(payload, unavailable=payload.unavailable[:1]))
