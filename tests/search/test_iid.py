"""The iid baseline (no evolution) in pool-world replays: every pool comes from the seed program."""

from __future__ import annotations

from verifyless.builtin import worlds_dir
from verifyless.offline.breakeven import standard_arms
from verifyless.offline.replay import IIDArm, RandomArm, point_index, replay_run
from verifyless.offline.worlds import load_world


class Watching:
    """Wraps a screener and records the parent (world point) of every pool it is shown."""

    def __init__(self, inner):
        self.inner, self.parents = inner, []
        self.name = inner.name
        self.from_seed = getattr(inner, "from_seed", False)

    async def screen(self, ctx, candidates):
        self.parents.append(point_index(ctx.parent.id))
        return await self.inner.screen(ctx, candidates)


def test_iid_expands_the_seed_every_time_and_random_evolves():
    world = load_world(worlds_dir() / "diabetes.jsonl")
    iid, rnd = Watching(IIDArm()), Watching(RandomArm())
    a = replay_run(world, iid, budget=24, n_candidates=8, seed=3)
    b = replay_run(world, rnd, budget=24, n_candidates=8, seed=3)
    assert set(iid.parents) == {world.baseline_index}
    assert len(set(rnd.parents)) > 1, "random greedy search never moved off the seed: the test cannot tell"
    assert a.arm == "iid" and len(a.best) == len(b.best) == 24
    assert list(a.best) == sorted(a.best), "the best-so-far curve must not fall"


def test_iid_is_a_standard_arm():
    world = load_world(worlds_dir() / "diabetes.jsonl")
    assert list(standard_arms(world))[:2] == ["iid", "random"] and "oracle" in standard_arms(world)


def test_the_iid_strategy_expands_the_seed_every_time_on_the_real_engine(tmp_path):
    import asyncio
    import random

    from verifyless.config import load_config
    from verifyless.engine import Engine
    from verifyless.screen.baselines import RandomScreener
    from verifyless.search.registry import build_strategy
    from verifyless.store import RunStore
    from verifyless.testing import FakeExecutor, fake_roles, fake_task

    cfg = load_config(overrides=["strategy.name=iid", "budget.verifications=10", "engine.candidates=4"])
    with RunStore(tmp_path / "s.db") as store:
        engine = Engine(
            task=fake_task(),
            roles=fake_roles(fix=False),
            screener=RandomScreener(),
            strategy=build_strategy("iid", None, random.Random(0)),
            executor=FakeExecutor(),
            store=store,
            config=cfg,
        )
        result = asyncio.run(engine.run())
        rows = store.node_rows(result.run_id)
    children = [r for r in rows if r["node_id"] != "root" and r["status"] != "implemented"]
    assert children and {r["parent_id"] for r in children} == {"root"}
    assert result.verifications == 10
    best = min((r for r in rows if r.get("score") is not None), key=lambda r: r["score"])  # the loss is minimised
    assert result.best_score == best["score"]
