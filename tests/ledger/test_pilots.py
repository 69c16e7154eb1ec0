"""Pilots and smoke runs (ledger/pilots.py, screen/pilot.py): paid, recorded, never fully verified when they crash."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from bench_modules import load
from pilot_runs import _cand, _ledger, fake_run, levelled_task, run_screening

from verifyless.ledger import BudgetConfig, Ledger, LowFidelity, RunState, verify_with_repairs
from verifyless.node import Status, Verification, content_hash
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import ScreenContext
from verifyless.screen.pilot import PilotOptions, PilotScreener, survivors
from verifyless.store import RunStore
from verifyless.testing import PROGRAM, fake_engine, fake_task, value

HERE = Path(__file__).parents[1]  # tests/


def test_a_candidate_that_crashes_at_smoke_level_is_never_fully_verified_and_is_repaired_keeping_its_idea(tmp_path):
    task = levelled_task()
    with RunStore(tmp_path / "s.db") as store:
        ledger = _ledger(store)
        smoke_calls: list[tuple[int, str]] = []
        low = LowFidelity(ledger, task, fake_run(smoke_calls, crash_odd=True), smoke_wall_seconds=5)
        fully_verified: list[int] = []

        async def verify(c, slot, attempt):
            async with slot:
                fully_verified.append(value(c.program))
                v = Verification(Status.OK, "", {"loss": 1.0}, {}, 1.0, None, program_hash=c.program_hash)
                ledger.record_verification(c.id, v)
            return v

        async def repair(current, v, attempt):
            assert "odd" in v.stderr_tail  # the smoke run's error reaches the repair
            fixed = _cand(f"{current.id}f", value(current.program) + 1, idea=current.idea.text)
            ledger.record_candidate(fixed, Status.IMPLEMENTED)
            return fixed

        async def smoke(c, attempt):
            return await low.smoke(c, "tiny")

        first = _cand("c", 3)
        ledger.record_candidate(first, Status.IMPLEMENTED)
        slot = ledger.gate.reserve()
        last, v = asyncio.run(
            verify_with_repairs(
                first, verify=verify, repair=repair, attempts=2, gate=ledger.gate, slot=slot, smoke=smoke
            )
        )
        events = list(store.events(ledger.run_id))
        budget = store.budget(ledger.run_id)
    assert fully_verified == [4]  # a = 3 crashed at smoke level and was never fully verified
    assert last.idea.text == first.idea.text == "set a to 3" and v.status is Status.OK
    assert ledger.state.staged["c"].status is Status.FAILED and "smoke run" in ledger.state.staged["c"].reason
    assert smoke_calls == [(3, "tiny"), (4, "tiny")]
    assert [e.kind for e in events].count("smoke") == 2 and ledger.gate.reserved == 0
    assert budget.verifications == 1 and budget.pilot_seconds == 0.5 + 0.25  # the crash cost only its smoke run
    assert "c" not in ledger.state.verifications  # a smoke result is never a full outcome


def test_successive_halving_sends_exactly_the_configured_number_of_survivors_up_each_level(tmp_path):
    task = levelled_task()
    assert [survivors(n, 3, 1) for n in (9, 3, 1)] == [3, 1, 1] and survivors(8, 2, 3) == 4
    for eta, floor, n, expected in ((3, 1, 9, [9, 3]), (2, 3, 8, [8, 4]), (2, 1, 5, [5, 3])):
        with RunStore(tmp_path / f"s{eta}{floor}{n}.db") as store:
            ledger = _ledger(store)
            calls: list[tuple[int, str]] = []
            low = LowFidelity(ledger, task, fake_run(calls))
            pool = [_cand(f"c{k}", 4 + 2 * k) for k in range(n)]
            for c in pool:
                ledger.record_candidate(c, Status.IMPLEMENTED)
            ctx = ScreenContext(task, ParentInfo(None, PROGRAM), random.Random(0), n_verify=1, pilot=low.pilot)
            screening = asyncio.run(PilotScreener(PilotOptions(eta=eta, min_survivors=floor)).screen(ctx, pool))
        per_level = [sum(1 for _, lv in calls if lv == level) for level in ("tiny", "half")]
        assert per_level == expected, (eta, floor, n)
        rounds = screening.evidence[screening.ranking[0]].detail["rounds"]
        assert [r["survivors"] for r in rounds] == [expected[1], survivors(expected[1], eta, floor)]
        assert sorted(screening.ranking) == sorted(c.id for c in pool) and len(screening.chosen) == 1
        reached = [screening.evidence[cid].detail["level_reached"] for cid in screening.ranking]
        assert reached == sorted(reached, key=("tiny", "half").index, reverse=True)  # survivors rank first


def test_without_a_sandbox_the_pool_keeps_its_order():
    pool = [_cand(f"c{k}", k) for k in range(3)]
    ctx = ScreenContext(levelled_task(), ParentInfo(None, PROGRAM), random.Random(0), n_verify=2)
    screening = asyncio.run(PilotScreener().screen(ctx, pool))
    assert screening.ranking == ("c0", "c1", "c2") and screening.chosen == ("c0", "c1")
    assert screening.evidence["c0"].detail["reason"] == "no sandbox for pilots"


_CHILD = """
import asyncio, random, sys, time
sys.path.insert(0, {tests!r})
from pilot_runs import _cand, _ledger, fake_run, levelled_task, run_screening
from verifyless.store import RunStore

calls = []
inner = fake_run(calls)

async def run(task, program, level):
    if len(calls) == 5:
        print("mid-pilot", flush=True)
        time.sleep(60)  # killed here, in the sixth pilot
    return await inner(task, program, level)

with RunStore({db!r}) as store:
    ledger = _ledger(store)
    run_screening(ledger, run)
"""


def test_pilots_are_charged_and_recorded_and_a_kill_9_mid_pilot_loses_nothing_and_charges_nothing_twice(tmp_path):
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent / "src"), str(HERE)])}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(tests=str(HERE / "support"), db=str(db))],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "mid-pilot"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    with RunStore(db) as store:
        (info,) = store.runs()
        run_id = info.run_id
        before = [e for e in store.events(run_id) if e.kind == "pilot_run"]
        assert len(before) == 5 and store.budget(run_id).pilot_seconds == 5 * 0.25  # stored as they ended
        ledger = Ledger(store, BudgetConfig(verifications=None), fake_task().metric)
        ledger.run_id = run_id
        for ev in store.events(run_id):
            ledger.state.apply(ev)
        calls: list[tuple[int, str]] = []
        screening = run_screening(ledger, fake_run(calls))
        after = [e for e in store.events(run_id) if e.kind == "pilot_run"]
        budget = store.budget(run_id)
    assert len(calls) == 3 + 4  # the three of level one never paid, then level two: nothing paid twice
    assert len(after) == 8 + 4 and len({(e.node_id, e.payload["level"]) for e in after}) == 12
    assert budget.pilot_seconds == budget.evaluator_seconds == 12 * 0.25 and budget.verifications == 0
    assert all(e.payload["low_fidelity"] for e in after) and len(screening.chosen) == 1
    assert RunState().low_fidelity == {}  # a fresh fold knows no pilot


def test_an_engine_run_pilots_its_pools_and_never_fully_verifies_what_crashed_at_smoke_level(tmp_path):
    from verifyless.config import load_config
    from verifyless.report.render import write_report
    from verifyless.report.views.curves import best_curve
    from verifyless.report.views.pilots import low_fidelity_view
    from verifyless.screen.registry import SCREENERS, build_screener
    from verifyless.testing import FakeExecutor

    task = levelled_task()
    overrides = ["screener.name=pilot", "budget.verifications=8", "engine.candidates=6", "engine.smoke=tiny"]
    cfg = load_config(overrides=overrides)
    executor = FakeExecutor()
    with RunStore(tmp_path / "s.db") as store:
        engine = fake_engine(
            store,
            cfg,
            build_screener("pilot", models={}, options=SCREENERS.validate("pilot", {"eta": 2, "levels": ["half"]})),
            task=task,
            executor=executor,
        )
        assert (
            engine.dispatch.low_fidelity is None and engine.dispatch.smoke_at is None
        )  # the fake executor has no sandbox
        engine.dispatch.low_fidelity = LowFidelity(engine.ledger, task, fake_run([], crash_odd=True))
        engine.dispatch.smoke_at = "tiny"
        asyncio.run(engine.run())
        events = list(store.events(engine.run_id))
        budget = store.budget(engine.run_id)
        view = low_fidelity_view(store, engine.run_id)
        curve = best_curve(store, engine.run_id)
        html = write_report(store, engine.run_id, tmp_path / "report", figures=False).html.read_text()
    smoked = {e.node_id: e.payload for e in events if e.kind == "smoke"}
    crashed = [nid for nid, p in smoked.items() if p["status"] == Status.FAILED.value]
    assert crashed, "the proposer made no odd a: the test saw no smoke crash"
    fully = {e.node_id for e in events if e.kind == "verification"}
    assert not fully & set(crashed)  # a smoke crash is never fully verified
    odd = {content_hash(PROGRAM.replace("a = 0", f"a = {a}")) for a in range(-200, 200, 1) if a % 2}
    assert not odd & set(executor.calls[1:])  # past the baseline, no odd program reached the executor
    ideas = {e.node_id: e.payload["idea"] for e in events if e.kind == "node"}
    for nid in crashed:
        assert engine.state.view.nodes[nid].status is Status.FAILED
        repaired = f"{nid.split('f')[0]}f{int(nid.split('f')[1]) + 1 if 'f' in nid else 1}"
        assert repaired in ideas and ideas[repaired] == ideas[nid]  # repaired keeping its idea
    assert any(e.kind == "pilot_run" for e in events)
    assert view.smoke_stops == len(crashed) and view.saved_seconds is not None and view.saved_seconds > 0
    assert [(p.level, p.piloted, p.survivors) for p in view.levels][0] == ("half", 6, 3)
    reached = curve.compute_to_target()
    assert reached and reached[-1][0] == curve.final and reached[-1][1] > curve.points[reached[-1][2] - 1].seconds
    assert [p.evaluator_seconds for p in curve.points] == sorted(p.evaluator_seconds for p in curve.points)
    assert (
        "Compute to target" in html
        and "stopped at smoke level" in html
        and "Estimated compute saved" in html
        and "went up" in html
    )
    assert budget.pilot_seconds > 0 and budget.evaluator_seconds >= budget.pilot_seconds


def test_cascade_critic_then_pilot_pilots_exactly_the_critics_m_and_orders_the_top_by_pilots():
    import re

    from cascade_pool import LABELS, QUALITY, cand, critic_fn
    from critic_screens import make_ctx

    from verifyless.screen.registry import SCREENERS, build_screener
    from verifyless.testing import SampleFnModel

    critic_model = SampleFnModel(critic_fn(LABELS), "critic")
    options = {"m": 3, "critic": {"k": 4}, "then": "pilot", "pilot": {"eta": 2, "levels": ["lo"]}}
    screener = build_screener(
        "cascade", models={"critic": critic_model}, options=SCREENERS.validate("cascade", options)
    )
    ctx = make_ctx(0)
    piloted: list[str] = []
    sign = 1.0 if ctx.task.metric.direction == "maximize" else -1.0

    async def pilot(c, level):
        piloted.append(c.id)
        q = int(re.search(r"# Q(\d)", c.program).group(1))
        return Verification(Status.OK, "", {ctx.task.metric.name: sign * q}, {}, sign * q, None, run_seconds=0.1)

    ctx = dataclasses.replace(ctx, pilot=pilot)
    screening = asyncio.run(screener.screen(ctx, [cand(c, q) for c, q in QUALITY.items()]))
    sent = screening.evidence[screening.ranking[0]].detail["sent_to_tournament"]
    assert len(piloted) == 3 and sorted(piloted) == sorted(sent)  # only the critic's m are piloted
    assert screening.ranking[0] == max(sent, key=QUALITY.__getitem__)
    assert screening.evidence[screening.ranking[0]].detail["second_stage"] == "pilot"


def test_the_levels_past_the_evaluator_seconds_left_are_skipped(tmp_path):
    task = levelled_task()
    with RunStore(tmp_path / "s.db") as store:
        ledger = _ledger(store)
        calls: list[tuple[int, str]] = []
        pool = [_cand(f"c{k}", 4 + 2 * k) for k in range(8)]
        for c in pool:
            ledger.record_candidate(c, Status.IMPLEMENTED)
        low = LowFidelity(ledger, task, fake_run(calls))
        parent = ParentInfo(None, PROGRAM)
        ctx = ScreenContext(task, parent, random.Random(0), n_verify=1, budget_left_s=1.0, pilot=low.pilot)
        screening = asyncio.run(PilotScreener(PilotOptions(eta=2)).screen(ctx, pool))
        spent = dataclasses.replace(ctx, budget_left_s=0.0)
        none = asyncio.run(PilotScreener(PilotOptions(eta=2)).screen(spent, pool))
    assert [lv for _, lv in calls] == ["tiny"] * 8  # 8 x 0.25 s spent the 1 s left: level two never ran
    rounds = screening.evidence[screening.ranking[0]].detail["rounds"]
    assert rounds[1] == {"level": "half", "piloted": 0, "survivors": 4, "skipped": "budget"}
    assert none.evidence["c0"].detail["reason"] == "no evaluator seconds left" and len(calls) == 8


def test_the_pilot_bench_ranks_and_replays_as_documented():
    bench = load("pilots")
    assert abs(bench.spearman([1, 2, 3, 4], [10, 20, 30, 40]) - 1.0) < 1e-9
    assert abs(bench.spearman([1, 2, 3], [3, 2, 1]) + 1.0) < 1e-9
    assert bench.spearman([1, 2], [1, 2]) is None and bench.spearman([1, 1, 1], [1, 2, 3]) is None
    exact = [bench.Measured(float(k), {"lo": (float(k), 0.1)}) for k in range(8)]  # a level that ranks perfectly
    found = bench.replay(exact, ["lo"], 1.0, 4.0, random.Random(0))
    assert found["oracle"][0] == 1.0 >= found["random"][0] and found["pilot"][1] < found["random"][1]
    rho, top = bench.correlations(exact, "lo")
    assert abs(rho - 1.0) < 1e-9 and top is None  # the best quarter of 8 is two points: n/a


def test_smoke_level_auto_is_the_cheapest_level_for_llm_roles_and_a_wrong_name_is_a_config_error():
    import pytest

    from verifyless.config import load_config
    from verifyless.errors import ConfigError
    from verifyless.ledger import smoke_level

    task = levelled_task()
    assert smoke_level(task, None, llm_roles=True) == "tiny" and smoke_level(task, None, llm_roles=False) is None
    assert smoke_level(fake_task(), None, llm_roles=True) is None and smoke_level(task, "off", True) is None
    assert smoke_level(task, "half", llm_roles=False) == "half"
    with pytest.raises(ConfigError, match="no such fidelity level"):
        smoke_level(task, "quarter", llm_roles=True)
    assert load_config(overrides=["engine.smoke=off"]).engine.smoke == "off"  # YAML's false


def test_a_pilot_at_the_smoke_level_answers_the_smoke_run_unpaid(tmp_path):
    task = levelled_task()
    with RunStore(tmp_path / "s.db") as store:
        ledger = _ledger(store)
        calls: list[tuple[int, str]] = []
        low = LowFidelity(ledger, task, fake_run(calls, crash_odd=True))
        odd, even = _cand("c1", 5), _cand("c2", 6)
        for c in (odd, even):
            ledger.record_candidate(c, Status.IMPLEMENTED)
            asyncio.run(low.pilot(c, "tiny"))
        stopped = asyncio.run(low.smoke(odd, "tiny"))
        passed = asyncio.run(low.smoke(even, "tiny"))
        kinds = [e.kind for e in store.events(ledger.run_id)]
    assert calls == [(5, "tiny"), (6, "tiny")] and "smoke" not in kinds  # nothing run twice
    assert stopped is not None and stopped.status is Status.FAILED and passed is None
    assert ledger.state.staged["c1"].status is Status.FAILED and ledger.state.staged["c2"].status is Status.IMPLEMENTED
