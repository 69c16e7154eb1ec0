"""RunStore: record round trips, views, blobs, append-only log, schema checks, ledger, threads."""

from __future__ import annotations

import os
import socket
import sqlite3
import subprocess
import sys
import threading

import pytest

from verifyless.errors import StoreError
from verifyless.node import (
    Candidate,
    Evidence,
    Idea,
    Node,
    Operator,
    Screening,
    Status,
    Verification,
    content_hash,
)
from verifyless.store import SCHEMA_VERSION, Charge, Item, RunStore
from verifyless.store import sqlite as store_sqlite


def make_candidate(cid: str, parent: str | None = None, program: str | None = None, **kw) -> Candidate:
    program = program if program is not None else f"def solve():\n    return {cid!r}\n"
    return Candidate(
        id=cid,
        parent_id=parent,
        operator=kw.pop("operator", Operator.IMPROVE),
        idea=Idea(text=f"idea for {cid}", params={"alpha": 0.5}, tags=("lr", "reg")),
        program=program,
        program_hash=content_hash(program),
        summary=f"summary of {cid}",
        reference_ids=kw.pop("reference_ids", ("ref1",)),
        round=kw.pop("round", 2),
        island=kw.pop("island", 1),
    )


def ok_verification(score: float, **kw) -> Verification:
    return Verification(
        status=Status.OK,
        metrics={"acc": score, "f1": score / 2},
        test_metrics={"acc": score - 0.1},
        score=score,
        test_score=score - 0.1,
        run_seconds=2.0,
        score_seconds=0.5,
        overhead_seconds=0.25,
        stdout_tail="done",
        **kw,
    )


@pytest.fixture
def store(tmp_path):
    with RunStore(tmp_path / "runs.db") as s:
        yield s


@pytest.fixture
def run_id(store):
    return store.create_run("digits", {"budget": {"verifications": 10}, "screen": "critic"}, seed=7)


def test_create_run_writes_config_event_first(store, run_id):
    events = list(store.events(run_id))
    assert [e.kind for e in events] == ["config"]
    assert events[0].payload == {
        "task": "digits",
        "seed": 7,
        "config": {"budget": {"verifications": 10}, "screen": "critic"},
    }
    info = store.run(run_id)
    assert (info.task, info.seed, info.status, info.n_nodes) == ("digits", 7, "created", 0)
    assert info.config["screen"] == "critic"
    with pytest.raises(StoreError, match="already exists"):
        store.create_run("digits", {}, run_id=run_id)


def test_candidate_round_trip_and_program_as_blob(store, run_id):
    cand = make_candidate("c1", parent="root")
    seq = store.add_candidate(run_id, cand)
    (event,) = store.events(run_id, kinds=["node"])
    assert event.seq == seq and event.node_id == "c1"
    assert "program" not in event.payload  # the program lives in blobs, once
    assert store.get_text(cand.program_hash) == cand.program
    assert store.candidate(run_id, "c1") == cand
    (node,) = store.nodes(run_id)
    assert node == Node(
        id="c1",
        parent_id="root",
        operator=Operator.IMPROVE,
        status=Status.IMPLEMENTED,
        idea="idea for c1",
        program_hash=cand.program_hash,
        reference_ids=("ref1",),
        round=2,
        island=1,
        tags=("lr", "reg"),
    )


def test_verification_round_trip_updates_view(store, run_id):
    store.add_candidate(run_id, make_candidate("c1"))
    ver = ok_verification(0.9, program_hash=content_hash("x"))
    store.add_verification(run_id, "c1", ver, fitness=-0.9)
    (event,) = store.events(run_id, kinds="verification")
    assert Verification.from_dict(event.payload) == ver
    assert event.payload["fitness"] == -0.9
    assert event.charge == Charge(verifications=1, evaluator_seconds=2.75)
    (node,) = store.nodes(run_id)
    assert (node.status, node.score, node.fitness, node.metrics) == (Status.OK, 0.9, -0.9, {"acc": 0.9, "f1": 0.45})
    assert node.program_hash == content_hash("x")
    assert not hasattr(node, "test_score")  # hidden test results never reach search
    (row,) = store.node_rows(run_id)
    assert row["test_score"] == pytest.approx(0.8) and row["test_metrics"] == {"acc": pytest.approx(0.8)}
    assert row["summary"] == "summary of c1" and row["verified_seq"] == event.seq == row["updated_seq"]


def test_failed_verification_has_no_fitness_and_status_events(store, run_id):
    store.add_candidate(run_id, make_candidate("c1"))
    store.add_candidate(run_id, make_candidate("c2"))
    store.add_verification(
        run_id, "c1", Verification(status=Status.TIMEOUT, reason="ran 600 s", run_seconds=600), fitness=1.0
    )
    store.append(run_id, "status", {"status": "screened-out", "reason": "critic ranked it last"}, node_id="c2")
    nodes = {n.id: n for n in store.nodes(run_id)}
    assert nodes["c1"].status is Status.TIMEOUT and nodes["c1"].fitness is None and nodes["c1"].reason == "ran 600 s"
    assert nodes["c2"].status is Status.SCREENED_OUT and nodes["c2"].reason == "critic ranked it last"
    assert store.budget(run_id).verifications == 1
    assert store.budget(run_id).evaluator_seconds == 600


def test_repeated_node_event_keeps_outcome(store, run_id):
    store.add_candidate(run_id, make_candidate("c1"))
    store.add_verification(run_id, "c1", ok_verification(0.5), fitness=0.5)
    store.add_candidate(run_id, make_candidate("c1", program="print('repaired')\n").replace(summary="new"))
    (row,) = store.node_rows(run_id)
    assert row["status"] == "ok" and row["fitness"] == 0.5 and row["summary"] == "new"
    assert row["program_hash"] == content_hash("print('repaired')\n")
    assert row["created_seq"] < row["updated_seq"]
    assert store.candidate(run_id, "c1").program == "print('repaired')\n"


def test_screening_and_other_records_round_trip_as_events(store, run_id):
    screening = Screening(
        screener="critic",
        ranking=("a", "b"),
        chosen=("a",),
        seconds=1.5,
        evidence={
            "a": Evidence(
                candidate_id="a",
                rank_value=-1.0,
                labels=("BigWin", "Tie"),
                votes={"improve": 0.5, "tie": 0.5, "lose": 0.0},
                uncertainty=0.5,
                n_valid=2,
                detail={"blobs": ["h1"]},
            )
        },
    )
    seq = store.append(run_id, "screening", screening.to_dict())
    store.append(run_id, "round", {"round": 3})
    (event,) = store.events(run_id, kinds=["screening"])
    assert event.seq == seq and Screening.from_dict(event.payload) == screening
    assert store.nodes(run_id) == []  # screening does not touch the view
    assert [e.kind for e in store.events(run_id, after=seq)] == ["round"]


def test_bad_events_raise_and_write_nothing(store, run_id):
    before = len(list(store.events(run_id)))
    with pytest.raises(StoreError, match="unknown node 'ghost'"):
        store.append(run_id, "status", {"status": "ok"}, node_id="ghost")
    with pytest.raises(StoreError, match="unknown status"):
        store.add_candidate(run_id, make_candidate("c1"), status="great")
    with pytest.raises(StoreError, match="does not match"):
        store.append(run_id, "node", {"id": "c1", "operator": "draft", "program": "a", "program_hash": "b" * 64})
    with pytest.raises(StoreError, match="JSON"):
        store.append(run_id, "memory", {"obj": object()})
    with pytest.raises(StoreError, match="cannot derive a charge"):
        store.append(run_id, "round", {}, charge=True)
    with pytest.raises(StoreError, match="unknown run 'nope'"):
        store.append("nope", "round", {})
    # append_many is all-or-nothing: the valid first item is rolled back with the bad second one.
    with pytest.raises(StoreError):
        store.append_many(
            run_id, [Item("node", make_candidate("c2").to_dict(), "c2"), ("status", {"status": "ok"}, "ghost")]
        )
    assert len(list(store.events(run_id))) == before
    assert store.nodes(run_id) == [] and not store.has_blob(make_candidate("c2").program_hash)


def test_append_many_returns_seqs_in_order(store, run_id):
    seqs = store.append_many(
        run_id, [Item("node", make_candidate(f"c{i}").to_dict(), f"c{i}") for i in range(5)] + [("round", {"round": 1})]
    )
    assert seqs == sorted(seqs) and len(set(seqs)) == 6
    assert [n.id for n in store.nodes(run_id)] == [f"c{i}" for i in range(5)]


def test_events_paging_and_filters(store, run_id, monkeypatch):
    monkeypatch.setattr(store_sqlite, "_PAGE", 3)
    store.add_candidate(run_id, make_candidate("c1"))
    for i in range(10):
        store.append(run_id, "llm_call", {"role": "proposer", "i": i}, node_id="c1" if i % 2 else None)
    assert [e.payload["i"] for e in store.events(run_id, kinds=["llm_call"])] == list(range(10))
    assert [e.payload.get("i") for e in store.events(run_id, node_id="c1")] == [None, 1, 3, 5, 7, 9]
    assert list(store.events(run_id, kinds=[])) == []


def test_blobs_are_content_addressed_and_deduplicated(store):
    big = "x = 1\n" * 1000
    h1, h2 = store.put_blob(big), store.put_blob(big.encode())
    assert h1 == h2 == content_hash(big)
    assert store.get_text(h1) == big and store.put_blob(b"\x00\xff") == content_hash(b"\x00\xff")
    raw = sqlite3.connect(store.path)
    assert raw.execute("SELECT COUNT(*), codec, size, length(data) FROM blobs WHERE hash = ?", (h1,)).fetchone()[
        :3
    ] == (1, "zlib", len(big))
    assert raw.execute("SELECT length(data) FROM blobs WHERE hash = ?", (h1,)).fetchone()[0] < len(big) // 10
    raw.close()
    with pytest.raises(StoreError, match="no blob"):
        store.get_blob("0" * 64)


def test_events_are_append_only(store, run_id):
    raw = sqlite3.connect(store.path)
    for sql in ("UPDATE events SET kind = 'x'", "DELETE FROM events"):
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            raw.execute(sql)
    raw.close()
    with pytest.raises(StoreError, match="append a new event"):
        with store._write() as conn:
            conn.execute("DELETE FROM events WHERE run_id = ?", (run_id,))
    assert len(list(store.events(run_id))) == 1


def test_reopen_persists_and_schema_version_is_set(tmp_path):
    path = tmp_path / "s.db"
    with RunStore(path) as s:
        rid = s.create_run("t", {})
        s.add_candidate(rid, make_candidate("c1"))
    with RunStore(path) as s:
        assert [n.id for n in s.nodes(rid)] == ["c1"] and s.integrity_check() == "ok"
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


def test_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "s.db"
    RunStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StoreError, match=f"schema version {SCHEMA_VERSION + 1}.*upgrade verifyless"):
        RunStore(path)


def test_corrupt_and_foreign_files_are_refused(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all\n" * 200)
    with pytest.raises(StoreError, match="not a readable verifyless run store.*move it aside"):
        RunStore(junk)
    foreign = tmp_path / "foreign.db"
    raw = sqlite3.connect(foreign)
    raw.execute("CREATE TABLE customers (id INTEGER)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="not a verifyless run store"):
        RunStore(foreign)


def test_ledger_totals(store, run_id):
    store.add_candidate(run_id, make_candidate("c1"))
    store.add_verification(run_id, "c1", ok_verification(0.5), fitness=0.5)  # 1 verification, 2.75 s
    store.add_verification(run_id, "c1", ok_verification(0.6), fitness=0.6, charge=False)  # replayed, not paid
    critic_call = {"role": "critic", "model": "m"}
    usage = {"prompt_tokens": 100, "completion_tokens": 20, "cost": 0.01, "cached": False, "latency": 0.5}
    store.append(run_id, "llm_call", {**critic_call, **usage}, charge=True)
    usage = {"prompt_tokens": 50, "completion_tokens": 5, "cost": 0.0, "cached": True, "latency_s": 0.0}
    store.append(run_id, "llm_call", {**critic_call, **usage}, charge=True)
    store.append(run_id, "pilot", {"seconds": 12.5}, charge=True)
    store.append(run_id, "memory", {"note": "x"}, charge=Charge(cost=0.5, tokens_in=1))
    store.append(run_id, "memory", {"note": "y"}, charge=Charge())  # empty charge writes no ledger row
    b = store.budget(run_id)
    assert (b.verifications, b.evaluator_seconds, b.tokens_in, b.tokens_out, b.pilot_seconds) == (
        1,
        2.75,
        151,
        25,
        12.5,
    )
    assert b.cost == pytest.approx(0.51)
    assert store.llm_usage(run_id) == [
        {
            "role": "critic",
            "model": "m",
            "calls": 2,
            "cached": 1,
            "prompt_tokens": 150,
            "completion_tokens": 25,
            "cost": 0.01,
            "latency": 0.5,
        }
    ]
    other = store.create_run("t", {})
    assert store.budget(other).verifications == 0
    assert store.rebuild_views(run_id).consistent


def test_rebuild_views_detects_and_repairs_drift(store, run_id):
    store.add_candidate(run_id, make_candidate("c1"))
    store.add_verification(run_id, "c1", ok_verification(0.5), fitness=0.5)
    expected = store.node_rows(run_id)
    with store._write() as conn:  # simulate a damaged view
        conn.execute("UPDATE nodes SET status = 'failed', fitness = NULL")
        conn.execute("DELETE FROM ledger")
    report = store.rebuild_views(run_id)
    assert (report.nodes_changed, report.ledger_changed, report.nodes) == (1, 1, 1) and not report.consistent
    assert store.node_rows(run_id) == expected and store.budget(run_id).verifications == 1
    assert store.nodes(run_id)[0].fitness == 0.5
    assert store.rebuild_views(run_id).consistent


def test_verified_hashes_and_pending_verifications(store, run_id):
    for cid in ("a", "b", "c"):
        store.add_candidate(run_id, make_candidate(cid))
    for cid in ("a", "b", "c"):
        store.append(run_id, "verification_started", {}, node_id=cid)
    store.add_verification(run_id, "b", ok_verification(0.4), fitness=0.4)
    assert store.pending_verifications(run_id) == ["a", "c"]
    assert store.verified_hashes(run_id) == {make_candidate("b").program_hash}
    assert store.budget(run_id).verifications == 1  # started but unfinished = not charged


def test_runs_resolve_and_status(store):
    a = store.create_run("t1", {}, run_id="20260101-000000-aaaaaa")
    b = store.create_run("t2", {}, run_id="20260101-000000-aabbbb")
    assert [r.run_id for r in store.runs()] == [a, b]
    assert store.resolve_run("20260101-000000-aab") == b and store.resolve_run(a) == a
    with pytest.raises(StoreError, match="ambiguous"):
        store.resolve_run("20260101")
    with pytest.raises(StoreError, match="Did you mean.*aaaaaa"):
        store.run("20260101-000000-aaaaab")
    store.set_status(a, "finished")
    assert store.run(a).status == "finished"
    assert [e.payload["status"] for e in store.events(a, kinds=["run_status"])] == ["finished"]
    (payload,) = [e.payload for e in store.events(a, kinds=["run_status"])]
    assert payload["pid"] == os.getpid() and payload["host"] == socket.gethostname(), "the writer, for liveness"
    generated = store.create_run("t3", {})
    assert len(generated) == 22 and generated > b  # timestamp prefix sorts after older ids


def test_a_running_run_whose_writer_died_reads_as_interrupted_and_the_config_in_force(store):
    run_id = store.create_run("t", {"budget": {"verifications": 6}})
    store.set_status(run_id, "running")
    assert store.run(run_id).status == "running", "this process is alive"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    payload = {"status": "running", "pid": int(dead.stdout), "host": socket.gethostname()}
    store.append(run_id, "run_status", payload)
    assert store.run(run_id).status == "interrupted"
    store.append(run_id, "run_status", {**payload, "host": "another-host"})
    assert store.run(run_id).status == "running", "a writer elsewhere cannot be checked"
    store.append(run_id, "config_update", {"changes": {"budget.verifications": 8}})
    assert store.run(run_id).config["budget"]["verifications"] == 8
    assert [r.config["budget"]["verifications"] for r in store.runs()] == [8]


def test_nodes_cache_sees_writes_from_another_connection(tmp_path):
    path = tmp_path / "s.db"
    with RunStore(path) as first, RunStore(path) as second:
        rid = first.create_run("t", {})
        first.add_candidate(rid, make_candidate("c1"))
        assert [n.status for n in second.nodes(rid)] == [Status.IMPLEMENTED]
        first.add_candidate(rid, make_candidate("c2"))
        first.add_verification(rid, "c1", ok_verification(0.7), fitness=0.7)
        nodes = second.nodes(rid)
        assert [(n.id, n.status) for n in nodes] == [("c1", Status.OK), ("c2", Status.IMPLEMENTED)]
        assert nodes == first.nodes(rid)


def test_concurrent_appends_from_threads(store, run_id):
    n_threads, per_thread = 6, 25
    results: list[list[int]] = [[] for _ in range(n_threads)]
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for i in range(per_thread):
                cid = f"t{t}-{i}"
                results[t].append(store.add_candidate(run_id, make_candidate(cid)))
                results[t].append(store.add_verification(run_id, cid, ok_verification(i / 100), fitness=i / 100))
                store.nodes(run_id)  # reads interleave with writes
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    seqs = [s for r in results for s in r]
    assert len(set(seqs)) == len(seqs) == 2 * n_threads * per_thread
    assert all(r == sorted(r) for r in results)
    assert len(store.nodes(run_id)) == n_threads * per_thread
    assert all(n.status is Status.OK for n in store.nodes(run_id))
    assert store.budget(run_id).verifications == n_threads * per_thread
    assert store.rebuild_views(run_id).consistent


def test_closed_store_raises(tmp_path):
    s = RunStore(tmp_path / "s.db")
    s.close()
    s.close()
    with pytest.raises(StoreError, match="closed"):
        s.runs()
