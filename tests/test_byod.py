"""``verifyless task new`` quirks (issue 46, item 8): what becomes a feature, how a 0/1 float target is read, bad
time values, rare classes and infinite targets, latin-1 files, interruptions and the help text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runs import cli
from sklearn.datasets import load_diabetes

from verifyless.byod import new_task
from verifyless.errors import ConfigError
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.task.tabular.prepare import Request, prepare_task


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VERIFYLESS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def numbers_csv(path: Path, **extra) -> Path:
    frame = load_diabetes(as_frame=True, scaled=False).frame.head(200)
    for name, values in extra.items():
        frame[name] = values
    frame.to_csv(path, index=False)
    return path


def features(task) -> dict[str, list[str]]:
    spec = next(p for p in task.public_data if p.name == "verifyless_task.json")
    return json.loads(spec.read_text())["features"]


def test_numbers_only_data_has_no_categorical_or_text_dimension(tmp_path):
    made = prepare_task(tmp_path / "t", Request(numbers_csv(tmp_path / "d.csv"), "target"))
    task = load_task(made.root)
    assert task.idea_space is not None and set(task.idea_space.dimensions) == {"model", "strength", "numeric"}


def test_a_zero_one_target_stored_as_floats_is_one_probability_column(tmp_path):
    flag = (np.arange(200) % 3 == 0).astype(float)  # 0.0 / 1.0
    made = prepare_task(tmp_path / "t", Request(numbers_csv(tmp_path / "d.csv", flag=flag), "flag"))
    assert made.problem == "binary" and made.columns == ("flag",)
    sample = pd.read_csv(made.root / "prepared" / "public" / "sample_submission.csv")
    assert list(sample.columns) == [made.id_column, "flag"]


def test_a_unique_id_column_and_the_group_column_are_not_features(tmp_path):
    ids = [f"p{i:04d}" for i in range(200)]
    groups = [f"clinic{i % 9}" for i in range(200)]
    path = numbers_csv(tmp_path / "d.csv", id=ids, clinic=groups)
    made = prepare_task(tmp_path / "t", Request(path, "target", group="clinic"))
    assert made.id_column == "id"
    assert list(pd.read_csv(made.root / "prepared" / "public" / "train.csv").columns)[0] == "id"
    kinds = features(load_task(made.root))
    used = {c for columns in kinds.values() for c in columns}
    assert "id" not in used and "clinic" not in used and "row_id" not in used and "bmi" in used


def test_unparseable_time_values_are_an_error_naming_the_rows(tmp_path):
    days = [f"2020-01-{1 + i % 28:02d}" for i in range(200)]
    days[4], days[17] = "soon", "n/a"
    path = numbers_csv(tmp_path / "d.csv", day=days)
    with pytest.raises(
        ConfigError, match=r"'day' has 2 value\(s\) that are neither numbers nor dates: row 5 \('soon'\)"
    ):
        prepare_task(tmp_path / "t", Request(path, "target", time="day"))
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize(
    "case, values, message",
    [
        ("one positive", [1] + [0] * 199, "class '1' in only 1 row"),
        ("infinite", [np.inf] + list(np.linspace(0, 1, 199)), "not finite numbers (e.g. row 1: inf)"),
    ],
)
def test_a_one_positive_or_infinite_target_is_one_line_and_no_folder(tmp_path, case, values, message):
    path = numbers_csv(tmp_path / "d.csv", y=values)
    folder = tmp_path / case.replace(" ", "_")
    out = cli("task", "new", str(folder), "--data", str(path), "--target", "y", cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert not folder.exists() and not list(tmp_path.glob(f".{folder.name}*"))


def test_a_latin1_file_gets_an_encoding_hint(tmp_path):
    path = tmp_path / "d.csv"
    rows = "".join(f"caf\xe9 {i},{i % 2}\n" for i in range(40))
    path.write_bytes(("name,y\n" + rows).encode("latin-1"))
    with pytest.raises(ConfigError, match="not UTF-8 .* save it as UTF-8"):
        prepare_task(tmp_path / "t", Request(path, "y"))


def test_an_interrupted_task_new_leaves_nothing_a_rerun_refuses(tmp_path, monkeypatch):
    import verifyless.byod as byod

    path = numbers_csv(tmp_path / "d.csv")
    real = byod.verify

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(byod, "verify", interrupted)
    with pytest.raises(KeyboardInterrupt):
        new_task(tmp_path / "t", Request(path, "target"), LocalSandbox())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "d.csv"]
    monkeypatch.setattr(byod, "verify", real)
    made = new_task(tmp_path / "t", Request(path, "target"), LocalSandbox())
    assert made.prepared.root == tmp_path / "t" and made.task.root == (tmp_path / "t").resolve()
    assert made.task.name == "t" and made.baseline.score is not None


def test_a_failing_baseline_leaves_no_folder(tmp_path, monkeypatch):
    import verifyless.task.tabular.prepare as prepare

    broken = tmp_path / "broken.py"
    broken.write_text(prepare.BASELINE.read_text().replace("def main() -> None:\n", "def main() -> None:\n    1 / 0\n"))
    monkeypatch.setattr(prepare, "BASELINE", broken)
    with pytest.raises(Exception, match="baseline program failed .*ZeroDivisionError"):
        new_task(tmp_path / "t", Request(numbers_csv(tmp_path / "d.csv"), "target"), LocalSandbox())
    assert not (tmp_path / "t").exists() and not list(tmp_path.glob(".t*"))


def test_help_shows_a_plain_percent_sign():
    out = cli("task", "new", "--help")
    assert "20%" in out.stdout and "20%%" not in out.stdout, out.stdout


def test_a_wide_file_gets_a_capped_column_table_in_its_statement(tmp_path):
    """Issue 46 item 5: the statement every prompt carries lists at most MAX_DESCRIBED_COLUMNS columns."""
    from verifyless.task.tabular.prepare import MAX_DESCRIBED_COLUMNS, describe

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(40, 200)), columns=[f"f{i}" for i in range(200)])
    frame["colour"] = ["red", "blue"] * 20
    frame["y"] = rng.normal(size=40)
    frame.insert(0, "id", range(40))
    text = describe(frame, Request(tmp_path / "wide.csv", "y"), "id", "regression", "rmse", ("y",), 0)
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith(("| column", "| ---"))]
    assert len(rows) == MAX_DESCRIBED_COLUMNS and rows[0].startswith("| y | target, numeric")
    assert "... and 142 more columns (1 categorical, 141 numeric)" in text
    assert len(text) < 10_000
