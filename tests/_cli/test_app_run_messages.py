"""Configuration and store problems of ``verifyless run`` are one clear line before anything is paid (issue 46,
items 7 and 10). Real CLI runs (in this process, ``cli_runs.in_process``) on real tasks and SQLite stores."""

from __future__ import annotations

import pytest
from cli_runs import in_process
from task_folders import toy_task


def _one_line(out, code: int) -> str:
    assert out.returncode == code, out.stdout + out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, f"not one line: {out.stderr!r}"
    return lines[0]


@pytest.mark.parametrize(
    "screener",
    [
        ["-c", "pilot"],
        ["-c", "adaptive", "screener.options.screener=pilot"],
        ["-c", "cascade", "screener.options.then=pilot", "roles.models.critic=scripted:x.yaml"],
    ],
)
def test_the_pilot_screener_on_a_task_without_fidelity_levels_is_refused_at_load(
    tmp_path, monkeypatch, capsys, screener
):
    """Item 7: it used to pick candidate 0 every round and exit 0. Refused before the store exists, nested too."""
    task = toy_task(tmp_path, 1)
    store = tmp_path / "s.db"
    args = ("run", str(task), *screener, "--budget", "3", "--store", str(store), "-q")
    line = _one_line(in_process(monkeypatch, capsys, *args), 2)
    assert "task 'toy_transfer' declares no fidelity levels" in line and "fidelity:" in line, line
    assert not store.exists()


def test_pilot_levels_the_task_lacks_are_refused(tmp_path, monkeypatch, capsys):
    from verifyless.task import builtin_tasks_dir

    args = ("run", str(builtin_tasks_dir() / "diabetes"), "-c", "pilot", "screener.options.levels=[tenth]")
    line = _one_line(in_process(monkeypatch, capsys, *args, "--store", str(tmp_path / "s.db"), "-q"), 2)
    assert "'tenth'" in line and "quarter_data, half_data" in line, line


# ---------------------------------------------------------------------- item 10: store places and resumes


@pytest.mark.parametrize("where", ["a-file/x.db", "/proc/nope/x.db"])
def test_a_store_path_whose_folder_cannot_be_made_is_one_line(tmp_path, monkeypatch, capsys, where):
    (tmp_path / "a-file").write_text("a file, not a folder")
    store = where if where.startswith("/") else str(tmp_path / where)
    task = toy_task(tmp_path, 1)
    line = _one_line(in_process(monkeypatch, capsys, "run", str(task), "--store", store, "--budget", "1", "-q"), 5)
    assert line.startswith("error: cannot make the store's folder") and "--store" in line, line


def _paid_run(tmp_path, monkeypatch, capsys, budget: int = 2) -> tuple[str, str]:
    from verifyless.store import RunStore

    store = tmp_path / "s.db"
    task = toy_task(tmp_path, 1)
    out = in_process(monkeypatch, capsys, "run", str(task), "--budget", str(budget), "--store", str(store), "-q")
    assert out.returncode == 0, out.stderr
    with RunStore(store) as st:
        return st.runs()[0].run_id, str(store)


def test_a_resume_with_a_budget_below_what_was_paid_is_refused(tmp_path, monkeypatch, capsys):
    run_id, store = _paid_run(tmp_path, monkeypatch, capsys, budget=2)
    args = ("run", "--resume", run_id, "--budget", "1", "--store", store, "-q")
    line = _one_line(in_process(monkeypatch, capsys, *args), 2)
    assert f"run {run_id} has already paid 2 verifications" in line and "--budget 1" in line, line
    assert "--budget 3" in line, "says what would continue it"


def test_a_resume_on_a_read_only_store_says_so_and_not_recover(tmp_path, monkeypatch, capsys):
    import shutil

    from cli_runs import cli
    from readonly_media import read_only_prefix

    run_id, store = _paid_run(tmp_path, monkeypatch, capsys, budget=1)
    folder = tmp_path / "ro"
    folder.mkdir()
    shutil.copy(store, folder / "s.db")  # a WAL store without its -wal and -shm files, as a copy leaves it
    prefix, reason = read_only_prefix(folder)
    if prefix is None:
        pytest.skip(reason)
    out = cli("run", "--resume", run_id, "--budget", "2", "--store", str(folder / "s.db"), "-q", prefix=prefix)
    line = _one_line(out, 5)
    assert "read-only" in line and ".recover" not in line, line


def test_tasks_lists_an_invalid_folder_by_name_with_every_problem_and_exits_3(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "tasks"
    folder.mkdir()
    toy_task(folder, 1)
    (folder / "broken").mkdir()
    (folder / "broken" / "task.yaml").write_text("name: broken\n")
    out = in_process(monkeypatch, capsys, "tasks", str(folder))
    assert out.returncode == 3, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].split()[:2] == ["broken", "invalid"], out.stdout
    assert any("required key 'statement' is missing" in line for line in lines), out.stdout
    assert any(line.split()[:2] == ["toy_transfer", "native"] for line in lines), "the valid ones are still listed"
    assert "1 of 2 task folders" in out.stderr, out.stderr


DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port


def test_a_dead_critic_endpoint_is_found_before_anything_is_paid(tmp_path, monkeypatch, capsys):
    """Item 10: two verifications used to be paid before the dead endpoint showed; the probe finds it first."""
    monkeypatch.setenv("VERIFYLESS_BASE_URL", DEAD)
    monkeypatch.setenv("VERIFYLESS_MODEL", "m")
    store = tmp_path / "s.db"
    args = ("run", str(toy_task(tmp_path, 1)), "-c", "critic", "roles.models.critic=env", "--budget", "3")
    line = _one_line(in_process(monkeypatch, capsys, *args, "--store", str(store), "-q"), 6)
    assert f"roles.models.critic: the endpoint {DEAD} does not answer" in line and "nothing was paid" in line, line
    assert not store.exists()
