"""The dashboard's ETA: the recent pace of paid verifications times what is left of the cap."""

from __future__ import annotations

import pytest

from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.report import views
from verifyless.store.records import Charge
from verifyless.store.sqlite import RunStore


def test_eta_is_the_recent_pace_times_what_is_left():
    assert views.progress.eta_seconds([10.0, 12.0, 14.0, 16.0], done=4, cap=10, status="running") == pytest.approx(12.0)
    assert views.progress.eta_seconds([10.0, 12.0], done=10, cap=10, status="running") == 0.0  # at the cap
    assert views.progress.eta_seconds([10.0], done=1, cap=10, status="running") is None  # no pace from one point
    assert views.progress.eta_seconds([10.0, 12.0], done=2, cap=None, status="running") is None  # no cap
    assert views.progress.eta_seconds([10.0, 12.0], done=2, cap=10, status="finished") is None


def _verify(store: RunStore, run_id: str, n: int) -> None:
    for _ in range(n):
        cid = f"c{len(list(store.events(run_id, kinds='node')))}"
        prog = f"x = {cid!r}\n"
        store.add_candidate(run_id, Candidate(cid, None, Operator.IMPROVE, Idea(cid), prog, content_hash(prog)))
        store.add_verification(run_id, cid, Verification(Status.OK, score=1.0, run_seconds=1.0), 1.0)
        store.append(run_id, "llm_call", {"tokens_in": 1}, charge=Charge(tokens_in=1))  # not a verification


def test_progress_carries_the_eta_incrementally_and_drops_it_when_the_run_ends(tmp_path):
    with RunStore(tmp_path / "runs.db") as store:
        rid = store.create_run("toy", {"budget": {"verifications": 20}})
        store.set_status(rid, "running")
        _verify(store, rid, 3)
        first = views.progress.progress(store, rid)
        _verify(store, rid, 12)
        later = views.progress.progress(store, rid, since=first)
        full = views.progress.progress(store, rid)
        assert later.verified_at == full.verified_at and len(full.verified_at) == views.progress.ETA_WINDOW
        assert later.eta_s == full.eta_s and full.eta_s is not None and full.eta_s >= 0.0
        store.set_status(rid, "finished")
        assert views.progress.progress(store, rid, since=later).eta_s is None


def test_duration_words():
    pytest.importorskip("starlette", reason="the ui extra is not installed")
    from verifyless.report.text import duration

    assert [duration(x) for x in (None, 4.4, 95, 3 * 3600 + 125)] == ["-", "4 s", "1 min 35 s", "3 h 2 min"]
