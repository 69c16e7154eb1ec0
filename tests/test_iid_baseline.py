"""The iid baseline (no evolution) in pool-world replays: every pool comes from the seed program."""

from __future__ import annotations

from verifyless.builtin import worlds_dir
from verifyless.offline.breakeven import standard_arms
from verifyless.offline.worlds import IIDSelector, PoolView, RandomSelector, load_world, replay_run


class Watching:
    """Wraps a selector and records the parent of every pool it is shown."""

    def __init__(self, inner):
        self.inner, self.parents = inner, []
        self.name = inner.name
        self.from_seed = getattr(inner, "from_seed", False)

    def choose(self, pool: PoolView) -> int:
        self.parents.append(pool.parent)
        return self.inner.choose(pool)

    def observe(self, pool, pick, fitness):
        return None


def test_iid_expands_the_seed_every_time_and_random_evolves():
    world = load_world(worlds_dir() / "diabetes.jsonl")
    iid, rnd = Watching(IIDSelector()), Watching(RandomSelector())
    a = replay_run(world, iid, budget=24, n_candidates=8, seed=3)
    b = replay_run(world, rnd, budget=24, n_candidates=8, seed=3)
    assert set(iid.parents) == {world.baseline_index}
    assert len(set(rnd.parents)) > 1, "random greedy search never moved off the seed: the test cannot tell"
    assert a.arm == "iid" and len(a.best) == len(b.best) == 24
    assert list(a.best) == sorted(a.best), "the best-so-far curve must not fall"


def test_iid_is_a_standard_arm():
    world = load_world(worlds_dir() / "diabetes.jsonl")
    assert list(standard_arms(world))[:2] == ["iid", "random"] and "oracle" in standard_arms(world)
