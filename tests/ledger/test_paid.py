"""The kernel for paid work (verifyless.ledger): the gate's reservation is the check, the chain's repairs keep
their slot accounting, the fold reads a paid result back by program hash, and a reopened log folds to the same state."""

from __future__ import annotations

import asyncio

import pytest

from verifyless.ledger import BudgetConfig, BudgetGate, Ledger, RunState, candidate_from, verify_with_repairs
from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.store import RunStore
from verifyless.testing import PROGRAM, fake_task


def _cand(cid: str, a: int, parent: str | None = None) -> Candidate:
    program = PROGRAM.replace("a = 0", f"a = {a}")
    return Candidate(cid, parent, Operator.IMPROVE, Idea(f"set a to {a}"), program, content_hash(program))


def _ok(cand: Candidate, score: float = 1.0) -> Verification:
    return Verification(Status.OK, "", {"loss": score}, {}, score, None, program_hash=cand.program_hash)


def test_reserve_is_the_check_and_a_released_slot_can_be_taken_again(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        run_id = store.create_run("t", {})
        gate = BudgetGate(BudgetConfig(verifications=2), lambda: store.budget(run_id))
        first, second = gate.reserve(), gate.reserve()
        assert first is not None and second is not None
        assert gate.reserve() is None and gate.reserved == 2  # no slot past the cap, nothing counted
        second.release()
        second.release()  # exactly once
        assert gate.reserved == 1 and gate.reserve() is not None


def failing_verify(ledger: Ledger):
    """A ``verify`` for ``verify_with_repairs`` that records each child on ``ledger`` as implemented and then as
    failed (``boom``), inside the slot it is given."""

    async def verify(c, slot, attempt):
        async with slot:
            ledger.record_candidate(c, Status.IMPLEMENTED)
            v = Verification(Status.FAILED, "boom", program_hash=c.program_hash)
            ledger.record_verification(c.id, v)
        return v

    return verify


def test_the_chain_reserves_before_each_repair_and_gives_back_the_slot_of_a_failed_repair(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        ledger = Ledger(store, BudgetConfig(verifications=3), fake_task().metric)
        ledger.run_id = store.create_run("fake", {})
        gate = ledger.gate
        seen_reserved: list[int] = []

        verify = failing_verify(ledger)

        async def repair(current, v, attempt):
            seen_reserved.append(gate.reserved)  # the repair's slot is already held while the model is asked
            await asyncio.sleep(0)
            return None if attempt == 2 else _cand(f"cf{attempt}", 3 + attempt, parent=current.id)

        first = _cand("c", 3)
        last, v = asyncio.run(
            verify_with_repairs(first, verify=verify, repair=repair, attempts=3, gate=gate, slot=gate.reserve())
        )
        assert last.id == "cf1" and v.status is Status.FAILED
        assert seen_reserved == [1, 1] and gate.reserved == 0  # the failed second repair gave its slot back
        assert store.budget(ledger.run_id).verifications == 2


def test_no_repair_is_asked_for_when_the_budget_is_spent(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        ledger = Ledger(store, BudgetConfig(verifications=1), fake_task().metric)
        ledger.run_id = store.create_run("fake", {})
        asked: list[int] = []

        verify = failing_verify(ledger)

        async def repair(current, v, attempt):
            asked.append(attempt)
            return _cand(f"cf{attempt}", 4)

        slot = ledger.gate.reserve()
        asyncio.run(
            verify_with_repairs(_cand("c", 3), verify=verify, repair=repair, attempts=3, gate=ledger.gate, slot=slot)
        )
        assert asked == [] and store.budget(ledger.run_id).verifications == 1


def test_a_paid_result_is_read_back_by_program_hash_and_a_reopened_log_folds_to_the_same_state(tmp_path):
    task = fake_task()
    with RunStore(tmp_path / "s.db") as store:
        ledger = Ledger(store, BudgetConfig(verifications=None), task.metric)
        ledger.run_id = store.create_run("fake", {})
        first, twin = _cand("a", 5), _cand("b", 5, parent="a")
        for c in (first, twin):
            ledger.record_candidate(c, Status.IMPLEMENTED)
        assert ledger.state.known_result(first.program_hash) is None
        ledger.record_verification("a", _ok(first, 64.0))
        source, v = ledger.state.known_result(twin.program_hash)
        ledger.record_reused("b", source, v)
        assert source == "a" and store.budget(ledger.run_id).verifications == 1  # the twin is not paid
        again = RunState()
        for ev in store.events(ledger.run_id):
            again.apply(ev)
    assert again.verifications == ledger.state.verifications and again.staged == ledger.state.staged
    assert again.known_result(twin.program_hash) == ("a", v) and again.last_seq == ledger.state.last_seq


def test_candidate_from_keeps_the_made_childs_idea_program_and_place():
    from verifyless.child import Made

    made = Made(Idea("set a to 4"), Status.IMPLEMENTED, "x = 4\n", content_hash("x = 4\n"), "sets x")
    cand = candidate_from(
        made, id="r1e0c0", parent_id="root", operator=Operator.IMPROVE, round=1, island=2, reference_ids=("n1",)
    )
    assert (cand.id, cand.parent_id, cand.round, cand.island, cand.reference_ids) == ("r1e0c0", "root", 1, 2, ("n1",))
    assert (cand.idea, cand.program, cand.program_hash, cand.summary) == (
        made.idea,
        made.program,
        made.program_hash,
        "sets x",
    )


def test_budget_config_lives_in_the_kernel_and_config_re_exports_it():
    from verifyless import config

    assert config.BudgetConfig is BudgetConfig and config.RunConfig().budget == BudgetConfig()
    with pytest.raises(ValueError):
        BudgetConfig(verifications=0)


def test_a_restored_packed_mapping_unpickles_a_record_only_when_it_is_read():
    import pickle

    from verifyless.ledger.packed import Packed
    from verifyless.node import Status, Verification

    records = Packed[Verification]()
    for i in range(3):
        records[f"n{i}"] = Verification(Status.OK, score=float(i))
    restored = pickle.loads(pickle.dumps(records))
    raw = restored._items
    assert all(type(v) is bytes for v in raw.values())
    assert restored["n1"] == Verification(Status.OK, score=1.0) and type(raw["n1"]) is Verification
    assert type(raw["n0"]) is bytes and list(restored) == ["n0", "n1", "n2"]  # order kept, n0 still packed
    assert restored == records and "n3" not in restored and restored.get("n3") is None
