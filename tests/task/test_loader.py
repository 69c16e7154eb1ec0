"""Task loading: malformed folders give specific messages; good folders and built-ins load."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from verifyless.errors import TaskError
from verifyless.task import InvalidTask, MissingTask, Task, UnknownTask, builtin_tasks_dir, discover_tasks, load_task

PROGRAM = """import sys

# EVOLVE-BLOCK-START
def predict(x):
    return x * 2
# EVOLVE-BLOCK-END

print(predict(1))
"""

SCORER = """def score(outdir, hidden, public):
    return {"val_rmse": 1.0, "test_rmse": 1.0}
"""

BASE: dict[str, Any] = {
    "name": "toy",
    "description": "A toy task.",
    "statement": "statement.md",
    "program": "solution.py",
    "metric": {"name": "val_rmse", "direction": "minimize"},
    "metrics": {"validation": ["val_rmse"], "test": ["test_rmse"]},
    "data": {"public": ["public/train.csv"], "hidden": ["hidden/y.csv"]},
    "score": "score.py:score",
}

SPACE: dict[str, Any] = {
    "baseline": {"factor": "two"},
    "template": "def predict(x):\n    return x * {{factor}}\n",
    "dimensions": {
        "factor": {
            "description": "the multiplier",
            "options": {
                "two": {"description": "doubles the input", "code": 2},
                "three": {"description": "triples the input", "code": 3},
            },
        }
    },
}


def make_task(root: Path, spec: dict[str, Any] | None = None, *, program: str = PROGRAM) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "public").mkdir(exist_ok=True)
    (root / "hidden").mkdir(exist_ok=True)
    (root / "public" / "train.csv").write_text("x,y\n1,2\n")
    (root / "hidden" / "y.csv").write_text("y\n2\n")
    (root / "statement.md").write_text("# Toy\nDouble the input.\n")
    (root / "solution.py").write_text(program)
    (root / "score.py").write_text(SCORER)
    (root / "task.yaml").write_text(yaml.safe_dump(BASE if spec is None else spec, sort_keys=False))
    return root


def edit(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    change(spec)
    return spec


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return change


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda spec: spec.pop(key)


def _space(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(spec: dict[str, Any]) -> None:
        space = copy.deepcopy(SPACE)
        change(space)
        spec["idea_space"] = space

    return apply


# (case id, how to break the folder, substrings the message must contain)
CASES: list[tuple[str, Callable[[Path], None], tuple[str, ...]]] = [
    (
        "bad-direction",
        lambda r: make_task(r, edit(_set("metric.direction", "min"))),
        ("task.yaml: metric.direction", "use 'minimize' or 'maximize'"),
    ),
    (
        "unknown-top-key",
        lambda r: make_task(r, edit(_set("metrik", 1))),
        ("task.yaml: metrik", "unknown key 'metrik'", "allowed keys here"),
    ),
    (
        "unknown-nested-key",
        lambda r: make_task(r, edit(_set("metric.nmae", "x"))),
        ("task.yaml: metric.nmae", "allowed keys here: name, direction, lower, upper"),
    ),
    (
        "missing-program",
        lambda r: make_task(r, edit(_drop("program"))),
        ("task.yaml: program", "required key 'program' is missing"),
    ),
    (
        "program-file-missing",
        lambda r: (make_task(r), (r / "solution.py").unlink()),
        ("task.yaml: program", "file 'solution.py' not found"),
    ),
    (
        "program-syntax",
        lambda r: make_task(r, program="def broken(:\n"),
        ("solution.py: line 1", "must be valid Python"),
    ),
    (
        "band-markers-missing",
        lambda r: make_task(r, program="x = 1\n"),
        ("solution.py: band", "EVOLVE-BLOCK-START", "set band.lines"),
    ),
    (
        "band-lines-outside",
        lambda r: make_task(r, edit(_set("band", {"lines": [5, 40]}))),
        ("solution.py: band", "outside the program"),
    ),
    (
        "band-both-kinds",
        lambda r: make_task(r, edit(_set("band", {"lines": [1, 2], "start_marker": "# A"}))),
        ("task.yaml: band", "not both"),
    ),
    ("data-overlap", lambda r: make_task(r, edit(_set("data.public", ["hidden"]))), ("task.yaml: data", "overlap")),
    (
        "hidden-outside",
        lambda r: make_task(r, edit(_set("data.hidden", ["../secret.csv"]))),
        ("task.yaml: data.hidden[0]", "outside the task folder"),
    ),
    (
        "public-missing",
        lambda r: make_task(r, edit(_set("data.public", ["public/nope.csv"]))),
        ("task.yaml: data.public[0]", "'public/nope.csv' not found"),
    ),
    (
        "main-metric-not-validation",
        lambda r: make_task(r, edit(_set("metrics.validation", ["val_mae"]))),
        ("task.yaml: metrics.validation", "main metric 'val_rmse'"),
    ),
    (
        "metric-name-shared",
        lambda r: make_task(r, edit(_set("metrics.test", ["val_rmse"]))),
        ("task.yaml: metrics.test", "distinct names"),
    ),
    (
        "score-function-missing",
        lambda r: make_task(r, edit(_set("score", "score.py:evaluate"))),
        ("task.yaml: score", "no top-level function 'evaluate'"),
    ),
    (
        "run-placeholder",
        lambda r: make_task(r, edit(_set("run", "{python} {prog}"))),
        ("task.yaml: run", "unknown placeholder(s) ['prog']", "{program}"),
    ),
    (
        "bounds-order",
        lambda r: make_task(r, edit(lambda s: s["metric"].update(lower=5, upper=1))),
        ("task.yaml: metric", "must be below upper"),
    ),
    (
        "limits-negative",
        lambda r: make_task(r, edit(_set("limits.wall_seconds", -3))),
        ("task.yaml: limits.wall_seconds", "greater than 0"),
    ),
    (
        "description-two-lines",
        lambda r: make_task(r, edit(_set("description", "one\ntwo"))),
        ("task.yaml: description", "one line"),
    ),
    ("bad-name", lambda r: make_task(r, edit(_set("name", "has space"))), ("task.yaml: name", "letters, digits")),
    (
        "yaml-syntax",
        lambda r: (make_task(r), (r / "task.yaml").write_text("name: [unclosed\n")),
        ("task.yaml: YAML syntax error at line 2, column 1", "fix the YAML syntax"),
    ),
    (
        "yaml-not-mapping",
        lambda r: (make_task(r), (r / "task.yaml").write_text("- just\n- a list\n")),
        ("task.yaml: (top level)", "expected a mapping"),
    ),
    (
        "space-baseline-unknown-option",
        lambda r: make_task(r, edit(_space(lambda s: s.__setitem__("baseline", {"factor": "four"})))),
        ("task.yaml: idea_space.baseline.factor", "'four' is not an option"),
    ),
    (
        "space-template-mismatch",
        lambda r: make_task(
            r, edit(_space(lambda s: s.__setitem__("template", "def predict(x):\n    return x + {{factor}}\n")))
        ),
        ("task.yaml: idea_space.baseline", "does not give the band", "x + 2"),
    ),
    (
        "space-option-syntax",
        lambda r: make_task(
            r, edit(_space(lambda s: s["dimensions"]["factor"]["options"]["three"].__setitem__("code", "3 +")))
        ),
        ("idea_space.dimensions.factor.options.three", "does not parse"),
    ),
    (
        "space-unknown-placeholder",
        lambda r: make_task(r, edit(_space(lambda s: s.__setitem__("template", "{{colour}}\n")))),
        ("task.yaml: idea_space.template", "{{colour}} names no dimension"),
    ),
    (
        "space-single-option",
        lambda r: make_task(r, edit(_space(lambda s: s["dimensions"]["factor"]["options"].pop("three")))),
        ("idea_space.dimensions.factor.options", "at least two options"),
    ),
]


@pytest.mark.parametrize("case, breaker, expected", CASES, ids=[c[0] for c in CASES])
def test_malformed_task_reports_location_and_fix(tmp_path: Path, case: str, breaker, expected) -> None:
    root = tmp_path / case
    breaker(root)
    with pytest.raises(TaskError) as info:
        load_task(root)
    message = str(info.value)
    assert "Traceback" not in message and "pydantic" not in message.lower()
    for part in expected:
        assert part in message, f"{part!r} not in:\n{message}"


def test_several_problems_are_reported_together(tmp_path: Path) -> None:
    spec = edit(lambda s: (s["metric"].__setitem__("direction", "up"), s.__setitem__("extra", 1)))
    make_task(tmp_path / "t", spec)
    with pytest.raises(InvalidTask) as info:
        load_task(tmp_path / "t")
    assert len(info.value.problems) == 2
    assert "2 problems" in str(info.value)


def test_valid_native_task_loads_with_defaults(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "toy", edit(_space(lambda s: None))))
    assert task.kind == "native" and task.name == "toy"
    assert task.run_command == ("{python}", "{program}", "--data", "{public}", "--out", "{outdir}")
    assert task.band.start_marker == "# EVOLVE-BLOCK-START" and task.band.lines is None
    assert task.public_data == ((tmp_path / "toy" / "public" / "train.csv").resolve(),)
    assert task.hidden_data[0].name == "y.csv" and task.hidden_data[0].is_absolute()
    assert task.validation_metrics == ("val_rmse",) and task.test_metrics == ("test_rmse",)
    assert task.metric.orient(2.0) == -2.0
    assert task.idea_space is not None and task.idea_space.fragments["factor"] == {"two": "2", "three": "3"}
    assert task.baseline_program == PROGRAM


def test_line_band_and_optimum_alias(tmp_path: Path) -> None:
    spec = edit(lambda s: (s.__setitem__("band", {"lines": [4, 5]}), s.__setitem__("anchors", {"optimum": 0.0})))
    task = load_task(make_task(tmp_path / "lines", spec))
    assert task.band.lines == (4, 5) and task.anchors.bound == 0.0


def _openevolve(root: Path, evaluator: str) -> Path:
    root.mkdir(parents=True)
    (root / "initial_program.py").write_text(PROGRAM)
    (root / "evaluator.py").write_text(evaluator)
    return root


def test_openevolve_folder_loads_with_cascade(tmp_path: Path) -> None:
    root = _openevolve(
        tmp_path / "oe",
        "def evaluate_stage1(p):\n    return {}\n\ndef evaluate_stage2(p):\n    return {}\n"
        "\ndef evaluate(p):\n    return {'combined_score': 1.0}\n",
    )
    (root / "config.yaml").write_text("prompt:\n  system_message: Make predict faster.\nmax_iterations: 5\n")
    task = load_task(root)
    assert task.kind == "openevolve" and task.name == "oe"
    assert task.metric.name == "combined_score" and task.metric.direction == "maximize"
    assert task.cascade == ("evaluate_stage1", "evaluate_stage2")
    assert task.evaluator == root.resolve() / "evaluator.py" and task.program_file == "initial_program.py"
    assert task.statement == "Make predict faster." and task.hidden_data == ()


def test_openevolve_evaluator_is_not_executed(tmp_path: Path) -> None:
    root = _openevolve(tmp_path / "oe", "raise SystemExit('must not run')\n\ndef evaluate(p):\n    return {}\n")
    assert load_task(root).cascade == ()


def test_openevolve_problems(tmp_path: Path) -> None:
    root = _openevolve(tmp_path / "oe", "def score(p):\n    return {}\n")
    (root / "verifyless.yaml").write_text("descripton: typo\n")
    with pytest.raises(InvalidTask) as info:
        load_task(root)
    message = str(info.value)
    assert "defines neither evaluate(program_path)" in message
    assert "verifyless.yaml: descripton: unknown key 'descripton'" in message


@pytest.mark.parametrize("file", ["task.yaml", "solution.py", "statement.md", "score.py"])
def test_a_file_that_is_not_utf8_is_an_invalid_task_naming_it(tmp_path: Path, file: str) -> None:
    """Issue 54, item 8: a non-UTF-8 byte was an unexpected UnicodeDecodeError (exit 1)."""
    root = make_task(tmp_path / "t")
    (root / file).write_bytes((root / file).read_bytes() + b"# caf\xe9\n")
    with pytest.raises(InvalidTask) as info:
        load_task(root)
    assert f"{file}: not UTF-8 text" in str(info.value) and "save it as UTF-8" in str(info.value)
    assert info.value.exit_code == 3 and len(info.value.problems) == 1


def test_an_openevolve_evaluator_that_is_not_utf8_is_one_problem(tmp_path: Path) -> None:
    root = _openevolve(tmp_path / "oe", "def evaluate(p):\n    return {'combined_score': 1.0}\n")
    (root / "evaluator.py").write_bytes(b"# \xfe\n" + (root / "evaluator.py").read_bytes())
    with pytest.raises(InvalidTask) as info:
        load_task(root)
    assert info.value.problems == ("evaluator.py: not UTF-8 text (byte 2: 0xfe); save it as UTF-8",)


def test_a_task_argument_that_names_nothing_is_bad_input(tmp_path: Path) -> None:
    """Issue 54, item 10: a missing folder exited 3 while a misspelt built-in exited 2; both are bad input."""
    for name in (str(tmp_path / "gone"), "diabetis"):
        with pytest.raises(MissingTask) as info:
            load_task(name)
        assert info.value.exit_code == 2
    with pytest.raises(UnknownTask, match="did you mean 'diabetes'"):
        load_task("diabetis")


def test_a_near_miss_is_told_what_it_lacks(tmp_path: Path) -> None:
    """Issue 54, item 10: a competition folder without its sample submission was told to add a task.yaml."""
    public, private = tmp_path / "comp" / "prepared" / "public", tmp_path / "comp" / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    with pytest.raises(TaskError) as info:
        load_task(tmp_path / "comp")
    assert "has no sample submission; add sample_submission.csv" in str(info.value)
    assert "task.yaml" not in str(info.value)
    half = tmp_path / "half"
    half.mkdir()
    (half / "initial_program.py").write_text(PROGRAM)
    with pytest.raises(TaskError, match="has initial_program.py but no evaluator.py"):
        load_task(half)


def test_not_a_task_folder_and_unknown_builtin(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="neither task.yaml"):
        load_task(tmp_path)
    with pytest.raises(TaskError, match="built-in tasks: .*diabetes"):
        load_task("no_such_task_name")


BUILTINS = (
    "affairs_gbm",
    "breast_cancer",
    "circle_packing",
    "diabetes",
    "diabetes_rmsle",
    "digits_torch",
    "moons_torch",
    "sunspots",
)


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_task_loads_by_name(name: str) -> None:
    task = load_task(name)
    assert isinstance(task, Task) and task.root == builtin_tasks_dir() / name
    # competitions of numbers only: model, strength, numeric (no categorical or text column to encode)
    assert task.idea_space is not None and len(task.idea_space.dimensions) >= (3 if task.kind == "competition" else 4)
    assert task.description and "\n" not in task.description
    assert task.anchors.reference is not None and task.anchors.bound is not None
    if task.kind == "native":
        assert task.test_metrics and task.hidden_data and task.public_data
        for path in (*task.public_data, *task.hidden_data):
            assert path.stat().st_size < 200_000
        assert all(builtin_tasks_dir() / name / "hidden" in p.parents for p in task.hidden_data)


def test_discover_tasks_keeps_errors_as_values(tmp_path: Path) -> None:
    found = discover_tasks(builtin_tasks_dir())
    assert sorted(t.name for t in found if isinstance(t, Task)) == list(BUILTINS)
    make_task(tmp_path / "good")
    make_task(tmp_path / "bad", edit(_set("metric.direction", "sideways")))
    (tmp_path / "not_a_task").mkdir()
    mixed = discover_tasks(tmp_path)
    assert len(mixed) == 2 and isinstance(mixed[0], TaskError) and isinstance(mixed[1], Task)
