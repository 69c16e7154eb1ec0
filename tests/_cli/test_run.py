"""``verifyless run`` (issue 54): a resume of a run another process holds is refused in one line (exit 10) before
anything is read or paid, reading commands go on meanwhile, and ``--take-over`` needs ``--resume`` (item 1); a run
whose trusted scorer hangs stops at the scorer's limit (exit 3) keeping every verification it paid for (item 4)."""

from __future__ import annotations

import os

from cli_runs import cli, in_process
from task_folders import hanging_scorer_task

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


def test_a_run_whose_scorer_hangs_stops_exit_3_and_keeps_what_it_paid(tmp_path):
    folder, db = hanging_scorer_task(tmp_path, spared=5), tmp_path / "s.db"  # the baseline (5) is scored; children hang
    out = cli("run", str(folder), "--budget", "2", "--screener", "random", "-q", "--store", str(db), timeout=180)
    assert out.returncode == 3 and "trusted scorer score.py:score did not finish within 1s" in out.stderr, out.stderr
    with RunStore(db) as store:
        run_id = store.runs()[0].run_id
        assert store.run(run_id).status == "failed" and store.budget(run_id).verifications == 1
        (paid,) = [e.seq for e in store.events(run_id, kinds=["verification"])]
    (folder / "score.py").write_text((folder / "score.py").read_text().replace("time.sleep(10**6)", "pass"))
    again = cli("run", "--resume", run_id, "--store", str(db), "-q", "--allow-changed-task", timeout=180)
    assert again.returncode == 0, again.stderr
    with RunStore(db) as store:
        charged = [e for e in store.events(run_id, kinds=["verification"]) if e.charge and e.charge.verifications]
        assert charged[0].seq == paid and len({e.node_id for e in charged}) == len(charged) == 2
        assert store.run(run_id).status == "finished"
