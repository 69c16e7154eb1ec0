"""Smoke runs outside the engine: ``data collect`` and the policy rewards (ledger/pilots.py's step, same rules).

The task is tests/data_task (score 2A + B - C, C < 0 crashes) with one cheap
level declared (``quick``, a knob the program ignores): a crash at full
fidelity is a crash at the smoke level too, which is what a smoke run is for.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

from verifyless.child import ChildMaker
from verifyless.critic_data.collect import Collector, CollectSettings
from verifyless.critic_data.harvest import harvest_run
from verifyless.executors.local import LocalExecutor
from verifyless.model.scripted import ScriptedModel
from verifyless.roles.space import space_roles
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.task.base import Fidelity, FidelityLevel
from verifyless.train.policy.rewards import PolicyRewarder
from verifyless.train.policy.settings import RewardSettings

TASK = dataclasses.replace(
    load_task(str(Path(__file__).parents[1] / "data_task")),
    fidelity=Fidelity(levels=(FidelityLevel("quick", knob="1"),)),
)


def _kinds(store: RunStore, run_id: str, *kinds: str) -> list[Any]:
    return list(store.events(run_id, kinds=list(kinds)))


def _collector(store: RunStore, tmp: Path, **kw: Any) -> Collector:
    settings = CollectSettings(parents=1, children=10, seed=3)
    return Collector(TASK, space_roles(TASK), LocalExecutor(hide=[tmp]), store, settings, **kw)


def test_collect_smoke_runs_each_child_first_and_never_fully_verifies_a_smoke_crash(tmp_path: Path) -> None:
    with RunStore(tmp_path / "c.db") as store:
        result = asyncio.run(_collector(store, tmp_path, smoke="quick").run())
        smokes = {e.node_id: e for e in _kinds(store, result.run_id, "smoke")}
        verified = {e.node_id: e.seq for e in _kinds(store, result.run_id, "verification")}
        crashed = {nid for nid, e in smokes.items() if e.payload["status"] == "failed"}
        assert crashed, "seed 3 drew no cneg child: the test saw no smoke crash"
        assert not crashed & set(verified)  # a smoke crash is never fully verified
        assert "root" not in smokes and set(verified) - {"root"} <= set(smokes)  # every other child smoked first
        assert all(smokes[nid].seq < seq for nid, seq in verified.items() if nid in smokes)
        assert all(e.charge.evaluator_seconds > 0 and e.charge.verifications == 0 for e in smokes.values())
        nodes = {r["node_id"]: r for r in store.node_rows(result.run_id)}
        assert all(nodes[nid]["status"] == "failed" for nid in crashed)
        assert not {r["child_id"] for r in harvest_run(store, result.run_id).rows} & crashed
        before = len(_kinds(store, result.run_id, "smoke", "verification"))
        again = asyncio.run(_collector(store, tmp_path, smoke="quick").run(result.run_id))
        assert again.run_id == result.run_id and len(_kinds(store, result.run_id, "smoke", "verification")) == before


def test_collect_smoke_is_on_by_default_for_llm_roles_only(tmp_path: Path) -> None:
    with RunStore(tmp_path / "d.db") as store:
        assert _collector(store, tmp_path, llm_roles=True).smoke_at == "quick"
        assert _collector(store, tmp_path).smoke_at is None
        assert _collector(store, tmp_path, smoke="off", llm_roles=True).smoke_at is None


def _rewarder(store: RunStore, tmp: Path, replies: list[str], run_id: str | None = None, **settings: Any):
    """Space briefer/proposer/summariser with a scripted LLM implementer: LLM roles, so smoke runs are on."""
    from verifyless.roles.base import Roles
    from verifyless.roles.llm import LLMImplementer
    from verifyless.roles.space import DeterministicSummarizer, SpaceProposer, StaticBriefer

    implementer = LLMImplementer(ScriptedModel(replies=replies), max_attempts=1)
    roles = Roles(StaticBriefer(), SpaceProposer(), implementer, DeterministicSummarizer())
    values = {"mode": "verify-all", "parents": 1, "ideas": 1, "votes": 4, **settings}
    makers = {TASK.name: ChildMaker(TASK, roles)}
    executor = LocalExecutor(hide=[tmp])
    return PolicyRewarder([TASK], makers, None, executor, store, run_id, RewardSettings(**values))


def _score(rewarder: PolicyRewarder, text: str) -> Any:
    async def go() -> Any:
        prompt = (await rewarder.prompts(0))[0]
        return (await rewarder.score(prompt, [text]))[0]

    return asyncio.run(go())


def test_policy_rewards_smoke_run_llm_children_and_never_fully_verify_a_smoke_crash(tmp_path: Path) -> None:
    crash, fixed = "```python\nA = 3\nB = 1\nC = -1\n```", "```python\nA = 3\nB = 1\nC = 0\n```"
    idea = "Raise the weight A to three (option a3)."
    with RunStore(tmp_path / "p.db") as store:
        rewarder = _rewarder(store, tmp_path, [crash, fixed])
        assert set(rewarder.smoke) == {TASK.name}  # auto: the cheapest level, for LLM roles
        reward = _score(rewarder, idea)
        run_id = rewarder.run_id
        smokes = {e.node_id: e.payload["status"] for e in _kinds(store, run_id, "smoke")}
        verified = {e.node_id for e in _kinds(store, run_id, "verification")}
        assert smokes == {"s0g00i00": "failed", "s0g00i00r1": "ok"}
        assert verified == {"t0-root", "s0g00i00r1"}  # the smoke crash was repaired, never fully verified
        assert reward.reward == 1.0 and reward.node_id == "s0g00i00r1" and reward.child_score == 7.0
        assert store.budget(run_id).verifications == 2 and store.budget(run_id).pilot_seconds > 0
        again = _rewarder(store, tmp_path, [], run_id=run_id)
        assert again.smoke[TASK.name] is not None and _score(again, idea) == reward
        assert len(_kinds(store, run_id, "smoke")) == 2  # nothing smoked twice

    with RunStore(tmp_path / "off.db") as store:
        rewarder = _rewarder(store, tmp_path, [crash], smoke="off", repairs=0)
        assert rewarder.smoke == {}
        reward = _score(rewarder, idea)
        assert reward.reward == -1.0 and reward.status == "failed" and store.budget(rewarder.run_id).verifications == 2


def test_policy_rewards_of_an_idea_space_world_smoke_nothing_by_default(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.db") as store:
        makers = {TASK.name: ChildMaker(TASK, space_roles(TASK))}
        settings = RewardSettings(mode="verify-all", parents=1, ideas=1)
        rewarder = PolicyRewarder([TASK], makers, None, LocalExecutor(hide=[tmp_path]), store, None, settings)
        assert rewarder.smoke == {}
