"""The real engine on a pool world served as the task's verifier (offline/world_engine.py), and the adaptive bench.

The bench's claims about adaptive screening are measured on this path, so it is checked here: the executor
answers as the world does, the proposer never offers a verified point, a harmful critic is switched off early
through the engine and a perfect one kept, and the bench script runs end to end on a tiny setting.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from bench_modules import load

from verifyless.builtin import worlds_dir
from verifyless.node import Status
from verifyless.offline.simulated import PRESETS
from verifyless.offline.world_engine import WorldBook, WorldCritic, WorldExecutor, world_run
from verifyless.offline.worlds import load_worlds, make_program, world_paths
from verifyless.screen.adaptive import AdaptiveScreener
from verifyless.screen.baselines import RandomScreener
from verifyless.store import RunStore
from verifyless.task.loader import load_task


@pytest.fixture(scope="module")
def diabetes():
    world = load_worlds(world_paths(worlds_dir()))["diabetes"]
    return world, load_task(world.task)


def test_the_executor_answers_each_program_with_its_world_outcome(diabetes):
    world, task = diabetes
    book = WorldBook(world, task)
    executor = WorldExecutor(book)
    for i in (world.baseline_index, 5, 17):
        v = asyncio.run(executor.verify(task, make_program(task, world.points[i].assignment)))
        point = world.points[i]
        assert (v.status == Status.OK) == (point.status == "ok") and v.score == (point.score if v.score else None)
        assert i in book.verified
    stranger = asyncio.run(executor.verify(task, "print('not a point')\n"))
    assert stranger.status == Status.FAILED and "no point of the world" in stranger.reason


def test_a_random_run_pays_distinct_points_and_never_reproposes_a_verified_one(diabetes, tmp_path):
    world, task = diabetes
    book = WorldBook(world, task)
    run = world_run(world, task, RandomScreener(), book=book, budget=16, seed=3, store=tmp_path / "w.db")
    with RunStore(tmp_path / "w.db") as store:
        programs = [e.payload.get("program_hash") for e in store.events(run.run_id, kinds=["verification"])]
    assert run.verifications == 16 == len(set(programs)) == len(book.verified)
    assert all(a <= b for a, b in zip(run.best, run.best[1:], strict=False))  # best so far never falls
    assert run.state is None and math.isfinite(run.final)


@pytest.mark.parametrize(("preset", "state"), [("inverted_perfect", "off"), ("inverted", "off"), ("perfect", "on")])
def test_adaptive_screening_through_the_engine_catches_a_harmful_critic_and_keeps_a_good_one(diabetes, preset, state):
    world, task = diabetes
    book = WorldBook(world, task)
    screener = AdaptiveScreener(WorldCritic(PRESETS[preset], book, seed=0))
    run = world_run(world, task, screener, book=book, budget=24, seed=0)
    assert run.state == state, screener.reason
    assert run.decided_at is not None and run.decided_at <= 12, screener.reason
    assert run.canaries > 0 and run.verifications == 24


def test_the_adaptive_bench_runs_the_engine_path_and_checks_its_targets(capsys):
    argv = ["--seeds", "2", "--budgets", "12", "--levels", "inverted 100", "perfect 100", "--worlds", "diabetes"]
    cells = load("adaptive").main(argv)
    out = capsys.readouterr().out
    assert "the engine path" in out and "| inverted 100 |" in out and "| perfect 100 |" in out
    inverted, perfect = cells
    assert inverted["off"] == 1.0 and inverted["on"] == 0.0 and perfect["off"] == 0.0
    assert inverted["target"] in ("ok",) or inverted["target"].startswith("MISSED")
    assert perfect["adaptive"]["final"] >= inverted["fixed"]["final"]  # a perfect critic beats an inverted one
