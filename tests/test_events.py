"""The run log's records (verifyless/events.py): every class round-trips, old payloads parse, the store reads them."""

from __future__ import annotations

import dataclasses
import random
import types
import typing
from collections import abc
from typing import Any

import pytest

import verifyless.train.policy.events  # noqa: F401  (registers the policy kinds)
from verifyless import events as ev
from verifyless.node import Candidate, Evidence, Idea, Operator, Screening, Status, Verification, content_hash
from verifyless.store import RunStore


def _value(annotation: Any, rng: random.Random) -> Any:
    """A random JSON-shaped value of a record field's type (lists inside mappings: what a payload holds)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return None if rng.random() < 0.3 else _value(options[0], rng)
    if annotation is Candidate:
        prog = rng.choice(["", "print(1)\n"])
        idea = Idea(f"idea {rng.random()}", {"alpha": [1, 2]}, ("a",))
        return Candidate(f"n{rng.randrange(9)}", rng.choice([None, "root"]), Operator.IMPROVE, idea, prog, "h" * 64)
    if annotation is Verification:
        return Verification(rng.choice(list(Status)), "why", {"acc": 0.5}, {}, rng.random(), None, 1.0, 2.0)
    if annotation is Screening:
        ev_ = Evidence("a", 1.0, ("BigWin",), {"improve": 1.0}, 0.0, 1, 0, {"k": [1]})
        return Screening("critic", ("a", "b"), ("a",), {"a": ev_}, 0.5)
    if annotation is Evidence:
        return Evidence("c", 0.5)
    if annotation is Status:
        return rng.choice(list(Status))
    if origin is tuple:
        return tuple(_value(args[0], rng) for _ in range(rng.randrange(3)))
    if origin in (abc.Mapping, dict) or annotation in (dict, abc.Mapping):
        return {f"k{i}": [i, {"x": i}] for i in range(rng.randrange(3))}
    return {
        str: lambda: f"s{rng.randrange(100)}",
        int: lambda: rng.randrange(100),
        float: rng.random,
        bool: lambda: True,
    }.get(annotation, lambda: [1, "x"])()


def _example(cls: type[ev.EventRecord], rng: random.Random) -> ev.EventRecord:
    hints = typing.get_type_hints(cls)
    kwargs = {f.name: _value(hints[f.name], rng) for f in dataclasses.fields(cls) if f.name != "extra"}
    kwargs["extra"] = {"future_key": [1, 2]} if rng.random() < 0.5 else {}
    return cls(**kwargs)


RECORDS = sorted(ev.KINDS.values(), key=lambda c: c.KIND)


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.KIND)
def test_every_record_round_trips(cls):
    rng = random.Random(cls.KIND)
    for _ in range(25):
        record = _example(cls, rng)
        assert cls.parse(record.payload()) == record
        assert ev.parse_event(cls.KIND, record.payload()) == record


def test_every_kind_has_one_record_and_the_vocabulary_is_complete():
    kinds = set(ev.KINDS)
    assert {"node", "status", "verification", "screening", "tell", "final", "llm_call", "pilot", "pilot_run"} <= kinds
    assert {"smoke", "screener_learn", "selection_split", "policy_idea", "data_report", "run_status"} <= kinds


def test_payloads_written_by_older_code_parse():
    # a node event as collect-pools wrote it: no status, no reason, idea as plain text
    node = ev.NodeRecorded.parse({"id": "c1", "idea": "try ridge", "program_hash": "h" * 64})
    assert node.status is None and node.default_status is Status.IMPLEMENTED and node.candidate.idea.text == "try ridge"
    assert ev.NodeRecorded.parse({"id": "c2"}).default_status is Status.PROPOSED
    # a screening stored before ``to_verify`` existed routes its chosen ids
    old = Screening("critic", ("a", "b"), ("b",)).to_dict()
    assert ev.Screened.parse(old).to_verify == ("b",)
    # a final event before ``selection_metric``; a submission before ``beats_final``; a run status with only a status
    assert ev.Finalised.parse({"node_id": "a", "stopped": "budget"}).selection_metric is None
    assert ev.Submitted.parse({"members": ["a"], "status": "ok", "score": 1.0}).beats_final is None
    assert ev.RunStatusChanged.parse({"status": "running"}).pid is None
    # a learn record keeps the screener's own keys; only critic-ttl's carries an adapter record
    learned = ev.ScreenerLearned.parse({"round": 3, "pairs": 4})
    assert learned.adaptive is None and learned.learned == {"pairs": 4}
    assert ev.ScreenerLearned.parse({"round": 1, "adaptive": {"version": 2}}).adaptive == {"version": 2}
    # a kind no record claims is kept whole
    other = ev.parse_event("memory", {"obj": 1})
    assert isinstance(other, ev.Unrecognised) and other.kind == "memory" and other.payload() == {"obj": 1}


def test_keys_a_newer_version_wrote_are_kept_nested_ones_included():
    newer = {
        **Screening("critic", ("a",), ("a",), {"a": Evidence("a", 1.0)}).to_dict(),
        "to_verify": ["a"],
        "mood": "calm",
    }
    newer["evidence"]["a"] |= {"calibrated": 0.7, "extra": {"x": 1}}
    record = ev.Screened.parse(newer)
    assert record.extra == {"mood": "calm"}
    assert record.screening.evidence["a"].extra == {"calibrated": 0.7, "extra": {"x": 1}}
    assert record.payload() == {**newer, "audited": [], "round": 0}  # nothing lost on the way back
    assert (
        Evidence("b", 0.0).to_dict().keys() >= {"candidate_id", "detail"}
        and "extra" not in Evidence("b", 0.0).to_dict()
    )


def test_bad_payloads_name_what_is_wrong():
    with pytest.raises(ValueError, match="unknown status 'great'"):
        ev.StatusChanged.parse({"status": "great"})
    with pytest.raises(ValueError, match="unknown operator"):
        ev.NodeRecorded.parse({"id": "c", "operator": "mutate"})
    with pytest.raises(ValueError, match="lacks 'round'"):
        ev.Told.parse({"node_ids": []})


def test_the_store_yields_typed_records_and_keeps_the_payload_bytes(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        rid = store.create_run("t", {"x": 1})
        cand = Candidate("c1", None, Operator.DRAFT, Idea("i"), "print(1)\n", content_hash("print(1)\n"))
        store.append(rid, ev.NodeRecorded(cand, status=Status.IMPLEMENTED, reason=""), node_id="c1")
        v = Verification(Status.OK, score=0.5, run_seconds=1.0)
        store.append(rid, ev.Verified(v, 0.5), node_id="c1", charge=True)
        store.append(rid, ev.Told(1, ("c1",)))
        (told,) = store.events(rid, ev.Told)
        assert told.record == ev.Told(1, ("c1",)) and told.payload == {"round": 1, "node_ids": ["c1"]}
        (node,) = store.events(rid, ev.NodeRecorded)
        assert "program" not in node.payload and node.record.candidate.program == ""
        kinds = [type(e.record) for e in store.events(rid)]
        assert kinds == [ev.RunCreated, ev.NodeRecorded, ev.Verified, ev.Told]
        assert store.budget(rid).verifications == 1 and store.nodes(rid)[0].fitness == 0.5
