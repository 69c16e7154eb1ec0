"""A task's fingerprint (``verifyless.task.fingerprint``): stable, per part, recorded in every run, checked on resume
and replay (issue 46, item 4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cli_runs import in_process

from verifyless.store import RunStore
from verifyless.task import builtin_tasks_dir, load_task
from verifyless.task.fingerprint import Fingerprint, file_hash, stored_fingerprint, task_fingerprint

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture()
def diabetes(tmp_path) -> Path:
    """A private copy of the built-in diabetes task, to change."""
    root = tmp_path / "diab"
    shutil.copytree(builtin_tasks_dir() / "diabetes", root)
    return root


def _truncate(path: Path, lines: int = 20) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:lines]))


def test_the_fingerprint_is_stable_and_names_each_changed_part(diabetes):
    before = task_fingerprint(load_task(str(diabetes)))
    assert before == task_fingerprint(load_task(str(diabetes))), "loading twice gives the same fingerprint"
    assert {"program", "scorer", "statement", "idea space", "metric", "run command"} <= set(before.parts)
    assert {"public data public/train.csv", "hidden data hidden/test_targets.csv"} <= set(before.parts)
    assert Fingerprint.from_dict(before.to_dict()) == before

    _truncate(diabetes / "public" / "train.csv")
    (diabetes / "statement.md").write_text((diabetes / "statement.md").read_text() + "\nOne more line.\n")
    score = diabetes / "score.py"
    score.write_text(score.read_text() + "\n# a comment changes the scorer's bytes\n")
    after = task_fingerprint(load_task(str(diabetes)))
    assert after.digest != before.digest
    assert before.diff(after) == ["public data public/train.csv", "scorer", "statement"]
    assert after.diff(after) == []


def test_a_large_file_is_hashed_in_chunks_to_the_same_digest(tmp_path):
    import hashlib

    big = tmp_path / "big.bin"
    data = bytes(range(256)) * (5 * 4096 + 7)  # over 5 MiB: several chunks and a short tail
    big.write_bytes(data)
    assert file_hash(big) == hashlib.sha256(data).hexdigest()
    assert file_hash(tmp_path / "absent.bin") == "missing"


def _one_paid_run(task: Path, tmp_path: Path, monkeypatch, capsys) -> tuple[Path, str]:
    """A one-verification run of ``task`` from the CLI: the store and the run's id."""
    store = tmp_path / "s.db"
    out = in_process(monkeypatch, capsys, "run", str(task), "--budget", "1", "--store", str(store), "-q")
    assert out.returncode == 0, out.stderr
    with RunStore(store) as st:
        return store, st.runs()[0].run_id


def test_a_run_records_its_task_fingerprint_and_an_older_store_has_none(diabetes, tmp_path, monkeypatch, capsys):
    store, run_id = _one_paid_run(diabetes, tmp_path, monkeypatch, capsys)
    with RunStore(store) as st:
        assert stored_fingerprint(st, run_id) == task_fingerprint(load_task(str(diabetes)))
    old = tmp_path / "old.db"
    shutil.copy(FIXTURES / "store-0.1-diabetes-critic.db", old)
    with RunStore(old) as st:
        assert stored_fingerprint(st, st.runs()[0].run_id) is None


def test_a_resume_or_replay_after_the_data_changed_is_refused_naming_the_file(diabetes, tmp_path, monkeypatch, capsys):
    """The issue's repro: truncate train.csv between a run and its resume -> one line naming the file and the override;
    nothing is written. With ``--allow-changed-task`` the resume goes on. A task argument naming another task is
    refused too (item 10)."""
    store, run_id = _one_paid_run(diabetes, tmp_path, monkeypatch, capsys)
    with RunStore(store) as st:
        events = len(list(st.events(run_id)))
    out = in_process(monkeypatch, capsys, "run", "sunspots", "--resume", run_id, "--budget", "2", "--store", str(store))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"run {run_id} is a run of task 'diabetes', not of 'sunspots'" in out.stderr, out.stderr
    _truncate(diabetes / "public" / "train.csv")
    for args in (("run", "--resume", run_id, "--budget", "2", "-q"), ("replay", run_id)):
        out = in_process(monkeypatch, capsys, *args, "--store", str(store))
        assert out.returncode == 3, out.stdout + out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
        assert "public data public/train.csv" in lines[0] and "--allow-changed-task" in lines[0], lines[0]
    with RunStore(store) as st:
        assert len(list(st.events(run_id))) == events, "a refused resume writes nothing"
    out = in_process(
        monkeypatch,
        capsys,
        "run",
        "--resume",
        run_id,
        "--budget",
        "2",
        "-q",
        "--allow-changed-task",
        "--store",
        str(store),
    )
    assert out.returncode == 0, out.stderr
    with RunStore(store) as st:
        assert st.budget(run_id).verifications == 2
