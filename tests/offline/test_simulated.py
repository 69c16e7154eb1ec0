"""Simulated critics of known quality, the break-even cost model and the breakeven command (tiny settings)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verifyless.offline.breakeven import CostModel, breakeven_grid, compare_arms, standard_arms, summarize
from verifyless.offline.replay import pick, point_index, pool_candidates, pool_context, run_sync
from verifyless.offline.simulated import (
    PRESETS,
    CriticSpec,
    SimulatedCritic,
    majority_accuracy,
    measured_dir3,
    true_direction,
)
from verifyless.offline.worlds import World, synthetic_world
from verifyless.screen.base import Screener


def _pick(screener: Screener, world: World, parent: int, pool: tuple[int, ...]) -> int:
    """The world point ``screener`` verifies of one replayed pool of ``parent``."""
    ctx = pool_context(parent, 1, random.Random(0))
    return point_index(run_sync(pick(screener, ctx, pool_candidates(world, parent, pool))).id)


@pytest.mark.parametrize("dir3", [0.466, 0.633])
def test_per_sample_accuracy_matches_the_spec_whatever_the_correlation(dir3: float) -> None:
    deltas = [1.0, 0.0, -1.0, None] * 400
    for rho in (0.0, 0.9):
        got = measured_dir3(CriticSpec("c", dir3, k=3, rho=rho), deltas, seed=1)
        assert got == pytest.approx(dir3, abs=0.03)


def test_independent_errors_make_voting_look_too_good() -> None:
    independent = majority_accuracy(0.6, 5, 0.0, trials=6000)
    correlated = majority_accuracy(0.6, 5, 1.0, trials=6000)
    assert independent > 0.7 and correlated == pytest.approx(0.6, abs=0.03)


def test_truth_and_a_perfect_critic_picks_the_best_improvement() -> None:
    assert [true_direction(d, 0.0) for d in (0.1, 0.0, -0.1, None)] == [0, 1, 2, 2]
    world = synthetic_world(n_points=40, seed=2)
    critic = SimulatedCritic(PRESETS["perfect"], world, seed=0)
    fits = {i: world.fitness(i) for i in range(len(world))}
    ok = sorted((i for i in fits if fits[i] is not None), key=lambda i: fits[i])
    parent = ok[len(ok) // 2]
    pool = (ok[0], ok[-1], ok[1])
    assert _pick(critic, world, parent, pool) == ok[-1]


def test_replayed_critics_order_by_accuracy_and_summary_has_all_columns() -> None:
    world = synthetic_world(n_points=120, n_dims=5, seed=6)
    runs = compare_arms(world, standard_arms(world), budget=12, n_candidates=6, seeds=range(10))
    rows = {r.arm: r for r in summarize({world.task: runs}, {world.task: lambda f: f}, budget=12, n_boot=200)}
    assert set(rows) == {"iid", "random", "surrogate", "critic-46.6", "critic-63.3", "oracle"}
    assert rows["oracle"].score.value >= rows["critic-63.3"].score.value - 0.2
    assert rows["critic-63.3"].score.value > rows["random"].score.value
    assert rows["random"].p_improve is None and rows["oracle"].p_improve.value > 0.6
    assert rows["oracle"].reach.value < 1.0 and rows["oracle"].reached == rows["oracle"].pairs == 10


def test_cost_model_break_even() -> None:
    cost = CostModel(tokens_per_sample=1000, usd_per_million_tokens=2.0, usd_per_verification_hour=3.6)
    assert cost.screening_usd(8, 3) == pytest.approx(0.048)
    # 12 screened verifications cost 0.576 $; saving 12 pays when one verification costs > 0.048 $ = 48 s
    assert cost.breakeven_seconds(
        n_candidates=8, k=3, screened_verifications=12, saved_verifications=12
    ) == pytest.approx(48.0)
    assert math.isinf(cost.breakeven_seconds(n_candidates=8, k=3, screened_verifications=24, saved_verifications=0))


def test_breakeven_grid_and_command(tmp_path: Path) -> None:
    world = synthetic_world(n_points=80, n_dims=4, seed=7)
    rows = breakeven_grid({world.task: world}, dir3s=[1 / 3, 1.0], ns=[6], ks=[1], budget=10, seeds=range(6))
    assert [r.dir3 for r in rows] == [1 / 3, 1.0]
    assert rows[1].headroom > rows[0].headroom and rows[1].saved > rows[0].saved
    path = tmp_path / "w.jsonl"
    head = {
        "kind": "world",
        "task": world.task,
        "seed": 7,
        "direction": "maximize",
        "baseline": dict(world.baseline),
        "dimensions": {d: list(o) for d, o in world.dimensions.items()},
    }
    path.write_text("\n".join([json.dumps(head)] + [json.dumps(p.to_dict()) for p in world.points]) + "\n")
    from verifyless._cli.app import app

    out = tmp_path / "report"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "breakeven",
            "--worlds",
            str(path),
            "--seeds",
            "3",
            "--budget",
            "8",
            "--dir3",
            "0.466,1.0",
            "--n",
            "4",
            "--k",
            "1,3",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    table = (out / "breakeven.md").read_text()
    assert table.count(f"| {world.task} |") == 4 and "break-even" in table
    assert len((out / "breakeven.csv").read_text().splitlines()) == 5
    bad = CliRunner().invoke(app, ["bench", "breakeven", "--worlds", str(tmp_path / "none")])
    assert bad.exit_code != 0 and "no world files" in str(bad.exception)  # main() prints it as one line


def test_perfect_judge_tournament_and_cascade_pick_the_pool_best() -> None:
    from verifyless.offline.simulated import CascadeScreener, SimulatedJudge, TieBrokenCritic, TournamentScreener

    world = synthetic_world(n_points=60, seed=9)
    fits = {i: world.fitness(i) for i in range(len(world)) if world.fitness(i) is not None}
    pool = tuple(sorted(fits)[:8])
    best = max(pool, key=lambda i: fits[i])
    judge = SimulatedJudge(1.0)
    assert _pick(TournamentScreener(judge, world), world, pool[0], pool) == best
    assert _pick(TieBrokenCritic(PRESETS["perfect"], world, judge), world, pool[0], pool) == best
    assert _pick(CascadeScreener(PRESETS["perfect"], world, judge, m=3), world, pool[0], pool) == best
    coin = SimulatedJudge(0.5, seed=1)
    wins = sum(coin.better(world, best, pool[1]) == best for _ in range(400))
    assert 150 < wins < 250
