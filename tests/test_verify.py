"""verify(): tiny native and OpenEvolve-style tasks built in tmp dirs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from verifyless.errors import TaskError
from verifyless.node import Status, content_hash
from verifyless.sandbox.local import LocalSandbox
from verifyless.task.base import Band, Limits, Metric, Task
from verifyless.verify import verify

SANDBOX = LocalSandbox()
LIMITS = Limits(wall_seconds=4.0, memory_mb=1024, output_bytes=50_000)

SCORER = """
import json
from pathlib import Path

def score(outdir, hidden, public):
    labels = (Path(hidden[0]) / "labels.txt").read_text().split()
    preds = (Path(outdir) / "pred.txt").read_text().split()
    hits = [p == y for p, y in zip(preds, labels)]
    return {"accuracy": sum(hits[:2]) / 2, "test_accuracy": sum(hits[2:]) / 2}

def passthrough(outdir, hidden, public):
    return json.loads((Path(outdir) / "metrics.json").read_text())
"""

GOOD = """
import argparse, pathlib
ap = argparse.ArgumentParser(); ap.add_argument("--data"); ap.add_argument("--out"); a = ap.parse_args()
# EVOLVE-BLOCK-START
rows = (pathlib.Path(a.data) / "train.txt").read_text().split()
pred = rows  # the public data happens to equal the labels
# EVOLVE-BLOCK-END
(pathlib.Path(a.out) / "pred.txt").write_text(" ".join(pred))
"""


def native_task(tmp_path: Path, *, scorer: str = "score.py:score", **changes) -> Task:
    root = tmp_path / "task"
    for sub in ("public", "hidden"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "public" / "train.txt").write_text("a b c d")
    (root / "hidden" / "labels.txt").write_text("a b c x")
    (root / "score.py").write_text(SCORER)
    (root / "score_cmd.py").write_text(
        "import json, sys\nfrom pathlib import Path\n"
        "pred = (Path(sys.argv[1]) / 'pred.txt').read_text().split()\n"
        "labels = (Path(sys.argv[2]) / 'labels.txt').read_text().split()\n"
        "print('noise'); print(json.dumps({'accuracy': sum(p == y for p, y in zip(pred, labels)) / 4}))\n"
    )
    fields = dict(
        name="tiny",
        root=root,
        kind="native",
        statement="Predict the labels.",
        program_file="solution.py",
        baseline_program=GOOD,
        band=Band(),
        metric=Metric("accuracy", "maximize", 0.0, 1.0),
        public_data=(root / "public" / "train.txt",),
        hidden_data=(root / "hidden",),
        run_command=("{python}", "{program}", "--data", "{public}", "--out", "{outdir}"),
        scorer=scorer,
        validation_metrics=("accuracy",),
        test_metrics=("test_accuracy",),
        limits=LIMITS,
    )
    fields.update(changes)
    return Task(**fields)


def run(task: Task, program: str, tmp_path: Path, **kw):
    return verify(task, program, SANDBOX, workspace_root=tmp_path / "runs", **kw)


# ------------------------------------------------------------------ native


def test_ok_fills_the_record(tmp_path):
    v = run(native_task(tmp_path), GOOD, tmp_path)
    assert v.status is Status.OK, v.reason
    assert v.score == 1.0 and v.metrics == {"accuracy": 1.0}
    assert v.test_score == 0.5 and v.test_metrics == {"test_accuracy": 0.5}
    assert "test_accuracy" not in v.metrics  # hidden-test numbers never reach search
    assert v.program_hash == content_hash(GOOD)
    assert v.run_seconds > 0 and v.overhead_seconds > 0 and v.peak_memory_mb > 0
    assert not list((tmp_path / "runs").iterdir()), "the workspace must be deleted"


def test_keep_workspace_and_layout(tmp_path):
    v = run(native_task(tmp_path), GOOD, tmp_path, keep_workspace=True)
    assert v.status is Status.OK
    (ws,) = (tmp_path / "runs").iterdir()
    assert (ws / "solution.py").read_text() == GOOD
    assert (ws / "public" / "train.txt").exists() and (ws / "out" / "pred.txt").exists()
    assert not (ws / "public" / "labels.txt").exists() and not (ws / "hidden").exists()


def test_crash_is_failed_with_the_last_stderr_line(tmp_path):
    v = run(native_task(tmp_path), GOOD.replace("pred = rows", "raise ValueError('bad feature 7')"), tmp_path)
    assert v.status is Status.FAILED and "ValueError: bad feature 7" in v.reason
    assert v.score is None and v.metrics == {}
    assert "Traceback" in v.stderr_tail and len(v.stderr_tail.encode()) <= 4096


def test_timeout(tmp_path):
    task = native_task(tmp_path, limits=Limits(wall_seconds=1.5, memory_mb=1024))
    v = run(task, GOOD.replace("pred = rows", "import time; time.sleep(30)"), tmp_path)
    assert v.status is Status.TIMEOUT and "wall-clock" in v.reason and v.score is None


def test_output_flood_is_a_contract_violation(tmp_path):
    v = run(native_task(tmp_path), GOOD.replace("pred = rows", "while True: print('z' * 500)"), tmp_path)
    assert v.status is Status.CONTRACT_VIOLATION and v.reason.startswith("output limit")


@pytest.mark.skipif(SANDBOX.isolation == "process", reason="process mode does not hide paths")
def test_the_candidate_cannot_read_hidden_labels(tmp_path):
    task = native_task(tmp_path)
    cheat = GOOD.replace("pred = rows", f"pred = open({str(task.root / 'hidden' / 'labels.txt')!r}).read().split()")
    v = run(task, cheat, tmp_path)
    assert v.status is Status.FAILED and "No such file" in v.reason


def test_symlink_to_hidden_labels_is_a_contract_violation(tmp_path):
    task = native_task(tmp_path)
    trick = GOOD.replace(
        '(pathlib.Path(a.out) / "pred.txt").write_text(" ".join(pred))',
        f'import os; os.symlink({str(task.root / "hidden" / "labels.txt")!r}, pathlib.Path(a.out) / "pred.txt")',
    )
    v = run(task, trick, tmp_path)
    assert v.status is Status.CONTRACT_VIOLATION and "symlink" in v.reason


def test_fifo_in_outputs_is_a_contract_violation(tmp_path):
    trick = GOOD.replace(
        '(pathlib.Path(a.out) / "pred.txt").write_text(" ".join(pred))',
        'import os; os.mkfifo(pathlib.Path(a.out) / "pred.txt")',
    )
    v = run(native_task(tmp_path), trick, tmp_path)
    assert v.status is Status.CONTRACT_VIOLATION and "FIFO" in v.reason


def test_scorer_exception_is_a_candidate_failure(tmp_path):
    no_output = GOOD.replace('(pathlib.Path(a.out) / "pred.txt").write_text(" ".join(pred))', "pass")
    v = run(native_task(tmp_path), no_output, tmp_path)
    assert v.status is Status.FAILED and v.reason.startswith("the program wrote no output (out/ is empty)")
    assert "scorer raised FileNotFoundError" in v.reason
    wrong = GOOD.replace('(pathlib.Path(a.out) / "pred.txt")', '(pathlib.Path(a.out) / "other.txt")')
    v = run(native_task(tmp_path), wrong, tmp_path)
    assert v.status is Status.FAILED and v.reason.startswith("invalid output: scorer raised FileNotFoundError")


def test_broken_scorer_file_is_a_task_error(tmp_path):
    task = native_task(tmp_path, scorer="score.py:nope")
    with pytest.raises(TaskError, match="no function 'nope'"):
        run(task, GOOD, tmp_path)
    assert not list((tmp_path / "runs").iterdir()), "the workspace is cleaned up on errors too"


def test_command_scorer(tmp_path):
    task = native_task(tmp_path, scorer="{python} score_cmd.py {outdir} {hidden}", test_metrics=())
    v = run(task, GOOD, tmp_path)
    assert v.status is Status.OK and v.score == 0.75


def _writes_metrics(value_literal: str) -> str:
    return GOOD.replace(
        '(pathlib.Path(a.out) / "pred.txt").write_text(" ".join(pred))',
        f'(pathlib.Path(a.out) / "metrics.json").write_text({value_literal!r})',
    )


@pytest.mark.parametrize(
    "payload, expected",
    [
        ('{"loss": 0.3}', "'accuracy' is missing (got: loss)"),
        ('{"accuracy": NaN}', "not finite"),
        ('{"accuracy": Infinity}', "not finite"),
        ('{"accuracy": "0.9"}', "not a number"),
        ('{"accuracy": true}', "not a number"),
        ('{"accuracy": 1.5}', "above its upper bound 1"),
        ('{"accuracy": -0.1}', "below its lower bound 0"),
        ("[0.9]", "not a mapping"),
    ],
    ids=["missing", "nan", "inf", "string", "bool", "above", "below", "not-a-dict"],
)
def test_invalid_metric_table(tmp_path, payload, expected):
    task = native_task(tmp_path, scorer="score.py:passthrough", test_metrics=())
    v = run(task, _writes_metrics(payload), tmp_path)
    assert v.status is Status.INVALID_METRIC and expected in v.reason, v.reason
    assert v.score is None and v.metrics == {}


def test_extra_metrics_are_kept_only_when_numeric(tmp_path):
    task = native_task(tmp_path, scorer="score.py:passthrough", test_metrics=())
    v = run(task, _writes_metrics('{"accuracy": 0.8, "f1": 0.7, "note": "hi", "flag": true}'), tmp_path)
    assert v.status is Status.OK and v.metrics == {"accuracy": 0.8, "f1": 0.7}


# ------------------------------------------------------------------ openevolve

OE_PROGRAM = """
# EVOLVE-BLOCK-START
def solve():
    return 3
# EVOLVE-BLOCK-END
"""


def openevolve_task(tmp_path: Path, evaluator: str, cascade: tuple[str, ...] = ()) -> Task:
    root = tmp_path / "oe"
    (root / "secret").mkdir(parents=True)
    (root / "initial_program.py").write_text(OE_PROGRAM)
    (root / "evaluator.py").write_text(evaluator)
    (root / "target.txt").write_text("3")
    (root / "secret" / "answers.txt").write_text("hidden")
    return Task(
        name="oe",
        root=root,
        kind="openevolve",
        statement="Return the target.",
        program_file="initial_program.py",
        baseline_program=OE_PROGRAM,
        band=Band(),
        metric=Metric("combined_score", "maximize"),
        hidden_data=(root / "secret",),
        validation_metrics=("combined_score",),
        limits=LIMITS,
        evaluator=root / "evaluator.py",
        cascade=cascade,
    )


EVALUATE = """
import importlib.util, os
from pathlib import Path

def _solve(path):
    spec = importlib.util.spec_from_file_location("candidate", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod.solve()

def evaluate(program_path):
    target = int((Path(__file__).parent / "target.txt").read_text())
    value = _solve(program_path)
    return {"combined_score": 1.0 / (1 + abs(value - target)), "value": value, "label": "text is dropped",
            "saw_secret": float(os.path.exists(Path(__file__).parent / "secret"))}
"""


def test_openevolve_evaluate(tmp_path):
    v = run(openevolve_task(tmp_path, EVALUATE), OE_PROGRAM.replace("return 3", "return 5"), tmp_path)
    assert v.status is Status.OK, v.reason
    assert v.score == pytest.approx(1 / 3)
    assert v.metrics == {"combined_score": pytest.approx(1 / 3), "value": 5.0, "saw_secret": 0.0}


def test_openevolve_crash_and_bad_score(tmp_path):
    task = openevolve_task(tmp_path, EVALUATE)
    crashed = run(task, OE_PROGRAM.replace("return 3", "return 1 / 0"), tmp_path)
    assert crashed.status is Status.FAILED and "ZeroDivisionError" in crashed.reason
    text = openevolve_task(tmp_path / "b", "def evaluate(p):\n    return {'combined_score': 'great'}\n")
    bad = run(text, OE_PROGRAM, tmp_path)
    assert bad.status is Status.INVALID_METRIC and "not a number" in bad.reason


CASCADE = (
    EVALUATE
    + """
class Result:
    def __init__(self, metrics):
        self.metrics = metrics

def evaluate_stage1(program_path):
    value = _solve(program_path)
    return {"combined_score": 0.0 if value < 0 else 0.5, "stage1": 1.0}

def evaluate_stage2(program_path):
    if _solve(program_path) == 4:
        raise RuntimeError("stage 2 exploded")
    return Result(evaluate(program_path))
"""
)


@pytest.mark.parametrize(
    "body, score, has_stage2",
    [("return 3", 1.0, True), ("return -1", 0.0, False), ("return 4", 0.5, False)],
    ids=["full-cascade", "stopped-by-score", "stopped-by-error"],
)
def test_openevolve_cascade(tmp_path, body, score, has_stage2):
    task = openevolve_task(tmp_path, CASCADE, cascade=("evaluate_stage1", "evaluate_stage2"))
    v = run(task, OE_PROGRAM.replace("return 3", body), tmp_path)
    assert v.status is Status.OK, v.reason
    assert v.score == score and v.metrics["stage1"] == 1.0
    assert ("value" in v.metrics) is has_stage2


def test_openevolve_folder_is_shown_read_only_without_hidden_files(tmp_path):
    task = openevolve_task(tmp_path, EVALUATE)
    (task.root / ".env").write_text("API_KEY=sk-dotfile-secret")
    v = run(task, OE_PROGRAM, tmp_path, keep_workspace=True)
    (ws,) = (tmp_path / "runs").iterdir()
    assert v.status is Status.OK and v.score == 1.0 and v.metrics["saw_secret"] == 0.0
    assert not (ws / "evaluator.py").exists() and not (ws / "secret").exists()  # nothing copied
    assert json.loads((ws / "out" / "metrics.json").read_text())["stages_run"] == 1
    probe = OE_PROGRAM.replace(
        "    return 3",
        (
            "    import os\n"
            f"    root = {str(task.root)!r}\n"
            "    for name in ('target.txt', 'evaluator.py'):\n"
            "        try:\n            open(os.path.join(root, name), 'a').write('x'); return 100\n"
            "        except OSError:\n            pass\n"
            "    for name in ('.env', 'secret/answers.txt'):\n"
            "        try:\n            if open(os.path.join(root, name)).read(): return 200\n"
            "        except OSError:\n            pass\n"
            "    return 3"
        ),
    )
    probed = run(task, probe, tmp_path / "probe")
    if SANDBOX.isolation != "process":  # process mode isolates nothing (docs/design/sandbox.md)
        assert probed.status is Status.OK, probed.reason
        assert probed.metrics["value"] == 3.0, "the program wrote to the task folder or read a hidden file"
        assert (task.root / "target.txt").read_text() == "3"


def test_a_hanging_openevolve_evaluator_is_not_blamed_on_the_program_alone(tmp_path):
    """Issue 54 item 10: the evaluator runs in the program's process, so a timeout names both."""
    hang = "import time\n\ndef evaluate(program_path):\n    time.sleep(60)\n    return {'combined_score': 1.0}\n"
    task = openevolve_task(tmp_path, hang)
    task = dataclasses.replace(task, limits=dataclasses.replace(task.limits, wall_seconds=2))
    v = run(task, OE_PROGRAM, tmp_path)
    assert v.status is Status.TIMEOUT
    assert "evaluator.py ran together in one process, so either may have hung" in v.reason
