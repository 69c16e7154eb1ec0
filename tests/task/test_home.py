"""A run knows where its task lives (issue 54, item 5): resume, replay, report and export find the task from any
folder, reports label scores with the run's own metric, and a task argument given with ``--resume`` must be the
run's task. Real CLI runs (in this process) on a toy task folder typed as a relative path."""

from __future__ import annotations

import shutil

import pytest
from cli_runs import in_process
from task_folders import toy_task

from verifyless.report.views.curves import best_curve
from verifyless.report.views.runs import run_summary
from verifyless.store import RunStore
from verifyless.task.home import TaskHome, load_run_task, task_home
from verifyless.task.loader import MissingTask


@pytest.fixture
def made(tmp_path, monkeypatch, capsys):
    """A finished run of ``../tasks/toy_transfer`` started from ``tmp_path/start``: (run id, store path)."""
    toy_task(tmp_path / "tasks", 1)
    start = tmp_path / "start"
    start.mkdir()
    monkeypatch.chdir(start)
    out = in_process(monkeypatch, capsys, "run", "../tasks/toy_transfer", "--budget", "2", "--store", "s.db", "-q")
    assert out.returncode == 0, out.stdout + out.stderr
    with RunStore(start / "s.db") as st:
        return st.runs()[0].run_id, start / "s.db"


def test_the_run_records_the_task_folder_and_metric(made, tmp_path):
    run_id, store = made
    with RunStore(store) as st:
        home = task_home(st, run_id)
    assert home == TaskHome(
        "../tasks/toy_transfer", str((tmp_path / "tasks" / "toy_transfer").resolve()), "val_err", "minimize"
    )


def test_resume_and_replay_work_from_another_folder(made, tmp_path, monkeypatch, capsys):
    run_id, store = made
    elsewhere = tmp_path / "a" / "b"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)  # ../tasks/toy_transfer names nothing here
    resumed = in_process(monkeypatch, capsys, "run", "--resume", run_id, "--budget", "3", "--store", str(store), "-q")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    replayed = in_process(monkeypatch, capsys, "replay", run_id, "--store", str(store))
    assert replayed.returncode == 0 and "identical" in replayed.stdout, replayed.stdout + replayed.stderr


def test_reports_label_scores_with_the_runs_metric(made, tmp_path, monkeypatch):
    run_id, store = made
    shutil.rmtree(tmp_path / "tasks")  # not even loadable: the stored metric still labels the scores
    with RunStore(store) as st:
        summary, curve = run_summary(st, run_id), best_curve(st, run_id)
    assert (summary.metric, summary.direction) == ("val_err", "minimize")
    assert (curve.metric, curve.direction) == ("val_err", "minimize")


def test_a_task_gone_from_where_the_run_was_made_is_named(made, tmp_path):
    run_id, store = made
    shutil.move(tmp_path / "tasks", tmp_path / "moved")
    with RunStore(store) as st, pytest.raises(MissingTask) as info:
        load_run_task(st, run_id)
    assert f"gone from {(tmp_path / 'tasks' / 'toy_transfer').resolve()}" in str(info.value)
    assert f"verifyless run PATH --resume {run_id}" in str(info.value) and info.value.exit_code == 2


def test_a_run_stored_before_task_roots_loads_its_task_as_typed(tmp_path, monkeypatch):
    toy_task(tmp_path, 1)
    monkeypatch.chdir(tmp_path)
    with RunStore(tmp_path / "s.db") as st:
        run_id = st.create_run("toy_transfer", {"task": "toy_transfer"})  # no task_root, no task_metric
        assert task_home(st, run_id) == TaskHome("toy_transfer")
        assert load_run_task(st, run_id).name == "toy_transfer"


def test_a_task_argument_with_resume_must_be_the_runs_task(made, monkeypatch, capsys):
    """Issue 54, item 10: ``run TASK --resume RUN`` of a finished run ignored TASK and said "finished"."""
    run_id, store = made
    out = in_process(monkeypatch, capsys, "run", "diabetes", "--resume", run_id, "--store", str(store))
    assert out.returncode == 2, out.stdout + out.stderr
    assert f"run {run_id} is a run of task 'toy_transfer', not of 'diabetes'" in out.stderr
    same = in_process(monkeypatch, capsys, "run", "../tasks/toy_transfer", "--resume", run_id, "--store", str(store))
    assert same.returncode == 0 and "is finished" in same.stdout, same.stdout + same.stderr
