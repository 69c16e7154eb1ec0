"""Pilot results reach learners as low-fidelity observations (engine/learners.py), never as full outcomes."""

from __future__ import annotations

import asyncio

from pilot_runs import fake_run, levelled_task

from verifyless.ledger import LowFidelity
from verifyless.outcome import Outcome, label3, pair_outcome, reward_label
from verifyless.screen.base import OutcomeObserver, PilotObserver
from verifyless.screen.pilot import PilotOptions, PilotScreener
from verifyless.screen.surrogate import SurrogateScreener
from verifyless.store import RunStore
from verifyless.testing import fake_engine


class RecordingPilot(PilotScreener):
    """The pilot screener, recording what the engine's learners hand it."""

    def __init__(self) -> None:
        super().__init__(PilotOptions(eta=2, levels=("tiny", "half")))
        self.low: list[Outcome] = []
        self.full: list[Outcome] = []

    def observe_pilot(self, outcome: Outcome) -> None:
        self.low.append(outcome)

    def observe(self, outcome: Outcome) -> None:
        self.full.append(outcome)


def _engine(store: RunStore, screener: RecordingPilot):
    from verifyless.config import load_config

    task = levelled_task()
    cfg = load_config(overrides=["budget.verifications=6", "engine.candidates=4", "engine.smoke=off"])
    engine = fake_engine(store, cfg, screener, task=task)
    engine.dispatch.low_fidelity = LowFidelity(engine.ledger, task, fake_run([]))
    return engine


def _run(tmp_path):
    live = RecordingPilot()
    store = RunStore(tmp_path / "s.db")
    engine = _engine(store, live)
    asyncio.run(engine.run())
    return store, engine, live


def test_a_pilot_result_reaches_an_observer_marked_low_fidelity_and_is_never_labelled(tmp_path):
    store, engine, live = _run(tmp_path)
    with store:
        events = list(store.events(engine.run_id, kinds=["pilot_run"]))
    paid = {(e.payload["program_hash"], e.payload["level"]) for e in events}
    seen = [(engine.state.candidates[o.child_id].program_hash, o.fidelity) for o in live.low]
    assert paid and set(seen) == paid  # every paid pilot reached the observer, marked with its level
    assert {(e.node_id, e.payload["level"]) for e in events} <= {(o.child_id, o.fidelity) for o in live.low}
    assert len({(o.child_id, o.fidelity) for o in live.low}) == len(live.low)  # once per node and level
    assert all(o.low_fidelity and label3(o) is None and reward_label(o) is None for o in live.low)
    assert all(o.fidelity is None for o in live.full)  # full outcomes stay unmarked
    levels = {}
    for o in live.low:
        levels.setdefault(o.child_id, []).append(o.fidelity)
    assert all(seq == ["tiny", "half"][: len(seq)] for seq in levels.values())  # cheapest level first
    screened_out = {o.child_id for o in live.low} - {o.child_id for o in live.full}
    assert screened_out  # pilots of candidates never verified reached the observer too
    assert all(o.child_fitness is not None for o in live.low)  # the evidence itself is there to use


def test_a_pilot_never_becomes_critic_data_a_learn_pair_or_a_strategy_node(tmp_path):
    from verifyless.critic_data.harvest import harvest_run

    store, engine, live = _run(tmp_path)
    with store:
        verified = {e.node_id for e in store.events(engine.run_id, kinds=["verification"])}
        harvest = harvest_run(store, engine.run_id)
    only_piloted = {o.child_id for o in live.low} - verified
    assert only_piloted
    assert {r["child_id"] for r in harvest.rows} <= verified and not {
        r["child_id"] for r in harvest.rows
    } & only_piloted
    assert {o.child_id for o in live.full} <= verified  # observe (and learn, built the same way) sees verified only
    for nid in only_piloted:  # a strategy node of a piloted, unverified candidate has no fitness from its pilot
        node = engine.state.view.nodes[nid]
        assert node.fitness is None and node.score is None
        assert engine.learners.outcome(engine.state, nid) is None


def test_restore_replays_the_same_pilot_observations(tmp_path):
    store, engine, live = _run(tmp_path)
    with store:
        again = RecordingPilot()
        resumed = _engine(store, again)
        resumed.run_id = engine.run_id
        resumed.resume.restore(from_snapshot=False)
    assert live.low and [o.to_dict() for o in again.low] == [o.to_dict() for o in live.low]
    assert [o.to_dict() for o in again.full] == [o.to_dict() for o in live.full]


def test_the_surrogate_ignores_pilots_and_the_marker_round_trips():
    assert isinstance(SurrogateScreener(), OutcomeObserver) and not isinstance(SurrogateScreener(), PilotObserver)
    low = Outcome("p", "c", "ok", 1.0, 2.0, 1.0, 2.0, True, fidelity="tiny")
    assert Outcome.from_dict(low.to_dict()) == low and low.delta == 1.0 and label3(low) is None
    full = pair_outcome("p", "c", 2.0, 1.0)
    assert "fidelity" not in full.to_dict() and label3(full) == "improve"
