"""Policy-training rewards on a tiny real task: routing per mode, the hard cap, durability, parents, the space reader.

The task (tests/data_task) scores 2A + B - C from three idea-space choices and
crashes when C < 0; it runs in the real sandbox. The critic is a real
``PointwiseCritic`` over a ``ScriptedModel`` whose votes are unanimous for
some children (A set to three: improve; A set to zero: lose) and split
half/half for every other child (u = 0.5, so critic-in-loop verifies it).
"""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from bench_modules import load

from verifyless.child import ChildMaker
from verifyless.executors.local import LocalExecutor
from verifyless.model.base import ModelRequest
from verifyless.model.scripted import ScriptedModel
from verifyless.roles import space_reader
from verifyless.roles.base import ParentInfo
from verifyless.roles.menu import idea_from_text
from verifyless.roles.space import space_roles
from verifyless.screen.critic import CriticOptions, PointwiseCritic
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.task.base import IdeaOption, IdeaSpace
from verifyless.testing import TASK as LLM_TASK
from verifyless.train.policy.contract import Rewarder, VerificationBudgetSpent
from verifyless.train.policy.metrics import audit_run
from verifyless.train.policy.rewards import PolicyRewarder
from verifyless.train.policy.settings import RewardSettings

TASK = load_task(str(Path(__file__).parents[2] / "data_task"))
# Baseline a1 b1 c0 scores 3: a3 -> 7 (improve), a0 -> 1, b2 -> 4 (improve), c1 -> 2, cneg crashes.
GROUP = ["Set A higher: a3.", "Use a0 instead.", "Try b2.", "Penalise more with c1.", "Use cneg.", "no idea here"]


def _critic_reply(request: ModelRequest) -> str:
    user = request.messages[-1].content
    child = user.split("## Child", 1)[1].split("## What is known", 1)[0]
    if "sets A to three" in child:
        return "Weights matter most.\n[IMPROVEMENT] improve --- more A\n[WINTIER] big --- large"
    if "sets A to zero" in child:
        return "[IMPROVEMENT] lose --- less A\n[WINTIER] NA --- none"
    if request.sample_offset % 2 == 0:
        return "[IMPROVEMENT] improve --- maybe\n[WINTIER] small --- maybe"
    return "[IMPROVEMENT] lose --- maybe not\n[WINTIER] NA --- none"


class CountingExecutor:
    """The real local executor, counting calls; ``fail_after`` raises an infrastructure error on a later call."""

    capacity = 1  # one verification at a time, whatever the inner executor allows
    sandbox = None  # no ensemble submission of its own
    hide: tuple[str, ...] = ()

    def __init__(self, tmp: Path, fail_after: int | None = None) -> None:
        self.inner = LocalExecutor(capacity=2, hide=[tmp])
        self.calls = 0
        self.fail_after = fail_after

    async def verify(self, task: Any, program: str) -> Any:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise RuntimeError("injected: the verification host died")
        return await self.inner.verify(task, program)


def _rewarder(store: RunStore, executor: Any, run_id: str | None = None, **settings: Any) -> PolicyRewarder:
    values = {"mode": "critic-in-loop", "parents": 1, "ideas": len(GROUP), "votes": 4, **settings}
    critic = PointwiseCritic(ScriptedModel(function=_critic_reply), CriticOptions(k=values["votes"]))
    makers = {TASK.name: ChildMaker(TASK, space_roles(TASK))}
    return PolicyRewarder([TASK], makers, critic, executor, store, run_id, RewardSettings(**values), random.Random(1))


def _score(rewarder: PolicyRewarder, completions: list[str] = GROUP, step: int = 0) -> list:
    async def go() -> list:
        prompt = (await rewarder.prompts(step))[0]
        return await rewarder.score(prompt, completions)

    return asyncio.run(go())


def _paid(store: RunStore, run_id: str) -> Counter[str]:
    return Counter(e.node_id for e in store.events(run_id, kinds=["verification"]) if e.charge is not None)


def test_critic_in_loop_verifies_exactly_the_uncertain_ideas(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path))
        assert isinstance(rewarder, Rewarder)
        rewards = _score(rewarder)
        assert [r.source for r in rewards] == ["critic", "critic", "verifier", "verifier", "verifier", "invalid"]
        assert [r.reward for r in rewards] == [1.0, -1.0, 1.0, -1.0, -1.0, -1.0]
        assert [r.improved for r in rewards] == [None, None, True, False, False, None]
        assert rewards[0].votes == {"improve": 4, "tie": 0, "lose": 0, "invalid": 0} and rewards[0].uncertainty == 0
        assert rewards[2].votes["improve"] == 2 and rewards[2].uncertainty == pytest.approx(0.5)
        assert rewards[2].parent_score == 3.0 and rewards[2].child_score == 4.0
        assert rewards[4].status == "failed" and rewards[5].status == "parse-error"
        paid = _paid(store, rewarder.run_id)
        assert set(paid) == {"t0-root", "s0g00i02", "s0g00i03", "s0g00i04"} and set(paid.values()) == {1}
        assert store.budget(rewarder.run_id).verifications == 4
        stored = [e.payload for e in store.events(rewarder.run_id, kinds=["policy_idea"])]
        assert sorted((p["index"], p["source"]) for p in stored) == [(i, r.source) for i, r in enumerate(rewards)]
        assert store.run(rewarder.run_id).config["kind"] == "policy-grpo"


def test_repairs_keep_the_idea_and_are_recorded(tmp_path: Path) -> None:
    """A crashed child goes to the implementer's repair; the template implementer cannot repair, so it ends there."""
    with RunStore(tmp_path / "r.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), mode="verify-all")
        (reward,) = _score(rewarder, ["Use cneg."])
        nodes = {r["node_id"]: r for r in store.node_rows(rewarder.run_id)}
        assert reward.source == "verifier" and reward.reward == -1.0 and reward.improved is False
        assert nodes["s0g00i00r1"]["status"] == "guard-failed" and "cannot be repaired" in nodes["s0g00i00r1"]["reason"]


def test_verification_cap_stops_with_budget_spent_and_keeps_what_was_paid(tmp_path: Path) -> None:
    with RunStore(tmp_path / "c.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), verifications=3)
        with pytest.raises(VerificationBudgetSpent):
            _score(rewarder)
        assert store.budget(rewarder.run_id).verifications == 3 and rewarder.verifications_left() == 0
        stored = [e.payload for e in store.events(rewarder.run_id, kinds=["policy_idea"])]
        assert sum(p["source"] == "verifier" for p in stored) == 2  # the two paid ideas got their rewards
        assert sum(p["source"] == "critic" for p in stored) == 2 and sum(p["source"] == "invalid" for p in stored) == 1


def test_verify_all_verifies_every_runnable_idea_and_critic_only_none(tmp_path: Path) -> None:
    with RunStore(tmp_path / "m.db") as store:
        everything = _rewarder(store, CountingExecutor(tmp_path), mode="verify-all")
        rewards = _score(everything)
        assert [r.source for r in rewards] == ["verifier"] * 5 + ["invalid"]
        assert [r.reward for r in rewards] == [1.0, -1.0, 1.0, -1.0, -1.0, -1.0]
        assert all(not r.votes for r in rewards) and store.budget(everything.run_id).verifications == 6

        only = _rewarder(store, CountingExecutor(tmp_path), mode="critic-only")
        rewards = _score(only)
        assert [r.source for r in rewards] == ["critic"] * 5 + ["invalid"]
        assert [r.reward for r in rewards] == [1.0, -1.0, -1.0, -1.0, -1.0, -1.0]  # split votes are no verdict
        assert store.budget(only.run_id).verifications == 1  # the baseline only


def test_audit_verifies_confident_critic_rewards_and_the_audit_reads_them_back(tmp_path: Path) -> None:
    with RunStore(tmp_path / "a.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), audit_rate=1.0)
        rewards = _score(rewarder)
        assert [r.source for r in rewards[:2]] == ["critic", "critic"] and rewards[0].improved is True
        assert rewards[1].improved is False and store.budget(rewarder.run_id).verifications == 6
        report = audit_run(store, rewarder.run_id)
    assert report.confident.to_dict()["tp"] == 1 and report.confident.tn == 1 and report.confident.reward_error == 0
    assert report.routed.to_dict()["fn"] == 1 and report.routed.tn == 2  # split votes: no improve verdict
    assert report.by_source == {"critic": 2, "verifier": 3, "invalid": 1}


def test_reopening_the_run_returns_stored_rewards_and_pays_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with RunStore(tmp_path / "o.db") as store:
        first = _rewarder(store, CountingExecutor(tmp_path))
        rewards = _score(first)
        prompts = asyncio.run(first.prompts(0))
        executor = CountingExecutor(tmp_path)
        again = _rewarder(store, executor, run_id=first.run_id, mode="verify-all")  # stored settings win
        assert again.settings.mode == "critic-in-loop" and asyncio.run(again.prompts(0)) == prompts
        assert _score(again) == rewards and executor.calls == 0
        stored = [e.payload["completion"] for e in store.events(first.run_id, kinds=["policy_idea"])]
        assert sorted(stored) == sorted(GROUP)
        assert _score(again, ["b0"] + GROUP[1:])[0] == rewards[0] and "another completion" in caplog.text
        assert store.budget(first.run_id).verifications == 4


def test_crash_mid_scoring_resumes_without_paying_twice(tmp_path: Path) -> None:
    with RunStore(tmp_path / "k.db") as store:
        broken = _rewarder(store, CountingExecutor(tmp_path, fail_after=2), mode="verify-all")
        with pytest.raises(RuntimeError, match="injected"):
            _score(broken)
        before = _paid(store, broken.run_id)
        assert sum(before.values()) == 2  # the root and one child were paid and recorded
        resumed = _rewarder(store, CountingExecutor(tmp_path), run_id=broken.run_id)
        rewards = _score(resumed)
        paid = _paid(store, broken.run_id)
        assert set(paid.values()) == {1} and sum(paid.values()) == 6 and before.keys() <= paid.keys()
        assert [r.reward for r in rewards] == [1.0, -1.0, 1.0, -1.0, -1.0, -1.0]


def test_all_ideas_improving_advances_the_parent(tmp_path: Path) -> None:
    with RunStore(tmp_path / "p.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), mode="verify-all", parents=2)

        async def go() -> tuple:
            groups = await rewarder.prompts(0)
            await rewarder.score(groups[0], ["Try b2.", "Set A higher: a3."])  # both improve: 4 and 7
            await rewarder.score(groups[1], ["Try b2.", "Use a0 instead."])
            stats = await rewarder.finish_step(0)
            return groups, stats, await rewarder.prompts(1)

        groups, stats, nxt = asyncio.run(go())
    assert stats.parents_advanced == 1 and stats.ideas == 4 and stats.verified == 4 and stats.mean_reward == 0.5
    assert nxt[0].parent_id == "s0g00i01" and nxt[1].parent_id == groups[1].parent_id == "t0-root"
    assert re.search(r"`a3` \(current\)", nxt[0].messages[-1]["content"])
    assert "validation combined_score = 7" in nxt[0].messages[-1]["content"]


def test_critic_rewarded_group_checks_the_chosen_child_before_it_becomes_parent(tmp_path: Path) -> None:
    with RunStore(tmp_path / "q.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), mode="critic-only")

        async def go() -> Any:
            (group,) = await rewarder.prompts(0)
            await rewarder.score(group, ["Set A higher: a3.", "a3 and b2"])
            return await rewarder.finish_step(0), await rewarder.prompts(1)

        stats, (nxt,) = asyncio.run(go())
        assert stats.parents_advanced == 1 and nxt.parent_id in ("s0g00i00", "s0g00i01")
        assert store.budget(rewarder.run_id).verifications == 2  # the baseline and the new parent


def test_space_reader_maps_named_options_and_rejects_text_without_them() -> None:
    space = TASK.idea_space
    assert space is not None
    idea = space_reader.read(space, dict(space.baseline), "Change a from a1 to a2, or rather a3; also b0.")
    assert idea is not None and idea.params["assignment"] == {"a": "a3", "b": "b0", "c": "c0"}
    assert idea.params["changed"] == ["a", "b"] and "a3" in idea.text
    assert space_reader.read(space, dict(space.baseline), "Keep a1 and b1 as they are.") is None
    assert space_reader.read(space, dict(space.baseline), "Make the model deeper.") is None
    assert space_reader.read(space, dict(space.baseline), "a12 and xa3 are not options") is None
    shared = IdeaSpace(
        dimensions={
            "x": (IdeaOption("none", "no x", "X = 0"), IdeaOption("big", "big x", "X = 9")),
            "y": (IdeaOption("none", "no y", "Y = 0"), IdeaOption("some", "some y", "Y = 1")),
        },
        template="{{x}}\n{{y}}",
        baseline={"x": "big", "y": "some"},
    )
    assert space_reader.read(shared, dict(shared.baseline), "use none") is None  # ambiguous bare name
    got = space_reader.read(shared, dict(shared.baseline), "set y=none.")
    assert got is not None and got.params["assignment"] == {"x": "big", "y": "none"}


def _critic_file(tmp: Path) -> Path:
    """A scripted critic: unanimous improve when the child sets A to three, unanimous lose otherwise."""
    path = tmp / "critic.yaml"
    path.write_text(
        "rules:\n"
        "  - {match: 'Child[^#]*sets A to three', repeat: true,\n"
        '     replies: ["[IMPROVEMENT] improve --- more A\\n[WINTIER] big --- large"]}\n'
        "  - {match: '## Child', repeat: true, replies: [\"[IMPROVEMENT] lose --- no\\n[WINTIER] NA --- none\"]}\n",
        encoding="utf-8",
    )
    return path


def test_build_rewarder_wires_a_scripted_critic_and_resumes_with_the_stored_settings(tmp_path: Path) -> None:
    from verifyless.errors import ConfigError
    from verifyless.train.policy.wiring import build_rewarder

    db, task = tmp_path / "w.db", str(Path(__file__).parents[2] / "data_task")
    with pytest.raises(ConfigError, match="needs a critic model"):
        build_rewarder([task], db, mode="critic-only")
    critic = f"scripted:{_critic_file(tmp_path)}"
    with build_rewarder([task], db, mode="critic-in-loop", parents=2, ideas=2, votes=3, critic=critic) as built:
        rewards = _score(built.rewarder, ["Set A higher: a3.", "Use b0."])
        assert [(r.source, r.reward) for r in rewards] == [("critic", 1.0), ("critic", -1.0)]
        assert rewards[0].votes == {"improve": 3, "tie": 0, "lose": 0, "invalid": 0}
        run_id, prompts = built.run_id, asyncio.run(built.rewarder.prompts(0))
        assert {p.task for p in prompts} == {TASK.name} and built.store.budget(run_id).tokens_in > 0  # critic calls
    with build_rewarder(["ignored"], db, mode="verify-all", resume=run_id[:15]) as again:
        assert again.rewarder.settings.mode == "critic-in-loop" and again.rewarder.settings.votes == 3
        assert asyncio.run(again.rewarder.prompts(0)) == prompts
        assert _score(again.rewarder, ["Set A higher: a3.", "Use b0."]) == rewards
        assert again.store.budget(run_id).verifications == 1  # the baseline only


_CHILD = """
import asyncio, sys
from verifyless.train.policy.wiring import build_rewarder

async def go(rewarder):
    (prompt,) = await rewarder.prompts(0)
    await rewarder.score(prompt, sys.argv[3:])

with build_rewarder([sys.argv[1]], sys.argv[2], mode="verify-all", parents=1, ideas=6, workers=1) as built:
    print(built.run_id, flush=True)
    asyncio.run(go(built.rewarder))
"""


def test_kill_9_mid_scoring_then_resume_pays_each_child_once(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    db, task = tmp_path / "k9.db", str(Path(__file__).parents[2] / "data_task")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, task, str(db), *GROUP], env=env, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    run_id = proc.stdout.readline().strip()
    deadline = time.monotonic() + 30
    with RunStore(db) as store:
        while time.monotonic() < deadline and sum(_paid(store, run_id).values()) < 2:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        killed_at = sum(_paid(store, run_id).values())
        assert 2 <= killed_at <= 6
    from verifyless.train.policy.wiring import build_rewarder

    with build_rewarder([task], db, resume=run_id) as again:
        rewards = _score(again.rewarder)
        paid = _paid(again.store, run_id)
    assert set(paid.values()) == {1} and sum(paid.values()) == 6  # the baseline + 5 runnable children, once each
    assert [r.reward for r in rewards] == [1.0, -1.0, 1.0, -1.0, -1.0, -1.0]


def test_llm_task_ideas_come_from_the_approach_section() -> None:
    parent = ParentInfo("root", LLM_TASK.baseline_program, 0.5)
    reply = "## Approach\nStandardise the inputs, then fit a ridge model with a small penalty.\n## Code\nx = 2"
    idea = idea_from_text(LLM_TASK, parent, reply)
    assert idea is not None and idea.text.startswith("Standardise the inputs") and "x = 2" not in idea.text
    assert idea_from_text(LLM_TASK, parent, "ok") is None  # too short to be an idea


def test_prompts_use_the_proposer_prompt_with_the_option_menu_and_step_stats_add_up(tmp_path: Path) -> None:
    with RunStore(tmp_path / "t.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), parents=3)

        async def go() -> tuple:
            groups = await rewarder.prompts(0)
            await rewarder.score(groups[0], GROUP)
            return groups, await rewarder.finish_step(0), await rewarder.finish_step(0)

        groups, stats, again = asyncio.run(go())
    assert [g.key for g in groups] == ["s0/g00", "s0/g01", "s0/g02"] and len({g.parent_id for g in groups}) == 1
    system, user = groups[0].messages
    assert system["role"] == "system" and user["role"] == "user" and "Options you can choose from" in user["content"]
    assert "`a1` (current)" in user["content"] and "sets A to three" in user["content"]
    assert stats == again and stats.ideas == 6 and stats.verified == 3 and stats.share_verified == 0.5
    assert stats.rewarded_per_verification == 5 / 3 and stats.audited == 3 and stats.agreement == pytest.approx(2 / 3)
    assert stats.mean_reward == pytest.approx(-2 / 6) and stats.parents_advanced == 0 and stats.tokens > 0


def test_scoring_works_across_event_loops(tmp_path: Path) -> None:
    """A trainer may call asyncio.run once per step; the executor's semaphore must never bind to an old loop."""
    with RunStore(tmp_path / "l.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), mode="verify-all", parents=2)

        async def one(group: int, completions: list[str]) -> list:
            return await rewarder.score((await rewarder.prompts(0))[group], completions)

        first = asyncio.run(one(0, ["a3", "a0", "b2"]))
        second = asyncio.run(one(1, ["a2", "b0", "a2 c1", "a0 b2"]))
    assert [r.reward for r in first] == [1.0, -1.0, 1.0] and [r.reward for r in second] == [1.0, -1.0, 1.0, -1.0]


def test_bench_quick_runs_every_arm_on_the_same_cap(capsys: pytest.CaptureFixture[str]) -> None:
    rows = {r.arm: r for r in load("policy_rewards").main(["--quick"])}
    assert "| critic-in-loop |" in capsys.readouterr().out
    assert rows["verify-all"].paid == 10 and rows["critic-only"].paid == 1  # the cap; the baseline only
    assert rows["critic-in-loop"].steps >= rows["verify-all"].steps and rows["verify-all"].reward_accuracy == 1.0
    assert rows["critic-in-loop"].share_verified < rows["verify-all"].share_verified


def _repairing_rewarder(
    store: RunStore, tmp: Path, replies: list[str], executor: Any = None, **settings: Any
) -> PolicyRewarder:
    """Space briefer/summariser with a real LLM implementer answering from a script (so repairs can succeed)."""
    from verifyless.roles.base import Roles
    from verifyless.roles.llm import LLMImplementer
    from verifyless.roles.space import DeterministicSummarizer, SpaceProposer, StaticBriefer

    implementer = LLMImplementer(ScriptedModel(replies=replies), max_attempts=1)
    roles = Roles(StaticBriefer(), SpaceProposer(), implementer, DeterministicSummarizer())
    values = {"mode": "verify-all", "parents": 1, "ideas": 1, "votes": 4, **settings}
    makers = {TASK.name: ChildMaker(TASK, roles)}
    executor = executor or CountingExecutor(tmp)
    return PolicyRewarder([TASK], makers, None, executor, store, None, RewardSettings(**values))


def test_a_crashing_child_is_repaired_keeping_its_idea_and_the_repair_is_verified(tmp_path: Path) -> None:
    crash, fixed = "```python\nA = 3\nB = 1\nC = -1\n```", "```python\nA = 3\nB = 1\nC = 0\n```"
    with RunStore(tmp_path / "fix.db") as store:
        rewarder = _repairing_rewarder(store, tmp_path, [crash, fixed])
        (reward,) = _score(rewarder, ["Raise the weight A to three (option a3)."])
        nodes = {r["node_id"]: r for r in store.node_rows(rewarder.run_id)}
        (stored,) = [e.payload for e in store.events(rewarder.run_id, kinds=["policy_idea"])]
        assert reward.source == "verifier" and reward.reward == 1.0 and reward.improved is True
        assert reward.node_id == "s0g00i00r1" and reward.child_score == 7.0 and stored["verifications"] == 2
        assert nodes["s0g00i00"]["status"] == "failed" and nodes["s0g00i00r1"]["status"] == "ok"
        assert nodes["s0g00i00r1"]["idea"] == nodes["s0g00i00"]["idea"]  # the idea is kept
        assert store.budget(rewarder.run_id).verifications == 3

    with RunStore(tmp_path / "none.db") as store:
        rewarder = _repairing_rewarder(store, tmp_path, [crash], repairs=0)
        (reward,) = _score(rewarder, ["Raise the weight A to three (option a3)."])
        assert reward.reward == -1.0 and reward.node_id == "s0g00i00" and reward.status == "failed"
        assert store.budget(rewarder.run_id).verifications == 2


class ContractBreakingExecutor(CountingExecutor):
    """The real executor, except that a program with a negative C breaks the output contract."""

    async def verify(self, task: Any, program: str) -> Any:
        from verifyless.node import Status, Verification

        if "C = -1" in program:
            self.calls += 1
            return Verification(Status.CONTRACT_VIOLATION, reason="output contract broken (injected)")
        return await super().verify(task, program)


def test_policy_training_repairs_exactly_what_the_engine_repairs(tmp_path: Path) -> None:
    """One repair rule (``ledger.REPAIRABLE``): a contract violation is not repaired, a crash is (issue #34)."""
    from verifyless.ledger import REPAIRABLE
    from verifyless.node import Status

    assert Status.CONTRACT_VIOLATION not in REPAIRABLE and Status.TIMEOUT not in REPAIRABLE
    assert Status.FAILED in REPAIRABLE
    broken, fixed = "```python\nA = 3\nB = 1\nC = -1\n```", "```python\nA = 3\nB = 1\nC = 0\n```"
    with RunStore(tmp_path / "cv.db") as store:
        executor = ContractBreakingExecutor(tmp_path)
        rewarder = _repairing_rewarder(store, tmp_path, [broken, fixed], executor=executor)
        (reward,) = _score(rewarder, ["Raise the weight A to three (option a3)."])
        nodes = {r["node_id"]: r for r in store.node_rows(rewarder.run_id)}
        assert reward.reward == -1.0 and reward.node_id == "s0g00i00" and reward.status == "contract-violation"
        assert "s0g00i00r1" not in nodes and executor.calls == 2  # the baseline and the child; no repair asked for
        assert store.budget(rewarder.run_id).verifications == 2


def test_a_program_verified_concurrently_twice_is_paid_once(tmp_path: Path) -> None:
    with RunStore(tmp_path / "d.db") as store:
        rewarder = _rewarder(store, CountingExecutor(tmp_path), mode="verify-all")
        rewards = _score(rewarder, ["Set A higher: a3.", "a3, please", "Try b2."])
        reused = [e.payload.get("reused_from") for e in store.events(rewarder.run_id, kinds=["verification"])]
        assert [r.reward for r in rewards] == [1.0, 1.0, 1.0] and store.budget(rewarder.run_id).verifications == 3
        assert sum(r is not None for r in reused) == 1


_LLM_SCRIPT = """
mode: rules
rules:
- role: brief
  reply: "## Task understanding\\nA weighted sum of three constants; higher is better.\\n\\n[CRITERIA]\\n1. Weight A.\\n2. Weight B.\\n3. Penalty C.\\n4. Robustness.\\n"
- role: implementer
  repeat: true
  replies: ["```python\\nA = 3\\nB = 1\\nC = 0\\n```"]
- role: summarizer
  repeat: true
  replies: ["The editable block sets three integer constants that the fixed run function combines into its score."]
- role: critic
  repeat: true
  replies: ["[IMPROVEMENT] improve --- larger weight\\n[WINTIER] big --- large", "[IMPROVEMENT] lose --- no\\n[WINTIER] NA"]
"""


def test_build_rewarder_with_llm_roles_uses_the_policy_text_as_the_idea(tmp_path: Path) -> None:
    from verifyless.train.policy.wiring import build_rewarder

    script = tmp_path / "llm.yaml"
    script.write_text(_LLM_SCRIPT, encoding="utf-8")
    spec, task = f"scripted:{script}", str(Path(__file__).parents[2] / "data_task")
    with build_rewarder([task], tmp_path / "llm.db", parents=1, ideas=2, votes=2, models=[spec], critic=spec) as built:
        (prompt,) = asyncio.run(built.rewarder.prompts(0))
        assert "Options you can choose from" not in prompt.messages[-1]["content"]  # LLM roles: no option menu
        text = "## Approach\nRaise the weight A to three so the sum grows, keeping B and C."
        good, bad = _score(built.rewarder, [text, "ok"])
        nodes = {r["node_id"]: r for r in built.store.node_rows(built.run_id)}
        roles = Counter(e.payload["role"] for e in built.store.events(built.run_id, kinds=["llm_call"]))
    assert (
        good.source == "verifier"
        and good.reward == 1.0
        and good.votes == {"improve": 1, "tie": 0, "lose": 1, "invalid": 0}
    )
    assert nodes["s0g00i00"]["idea"].startswith("Raise the weight A") and good.child_score == 7.0
    assert bad.source == "invalid" and bad.reason == "the completion has no usable idea"
    assert roles["implementer"] == 1 and roles["critic"] >= 1 and roles["brief"] == 1


def test_groups_sample_their_tasks_from_all_tasks_and_baselines_are_verified_only_when_prompted(
    tmp_path: Path,
) -> None:
    """With more tasks than groups every task gets prompted over the steps; unprompted ones cost nothing."""
    import dataclasses

    tasks = [dataclasses.replace(TASK, name=f"task{i}") for i in range(6)]
    makers = {t.name: ChildMaker(t, space_roles(t)) for t in tasks}
    values = {"mode": "verify-all", "parents": 2, "ideas": 2}

    def rewarder(store: RunStore, run_id: str | None = None) -> PolicyRewarder:
        return PolicyRewarder(
            tasks, makers, None, CountingExecutor(tmp_path), store, run_id, RewardSettings(**values), random.Random(1)
        )

    with RunStore(tmp_path / "s.db") as store:
        one = rewarder(store)
        drawn = []
        for step in range(6):
            groups = asyncio.run(one.prompts(step))
            names = [g.task for g in groups]
            assert len(set(names)) == 2  # distinct tasks per step
            for g in groups:  # a task drawn for the first time starts at its own baseline
                if all(g.task not in earlier for earlier in drawn):
                    assert g.parent_id == f"t{int(g.task[4:])}-root"
            drawn.append(names)
            assert asyncio.run(one.prompts(step)) == groups  # stored prompts come back identical
            for g in groups:
                asyncio.run(one.score(g, ["Set A higher: a3.", "Try b2."]))
            asyncio.run(one.finish_step(step))
        prompted = {n for names in drawn for n in names}
        assert len(prompted) > 2  # the groups rotate over the tasks (pinned groups would see task0, task1 only)
        roots = {e.node_id for e in store.events(one.run_id, kinds=["verification"]) if e.node_id.endswith("-root")}
        assert roots == {f"t{int(n[4:])}-root" for n in prompted}  # no unprompted task's baseline was paid
        again = rewarder(store, one.run_id)
        assert [g.task for g in asyncio.run(again.prompts(2))] == drawn[2]  # the draw is the run's, not the object's
        assert any(not p.endswith("-root") for s in range(6) for p in store_parents(again, s))  # lineages advanced
        nxt = asyncio.run(again.prompts(6))
        for g in nxt:  # a lineage continues from its task's latest advanced parent
            earlier = [s for s in range(6) if g.task in drawn[s]]
            if earlier:
                last = earlier[-1]
                place = drawn[last].index(g.task)
                assert g.parent_id == store_parents(again, last)[place]


def store_parents(rewarder: PolicyRewarder, step: int) -> list[str]:
    return list(rewarder.ledger.log.steps[step]["parents"])


def test_policy_reuse_is_the_kernels_lookup_with_the_task_in_the_key(tmp_path: Path) -> None:
    """A paid result is found by (task, program hash) through ``RunState.known_result``, also after reopening."""
    from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
    from verifyless.train.policy.ledger import POLICY_KIND, PolicyLedger

    program = "print(1)\n"
    digest = content_hash(program)

    def cand(cid: str) -> Candidate:
        return Candidate(cid, None, Operator.IMPROVE, Idea("same program"), program, digest)

    with RunStore(tmp_path / "p.db") as store:
        run_id = store.create_run("policy", {"kind": POLICY_KIND})
        ledger = PolicyLedger(store, run_id)
        for cid, task in (("a", "t1"), ("b", "t2"), ("c", "t1")):
            ledger.node(cand(cid), Status.IMPLEMENTED, "", task=task)
        v = Verification(Status.OK, score=1.0, program_hash=digest)
        ledger.verification("a", v, 1.0)
        assert ledger.known_result("t1", digest) == ("a", v) and ledger.known_result("t2", digest) is None
        ledger.verification("c", v, 1.0, reused_from="a")
        again = PolicyLedger(store, run_id)  # reopened: the kernel's fold is rebuilt from the events
        assert again.known_result("t1", digest) == ("a", v) and again.known_result("t2", digest) is None
        charged = {e.node_id: e.charge is not None and e.charge.verifications > 0 for e in store.events(run_id)}
        assert again.state.verifications["c"] == v and {k: charged[k] for k in ("a", "c")} == {"a": True, "c": False}
        assert store.budget(run_id).verifications == 1


def test_a_failing_baseline_stops_policy_training_with_the_engines_diagnosis(tmp_path: Path) -> None:
    from verifyless.engine.baseline import BaselineFailed

    broken = TASK.__class__(**{**TASK.__dict__, "baseline_program": TASK.baseline_program + "\nraise SystemExit(3)\n"})
    critic = PointwiseCritic(ScriptedModel(function=_critic_reply), CriticOptions(k=4))
    with RunStore(tmp_path / "s.db") as store:
        rewarder = PolicyRewarder(
            [broken],
            {broken.name: ChildMaker(broken, space_roles(broken))},
            critic,
            CountingExecutor(tmp_path),
            store,
            None,
            RewardSettings(mode="critic-in-loop", parents=1, ideas=len(GROUP), votes=4),
            random.Random(1),
        )
        with pytest.raises(BaselineFailed) as stopped:
            asyncio.run(rewarder.prompts(0))
        assert "the program itself failed, and policy training needs a working starting solution" in str(stopped.value)
        assert "allow_failed_baseline" not in str(stopped.value)
