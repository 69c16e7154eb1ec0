"""The run lease (store/lease.py, issue 54): one live process at a time holds a run; a kill -9 leaves nothing stuck."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from verifyless.errors import RunHeld
from verifyless.store import RunStore
from verifyless.store.lease import Holder, gone, process_start, this_process

HOLD_SCRIPT = """
import sys, time
from verifyless.errors import RunHeld
from verifyless.store import RunStore
store = RunStore(sys.argv[1])
while time.time() < float(sys.argv[3]):  # start together
    time.sleep(0.005)
try:
    store.hold(sys.argv[2])
    print("held", flush=True)
except RunHeld as exc:
    print("refused", exc, flush=True)
time.sleep(float(sys.argv[4]))
"""


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        run_id = store.create_run("t", {})
    return path, run_id


def _foreign(path, run_id, *, pid, host=None, started="x"):
    """A lease row written as another process would have written it."""
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT OR REPLACE INTO leases VALUES (?,?,?,?,?,?)",
            (run_id, pid, host or socket.gethostname(), started, time.time() - 60, "theirs"),
        )


def _holder_process(tmp_path, path, run_id, seconds=60.0):
    script = tmp_path / "hold.py"
    script.write_text(HOLD_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path), run_id, "0", str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().startswith("held")
    return proc


def test_a_run_is_held_then_released(db):
    path, run_id = db
    with RunStore(path) as store:
        held = store.hold(run_id)
        assert (held.pid, held.host) == (os.getpid(), socket.gethostname())
        assert store.holder(run_id) == held
        store.release(run_id)
        assert store.holder(run_id) is None


def test_a_second_holder_is_refused_with_one_line_naming_the_first(db):
    path, run_id = db
    with RunStore(path) as first, RunStore(path) as second:
        first.hold(run_id)
        with pytest.raises(RunHeld) as refused:
            second.hold(run_id)
        line = str(refused.value)
        assert "\n" not in line and refused.value.exit_code == 10
        assert f"run {run_id} is being run by another process (pid {os.getpid()} on host {socket.gethostname()}" in line
        assert "since 20" in line and f"kill {os.getpid()}" in line
        first.release(run_id)
        assert second.holder(run_id) is None
        assert second.hold(run_id) == second.holder(run_id)  # free again: taken


def test_the_lease_of_a_process_killed_with_minus_9_is_taken_over(db, tmp_path):
    path, run_id = db
    proc = _holder_process(tmp_path, path, run_id)
    with RunStore(path) as store:
        with pytest.raises(RunHeld, match=f"pid {proc.pid}"):
            store.hold(run_id)
        os.kill(proc.pid, signal.SIGKILL)
        while process_start(proc.pid) is not None:  # a zombie until reaped: it counts as gone already
            time.sleep(0.01)
        assert store.hold(run_id).pid == os.getpid()
    proc.wait()


def test_a_dead_pid_and_a_reused_pid_are_gone_a_live_one_is_not(db):
    path, run_id = db
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert gone(Holder(run_id, dead.pid, socket.gethostname(), "", 0.0, "t"))
    me = this_process(run_id)
    assert not gone(me)
    assert gone(Holder(run_id, me.pid, me.host, "another-boot:1", 0.0, "t"))  # our pid, another process's
    _foreign(path, run_id, pid=os.getpid(), started="another-boot:1")
    with RunStore(path) as store:
        assert store.hold(run_id).token != "theirs"


def test_a_lease_from_another_host_is_refused_unless_taken_over(db):
    path, run_id = db
    _foreign(path, run_id, pid=1, host="elsewhere")
    with RunStore(path) as store:
        with pytest.raises(RunHeld) as refused:
            store.hold(run_id)
        assert "host elsewhere" in str(refused.value) and "--take-over" in str(refused.value)
        assert store.hold(run_id, take_over=True).host == socket.gethostname()


def test_a_live_holder_on_this_host_is_never_taken_over(db):
    path, run_id = db
    with RunStore(path) as first, RunStore(path) as second:
        first.hold(run_id)
        with pytest.raises(RunHeld):
            second.hold(run_id, take_over=True)


def test_a_holder_whose_run_was_taken_over_stops_at_its_next_write(db):
    path, run_id = db
    with RunStore(path) as store:
        store.hold(run_id)
        store.set_status(run_id, "running")
        _foreign(path, run_id, pid=1, host="elsewhere")  # forced from another machine
        with pytest.raises(RunHeld, match="was taken over by pid 1 on host elsewhere"):
            store.set_status(run_id, "finished")
        with pytest.raises(RunHeld):
            store.append(run_id, "note", {})
        assert store.run(run_id).status == "running"  # reads go on


def test_holding_releases_at_the_end_of_its_block_and_keeps_an_outer_hold(db):
    path, run_id = db
    with RunStore(path) as store:
        with store.holding(run_id) as outer:
            with store.holding(run_id) as inner:
                assert inner == outer
            assert store.holder(run_id) == outer
        assert store.holder(run_id) is None
        with pytest.raises(KeyError), store.holding(run_id):
            raise KeyError("boom")
        assert store.holder(run_id) is None


def test_closing_the_store_lets_go(db):
    path, run_id = db
    store = RunStore(path)
    store.hold(run_id)
    store.close()
    with RunStore(path) as other:
        assert other.holder(run_id) is None


def test_two_processes_racing_for_a_run_get_it_once(db, tmp_path):
    path, run_id = db
    script = tmp_path / "race.py"
    script.write_text(HOLD_SCRIPT)
    start = str(time.time() + 1.5)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(path), run_id, start, "1"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    lines = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert lines[0].startswith("held") and lines[1].startswith("refused"), lines
