"""Configuration and store problems of ``verifyless run`` are one clear line before anything is paid (issue 46,
items 7 and 10). Real CLI runs (in this process, ``test_cli.in_process``) on real tasks and SQLite stores."""

from __future__ import annotations

import pytest

from test_cli import in_process
from test_run_results import toy_task


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
