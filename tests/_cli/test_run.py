"""``verifyless run``'s hold on a run (issue 54, item 1): a resume of a run another process holds is refused in one
line (exit 10) before anything is read or paid, reading commands go on meanwhile, and ``--take-over`` needs
``--resume``."""

from __future__ import annotations

import os

from cli_runs import in_process

from verifyless.store import RunStore


def test_a_resume_of_a_held_run_is_refused_and_reading_commands_go_on(tmp_path, monkeypatch, capsys):
    db = tmp_path / "s.db"
    with RunStore(db) as holder:
        run_id = holder.create_run("diabetes", {"task": "diabetes"})
        holder.hold(run_id)
        refused = in_process(monkeypatch, capsys, "run", "--resume", run_id[:10], "--store", str(db))
        assert refused.returncode == 10, refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and f"being run by another process (pid {os.getpid()} on host" in lines[0]
        listed = in_process(monkeypatch, capsys, "runs", "--store", str(db))
        assert listed.returncode == 0 and run_id in listed.stdout
        assert holder.holder(run_id) is not None and holder.holder(run_id).pid == os.getpid()


def test_take_over_goes_with_resume(tmp_path, monkeypatch, capsys):
    out = in_process(monkeypatch, capsys, "run", "diabetes", "--take-over", "--store", str(tmp_path / "s.db"))
    assert out.returncode == 2 and "--take-over goes with --resume" in out.stderr
