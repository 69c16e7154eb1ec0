"""The engine's rooms: routing, the budget gate (one test per cap), stop reasons, screener fallback and
learning, snapshot resume against full replay. Real store, real strategies, deterministic fake roles."""

from __future__ import annotations

import asyncio
import logging
import random
import shutil
from collections import Counter

import pytest

from verifyless.config import BudgetConfig, load_config
from verifyless.engine import BudgetGate
from verifyless.engine.routing import select
from verifyless.errors import ModelUnavailable
from verifyless.node import Evidence, Idea, Screening, Status, Verification, content_hash
from verifyless.outcome import Outcome
from verifyless.screen.base import LearningScreener
from verifyless.screen.baselines import RandomScreener
from verifyless.screen.ranking import route
from verifyless.store import Charge, RunStore
from verifyless.testing import (
    FakeExecutor,
    Implementer,
    Proposer,
    fake_engine,
    fake_roles,
    make_engine,
    verification_events,
)


def _screening(evidence: dict[str, Evidence]) -> Screening:
    ids = tuple(evidence)
    return Screening("s", ids, ids[:1], evidence)


# ---------------------------------------------------------------------- routing


def test_route_is_u_at_least_t():
    assert route(0.25, 0.25) and route(0.9, 0.25) and not route(0.2, 0.25)


@pytest.mark.parametrize("kind", ["random", "agentic", "surrogate-cold-start"])
def test_routing_is_never_triggered_without_votes(kind):
    # What these screeners report: uncertainty 1.0 and no vote distribution.
    evidence = {
        f"c{i}": Evidence(f"c{i}", rank_value=float(-i), uncertainty=1.0, detail={"kind": kind}) for i in range(6)
    }
    routed = select(
        _screening(evidence), slots=100, verify_uncertain=True, threshold=0.0, audit_rate=0.0, rng=random.Random(0)
    )
    assert routed.to_verify == ("c0",) and routed.uncertain == ()


def test_routing_verifies_split_votes_only():
    evidence = {
        "a": Evidence("a", 1.0, votes={"improve": 1.0}, uncertainty=0.0),
        "b": Evidence("b", 0.5, votes={"improve": 0.5, "lose": 0.5}, uncertainty=0.5),
        "c": Evidence("c", 0.2, votes={"improve": 0.8, "lose": 0.2}, uncertainty=0.2),
    }
    routed = select(
        _screening(evidence), slots=100, verify_uncertain=True, threshold=0.25, audit_rate=0.0, rng=random.Random(0)
    )
    assert routed.to_verify == ("a", "b") and routed.uncertain == ("b",)
    off = select(
        _screening(evidence), slots=100, verify_uncertain=False, threshold=0.25, audit_rate=0.0, rng=random.Random(0)
    )
    assert off.to_verify == ("a",)
    cut = select(
        _screening(evidence), slots=1, verify_uncertain=True, threshold=0.25, audit_rate=0.0, rng=random.Random(0)
    )
    assert cut.to_verify == ("a",) and cut.uncertain == ()


def test_a_random_screener_run_with_routing_on_verifies_only_its_choice(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(
            store, screener="random", budget=8, **{"engine.verify_uncertain": True, "engine.uncertainty_threshold": 0.0}
        )
        result = asyncio.run(engine.run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
    assert screenings and all(s["to_verify"] == s["chosen"] for s in screenings)


# ---------------------------------------------------------------------- the budget gate, one test per cap


def _gate(store: RunStore, run_id: str, clock=None, **caps) -> BudgetGate:
    full = {"verifications": None, **caps}
    kwargs = {"clock": clock} if clock else {}
    return BudgetGate(BudgetConfig(**full), lambda: store.budget(run_id), **kwargs)


def test_verification_cap_counts_reserved_slots(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        run_id = store.create_run("t", {})
        gate = _gate(store, run_id, verifications=2)
        assert gate.slots_left() == 2
        slot = gate.reserve()
        assert gate.slots_left() == 1
        gate.reserve()
        assert gate.slots_left() == 0 and gate.stop_reason() == "budget: verifications"

        async def release():
            async with slot:
                pass

        asyncio.run(release())
        assert gate.reserved == 1 and gate.slots_left() == 1


@pytest.mark.parametrize(
    "cap, charge, reason",
    [
        ({"tokens": 100}, Charge(tokens_in=60, tokens_out=40), "budget: tokens"),
        ({"cost": 0.5}, Charge(cost=0.5), "budget: cost"),
        ({"evaluator_seconds": 10.0}, Charge(evaluator_seconds=10.0), "budget: evaluator seconds"),
    ],
)
def test_each_ledger_cap_stops_new_work(tmp_path, cap, charge, reason):
    with RunStore(tmp_path / "s.db") as store:
        run_id = store.create_run("t", {})
        gate = _gate(store, run_id, **cap)
        store.append(
            run_id, "llm_call", {"role": "x"}, charge=Charge(**{k: v / 2 for k, v in charge.to_dict().items()})
        )
        assert gate.stop_reason() is None and gate.slots_left() > 0
        store.append(
            run_id, "llm_call", {"role": "x"}, charge=Charge(**{k: v / 2 for k, v in charge.to_dict().items()})
        )
        assert gate.stop_reason() == reason and gate.slots_left() == 0


def test_wall_clock_cap(tmp_path):
    now = [100.0]
    with RunStore(tmp_path / "s.db") as store:
        gate = _gate(store, store.create_run("t", {}), clock=lambda: now[0], wall_seconds=5.0)
        now[0] = 104.9
        assert gate.stop_reason() is None
        now[0] = 105.0
        assert gate.stop_reason() == "budget: wall time"


def test_a_wall_clock_cap_counts_steps_only_for_a_strategy_paced_by_wall_time(tmp_path):
    """Issue 56, item 7: the wall seconds left over the wall seconds per verification since the first look."""
    now = [100.0]
    with RunStore(tmp_path / "s.db") as store:
        run_id = store.create_run("t", {})
        gate = _gate(store, run_id, clock=lambda: now[0], wall_seconds=100.0)
        store.append(run_id, "llm_call", {"role": "x"}, charge=Charge(verifications=1))
        now[0] = 110.0
        assert gate.steps_left(1) is None and gate.steps_left(1, wall=True) is None  # no pace measured yet
        now[0] = 120.0  # two more verifications in the next 10 s: 5 s each, 80 s left
        for _ in range(2):
            store.append(run_id, "llm_call", {"role": "x"}, charge=Charge(verifications=1))
        assert gate.steps_left(1, wall=True) == 80 // 5 - 1 and gate.steps_left(1) is None
        capped = _gate(store, run_id, clock=lambda: now[0], wall_seconds=100.0, verifications=5)
        capped._wall_mark = (110.0, 1)
        assert capped.steps_left(1, wall=True) == 5 - 3 - 1  # the smaller count binds


def test_seconds_held_for_the_final_step_count_as_spent_for_the_search_only(tmp_path):
    """Issue 56, item 3: a top-K ensemble that is the run's answer keeps its seconds out of the search."""
    now = [100.0]
    with RunStore(tmp_path / "s.db") as store:
        run_id = store.create_run("t", {})
        gate = _gate(store, run_id, clock=lambda: now[0], evaluator_seconds=10.0, wall_seconds=50.0)
        for _ in range(2):
            store.append(run_id, "llm_call", {"role": "x"}, charge=Charge(verifications=1, evaluator_seconds=3.0))
        assert gate.stop_reason() is None and gate.steps_left(0) == 1  # 4 s left: one more 3 s verification
        gate.hold = lambda used: 2 * used.evaluator_seconds / used.verifications  # two members at 3 s each
        assert gate.stop_reason() == "budget: evaluator seconds" and gate.steps_left(0) == 0
        assert gate.llm_stop_reason(final=True) is None  # the final step itself may spend what was held
        now[0] = 146.0  # 46 s of 50 gone: the wall clock holds the same 6 s back
        gate.caps = BudgetConfig(verifications=None, wall_seconds=50.0)
        assert gate.stop_reason() == "budget: wall time" and gate.llm_stop_reason(final=True) is None


def test_mcgs_with_wall_pacing_anneals_over_the_wall_clock_budget(tmp_path):
    from verifyless.config import load_config
    from verifyless.engine import Engine
    from verifyless.screen.registry import build_screener
    from verifyless.search.mcgs import MCGSConfig
    from verifyless.search.registry import build_strategy
    from verifyless.testing import fake_task

    cfg = load_config(overrides=["budget.verifications=null", "budget.wall_seconds=1.5", "engine.candidates=2"])
    rounds = {}
    for paced in (False, True):
        with RunStore(tmp_path / f"{paced}.db") as store:
            engine = Engine(
                task=fake_task(),
                roles=fake_roles(),
                screener=build_screener("random", models={}, seed=0),
                strategy=build_strategy("mcgs", MCGSConfig(wall_pacing=paced), random.Random(0)),
                executor=FakeExecutor(delay=0.05),
                store=store,
                config=cfg,
            )
            result = asyncio.run(engine.run())
            rounds[paced] = [e.payload["schedule"] for e in store.events(result.run_id, kinds=["round"])]
        assert result.stopped == "budget: wall time"
    assert all(r["steps_left"] is None for r in rounds[False])  # only the verification count paces by default
    paced = [r for r in rounds[True] if r["steps_left"] is not None]
    assert len(paced) >= 3 and paced[-1]["progress"] > 0.5 > paced[0]["progress"]
    assert paced[-1]["c"] < rounds[False][-1]["c"]  # further down the anneal than the unpaced run at its end


def test_evaluator_seconds_cap_stops_a_run(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, budget=1000, **{"budget.evaluator_seconds": 0.05})
        result = asyncio.run(engine.run())
        used = store.budget(result.run_id)
    assert result.stopped == "budget: evaluator seconds"
    assert 0.05 <= used.evaluator_seconds < 0.05 + 0.02  # each fake verification takes 0.01 s


def test_wall_clock_cap_stops_a_run(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, budget=1000, executor=FakeExecutor(delay=0.02), **{"budget.wall_seconds": 0.3})
        result = asyncio.run(engine.run())
    assert result.stopped == "budget: wall time" and 1 <= result.verifications < 1000


# ---------------------------------------------------------------------- stop reasons


def test_max_rounds_stop(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(make_engine(store, budget=100, **{"engine.max_rounds": 3}).run())
    assert result.stopped == "max_rounds" and result.rounds == 3


def test_stall_stop_when_every_candidate_is_a_duplicate(tmp_path):
    class Same(Proposer):
        async def propose(self, ctx, n):
            return [Idea("set a to 0", {"a": 0}) for _ in range(n)]  # the baseline's own program

    base = fake_roles()
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(
            store,
            budget=100,
            roles=base.__class__(base.briefer, Same(), base.implementer, base.summarizer),
            **{"engine.max_idle_rounds": 3},
        )
        result = asyncio.run(engine.run())
        statuses = Counter(r["status"] for r in store.node_rows(result.run_id))
    assert result.stopped.startswith("stalled: 3 rounds") and result.verifications == 1
    assert statuses["duplicate"] == 3 * 4


def test_strategy_exhausted_stop(tmp_path):
    class OneShot:
        name = "one-shot"

        def __init__(self):
            self.asked = 0

        def ask(self, view, k):
            self.asked += 1
            from verifyless.node import Operator
            from verifyless.search.base import Expansion

            return [Expansion("root", Operator.IMPROVE)] if self.asked == 1 else []

        def tell(self, node):
            pass

        def final(self, view):
            return view.best_id

    cfg = load_config(overrides=["budget.verifications=50", "engine.candidates=2"])
    with RunStore(tmp_path / "s.db") as store:
        engine = fake_engine(store, cfg, RandomScreener(), strategy=OneShot())
        result = asyncio.run(engine.run())
    assert result.stopped == "strategy-exhausted" and result.verifications == 2


def test_a_dead_screener_falls_back_to_a_seeded_random_pick(tmp_path, caplog):
    """With the stops lifted (``engine.max_screener_fallbacks=null``) every round falls back, counted and logged;
    the stops themselves are tested in e2e/test_first_hour.py."""

    class Dead:
        name = "critic"

        async def screen(self, ctx, candidates):
            raise ModelUnavailable("cannot reach http://127.0.0.1:9/v1")

    over = [
        "budget.verifications=5",
        "engine.candidates=4",
        "strategy.name=greedy",
        "engine.max_screener_fallbacks=null",
    ]
    cfg = load_config(overrides=over)
    with RunStore(tmp_path / "s.db") as store, caplog.at_level(logging.WARNING, logger="verifyless.engine"):
        engine = fake_engine(store, cfg, Dead())
        result = asyncio.run(engine.run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        fallbacks = list(store.events(result.run_id, kinds=["screener_fallback"]))
    assert result.verifications == 5 and result.stopped == "budget: verifications"
    assert screenings and all(s["screener"] == "critic-unavailable" and len(s["to_verify"]) == 1 for s in screenings)
    assert len(fallbacks) == len(screenings) and "cannot reach" in fallbacks[0].payload["reason"]
    assert fallbacks[-1].payload["fallbacks"] == fallbacks[-1].payload["screenings"] == len(screenings)
    assert "falling back to a seeded random pick" in caplog.text


# ---------------------------------------------------------------------- learning screeners


class Learner(RandomScreener):
    """A random screener that also learns: records what it was given and returns a version."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[int, list[Outcome]]] = []
        self.restored: list[dict] | None = None

    async def learn(self, outcomes, round):
        self.calls.append((round, list(outcomes)))
        return {"adapter_version": len(self.calls), "pairs": len(outcomes)} if outcomes else None

    def restore(self, records):
        self.restored = list(records)


def _learning_engine(store, screener, executor=None):
    cfg = load_config(
        overrides=[
            "budget.verifications=8",
            "engine.candidates=3",
            "strategy.name=greedy",
            "engine.verify_per_expansion=2",
        ]
    )
    return fake_engine(store, cfg, screener, executor=executor)


def test_learning_screener_learns_once_per_round_and_is_restored(tmp_path):
    learner = Learner()
    assert isinstance(learner, LearningScreener)
    with RunStore(tmp_path / "s.db") as store:
        engine = _learning_engine(store, learner)
        result = asyncio.run(engine.run())
        rounds = [r for r, _ in learner.calls]
        assert rounds == sorted(set(rounds)) and rounds[0] == 0 and rounds[-1] == result.rounds
        told = {e.payload["round"]: e.payload["node_ids"] for e in store.events(result.run_id, kinds=["tell"])}
        verified = {e.node_id for e in verification_events(store, result.run_id)}
        for r, outcomes in learner.calls:
            assert [o.child_id for o in outcomes] == [n for n in told[r] if n in verified and n != "root"]
            for o in outcomes:
                assert o.parent_id and o.higher_is_better is False and o.child_summary.startswith("The program")
        stored = [e.payload for e in store.events(result.run_id, kinds=["screener_learn"])]
        assert stored and stored == [
            {"adapter_version": i + 1, "pairs": len(o), "round": r} for i, (r, o) in enumerate(learner.calls) if o
        ]
        again = Learner()
        resumed = _learning_engine(store, again)
        resumed.run_id = result.run_id

        resumed.resume.restore()
        assert again.restored == stored


# ---------------------------------------------------------------------- snapshots


class Interrupt(Exception):
    pass


class Crashing(FakeExecutor):
    def __init__(self, after: int, **kw):
        super().__init__(**kw)
        self.after = after

    async def verify(self, task, program):
        if len(self.calls) >= self.after:
            raise Interrupt()
        return await super().verify(task, program)


def _decisions(store, run_id):
    nodes = [
        (e.node_id, e.payload.get("program_hash"), e.payload.get("status"))
        for e in store.events(run_id, kinds=["node"])
    ]
    verifications = sorted((e.node_id, e.payload["score"]) for e in verification_events(store, run_id))
    tells = [e.payload["node_ids"] for e in store.events(run_id, kinds=["tell"])]
    final = [e.payload for e in store.events(run_id, kinds=["final"])]
    return sorted(nodes), verifications, tells, final


@pytest.mark.parametrize("strategy", ["mcgs", "islands"])
def test_snapshot_resume_reaches_the_same_decisions_as_full_replay(tmp_path, strategy):
    from verifyless.search.memory import Memory

    over = {"engine.snapshot_every": 2}
    with RunStore(tmp_path / "a.db") as store:
        engine = make_engine(
            store,
            strategy=strategy,
            screener="surrogate",
            budget=16,
            executor=Crashing(8),
            memory=Memory(embedder="hashing"),
            **over,
        )
        with pytest.raises(Interrupt):
            asyncio.run(engine.run())
        run_id = engine.run_id
        upto = store.latest_snapshot(run_id)[0]
        assert 0 < upto < max(e.seq for e in store.events(run_id))
    shutil.copy(tmp_path / "a.db", tmp_path / "b.db")
    results = []
    for name, from_snapshot in (("a.db", True), ("b.db", False)):
        with RunStore(tmp_path / name) as store:
            engine = make_engine(
                store, strategy=strategy, screener="surrogate", budget=16, memory=Memory(embedder="hashing"), **over
            )
            result = asyncio.run(engine.run(run_id, from_snapshot=from_snapshot))
            assert result.verifications == 16
            results.append((result.best_id, _decisions(store, run_id)))
    assert results[0] == results[1]


def test_an_unusable_snapshot_falls_back_to_full_replay(tmp_path, caplog):
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, strategy="greedy", budget=12, executor=Crashing(6), **{"engine.snapshot_every": 1})
        with pytest.raises(Interrupt):
            asyncio.run(engine.run())
        upto, header, _ = store.latest_snapshot(engine.run_id)
        store.put_snapshot(engine.run_id, upto, header, b"not a snapshot")
        with caplog.at_level(logging.WARNING, logger="verifyless.engine"):
            result = asyncio.run(make_engine(store, strategy="greedy", budget=12).run(engine.run_id))
        assert "replaying every event" in caplog.text and "does not load" in caplog.text
        assert result.verifications == 12 == len(verification_events(store, engine.run_id))
        store.put_snapshot(engine.run_id, upto, {**header, "format": 0}, b"")
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="verifyless.engine"):
            resumed = make_engine(store, strategy="greedy", budget=12)
            resumed.run_id = engine.run_id

            resumed.resume.restore()
        assert "its format is 0" in caplog.text and len(resumed.state.view) == len(store.node_rows(engine.run_id))


def test_repairs_keep_their_idea_and_each_is_charged(tmp_path):
    class Three(Proposer):
        async def propose(self, ctx, n):
            return [Idea("set a to 3", {"a": 3})] + (await super().propose(ctx, n - 1))

    base = fake_roles()
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(
            store,
            strategy="linear",
            screener="oracle",
            budget=6,
            roles=base.__class__(base.briefer, Three(), Implementer(), base.summarizer),
            **{"engine.verify_per_expansion": 4},
        )
        result = asyncio.run(engine.run())
        rows = {r["node_id"]: r for r in store.node_rows(result.run_id)}
        assert store.budget(result.run_id).verifications == result.verifications == 6
    failed = [r for r in rows.values() if r["status"] == "failed"]
    fixes = [r for r in rows.values() if r["operator"] == "debug"]
    assert failed and fixes
    for fix in fixes:
        assert rows[fix["parent_id"]]["idea"] == fix["idea"] == "set a to 3"
        assert fix["status"] == "ok" and fix["node_id"].endswith("f1")


def test_snapshot_records_unpickle_in_a_fresh_process():
    """Records pickle by reference to generated per-class constructors; a new process resolves them by name."""
    import pickle
    import subprocess
    import sys

    from verifyless.engine.snapshot import _dumps
    from verifyless.node import Idea, Node, Operator, Status

    nodes = [
        Node(id=f"n{i}", parent_id=None, operator=Operator.DRAFT, status=Status.OK, idea=f"idea {i}") for i in range(3)
    ] + [Idea("a plan", params={"model": "ridge"})]
    data = _dumps(nodes)
    code = (
        "import pickle, sys; nodes = pickle.loads(sys.stdin.buffer.read()); "
        "print(type(nodes[0]).__name__, nodes[2].id, nodes[2].idea, nodes[1].status.value, nodes[3].params['model'])"
    )
    done = subprocess.run([sys.executable, "-c", code], input=data, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["Node", "n2", "idea", "2", Status.OK.value, "ridge"]
    assert pickle.loads(data) == nodes


@pytest.mark.parametrize("capacity", [1, 2])
def test_a_repair_never_takes_a_slot_after_the_budget_is_spent(tmp_path, capacity):
    """Issue #25: every program fails (as with an evaluator that raises at import), each repair is a slow
    model call and the next round is pipelined meanwhile; a budget of 3 must charge exactly 3."""

    class SlowRepair(Implementer):
        async def repair(self, task, program, idea, error):
            await asyncio.sleep(0.02)  # the repair is an LLM call: other chains and the next round run meanwhile
            return await super().repair(task, program, idea, error)

    class Raises(FakeExecutor):
        async def verify(self, task, program):
            self.calls.append(content_hash(program))
            await asyncio.sleep(0.01)
            return Verification(Status.FAILED, "evaluator raised at import", program_hash=content_hash(program))

    base = fake_roles()
    executor = Raises(capacity=capacity)
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(
            store,
            strategy="greedy",
            budget=3,
            executor=executor,
            roles=base.__class__(base.briefer, base.proposer, SlowRepair(), base.summarizer),
            **{"engine.candidates": 2, "engine.verify_per_expansion": 2, "engine.verify_concurrency": capacity},
            **{"engine.allow_failed_baseline": True},  # search on: a failed baseline would stop the run at once
        )
        result = asyncio.run(engine.run())
        assert store.budget(result.run_id).verifications == result.verifications == 3
    assert len(executor.calls) == 3 and result.stopped == "budget: verifications"


@pytest.mark.slow
@pytest.mark.parametrize("concurrency", [1, 2])
def test_issue_25_an_openevolve_evaluator_that_raises_at_import_stops_after_the_baseline(tmp_path, concurrency):
    """The report's reproduction: LLM roles with the scripted model, ``--budget 3 engine.candidates=2``.

    It was charged more than its cap; now a broken evaluator stops the run (exit 3) after its one baseline
    verification (``engine/baseline.py``), so the cap is never approached."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    task = tmp_path / "broken"
    shutil.copytree(root / "tasks" / "circle_packing", task)
    evaluator = task / "evaluator.py"
    source = evaluator.read_text()  # the raise goes after the __future__ import, which must stay first
    future = "from __future__ import annotations\n"
    broken = 'raise RuntimeError("the evaluator is broken at import")\n'
    evaluator.write_text(source.replace(future, future + broken, 1) if future in source else broken + source)
    store = tmp_path / "s.db"
    script = root / "examples" / "scripted" / "circle_packing.yaml"
    common = [sys.executable, "-m", "verifyless"]
    args = ["run", str(task), "--budget", "3", "--store", str(store), "--quiet", "engine.candidates=2"]
    args += [f"engine.verify_concurrency={concurrency}", "roles.kind=llm", f"roles.models.default=scripted:{script}"]
    out = subprocess.run([*common, *args], capture_output=True, text=True, timeout=300)
    assert out.returncode == 3 and "the evaluator is broken at import" in out.stderr, out.stderr
    runs = json.loads(
        subprocess.run([*common, "runs", "--store", str(store), "--json"], capture_output=True, text=True).stdout
    )
    assert [r["verifications"] for r in runs] == [1]


def test_a_snapshot_resumed_mcgs_asks_exactly_what_a_full_replay_asks(tmp_path):
    """Format 4 (records packed one by one, the memory index unpacked on first use) changes no decision."""
    from verifyless.search.memory import Memory

    over = {"engine.snapshot_every": 2}
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(
            store, strategy="mcgs", budget=16, executor=Crashing(8), memory=Memory(embedder="hashing"), **over
        )
        with pytest.raises(Interrupt):
            asyncio.run(engine.run())
        assert store.latest_snapshot(engine.run_id)[1]["format"] == 4
        restored = []
        for from_snapshot in (True, False):
            again = make_engine(store, strategy="mcgs", budget=16, memory=Memory(embedder="hashing"), **over)
            again.run_id = engine.run_id
            again.resume.restore(from_snapshot=from_snapshot)
            restored.append(again)
    fast, slow = restored
    assert "_packed" in vars(fast.memory) and len(fast.memory) == len(slow.memory) > 0  # not unpacked yet
    assert list(fast.state.view.nodes) == list(slow.state.view.nodes)
    assert dict(fast.state.candidates.items()) == dict(slow.state.candidates.items())
    assert dict(fast.state.verifications.items()) == dict(slow.state.verifications.items())
    asks = [(fast.strategy.ask(fast.state.view, 2), slow.strategy.ask(slow.state.view, 2)) for _ in range(20)]
    assert all(a == b for a, b in asks)
    query = Memory.query_for("improve", idea=slow.state.ideas["root"].text or "improve the model")
    assert [h.record for h in fast.memory.search(query)] == [h.record for h in slow.memory.search(query)]
