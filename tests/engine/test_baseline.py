"""Where a failure belongs (issue 46, item 1): the program's own bugs raise inside libraries and are still the
program's; the trusted side failing to read its own hidden files is a task problem found when the task loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from cli_runs import cli
from competitions import competition

from verifyless.engine.baseline import BaselineFailed, check_baseline, failure_source
from verifyless.errors import TaskError
from verifyless.node import Status, Verification
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.verify import verify

CRASH = 'import pandas as pd\npd.read_csv("no_such_file.csv")\n'
LIBRARY_ONLY = """Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/sklearn/base.py", line 1389, in wrapper
    return fit_method(estimator, *args, **kwargs)
  File "/venv/lib/python3.11/site-packages/sklearn/utils/validation.py", line 1130, in check_array
    raise ValueError(msg)
ValueError: Found array with 0 feature(s) (shape=(48, 0)) while a minimum of 1 is required.
"""


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VERIFYLESS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_repro_a_program_bug_raised_inside_pandas_is_the_program_s(tmp_path):
    (tmp_path / "crash.py").write_text(CRASH)
    out = cli("verify", "diabetes", "crash.py", cwd=tmp_path)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "evaluator" not in text, text
    assert "FileNotFoundError" in text
    assert cli("verify", "diabetes", "crash.py", "--strict", cwd=tmp_path).returncode == 1


def test_allow_failed_baseline_gets_past_a_program_bug_raised_inside_a_library(tmp_path):
    task = load_task("diabetes")
    v = verify(task, CRASH, LocalSandbox(), workspace_root=tmp_path)
    assert v.status is Status.FAILED and failure_source(task, v) == "program", v.stderr_tail
    check_baseline(task, v, allow_failed=True)
    with pytest.raises(BaselineFailed, match="the program itself failed"):
        check_baseline(task, v, allow_failed=False)


def test_a_clipped_traceback_of_a_program_the_run_step_starts_is_the_program_s():
    """The stderr tail keeps the last 4 KB: a deep library traceback may have lost the program's own frames."""
    task = load_task("diabetes")
    v = Verification(status=Status.FAILED, reason="ValueError: Found array", stderr_tail=LIBRARY_ONLY)
    assert failure_source(task, v) == "program"


def test_an_openevolve_evaluator_is_blamed_only_when_the_program_is_nowhere_in_the_traceback():
    task = load_task("circle_packing")
    mine = LIBRARY_ONLY.replace(
        "Traceback (most recent call last):\n",
        f'Traceback (most recent call last):\n  File "/ws/{task.program_file}", line 9, in run\n    fit()\n',
    )
    assert failure_source(task, Verification(status=Status.FAILED, reason="ValueError", stderr_tail=mine)) == "program"
    theirs = Verification(status=Status.FAILED, reason="ValueError", stderr_tail=LIBRARY_ONLY)
    assert failure_source(task, theirs) == "evaluator"


def test_a_competition_without_its_private_answers_fails_to_load_in_one_line(tmp_path):
    root = competition(tmp_path)
    (root / "prepared" / "private" / "test.csv").unlink()
    with pytest.raises(TaskError) as raised:
        load_task(root)
    assert len(str(raised.value).splitlines()) == 1 and "private/test.csv" in str(raised.value), raised.value
    out = cli("verify", str(root), cwd=tmp_path)
    assert out.returncode == 3 and "Traceback" not in out.stderr, out.stderr
    assert [ln for ln in out.stderr.splitlines() if "private/test.csv" in ln], out.stderr


def test_short_private_answers_are_the_task_s_problem_not_the_candidate_s(tmp_path):
    root = competition(tmp_path)
    answers = root / "prepared" / "private" / "test.csv"
    pd.read_csv(answers).iloc[:-4].to_csv(answers, index=False)
    with pytest.raises(TaskError, match="36 of test.csv's 40 ids"):
        load_task(root)


def test_hidden_files_that_vanish_after_loading_stop_verification_as_a_task_error(tmp_path):
    root = competition(tmp_path)
    task = load_task(root)
    assert verify(task, task.baseline_program, LocalSandbox()).status is Status.OK
    (root / "prepared" / "private" / "test.csv").unlink()
    with pytest.raises(TaskError, match="private/test.csv"):
        verify(task, task.baseline_program, LocalSandbox())


def test_a_native_task_s_hidden_file_that_vanishes_after_loading_is_a_task_error(tmp_path):
    root = tmp_path / "diabetes"
    shutil.copytree(load_task("diabetes").root, root)
    task = load_task(root)
    (root / "hidden" / "test_targets.csv").unlink()
    with pytest.raises(TaskError, match="test_targets.csv is gone"):
        verify(task, task.baseline_program, LocalSandbox())
    with pytest.raises(TaskError, match="test_targets.csv' not found"):
        load_task(root)
