"""The engine end to end with deterministic fakes (roles, executor) and the real store, strategies, screeners."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from verifyless.store import RunStore
from verifyless.testing import FakeExecutor, fake_roles, make_engine, verification_events


@pytest.mark.parametrize("strategy", ["greedy", "islands", "mcgs", "linear"])
@pytest.mark.parametrize("screener", ["random", "surrogate", "oracle"])
def test_every_strategy_and_screener_spends_the_budget_exactly(tmp_path, strategy, screener):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, strategy=strategy, screener=screener, budget=9)
        result = asyncio.run(engine.run())
        events = verification_events(store, result.run_id)
        assert store.budget(result.run_id).verifications == len(events) == 9
        assert result.verifications == 9
        hashes = Counter(e.payload["program_hash"] for e in events)
        assert max(hashes.values()) == 1, "an identical program was verified twice"
        assert result.best_score is not None and result.best_score <= result.baseline_score
        assert store.run(result.run_id).status == "finished"
        first = next(iter(store.events(result.run_id)))
        assert first.kind == "config" and first.payload["config"]["budget"]["verifications"] == 9


def test_search_improves_on_the_baseline(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(make_engine(store, strategy="greedy", budget=15).run())
    assert result.baseline_score == 169.0
    assert result.best_score < 60


def test_pipelined_and_sequential_runs_are_each_deterministic(tmp_path):
    """Same decisions in the same order whatever the verification timing (told batches in order, same outcomes)."""
    outcomes = []
    timing = random.Random(7)
    for pipeline in (True, True, False, False):
        with RunStore(tmp_path / f"{len(outcomes)}.db") as store:
            engine = make_engine(
                store,
                strategy="mcgs",
                screener="surrogate",
                budget=12,
                executor=FakeExecutor(capacity=2, delay=0.02 * timing.random()),
                **{"engine.pipeline": pipeline, "engine.verify_concurrency": 2, "engine.verify_per_expansion": 2},
            )
            result = asyncio.run(engine.run())
            tells = [(e.payload["round"], e.payload["node_ids"]) for e in store.events(result.run_id, kinds=["tell"])]
            verified = sorted((e.node_id, e.payload["score"]) for e in verification_events(store, result.run_id))
            outcomes.append((tells, verified, result.best_id))
    assert outcomes[0] == outcomes[1]
    assert outcomes[2] == outcomes[3]
    assert outcomes[0][0] != outcomes[2][0], "pipelining should change what each ask knew"


def test_budget_is_never_exceeded_with_parallel_verifications(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(
            store,
            strategy="greedy",
            screener="oracle",
            budget=7,
            executor=FakeExecutor(capacity=3, delay=0.02),
            **{"engine.verify_concurrency": 3},
        )
        result = asyncio.run(engine.run())
        assert store.budget(result.run_id).verifications == 7


@pytest.mark.parametrize("option", ["engine.verify_uncertain", "engine.audit_rate"])
def test_uncertain_and_audit_candidates_are_also_verified(tmp_path, option):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, strategy="greedy", screener="surrogate", budget=12, **{option: 1})
        result = asyncio.run(engine.run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
    assert any(len(s["to_verify"]) > 1 for s in screenings)
    if option == "engine.audit_rate":
        audited = [a for s in screenings for a in s["audited"]]
        assert audited and all(a in s["to_verify"] and a not in s["chosen"] for s in screenings for a in s["audited"])


def test_memory_receives_every_verification(tmp_path):
    from verifyless.search.memory import Memory

    memory = Memory(embedder="hashing")
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(make_engine(store, strategy="mcgs", budget=8, memory=memory).run())
        assert len(memory) == len(verification_events(store, result.run_id))


def test_resume_after_an_interruption_loses_nothing_and_charges_nothing_twice(tmp_path):
    class Interrupt(Exception):
        pass

    class Crashing(FakeExecutor):
        async def verify(self, task, program):
            if len(self.calls) >= 5:
                raise Interrupt()
            return await super().verify(task, program)

    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, strategy="mcgs", budget=12, executor=Crashing())
        with pytest.raises(Interrupt):
            asyncio.run(engine.run())
        run_id = engine.run_id
        before = verification_events(store, run_id)
        assert store.run(run_id).status == "interrupted" and len(before) == 5
        resumed = make_engine(store, strategy="mcgs", budget=12)
        result = asyncio.run(resumed.run(run_id))
        after = verification_events(store, run_id)
        assert [e.seq for e in after[:5]] == [e.seq for e in before]
        assert store.budget(run_id).verifications == len(after) == 12 == result.verifications
        assert max(Counter(e.payload["program_hash"] for e in after).values()) == 1


CRASH_SCRIPT = r"""
import asyncio, random, sys
sys.path.insert(0, {tests!r})
from verifyless.testing import FakeExecutor, fake_roles, fake_task
from verifyless.config import load_config
from verifyless.engine import Engine
from verifyless.screen.registry import build_screener
from verifyless.search.registry import build_strategy
from verifyless.store import RunStore
cfg = load_config(overrides=["strategy.name=mcgs", "screener.name=surrogate", "budget.verifications=40",
                            "engine.candidates=4"])
store = RunStore({db!r})
screener = build_screener("surrogate", models={{}}, seed=0)
engine = Engine(task=fake_task(), roles=fake_roles(), screener=screener,
                strategy=build_strategy("mcgs", None, random.Random(0)), executor=FakeExecutor(delay=0.01),
                store=store, config=cfg)
asyncio.run(engine.run())
"""


def test_kill_minus_nine_then_resume(tmp_path):
    db = tmp_path / "s.db"
    script = tmp_path / "crash.py"
    script.write_text(CRASH_SCRIPT.format(tests=str(Path(__file__).parent), db=str(db)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    with RunStore(db) as probe:
        while time.monotonic() < deadline:
            runs = probe.runs() if db.exists() else []
            if runs and probe.budget(runs[0].run_id).verifications >= 8:
                break
            time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with RunStore(db) as store:
        assert store.integrity_check() == "ok"
        run_id = store.runs()[0].run_id
        before = verification_events(store, run_id)
        assert 8 <= len(before) < 40
        engine = make_engine(store, strategy="mcgs", screener="surrogate", budget=40)
        result = asyncio.run(engine.run(run_id))
        after = verification_events(store, run_id)
        assert {e.seq for e in before} <= {e.seq for e in after}
        assert store.budget(run_id).verifications == len(after) == 40 == result.verifications
        assert max(Counter(e.payload["program_hash"] for e in after).values()) == 1


def test_model_failures_are_statuses_and_a_dead_endpoint_stops_with_a_clear_error(tmp_path):
    from verifyless.errors import ModelUnavailable
    from verifyless.testing import Implementer, Proposer

    class Flaky(Implementer):
        def __init__(self):
            super().__init__()
            self.n = 0

        async def implement(self, task, parent, idea):
            self.n += 1
            if self.n % 3 == 0:
                raise ModelUnavailable("retries exhausted talking to http://127.0.0.1:9/v1")
            return await super().implement(task, parent, idea)

    class Dead(Proposer):
        async def propose(self, ctx, n):
            raise ModelUnavailable("cannot reach http://127.0.0.1:9/v1")

    with RunStore(tmp_path / "s.db") as store:
        base = fake_roles()
        engine = make_engine(
            store, budget=6, roles=base.__class__(base.briefer, base.proposer, Flaky(), base.summarizer)
        )
        result = asyncio.run(engine.run())
        statuses = Counter(r["status"] for r in store.node_rows(result.run_id))
        assert statuses["model-error"] > 0 and result.verifications == 6

        dead = make_engine(
            store, budget=6, roles=base.__class__(base.briefer, Dead(), base.implementer, base.summarizer)
        )
        with pytest.raises(ModelUnavailable, match="3 rounds in a row"):
            asyncio.run(dead.run())
        assert len(list(store.events(dead.run_id, kinds=["model_error"]))) == 3


def test_the_implementer_is_told_each_childs_operator_so_it_can_code_by_stage(tmp_path):
    """Issue 56, item 7: ``ParentInfo.operator`` is the expansion's operator (roles/staged.py reads it)."""
    from verifyless.testing import Implementer

    seen: list[tuple[str, str]] = []

    class Recording(Implementer):
        async def implement(self, task, parent, idea):
            seen.append((parent.id, parent.operator.value))
            return await super().implement(task, parent, idea)

    with RunStore(tmp_path / "s.db") as store:
        base = fake_roles()
        roles = base.__class__(base.briefer, base.proposer, Recording(), base.summarizer)
        result = asyncio.run(make_engine(store, strategy="mcgs", budget=8, roles=roles).run())
        made = {(r["parent_id"], r["operator"]) for r in store.node_rows(result.run_id) if r["node_id"] != "root"}
    assert seen and set(seen) <= made and {"draft", "improve"} <= {op for _, op in seen}


@pytest.mark.parametrize("budget", [3, 5, 12, 30])
@pytest.mark.parametrize("pipeline", [True, False])
def test_mcgs_schedules_reach_their_floors_by_the_last_round_at_any_budget(tmp_path, budget, pipeline):
    """The engine paces MCGS by the verifications left: the last ask runs at c_min and w_min (issue 47, item 1)."""
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, strategy="mcgs", budget=budget, **{"engine.pipeline": pipeline})
        result = asyncio.run(engine.run())
        rounds = [e.payload["schedule"] for e in store.events(result.run_id, kinds=["round"])]
    assert rounds and rounds[-1]["c"] == pytest.approx(0.1) and rounds[-1]["w"] == pytest.approx(0.2)
    progress = [r["progress"] for r in rounds]
    assert progress == sorted(progress) and rounds[0]["c"] == pytest.approx(1.414)


def test_mcgs_schedules_follow_evaluator_seconds_when_they_bind(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, strategy="mcgs", budget="null", **{"budget.evaluator_seconds": 0.12})
        result = asyncio.run(engine.run())
        rounds = [e.payload["schedule"] for e in store.events(result.run_id, kinds=["round"])]
    assert len(rounds) >= 5 and rounds[-1]["c"] == pytest.approx(0.1) and rounds[-1]["w"] == pytest.approx(0.2)
    assert rounds[0]["steps_left"] is not None and rounds[0]["c"] > 1.0


def test_the_report_shows_the_mcgs_schedule_over_the_run(tmp_path):
    from verifyless.report import views
    from verifyless.report.render import report_html

    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(make_engine(store, strategy="mcgs", budget=12).run())
        points = views.series.schedule_series(store, result.run_id)
        html = report_html(store, result.run_id, figures_dir="figures/")
    assert points[0].c == pytest.approx(1.414) and points[-1].c == pytest.approx(0.1)
    assert [p.w for p in points] == sorted((p.w for p in points), reverse=True)
    assert all(p.branches >= 1.0 for p in points if p.t > 3)
    assert "MCGS schedule" in html and "exp(H(&pi;" in html


def test_a_budget_raised_on_resume_stretches_the_mcgs_schedules(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        first = asyncio.run(make_engine(store, strategy="mcgs", budget=8).run())
        asyncio.run(make_engine(store, strategy="mcgs", budget=20).run(first.run_id))
        rounds = [e.payload["schedule"] for e in store.events(first.run_id, kinds=["round"])]
    ends = [i for i, r in enumerate(rounds) if r["c"] == pytest.approx(0.1)]
    assert ends and ends[0] < len(rounds) - 1  # the first budget's floor was reached ...
    after = rounds[ends[0] + 1]
    assert after["c"] > 0.1 and after["steps_left"] > 0  # ... and the raised budget reopened the anneal
    assert rounds[-1]["c"] == pytest.approx(0.1) and rounds[-1]["w"] == pytest.approx(0.2)


def test_the_peek_oracle_runs_every_candidate_and_charges_one_verification_per_expansion(tmp_path):
    """The RPM paper's oracle on the engine path (issue 47, item 4): N uncharged runs, the best pick charged."""
    executor = FakeExecutor()
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, screener="peek", budget=7, executor=executor, **{"engine.repair_attempts": 0})
        result = asyncio.run(engine.run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        charged = verification_events(store, result.run_id)
        paid = store.budget(result.run_id).verifications
    expansions = [s for s in screenings if s["screener"] == "peek"]
    assert paid == len(charged) == 1 + len(expansions) == 7
    assert all(len(s["to_verify"]) == 1 for s in expansions)
    peeked = sum(len(s["ranking"]) for s in expansions)
    assert peeked > len(expansions) and len(executor.calls) == 1 + peeked + len(expansions)  # run, then charged
    for s in expansions:  # the pick is the best validation score of the pool (the loss is minimised)
        ev = s["evidence"]
        assert s["to_verify"][0] == max(ev, key=lambda cid: ev[cid]["rank_value"])
        assert all(e["detail"]["peeked"] for e in ev.values())
