"""One outcome, one label: every learner labels the same ``Outcome`` the same way (verifyless.outcome).

With a tie tolerance of 0.01 a 0.5 % gain is a tie everywhere: in the critic dataset, for the critic
metrics, the test-time critic, the surrogate and the policy reward (issue #20 item 2). A failed child
has no label for critic data (datasets, metrics, test-time critic) and is a loss for the learners paid
to avoid failures (surrogate, policy reward -1).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from verifyless.critic_data.labels import label_pairs
from verifyless.events import Screened
from verifyless.metrics.critic import critic_records_from_store
from verifyless.node import Candidate, Idea, Node, Operator, Status, Verification
from verifyless.outcome import Outcome, improved, label3, node_improved, outcome_of, reward_label
from verifyless.roles.base import ParentInfo
from verifyless.screen.surrogate import SurrogateOptions, SurrogateScreener
from verifyless.screen.ttl import TestTimeCritic
from verifyless.task.base import Band, Metric, Task
from verifyless.train.policy.verifying import improves

TIE = 0.01
PARENT = 1.0
# child id -> (verification, the one label, the label of learners that count a failure as a loss)
CASES = {
    "gain-half-percent": (Verification(Status.OK, score=1.005), "tie", "tie"),
    "gain-two-percent": (Verification(Status.OK, score=1.02), "improve", "improve"),
    "loss-two-percent": (Verification(Status.OK, score=0.98), "lose", "lose"),
    "equal": (Verification(Status.OK, score=1.0), "tie", "tie"),
    "crashed": (Verification(Status.FAILED, reason="boom"), None, "lose"),
    "no-metric": (Verification(Status.OK, score=float("nan")), None, "lose"),
}


def _task(direction: str = "maximize") -> Task:
    return Task(
        name="toy",
        root=Path("/nonexistent"),
        kind="native",
        statement="predict y",
        program_file="solution.py",
        baseline_program="x = 1\n",
        band=Band(),
        metric=Metric("r2", direction),  # type: ignore[arg-type]
    )


def _candidate(cid: str) -> Candidate:
    return Candidate(cid, "p", Operator.IMPROVE, Idea(f"idea {cid}"), program="", program_hash=cid)


def _outcomes() -> dict[str, Outcome]:
    return {
        cid: outcome_of(PARENT, _candidate(cid), v, higher_is_better=True, tie=TIE, round=1)
        for cid, (v, _, _) in CASES.items()
    }


def test_the_one_rule_and_the_failed_child_rule() -> None:
    for cid, o in _outcomes().items():
        _, one, paid = CASES[cid]
        assert label3(o) == one, cid
        assert reward_label(o) == paid, cid
        assert improved(o) == (paid == "improve"), cid


def test_dataset_labels_agree() -> None:
    rows = [("p", cid, o.child_fitness, o.parent_fitness) for cid, o in _outcomes().items()]
    result = label_pairs(rows, tolerance=TIE)
    labelled = {c.child_id: c.three for c in result.outcomes}
    assert labelled == {cid: one for cid, (_, one, _) in CASES.items() if one is not None}
    assert result.infeasible == {"p": 2}  # the failed children: left out and counted


def test_surrogate_learns_the_same_labels() -> None:
    surrogate = SurrogateScreener(SurrogateOptions(rank_by="improve"))
    for o in _outcomes().values():
        surrogate.observe(o)
    assert {e.candidate_id: e.label for e in surrogate.examples} == {cid: paid for cid, (_, _, paid) in CASES.items()}


def test_policy_reward_label_agrees() -> None:
    parent = ParentInfo(id="p", program="", score=PARENT)
    for cid, (v, _, paid) in CASES.items():
        assert improves(_task(), v, parent, TIE) == (paid == "improve"), cid


def test_test_time_critic_learns_from_the_labelled_outcomes_only(tmp_path: Path) -> None:
    critic = TestTimeCritic.__new__(TestTimeCritic)  # the learning bookkeeping only: no model is loaded
    critic.mode, critic.every, critic.pending, critic.pairs_per_update = "grpo", 2, [], None
    critic.learner = SimpleNamespace(
        version=0, origin=None, folder=lambda v: tmp_path / f"v{v:04d}"
    )  # no update runs here
    record = asyncio.run(critic.learn(list(_outcomes().values()), round=1))  # odd round: pairs wait
    assert [o.child_id for o in critic.pending] == [cid for cid, (_, one, _) in CASES.items() if one is not None]
    restored = [Outcome.from_dict(p) for p in record["pending"]]  # type: ignore[index]
    assert [label3(o) for o in restored] == [label3(o) for o in critic.pending]


@dataclass
class _Event:
    record: Screened


@dataclass
class _Run:
    task: str = "toy"
    config: dict[str, Any] = field(default_factory=lambda: {"tie_tolerance": TIE})


class _Store:
    """The three store reads ``critic_records_from_store`` makes, for one run."""

    def __init__(self, outcomes: dict[str, Outcome]) -> None:
        self.rows = [{"node_id": "p", "parent_id": None, "fitness": PARENT}]
        self.rows += [{"node_id": cid, "parent_id": "p", "fitness": o.child_fitness} for cid, o in outcomes.items()]

    def node_rows(self, run_id: str) -> list[dict[str, Any]]:
        return self.rows

    def run(self, run_id: str) -> _Run:
        return _Run()

    def events(self, run_id: str, *types: type) -> list[_Event]:
        assert types == (Screened,), types
        votes = {"improve": 1.0, "tie": 0.0, "lose": 0.0}
        evidence = {
            r["node_id"]: {"candidate_id": r["node_id"], "rank_value": 0.0, "votes": votes, "n_valid": 1}
            for r in self.rows[1:]
        }
        return [_Event(Screened.parse({"screener": "critic", "evidence": evidence}))]


def test_critic_metrics_use_the_runs_tie_tolerance() -> None:
    records = critic_records_from_store(_Store(_outcomes()), "run")
    assert {r.candidate_id: r.true3 for r in records} == {cid: one for cid, (_, one, _) in CASES.items() if one}


def test_outcome_is_oriented_and_validation_only() -> None:
    v = Verification(Status.OK, score=45.0, test_score=1.0, test_metrics={"rmse": 1.0})
    o = outcome_of(-50.0, _candidate("c"), v, higher_is_better=False)  # RMSE 50 -> 45: a 10 % gain
    assert (o.parent_score, o.child_score, o.child_fitness) == (50.0, 45.0, -45.0)
    assert o.delta == pytest.approx(0.10) and label3(o) == "improve"
    assert "test" not in " ".join(o.to_dict()) and Outcome.from_dict(o.to_dict()) == o
    assert improves(_task("minimize"), v, ParentInfo(id="p", program="", score=50.0)) is True


def test_a_pending_pair_stored_in_the_older_shape_still_restores() -> None:
    old = {
        "node_id": "n1",
        "parent_id": "p0",
        "round": 1,
        "parent_summary": "The parent.",
        "child_summary": "The child.",
        "idea": "x",
        "parent_score": 50.0,
        "child_score": 45.0,
        "higher_is_better": False,
        "status": "ok",
    }
    o = Outcome.from_dict(old)
    assert (o.child_id, o.child_fitness, o.parent_fitness, label3(o)) == ("n1", -45.0, -50.0, "improve")


def test_relabelling_with_another_tolerance_is_explicit() -> None:
    o = _outcomes()["gain-half-percent"]
    assert label3(o) == "tie" and label3(o, tie=0.0) == "improve"


def test_node_improved_is_the_outcome_rule_over_node_rows():
    parent = Node("p", None, Operator.DRAFT, Status.OK, fitness=-2.0)
    better = Node("b", "p", Operator.IMPROVE, Status.OK, fitness=-1.0)
    close = Node("c", "p", Operator.IMPROVE, Status.OK, fitness=-1.9)
    failed = Node("f", "p", Operator.IMPROVE, Status.FAILED)
    assert node_improved(better, parent, 0.0) and node_improved(close, parent, 0.0)
    assert not node_improved(close, parent, 0.1)  # within the run's tie tolerance: a tie, not an improvement
    assert not node_improved(failed, parent, 0.0) and not node_improved(parent, None, 0.0)
