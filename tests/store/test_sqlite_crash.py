"""Crash safety: kill -9 a writer at random moments; every acknowledged seq must survive, views must match the log.

The child appends candidates and charged verifications in a tight loop and
records each seq in a side file (fsynced) only AFTER ``append`` returned. A
seq in the side file was therefore acknowledged as committed; losing it
would be a durability bug. Killing the process mid-transaction must leave
no half-written event (a view row or ledger charge without its event, or
the reverse).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time

from verifyless.node import Status
from verifyless.store import RunStore

CHILD = textwrap.dedent(
    """
    import os, sys
    from verifyless.store import RunStore, Item

    db, side, run_id, tag = sys.argv[1:5]
    store = RunStore(db)
    fd = os.open(side, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def ack(*seqs):
        os.write(fd, "".join(f"{s}\\n" for s in seqs).encode())
        os.fsync(fd)

    i = 0
    while True:
        nid = f"{tag}-{i}"
        program = f"def solve():\\n    return {i}  # {tag}\\n" * (1 + i % 40)
        node = {"id": nid, "parent_id": None, "operator": "draft", "idea": {"text": f"idea {i}"},
                "program": program, "round": i}
        ack(*store.append_many(run_id, [Item("node", node, nid),
                                        Item("verification_started", {}, nid)]))
        status = "ok" if i % 3 else "failed"
        ver = {"status": status, "score": i / 7, "fitness": i / 7, "metrics": {"acc": i / 7},
               "run_seconds": 0.5, "score_seconds": 0.25}
        ack(store.append(run_id, "verification", ver, node_id=nid, charge=True))
        if i % 5 == 0:
            ack(store.append(run_id, "status", {"status": "screened-out", "reason": "kill test"}, node_id=nid))
        i += 1
    """
)

ITERATIONS = 25


def _acknowledged(side) -> list[int]:
    if not side.exists():
        return []
    text = side.read_text()
    lines = text.split("\n")
    if not text.endswith("\n"):
        lines = lines[:-1]  # the kill may have cut the last line short: not acknowledged
    return [int(x) for x in lines if x]


def _check(db, run_id: str, acknowledged: list[int]) -> int:
    with RunStore(db) as store:
        assert store.integrity_check() == "ok"
        events = list(store.events(run_id))
        seqs = {e.seq for e in events}
        missing = set(acknowledged) - seqs
        assert not missing, f"acknowledged events lost after kill -9: {sorted(missing)[:10]}"
        charged = [e for e in events if e.kind == "verification" and e.charge is not None]
        assert store.budget(run_id).verifications == len(charged)
        assert store.budget(run_id).evaluator_seconds == 0.75 * len(charged)
        nodes = {n.id: n for n in store.nodes(run_id)}
        assert set(nodes) == {e.node_id for e in events if e.kind == "node"}
        for node in nodes.values():  # every program referenced by the view was committed with it
            assert store.get_text(node.program_hash).startswith("def solve")
        verified = {e.node_id for e in charged}
        assert all(nodes[n].status.verified or nodes[n].status is Status.SCREENED_OUT for n in verified)
        report = store.rebuild_views(run_id)
        assert report.consistent, report
        return len(events)


def test_kill_9_never_loses_acknowledged_events(tmp_path):
    rng = random.Random(1234)
    db, side = tmp_path / "crash.db", tmp_path / "acked.txt"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    with RunStore(db) as store:
        run_id = store.create_run("crash", {"purpose": "kill -9 test"})
    env = dict(os.environ, OMP_NUM_THREADS="1")
    growth = []
    for it in range(ITERATIONS):
        before = len(_acknowledged(side))
        child = subprocess.Popen(
            [sys.executable, str(script), str(db), str(side), run_id, f"k{it}"], env=env, stderr=subprocess.PIPE
        )
        # Let it commit at least once, then kill at a random moment inside its loop.
        deadline = time.monotonic() + 120  # only catches a child that hangs before its first commit
        while len(_acknowledged(side)) == before and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert child.poll() is None, child.stderr.read().decode()[-2000:]
        time.sleep(rng.uniform(0.0, 0.08))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stderr.close()
        acked = _acknowledged(side)
        assert len(acked) > before
        growth.append(_check(db, run_id, acked))
    assert growth == sorted(growth)  # a hang is caught by pytest-timeout (pyproject), not by a wall-clock bound
