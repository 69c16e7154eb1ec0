"""Two-fidelity pool worlds (offline/fidelity.py) and replays at matched evaluator seconds (offline/pilot_replay.py)."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

import pytest

from verifyless.builtin import worlds_dir
from verifyless.offline.fidelity import LevelPoint, LevelWorld, attach, collect_level, level_path, load_level
from verifyless.offline.pilot_replay import ARMS, arm_factory, replay_seconds
from verifyless.offline.worlds import collect_world, load_world, synthetic_world
from verifyless.task import load_task
from verifyless.task.base import Fidelity, FidelityLevel

SHIPPED = [("diabetes", "quarter_data", 118), ("affairs_gbm", "quarter_data", 257)]


@pytest.mark.parametrize(("task", "level", "n"), SHIPPED)
def test_the_shipped_level_worlds_load_and_match_their_worlds_point_for_point(task: str, level: str, n: int) -> None:
    world = load_world(worlds_dir() / f"{task}.jsonl")
    low = attach(world, level_path(task, level))
    assert len(low.points) == len(world) == n and low.level == level
    assert [p.program_hash for p in low.points] == [p.program_hash for p in world.points]
    assert all(p.seconds > 0 for p in low.points)
    ok = [i for i in range(n) if low.fitness(i) is not None]
    assert len(ok) >= 0.9 * n  # a quarter of the data still trains nearly every configuration
    assert low.calibration and low.cost_ratio is not None and 0 < low.cost_ratio < 1.5
    assert low.cost(0) == pytest.approx(low.points[0].seconds * low.machine_factor)


def test_attach_refuses_a_level_world_that_misses_points(tmp_path: Path) -> None:
    world = load_world(worlds_dir() / "diabetes.jsonl")
    lines = level_path("diabetes", "quarter_data").read_text().splitlines()
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(lines[:1] + lines[6:]) + "\n")  # five points left out
    with pytest.raises(ValueError, match="missing"):
        attach(world, short)


def test_collect_level_measures_every_world_point_and_resumes(tmp_path: Path) -> None:
    task = load_task(str(Path(__file__).parents[1] / "data_task"))
    task = dataclasses.replace(task, fidelity=Fidelity(levels=(FidelityLevel("quick", knob="1"),)))
    world = collect_world(task, tmp_path / "w.jsonl", n=4, seed=1)
    path = tmp_path / "w.quick.jsonl"
    assert collect_level(task, world, "quick", path, deadline=time.monotonic() - 1) == 0  # nothing run yet
    assert collect_level(task, world, "quick", path) == 4
    before = path.read_text()
    assert collect_level(task, world, "quick", path) == 4 and path.read_text() == before  # nothing paid twice
    low = attach(world, path)
    assert [low.fitness(i) for i in range(4)] == [world.fitness(i) for i in range(4)]  # the knob changes nothing here
    head, _ = load_level(path)
    assert (head["task"], head["level"], head["world_points"]) == (task.name, "quick", 4)
    with pytest.raises(ValueError, match="no cheaper fidelity level"):
        collect_level(task, world, "full", tmp_path / "x.jsonl")


def _mirror(cost: float = 0.0) -> tuple[LevelWorld, float]:
    """A synthetic world whose level ranks exactly like full fidelity."""
    world = synthetic_world(n_points=120, seed=3)
    points = tuple(LevelPoint(p.program_hash or f"h{i}", p.status, p.score, 1.0) for i, p in enumerate(world.points))
    return LevelWorld(world, "mirror", points), cost


def test_a_free_perfect_pilot_replays_exactly_as_the_oracle_and_pilots_are_charged() -> None:
    low, _ = _mirror()
    for seed in range(5):
        free = replay_seconds(low, arm_factory("pilot", low, lambda i: 0.0, seed), budget_s=20, seed=seed)
        oracle = replay_seconds(low, arm_factory("oracle", low, lambda i: 0.0, seed), budget_s=20, seed=seed)
        assert free.best == oracle.best and free.seconds == oracle.seconds
    paid = replay_seconds(low, arm_factory("pilot", low, lambda i: 0.25, 0), budget_s=20, seed=0)
    assert paid.seconds[1] == pytest.approx(1.0 + 8 * 0.25 + 1.0)  # baseline, 8 pilots, one full verification
    assert paid.verifications_at(20) < 20 and paid.best_at(0.5) == -float("inf")
    cascade = replay_seconds(low, arm_factory("critic-63.3->pilot", low, lambda i: 0.25, 0), budget_s=20, seed=0)
    assert cascade.seconds[1] == pytest.approx(1.0 + 3 * 0.25 + 1.0)  # the critic's top 3 piloted
    assert all(replay_seconds(low, arm_factory(a, low, lambda i: 0.1, 1), budget_s=6, seed=1).best for a in ARMS)


def test_the_level_world_file_format_is_as_documented(tmp_path: Path) -> None:
    lines = level_path("diabetes", "quarter_data").read_text().splitlines()
    head = json.loads(lines[0])
    assert head["kind"] == "level_world" and head["version"] == 1 and head["world_points"] == 118
    rows = [json.loads(x) for x in lines[1:]]
    assert {tuple(sorted(r)) for r in rows if r.get("run") != "calibration"} == {
        ("program_hash", "reason", "score", "seconds", "status")
    }
