"""``verifyless export``: a run's trace loads as a Hugging Face dataset and hides test scores by default."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "store-0.1-diabetes-critic.db"
RUN = "20261201-191950-67a390"
HIDDEN = "48.4608"  # the baseline's hidden test RMSE in the fixture (48.46089...)


def export(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    store = tmp_path / "s.db"
    if not store.exists():
        shutil.copy(FIXTURE, store)
    return subprocess.run(
        [sys.executable, "-m", "verifyless", "export", RUN, "--store", str(store), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_jsonl_trace_round_trips_through_datasets_without_hidden_scores(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "trace.jsonl"
    done = export(tmp_path, "--out", str(out))
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stdout.splitlines() if line.startswith("trace:")]
    assert said and str(tmp_path / "trace.calls.jsonl") in said[0], "the paths stay on one line to copy"
    text = out.read_text() + (tmp_path / "trace.calls.jsonl").read_text()
    assert HIDDEN not in text and "test_score" not in text and "test_metrics" not in text
    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert len(ds) == 25 and ds[0]["node_id"] == "root" and ds[0]["schema_version"] == 1
    children = [r for r in ds if r["parent_id"] == "root"]
    assert children and all(r["diff"] and r["idea"] for r in children)
    verified = [r for r in ds if r["verifications"] > 0]
    assert len(verified) == 4 and all(json.loads(r["metrics"]) for r in verified if r["status"] == "ok")
    assert ds[0]["band"] and "STRENGTH" in ds[0]["band"]
    calls = datasets.load_dataset("json", data_files=str(tmp_path / "trace.calls.jsonl"), split="train")
    assert len(calls) == 98 and set(calls["role"]) >= {"brief", "summarizer", "critic"}


def test_include_test_and_inline_calls_in_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "trace.parquet"
    done = export(tmp_path, "--out", str(out), "--format", "parquet", "--include-test", "--inline-calls")
    assert done.returncode == 0, done.stderr
    ds = datasets.load_dataset("parquet", data_files=str(out), split="train")
    root = ds[0]
    assert root["test_score"] == pytest.approx(48.46089019327448)
    calls = datasets.load_dataset("parquet", data_files=str(tmp_path / "trace.calls.parquet"), split="train")
    assert all(c["request"] and c["replies"] and c["replies"][0] for c in calls if not c["error"])


def test_a_bad_format_is_one_clear_line(tmp_path):
    done = export(tmp_path, "--out", str(tmp_path / "t.csv"), "--format", "csv")
    assert done.returncode == 2 and "choose jsonl or parquet" in done.stderr and "Traceback" not in done.stderr
