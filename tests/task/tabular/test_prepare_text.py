"""Free-text columns (issue 46, item 2): the README's MLE-bench example, a text-only competition, runs end to end;
the baseline and the idea space use text columns, and ``task new`` on a text-only CSV works.

The data is made up: three "authors" who favour their own words, so a bag of words separates them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_runs import cli
from competitions import sentences, spooky_text_folder

from verifyless.byod import new_task
from verifyless.node import Status
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.verify import verify


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VERIFYLESS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_the_baseline_learns_from_the_text_of_a_text_only_competition(tmp_path):
    task = load_task(spooky_text_folder(tmp_path))
    spec = json.loads(next(p for p in task.public_data if p.name == "verifyless_task.json").read_text())
    assert spec["features"] == {"numeric": [], "categorical": [], "text": ["text"]}
    v = verify(task, task.baseline_program, LocalSandbox())
    assert v.status is Status.OK, v.reason + v.stderr_tail
    assert v.score < 0.8 * np.log(3) and v.test_score < 0.8 * np.log(3)  # far better than a uniform guess


def test_the_idea_space_offers_text_options_only_where_there_is_text(tmp_path):
    text_task = load_task(spooky_text_folder(tmp_path))
    assert text_task.idea_space is not None
    assert "text" in text_task.idea_space.dimensions and "categorical" not in text_task.idea_space.dimensions
    numbers_only = load_task("breast_cancer")
    assert numbers_only.idea_space is not None
    assert not {"text", "categorical"} & set(numbers_only.idea_space.dimensions)


def test_the_readme_s_mlebench_example_runs_end_to_end(tmp_path):
    root = spooky_text_folder(tmp_path)
    store = tmp_path / "runs.db"
    env = {"VERIFYLESS_CACHE_DIR": str(tmp_path / "cache")}
    out = cli("run", str(root), "--budget", "3", "--quiet", "--store", str(store), cwd=tmp_path, env=env, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    (row,) = json.loads(cli("runs", "--store", str(store), "--json", cwd=tmp_path, env=env).stdout)
    assert row["task"] == "spooky-author-identification" and row["status"] == "finished", row
    assert row["verifications"] == 3 and row["best_score"] < np.log(3)


def test_task_new_on_a_text_only_csv_makes_a_task_that_learns(tmp_path):
    texts, authors = sentences(200, seed=11)
    pd.DataFrame({"text": texts, "author": authors}).to_csv(tmp_path / "texts.csv", index=False)
    made = new_task(tmp_path / "authors", _request(tmp_path / "texts.csv", "author"), LocalSandbox())
    assert made.baseline.status is Status.OK and made.prepared.problem == "multiclass"
    assert made.anchors.reference is not None and made.anchors.reference < made.anchors.floor
    assert "| text | free text |" in made.task.statement


def _request(path: Path, target: str):
    from verifyless.task.tabular.prepare import Request

    return Request(path, target)


def test_data_without_a_usable_column_is_refused_up_front_and_leaves_no_folder(tmp_path):
    rng = np.random.default_rng(5)
    codes = [f"K{n:06d}" for n in rng.permutation(10**6)[:120]]  # one distinct code per row: neither category nor text
    pd.DataFrame({"code": codes, "y": rng.normal(size=120)}).to_csv(tmp_path / "codes.csv", index=False)
    out = cli("task", "new", str(tmp_path / "t"), "--data", "codes.csv", "--target", "y", cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr  # bad input to task new (issue 54), not a broken folder
    assert "has no input column besides --target 'y' (left out as ids or codes: 'code')" in out.stderr, out.stderr
    assert ".partial-" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "t").exists(), out.stderr
