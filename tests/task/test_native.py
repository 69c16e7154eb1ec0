"""Native task folders' trusted scorer (task/native.py): a time limit for every scorer kind (issue 54, item 4).

A scorer that hangs used to hang ``verify`` and ``run`` for ever (a ``score.py:function`` scorer had no limit); past
``limits.score_seconds`` it is now the evaluator's failure, ``ScorerTimedOut`` (exit 3), naming the scorer.
"""

from __future__ import annotations

import time

import pytest
from task_folders import hanging_scorer_task, toy_task

from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.task.base import Limits
from verifyless.task.native import ScorerTimedOut
from verifyless.verify import verify


@pytest.mark.parametrize("command", [False, True], ids=["function", "command"])
def test_a_scorer_past_its_time_limit_is_the_evaluators_failure_naming_it(tmp_path, command):
    task = load_task(str(hanging_scorer_task(tmp_path, command=command)))
    assert task.limits.scorer_seconds == 1
    started = time.monotonic()
    with pytest.raises(ScorerTimedOut) as stopped:
        verify(task, task.baseline_program, LocalSandbox())
    assert time.monotonic() - started < 30
    line = str(stopped.value)
    assert stopped.value.exit_code == 3 and "\n" not in line
    assert f"its trusted scorer {task.scorer} did not finish within 1s (limits.score_seconds)" in line


def test_a_scorer_within_its_limit_scores_and_its_exceptions_stay_candidate_failures(tmp_path):
    task = load_task(str(hanging_scorer_task(tmp_path, spared=5)))  # the baseline writes 5: scored at once
    assert verify(task, task.baseline_program, LocalSandbox()).metrics == {"val_err": 4.0}
    broken = task.baseline_program.replace('"value.txt").write_text(str(A))', '"value.txt").write_text("x")')
    failed = verify(task, broken, LocalSandbox())
    assert failed.status.value == "failed" and "scorer raised ValueError" in failed.reason


def test_the_scorer_limit_defaults_to_the_larger_of_60_s_and_the_wall_limit(tmp_path):
    assert Limits().scorer_seconds == 60 and Limits(wall_seconds=600).scorer_seconds == 600
    assert load_task(str(toy_task(tmp_path, 1))).limits.scorer_seconds == 60
