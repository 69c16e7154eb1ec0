"""Issue 55: a learnt critic does no harm before it has learnt, and the safety net's audits follow the evidence.

Real parts: the engine on pool worlds of ``tests/data_task`` (``offline/world_engine.py``: a real SQLite store),
real logistic fits over the package's ``hashing`` text encoder (conftest), the adaptive rule's real bets.
"""

from __future__ import annotations

import random
from dataclasses import replace

from data_world import data_task_world

from verifyless.offline.world_engine import WorldBook, world_run
from verifyless.offline.worlds import World
from verifyless.report.views.learned import learned_critic_data
from verifyless.screen.adaptive import AdaptiveOptions, AdaptiveRule, AdaptiveScreener
from verifyless.screen.baselines import RandomScreener
from verifyless.screen.gate import RankGate
from verifyless.screen.reward import RewardModelCritic, RewardModelOptions
from verifyless.store import RunStore

SHOWN = {"name": "critic-rm", "options": {"warm": "cold", "gate": "evidence"}}  # the configuration show reads


def gated(gate: str | None = "evidence") -> RewardModelCritic:
    return RewardModelCritic(RewardModelOptions(encoder="hashing", gate=gate))  # type: ignore[arg-type]


def shuffled_world(seed: int) -> World:
    """``data_task``'s world with its outcomes (failures included) shuffled over its points: nothing in a change
    predicts its outcome, a head can only learn noise."""
    world, _ = data_task_world()
    outcomes = [(p.status, p.score) for p in world.points[1:]]  # the baseline keeps its own
    random.Random(seed).shuffle(outcomes)
    points = [
        replace(p, status=st, score=sc, test_score=sc) for p, (st, sc) in zip(world.points[1:], outcomes, strict=True)
    ]
    return replace(world, points=(world.points[0], *points))


def gate_notes(store, run_id: str) -> list[dict]:
    """Per screening, the gate's note as the run stored it (every candidate of one screening carries the same)."""
    with RunStore(store) as s:
        notes = []
        for e in s.events(run_id, kinds=["screening"]):
            detail = next(iter(e.payload["evidence"].values()))["detail"]
            notes.append({"gate": detail["gate"], "reason": detail["reason"] if "reason" in detail else None})
        return notes


def run_id_of(store) -> str:
    with RunStore(store) as s:
        (run,) = s.runs()
        return run.run_id


def test_a_cold_critic_that_cannot_learn_picks_as_random_does_and_says_so(tmp_path):
    _, task = data_task_world()
    for seed in (0, 1, 2):
        world = shuffled_world(seed)
        db = tmp_path / f"gated-{seed}.db"
        critic = gated()
        mine = world_run(world, task, critic, book=WorldBook(world, task), budget=30, n=4, seed=seed, store=db)
        theirs = world_run(world, task, RandomScreener(), book=WorldBook(world, task), budget=30, n=4, seed=seed)
        assert mine.best == theirs.best  # the same picks, verification for verification
        assert critic.gate is not None and not critic.gate.open and not critic.gate.switches
        notes = gate_notes(db, run_id_of(db))
        assert notes and all(n["gate"]["state"] == "abstaining" for n in notes)
        assert all(n["reason"].startswith(("cold start", "abstaining (random pick)")) for n in notes)
        assert any(n["gate"]["told"] > 10 for n in notes)  # it kept looking, and kept abstaining
        with RunStore(db) as store:
            said = learned_critic_data(store, run_id_of(db), {"screener": SHOWN})
        assert said is not None and said["gate"].startswith("abstained throughout (random picks)")


def test_where_the_head_can_learn_it_starts_ranking_once_its_evidence_says_so_the_same_way_every_time(tmp_path):
    world, task = data_task_world()  # score = 2A + B - C: the summaries say what changed
    runs = []
    for k in range(2):
        db = tmp_path / f"learn-{k}.db"
        critic = gated()
        run = world_run(world, task, critic, book=WorldBook(world, task), budget=40, n=4, seed=3, store=db)
        runs.append((run.best, critic.gate.switches if critic.gate else None, gate_notes(db, run_id_of(db))))
    (curve, switches, notes), again = runs[0], runs[1]
    assert (curve, switches, notes) == again  # deterministic: the same switch at the same paid outcome
    assert switches and switches[0]["state"] == "ranking" and switches[0]["p_chance"] <= 0.05
    states = [n["gate"]["state"] for n in notes]
    first = states.index("ranking")
    assert set(states[:first]) == {"abstaining"} and first > 0  # random picks until the evidence said so
    assert notes[first]["gate"]["switches"][0]["told"] == switches[0]["told"]
    with RunStore(tmp_path / "learn-0.db") as store:  # show, the report and the dashboard say when it switched
        said = learned_critic_data(store, run_id_of(tmp_path / "learn-0.db"), {"screener": SHOWN})
    assert said is not None and said["gate"] == f"ranking since paid outcome {switches[0]['told']}"


def test_a_warm_head_ranks_from_the_start_unless_its_check_found_it_worse_than_random():
    assert RankGate.from_check({"word": "helps", "low": 0.56, "high": 0.7}).open
    assert RankGate.from_check({"word": "too little data to tell", "low": None, "high": None}).open
    assert not RankGate.from_check({"word": "no better than random", "low": 0.2, "high": 0.45}).open
    assert not RankGate.from_check(None).open  # cold
    gate = RankGate()
    for i in range(12):  # a head that scores every improvement below every other outcome
        gate.add(-1.0 if i % 3 == 0 else 1.0, "p", 1.0 if i % 3 == 0 else 0.0)
    assert not gate.open and gate.stats()["pairwise"] == 0.0
    opened = RankGate.from_check({"word": "helps", "low": 0.6, "high": 0.8})
    for i in range(12):
        opened.add(-1.0 if i % 3 == 0 else 1.0, "p", 1.0 if i % 3 == 0 else 0.0)
    assert not opened.open and opened.switches[-1]["state"] == "abstaining"  # credibly worse: closed again


def test_an_ungated_critic_of_a_stored_run_ranks_from_its_first_head_as_before():
    critic = gated(None)
    assert critic.gate is None and not critic.abstaining


def _rule(xs, **over) -> AdaptiveRule:
    rule = AdaptiveRule(AdaptiveOptions(sizing="evidence", **over))
    for x in xs:
        rule.add("pair", x)
    return rule


def test_the_audit_rate_shrinks_when_the_critic_is_clearly_right_and_grows_when_it_is_doubtful():
    start = _rule([])
    assert start.audit_rate() == AdaptiveOptions().audit
    right, wrong = _rule([1.0] * 6), _rule([-1.0] * 4)
    assert right.audit_rate() < start.audit_rate() < wrong.audit_rate() <= 2 * AdaptiveOptions().audit
    assert _rule([1.0] * 40).audit_rate() == AdaptiveOptions().audit / 4
    fixed = AdaptiveRule(AdaptiveOptions(sizing="fixed"))
    for x in [1.0] * 6:
        fixed.add("pair", x)
    assert fixed.audit_rate() == AdaptiveOptions().audit  # as given


def test_the_audit_rate_is_stored_with_the_evidence_and_a_resume_reproduces_it(tmp_path):
    world, task = data_task_world()
    db = tmp_path / "net.db"

    def screener() -> AdaptiveScreener:  # a critic that ranks from its first head: the net tests it from the start
        return AdaptiveScreener(gated("always"), AdaptiveOptions(sizing="evidence"))

    net = screener()
    world_run(world, task, net, book=WorldBook(world, task), budget=40, n=4, seed=5, store=db)
    run_id = run_id_of(db)
    with RunStore(db) as store:
        records = [e.payload for e in store.events(run_id, kinds=["screener_learn"])]
    rates = [rec["adaptive"]["audit_rate"] for rec in records]
    assert len(set(rates)) > 1  # the evidence moved it
    assert rates[-1] == round(net.rule.audit_rate(), 6)
    again = screener()
    again.restore(records)
    assert round(again.rule.audit_rate(), 6) == rates[-1] and again.rule.evidence() == net.rule.evidence()


def test_a_new_run_records_the_gate_and_the_sizing_and_a_stored_one_keeps_what_it_had():
    from verifyless.config import load_config
    from verifyless.wiring import screener_pins

    new = load_config(overrides=["task=x", "store=s.db"])
    assert screener_pins(new, None) == {
        "screener.options.options.warm": "cold",
        "screener.options.options.encoder": "hashing",
        "screener.options.options.gate": "evidence",
        "screener.options.sizing": "evidence",
    }
    stored = load_config(  # a run stored before issue 55: its warm start and encoder recorded, no gate, no sizing
        overrides=[
            "task=x",
            "store=s.db",
            "screener.options.options.warm=cold",
            "screener.options.options.encoder=hashing",
        ]
    )
    assert screener_pins(stored, None) == {}
    assert stored.screener.options.sizing is None and stored.screener.options.options.get("gate") is None
