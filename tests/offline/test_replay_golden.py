"""Replay numbers pinned: every arm's curves as the pool-world ``Selector`` code produced them (issue #20 item 6).

``tests/fixtures/replay_golden.json`` was recorded with the code before the replays drove ``Screener``s
directly (the removed ``Selector`` contract): 3 seeds, budget 12, N = 4, on ``synthetic_world(seed=0)`` and the
shipped diabetes world, for every arm of ``standard_arms``, the simulated tournament, tie-broken critic and
cascade, and every arm of the pilot replay (``replay_seconds`` on diabetes' quarter-data level, budget 12 x the
median full seconds, pilots charged at ``LevelWorld.cost``). The replays must reproduce them exactly: same
curves, same verified points, same incumbents, same seconds and pilots.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from verifyless.builtin import worlds_dir
from verifyless.offline.breakeven import standard_arms
from verifyless.offline.fidelity import attach, level_path
from verifyless.offline.pilot_replay import ARMS, arm_factory, replay_seconds
from verifyless.offline.replay import ArmFactory, replay_many
from verifyless.offline.simulated import PRESETS, CascadeScreener, SimulatedJudge, TieBrokenCritic, TournamentScreener
from verifyless.offline.worlds import World, load_world, synthetic_world

GOLDEN = json.loads((Path(__file__).parents[1] / "fixtures" / "replay_golden.json").read_text())
SEEDS, BUDGET, N = (0, 1, 2), 12, 4


def _curve(values: tuple[float, ...]) -> list[float | None]:
    return [None if not math.isfinite(v) else v for v in values]


def _simulated_arms() -> dict[str, ArmFactory]:
    spec = PRESETS["trained"]
    return {
        "tournament": lambda w, s: TournamentScreener(SimulatedJudge(0.694, s), w),
        "tiebreak": lambda w, s: TieBrokenCritic(spec, w, SimulatedJudge(0.694, s), s),
        "cascade": lambda w, s: CascadeScreener(spec, w, SimulatedJudge(0.694, s), 3, s),
    }


def _worlds() -> dict[str, World]:
    return {"synthetic0": synthetic_world(seed=0), "diabetes": load_world(worlds_dir() / "diabetes.jsonl")}


@pytest.mark.parametrize("world_name", ["synthetic0", "diabetes"])
def test_every_replay_arm_reproduces_its_recorded_curves(world_name: str) -> None:
    world = _worlds()[world_name]
    arms = {**standard_arms(world), **_simulated_arms()}
    assert {k.split("/")[1] for k in GOLDEN if k.startswith(world_name + "/")} == set(arms)
    for arm, factory in arms.items():
        runs = replay_many(world, factory, seeds=SEEDS, budget=BUDGET, n_candidates=N)
        got = [
            {
                "seed": r.seed,
                "arm": r.arm,
                "best": _curve(r.best),
                "verified": list(r.verified),
                "incumbent": r.incumbent,
            }
            for r in runs
        ]
        assert got == GOLDEN[f"{world_name}/{arm}"], arm


def test_every_pilot_replay_arm_reproduces_its_recorded_curves() -> None:
    world = load_world(worlds_dir() / "diabetes.jsonl")
    low = attach(world, level_path("diabetes", "quarter_data"))
    unit = sorted(p.seconds for p in world.points)[len(world) // 2]
    for arm in ARMS:
        got = []
        for s in SEEDS:
            r = replay_seconds(low, arm_factory(arm, low, low.cost, s), budget_s=BUDGET * unit, n_candidates=N, seed=s)
            got.append(
                {"seed": s, "arm": r.arm, "best": _curve(r.best), "seconds": list(r.seconds), "pilots": r.pilots}
            )
        assert got == GOLDEN[f"diabetes-pilot/{arm}"], arm
