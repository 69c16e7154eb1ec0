"""One process at a time pays for a run (issue 54, item 1), through the real command line.

A second ``run --resume`` of a live run is refused with one line naming the holder (exit 10), and a kill -9
campaign in which two resumers race each time pays every verification once and stops at the cap.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

from cli_runs import cli
from task_folders import slow_task

from verifyless.store import RunStore

BUDGET = 12


def _start(*args: str, cwd) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "verifyless", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    )


def _wait(what: str, ready, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _paid(db, run_id: str) -> int:
    with RunStore(db) as store:
        return store.budget(run_id).verifications


def _run_id(db) -> str | None:
    if not db.exists():
        return None
    with RunStore(db) as store:
        runs = store.runs()
    return runs[0].run_id if runs else None


def _refused(proc: subprocess.Popen | subprocess.CompletedProcess, holder: int) -> bool:
    """Exit 10 with one line naming the holder's pid."""
    err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.read()  # type: ignore[union-attr]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    return proc.returncode == 10 and len(lines) == 1 and f"being run by another process (pid {holder} " in lines[0]


def _race(resume: list[str], cwd) -> tuple[subprocess.Popen, subprocess.Popen]:
    """Two resumers started together; (the one that runs the run, the one refused)."""
    pair = [_start(*resume, cwd=cwd) for _ in range(2)]
    _wait("one of two racing resumers to stop", lambda: any(p.poll() is not None for p in pair))
    loser = next(p for p in pair if p.poll() is not None)
    winner = next(p for p in pair if p is not loser)
    assert _refused(loser, winner.pid), (loser.returncode, loser.stderr.read() if loser.stderr else "")
    return winner, loser


def test_two_processes_never_pay_for_one_run_under_kill_minus_9(tmp_path):
    task, db = slow_task(tmp_path, 1.0), tmp_path / "live.db"
    common = ["--store", str(db), "-q"]
    first = _start("run", str(task), "--budget", str(BUDGET), "--screener", "random", *common, cwd=tmp_path)
    _wait("the first run to pay twice", lambda: (rid := _run_id(db)) is not None and _paid(db, rid) >= 2)
    run_id = _run_id(db)
    assert run_id is not None
    resume = ["run", "--resume", run_id, *common]

    second = cli(*resume, cwd=tmp_path)  # the repro: a resume while the run is live
    assert _refused(second, first.pid), second.stderr
    assert first.poll() is None
    os.kill(first.pid, signal.SIGKILL)
    first.wait()

    winner, _ = _race(resume, tmp_path)  # resumed from two terminals at once, then killed again
    paid = _paid(db, run_id)
    _wait("the resumed run to pay twice more", lambda: _paid(db, run_id) >= paid + 2 or winner.poll() is not None)
    assert winner.poll() is None, winner.stderr.read() if winner.stderr else ""
    os.kill(winner.pid, signal.SIGKILL)
    winner.wait()

    last = [_start(*resume, cwd=tmp_path) for _ in range(2)]
    outs = [p.communicate(timeout=180) for p in last]
    finished = [
        p for p, (out, _) in zip(last, outs, strict=True) if p.returncode == 0 and "budget: verifications" in out
    ]
    assert len(finished) == 1, [(p.returncode, err[-500:]) for p, (_, err) in zip(last, outs, strict=True)]
    other = next(p for p in last if p is not finished[0])
    other_out, other_err = outs[last.index(other)]
    # refused while the other ran, or came after it finished: either way it paid nothing
    assert other.returncode == 10 or (other.returncode == 0 and "is finished" in other_out), other_err

    with RunStore(db) as store:
        assert store.integrity_check() == "ok"
        assert store.run(run_id).status == "finished"
        paid_events = [e for e in store.events(run_id, kinds=["verification"]) if e.charge and e.charge.verifications]
        per_node = Counter(e.node_id for e in paid_events)
        per_program = Counter(e.payload["program_hash"] for e in paid_events)
        assert max(per_node.values()) == 1 and max(per_program.values()) == 1, (per_node, per_program)
        assert store.budget(run_id).verifications == len(paid_events) == BUDGET
        assert store.holder(run_id) is None
