"""Conformance of every registered task kind (``task.loader.KINDS``) to the ``TaskKind`` contract.

Each kind gets a tiny folder of its own layout and a program that writes valid output for it; every kind then
goes through detect, load, prepare (with a real sandbox run of the step it returns) and judge. A kind added to
``KINDS`` without a case here fails the first test.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from competitions import cache, spooky_folder  # noqa: F401  (cache: each test's own split cache, autouse)

from verifyless.errors import InvalidSubmission, TaskError
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import KINDS, Task, kind_of, load_task
from verifyless.task.base import Band, Metric
from verifyless.task.kind import TaskKind
from verifyless.verify import check_metrics, copy_public_data, split_metrics

SANDBOX = LocalSandbox()

NATIVE_PROGRAM = """import argparse, pathlib
ap = argparse.ArgumentParser(); ap.add_argument("--data"); ap.add_argument("--out"); a = ap.parse_args()
# EVOLVE-BLOCK-START
rows = (pathlib.Path(a.data) / "train.txt").read_text().split()
# EVOLVE-BLOCK-END
(pathlib.Path(a.out) / "pred.txt").write_text(" ".join(rows))
"""

NATIVE_SCORER = """from pathlib import Path

def score(outdir, hidden, public):
    labels = Path(hidden[0]).read_text().split()
    preds = (Path(outdir) / "pred.txt").read_text().split()
    hits = [p == y for p, y in zip(preds, labels, strict=True)]
    return {"val_accuracy": sum(hits[:2]) / 2, "test_accuracy": sum(hits[2:]) / 2}
"""

OE_PROGRAM = """# EVOLVE-BLOCK-START
def solve():
    return 3
# EVOLVE-BLOCK-END
"""

OE_EVALUATOR = """import importlib.util

def evaluate(program_path):
    spec = importlib.util.spec_from_file_location("candidate", program_path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return {"combined_score": 1.0 / (1 + abs(mod.solve() - 4))}
"""

COMPETITION_PROGRAM = """import argparse, pathlib, shutil
ap = argparse.ArgumentParser(); ap.add_argument("--data"); ap.add_argument("--out"); a = ap.parse_args()
shutil.copy(pathlib.Path(a.data) / "sample_submission.csv", pathlib.Path(a.out) / "submission.csv")
"""


def native_folder(base: Path) -> Path:
    root = base / "native"
    (root / "public").mkdir(parents=True)
    (root / "hidden").mkdir()
    (root / "public" / "train.txt").write_text("a b c d")
    (root / "hidden" / "labels.txt").write_text("a b c x")
    (root / "statement.md").write_text("Predict the labels.\n")
    (root / "solution.py").write_text(NATIVE_PROGRAM)
    (root / "score.py").write_text(NATIVE_SCORER)
    spec = {
        "name": "tiny",
        "statement": "statement.md",
        "program": "solution.py",
        "metric": {"name": "val_accuracy", "direction": "maximize", "lower": 0, "upper": 1},
        "metrics": {"validation": ["val_accuracy"], "test": ["test_accuracy"]},
        "data": {"public": ["public/train.txt"], "hidden": ["hidden/labels.txt"]},
        "score": "score.py:score",
    }
    (root / "task.yaml").write_text(yaml.safe_dump(spec))
    return root


def openevolve_folder(base: Path) -> Path:
    root = base / "oe"
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(OE_PROGRAM)
    (root / "evaluator.py").write_text(OE_EVALUATOR)
    return root


@dataclass(frozen=True)
class Case:
    """A tiny folder of one kind and a program that writes valid output for it."""

    build: Callable[[Path], Path]
    program: Callable[[Task], str]


CASES = {
    "native": Case(native_folder, lambda task: task.baseline_program),
    "openevolve": Case(openevolve_folder, lambda task: task.baseline_program),
    "competition": Case(spooky_folder, lambda task: COMPETITION_PROGRAM),
}


def workspace(task: Task, program: str, ws: Path) -> Path:
    """What verify puts in every workspace before the kind prepares it."""
    ws.mkdir()
    copy_public_data(task, ws / "public")
    (ws / "out").mkdir()
    (ws / task.program_file).write_text(program, encoding="utf-8")
    return ws


def _ids(kind: TaskKind) -> str:
    return kind.name


def test_every_registered_kind_has_a_case_and_a_distinct_name():
    names = [kind.name for kind in KINDS]
    assert len(set(names)) == len(names) and set(names) == set(CASES)


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_detect_recognises_only_its_own_layout_and_load_picks_it(kind, tmp_path):
    folders = {name: case.build(tmp_path / name) for name, case in CASES.items()}
    for name, root in folders.items():
        assert kind.detect(root) is (name == kind.name), (kind.name, name)
    assert not kind.detect(tmp_path / "empty") and not kind.detect(tmp_path)
    task = kind.load(folders[kind.name])
    assert task.kind == kind.name and kind_of(task) is kind
    assert load_task(folders[kind.name]) == task


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_prepared_step_runs_in_the_sandbox_and_judges_to_valid_metrics(kind, tmp_path):
    task = kind.load(CASES[kind.name].build(tmp_path / "task"))
    ws = workspace(task, CASES[kind.name].program(task), tmp_path / "ws")
    step = kind.prepare(task, ws, None)
    for hidden in task.hidden_data:  # the untrusted step never sees hidden data
        assert any(hidden == h or hidden.is_relative_to(h) for h in step.hide), hidden
    assert not any(ws.is_relative_to(h) for h in step.hide)
    result = SANDBOX.run(list(step.argv), ws, task.limits, hide=step.hide, expose=step.expose, env=step.env)
    assert result.status == "ok", result.stderr_tail
    judged = kind.judge(task, ws, None)
    assert judged.failure is None and not judged.silent
    metrics, _ = split_metrics(task, judged.raw)
    assert check_metrics(task, metrics) is None and math.isfinite(metrics[task.metric.name])


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_judging_a_workspace_the_program_left_empty_is_the_candidates_failure(kind, tmp_path):
    task = kind.load(CASES[kind.name].build(tmp_path / "task"))
    ws = workspace(task, CASES[kind.name].program(task), tmp_path / "ws")
    kind.prepare(task, ws, None)
    try:
        judged = kind.judge(task, ws, None)
    except InvalidSubmission:  # a submission contract that names the missing file: a contract violation
        return
    assert judged.failure and judged.raw is None


@pytest.mark.parametrize("kind", KINDS, ids=_ids)
def test_hidden_data_gone_after_loading_is_the_tasks_problem(kind, tmp_path):
    task = kind.load(CASES[kind.name].build(tmp_path / "task"))
    ws = workspace(task, CASES[kind.name].program(task), tmp_path / "ws")
    step = kind.prepare(task, ws, None)
    assert (
        SANDBOX.run(list(step.argv), ws, task.limits, hide=step.hide, expose=step.expose, env=step.env).status == "ok"
    )
    if not task.hidden_data:  # OpenEvolve: the evaluator runs in the sandbox and the trusted side reads no hidden file
        assert kind.judge(task, ws, None).failure is None
        return
    first = task.hidden_data[0]
    shutil.rmtree(first) if first.is_dir() else first.unlink()
    with pytest.raises(TaskError, match="gone"):
        kind.judge(task, ws, None)


def test_a_task_of_an_unknown_kind_names_the_known_ones(tmp_path):
    task = Task("t", tmp_path, "notebook", "", "p.py", "", Band(), Metric("m", "maximize"))
    with pytest.raises(TaskError, match="native"):
        kind_of(task)
