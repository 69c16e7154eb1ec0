"""``run --out DIR`` gives what it promises (issue 54, item 2): for a competition (an MLE-bench folder, a ``task new``
folder) the submission has exactly the sample submission's ids and columns, in its order, not the rows the run held
out too; ``--refit`` refits the returned program on every public training row first (and falls back to the program
as verified, saying why, when that run fails); ``config.yaml`` reruns the run from any folder, without the pins only
the run's store can honour. Real runs through the CLI (sandbox, scorer, SQLite) at budget 1 or 2."""

from __future__ import annotations

import textwrap

import pandas as pd
import pytest
import yaml
from cli_runs import in_process
from competitions import cache, competition  # noqa: F401  (cache: autouse fixture)

from verifyless._cli.outputs import rerun_config
from verifyless.config import load_config
from verifyless.report.text import number
from verifyless.report.views.final import final_view
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.task.tabular.prepare import Request, prepare_task


def _same_shape(submission, sample) -> None:
    got, want = (pd.read_csv(p, dtype={"id": str}) for p in (submission, sample))
    assert list(got.columns) == list(want.columns) and list(got["id"]) == list(want["id"]), got.head()


def test_an_mlebench_folder_s_submission_is_the_sample_s_shape_and_its_config_reruns_from_elsewhere(
    tmp_path, monkeypatch, capsys
):
    root = competition(tmp_path)  # 80 public training rows, 40 test rows
    (root / "verifyless.yaml").write_text("metric: auc\nsplit: {validation: 0.2, selection: 0.2}\n")
    monkeypatch.chdir(tmp_path)  # everything typed relative to here, as a user does
    args = ("run", root.name, "--budget", "2", "--store", "s.db", "-q", "--out", "out")
    done = in_process(monkeypatch, capsys, *args)
    assert done.returncode == 0, done.stderr
    _same_shape(
        tmp_path / "out" / "submission" / "submission.csv", root / "prepared" / "public" / "sample_submission.csv"
    )
    with RunStore(tmp_path / "s.db") as st:
        final = final_view(st, st.runs()[0].run_id)
    said = f"the sample submission's 40 rows from the program as verified (hidden test {number(final.test_score, 6)})"
    assert said in done.stdout, done.stdout
    config = yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())
    assert config["task"] == str(root.resolve()) and config["store"] == str((tmp_path / "s.db").resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    again = in_process(monkeypatch, capsys, "run", "--config", "../out/config.yaml", "--budget", "1", "-q")
    assert again.returncode == 0, again.stderr
    with RunStore(tmp_path / "s.db") as st:
        assert len(st.runs()) == 2 and not list(elsewhere.iterdir()), "a new run in the run's own store"


ROWS_PROGRAM = """import argparse
from pathlib import Path

import pandas as pd

# EVOLVE-BLOCK-START
LIMIT = None
# EVOLVE-BLOCK-END

p = argparse.ArgumentParser()
p.add_argument("--data")
p.add_argument("--out")
args = p.parse_args()
data, out = Path(args.data), Path(args.out)
train = pd.read_csv(data / "train.csv")
if LIMIT is not None and len(train) > LIMIT:
    raise SystemExit(f"too many training rows: {len(train)}")
submission = pd.read_csv(data / "sample_submission.csv", dtype={"id": str})
submission["label"] = 0.5
submission.to_csv(out / "submission.csv", index=False)
(out / "rows.txt").write_text(str(len(train)))
"""

ROWS_SIDECAR = """
metric: auc
program: solution.py
idea_space:
  baseline: {limit: LIMIT}
  dimensions:
    limit:
      description: the most training rows the program accepts
      options: {none: {description: any number, code: None}, l64: {description: at most 64, code: "64"}}
  template: |
    LIMIT = {{limit}}
"""


@pytest.mark.parametrize(("limit", "rows"), [("none", "80"), ("l64", "64")])
def test_refit_trains_on_every_public_row_or_says_why_not(tmp_path, monkeypatch, capsys, limit, rows):
    """The program writes how many training rows it saw: 64 as verified (80 less the validation share), 80 refitted.
    A program that refuses 80 rows makes the refit fail: the submission is then the program's as verified."""
    root = competition(tmp_path)
    baseline = "None" if limit == "none" else "64"
    (root / "solution.py").write_text(ROWS_PROGRAM.replace("LIMIT = None", f"LIMIT = {baseline}"))
    (root / "verifyless.yaml").write_text(textwrap.dedent(ROWS_SIDECAR).replace("LIMIT}", f"{limit}}}"))
    out = tmp_path / "out"
    args = ("run", str(root), "--budget", "1", "--store", str(tmp_path / "s.db"), "-q", "--out", str(out), "--refit")
    done = in_process(monkeypatch, capsys, *args)
    assert done.returncode == 0, done.stderr
    assert (out / "submission" / "rows.txt").read_text() == rows, "the program's other outputs are kept as written"
    _same_shape(out / "submission" / "submission.csv", root / "prepared" / "public" / "sample_submission.csv")
    if limit == "none":
        assert "40 rows from the program refitted on every public training row (hidden test 0.5; " in done.stdout
    else:
        assert "the refit gave no submission.csv (re-run failed: too many training rows: 80" in done.stdout
        assert "instead submission.csv: the sample submission's 40 rows from the program as verified" in done.stdout


def test_a_task_new_folder_s_submission_is_the_sample_s_shape_after_a_refit(tmp_path, monkeypatch, capsys):
    frame = pd.DataFrame({"x": range(150), "z": [i % 7 for i in range(150)], "y": [i % 2 for i in range(150)]})
    frame.to_csv(tmp_path / "d.csv", index=False)
    made = prepare_task(tmp_path / "t", Request(tmp_path / "d.csv", "y"))
    out = tmp_path / "out"
    args = ("run", str(made.root), "--budget", "1", "--store", str(tmp_path / "s.db"), "-q", "--out", str(out))
    done = in_process(monkeypatch, capsys, *args, "--refit")
    assert done.returncode == 0, done.stderr
    sample = made.root / "prepared" / "public" / "sample_submission.csv"
    _same_shape(out / "submission" / "submission.csv", sample)
    assert f"the sample submission's {len(pd.read_csv(sample))} rows from the program refitted" in done.stdout


def test_refit_is_refused_without_out_or_on_a_task_without_public_rows(tmp_path, monkeypatch, capsys):
    store = str(tmp_path / "s.db")
    alone = in_process(monkeypatch, capsys, "run", "diabetes", "--budget", "1", "--store", store, "--refit")
    assert alone.returncode == 2 and "--refit goes with --out DIR" in alone.stderr, alone.stderr
    native = ("run", "diabetes", "--budget", "1", "--store", store, "--out", str(tmp_path / "o"), "--refit")
    refused = in_process(monkeypatch, capsys, *native)
    assert refused.returncode == 2 and "--refit refits on a competition's public rows" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "s.db").exists()


def test_the_config_names_every_path_absolute_and_leaves_out_the_store_s_warm_start(tmp_path):
    stored = load_config(values={"task": "diabetes", "store": "runs/s.db"}).model_dump(mode="json")
    stored["screener"]["options"] = {"options": {"warm": "ab" * 32, "encoder": "minilm"}}
    text = rerun_config(stored, load_task("diabetes"), tmp_path / "runs" / "s.db", "RUN", cwd=tmp_path)
    assert "# screener.options.options.warm: left out: the run warm-started critic-rm from blob abababab" in text
    data = yaml.safe_load(text)
    assert data["task"] == "diabetes" and data["store"] == str((tmp_path / "runs" / "s.db").resolve())
    assert data["screener"]["options"]["options"] == {"encoder": "minilm"}
    (tmp_path / "config.yaml").write_text(text)
    assert load_config(tmp_path / "config.yaml").store == tmp_path.resolve() / "runs" / "s.db"


def test_a_run_that_answers_with_its_ensemble_writes_the_combined_submission_too(tmp_path, monkeypatch, capsys):
    """Issue 56, item 3: with the mlevolve preset's answer rule, ``--out`` holds the ensemble's combined
    submission (the sample submission's rows) beside the final node's."""
    root = competition(tmp_path)
    monkeypatch.chdir(tmp_path)
    preset = ("--preset", "mlevolve", "roles.kind=space", "engine.memory_embedder=hashing")
    args = ("run", root.name, "--budget", "4", "--store", "s.db", "-q", "--out", "out", *preset)
    done = in_process(monkeypatch, capsys, *args)
    assert done.returncode == 0, done.stderr
    sample = root / "prepared" / "public" / "sample_submission.csv"
    _same_shape(tmp_path / "out" / "ensemble" / "submission.csv", sample)
    _same_shape(tmp_path / "out" / "submission" / "submission.csv", sample)
    assert "ensemble/ (the run's answer: mean of " in done.stdout, done.stdout
