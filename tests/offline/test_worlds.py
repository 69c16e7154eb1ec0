"""Pool worlds: a real (tiny) collection through the sandboxed verifier, and replays on synthetic worlds."""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import pytest

from verifyless.offline.replay import OracleArm, RandomArm, draw_pool, replay_many, replay_run
from verifyless.offline.worlds import collect_world, load_world, synthetic_world, world_best
from verifyless.screen.surrogate import SurrogateOptions, SurrogateScreener

PROGRAM = """import argparse
from pathlib import Path

# EVOLVE-BLOCK-START
A = 1
B = 1
# EVOLVE-BLOCK-END

p = argparse.ArgumentParser()
p.add_argument("--out")
args = p.parse_args()
Path(args.out, "value.txt").write_text(str(A * 10 + B if A != 3 else "oops"))
"""

SCORER = """from pathlib import Path


def score(outdir, hidden, public):
    value = float(Path(outdir, "value.txt").read_text())
    truth = float(Path(hidden[0]).read_text())
    return {"val_err": abs(value - truth), "test_err": abs(value - truth - 1)}
"""

TASK = """
name: toy_world
description: Pick two digits whose code is close to a hidden number.
statement: statement.md
program: prog.py
metric: {name: val_err, direction: minimize, lower: 0}
metrics: {validation: [val_err], test: [test_err]}
anchors: {floor: 40, reference: 10, bound: 0}
data: {public: [public/readme.txt], hidden: [hidden/truth.txt]}
run: "{python} {program} --out {outdir}"
score: "score.py:score"
limits: {wall_seconds: 30, threads: 1}
idea_space:
  baseline: {a: a1, b: b1}
  dimensions:
    a:
      description: the tens digit
      options: {a1: {description: one, code: 1}, a2: {description: two, code: 2}, a3: {description: three, code: 3}}
    b:
      description: the units digit
      options: {b1: {description: one, code: 1}, b5: {description: five, code: 5}}
  template: |
    A = {{a}}
    B = {{b}}
"""


def _toy_task(root: Path) -> Path:
    folder = root / "toy_world"
    (folder / "public").mkdir(parents=True)
    (folder / "hidden").mkdir()
    (folder / "public" / "readme.txt").write_text("nothing here")
    (folder / "hidden" / "truth.txt").write_text("25")
    (folder / "prog.py").write_text(PROGRAM)
    (folder / "score.py").write_text(SCORER)
    (folder / "statement.md").write_text("Guess the number.")
    (folder / "task.yaml").write_text(textwrap.dedent(TASK))
    return folder


def test_collect_world_verifies_for_real_appends_and_resumes(tmp_path: Path) -> None:
    from verifyless.task import load_task

    task = load_task(_toy_task(tmp_path))
    path = tmp_path / "w" / "toy.jsonl"
    world = collect_world(task, path, n=3, seed=1)
    assert len(world) == 3 and world.points[0].assignment == {"a": "a1", "b": "b1"}
    assert world.baseline_index == 0 and world.fitness(0) == pytest.approx(-14.0)  # |11 - 25|
    head = json.loads(path.read_text().splitlines()[0])
    assert head["kind"] == "world" and head["dimensions"] == {"a": ["a1", "a2", "a3"], "b": ["b1", "b5"]}
    more = collect_world(task, path, n=6, seed=1)  # resumes: only the 3 new points are verified
    assert len(more) == 6 and more.points[:3] == world.points
    assert len({p.key for p in more.points}) == 6
    for p in more.points:
        if p.assignment["a"] == "a3":  # the program writes "oops": a failed candidate, kept as data
            assert p.status != "ok" and p.score is None and p.reason
        else:
            a, b = int(p.assignment["a"][1]), int(p.assignment["b"][1])
            assert p.status == "ok" and p.score == pytest.approx(abs(10 * a + b - 25))
            assert p.test_score == pytest.approx(abs(10 * a + b - 26))
    assert load_world(path) == more
    from verifyless.offline.worlds import load_worlds, merge_worlds

    other = collect_world(task, tmp_path / "w" / "toy.s2.jsonl", n=4, seed=2)
    merged = load_worlds([path, tmp_path / "w" / "toy.s2.jsonl"])["toy_world"]
    assert merged.points[:6] == more.points and len(merged) == len({p.key for p in (*more.points, *other.points)})
    assert merge_worlds([more]) == more
    with pytest.raises(ValueError, match="seed"):
        collect_world(task, path, n=6, seed=2)


def test_load_world_names_a_bad_line(tmp_path: Path) -> None:
    world = synthetic_world(n_points=3)
    path = tmp_path / "w.jsonl"
    head = {
        "kind": "world",
        "task": "t",
        "direction": "maximize",
        "baseline": dict(world.baseline),
        "dimensions": {d: list(o) for d, o in world.dimensions.items()},
    }
    path.write_text(json.dumps(head) + "\n" + json.dumps({"nope": 1}) + "\n")
    with pytest.raises(ValueError, match="w.jsonl:2"):
        load_world(path)


def test_replay_respects_budget_and_never_repeats() -> None:
    world = synthetic_world(n_points=60, seed=3)
    run = replay_run(world, RandomArm(), budget=20, n_candidates=5, seed=0)
    assert len(run.best) == 20 and len(set(run.verified)) == 20 and run.verified[0] == world.baseline_index
    assert all(b2 >= b1 for b1, b2 in zip(run.best, run.best[1:], strict=False))
    assert run.reach(run.final) is not None and run.reach(math.inf) is None
    small = replay_run(world, RandomArm(), budget=500, n_candidates=5, seed=0)
    assert len(small.best) == len(world)  # stops when the world is used up
    again = replay_run(world, RandomArm(), budget=20, n_candidates=5, seed=0)
    assert again == run  # deterministic under the seed


def test_draw_pool_prefers_neighbours_and_excludes_verified() -> None:
    import random

    world = synthetic_world(n_points=200, n_dims=6, seed=4)
    rng = random.Random(0)
    from verifyless.offline.replay import hamming

    near = [hamming(world, 0, i) for _ in range(30) for i in draw_pool(world, 0, {1, 2}, 6, 2.0, rng)]
    far = [hamming(world, 0, i) for _ in range(30) for i in draw_pool(world, 0, {1, 2}, 6, 0.0, rng)]
    assert sum(near) / len(near) < sum(far) / len(far) - 1.0
    assert not {1, 2} & set(draw_pool(world, 0, {1, 2}, 150, 1.0, rng))


def test_oracle_beats_random_and_fitness_surrogate_learns_the_landscape() -> None:
    world = synthetic_world(n_points=150, n_dims=5, seed=5)
    seeds = range(12)

    def mean_final(factory) -> float:
        runs = replay_many(world, factory, seeds=seeds, budget=16, n_candidates=6)
        return sum(r.final for r in runs) / len(runs)

    rand = mean_final(lambda w, s: RandomArm())
    oracle = mean_final(lambda w, s: OracleArm(w))
    surrogate = mean_final(lambda w, s: SurrogateScreener(SurrogateOptions(rank_by="fitness"), seed=s))
    assert oracle <= world_best(world) + 1e-9
    assert oracle > rand + 0.5
    assert surrogate > rand + 0.25 * (oracle - rand)


_COLLECT = """
import sys
from verifyless.offline.worlds import collect_world
from verifyless.store import RunStore
from verifyless.task import load_task

with RunStore(sys.argv[3]) as store:
    collect_world(load_task(sys.argv[1]), sys.argv[2], n=6, seed=1, store=store)
"""


def _charged(store, run_id: str) -> dict[str, int]:
    paid: dict[str, int] = {}
    for ev in store.events(run_id, kinds=["verification"]):
        if ev.charge is not None and ev.charge.verifications:
            paid[str(ev.node_id)] = paid.get(str(ev.node_id), 0) + 1
    return paid


def test_kill_9_mid_collection_then_resume_pays_each_configuration_once(tmp_path: Path) -> None:
    """collect_world pays through the kernel: a verification stored before its line is never paid again."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from verifyless.store import RunStore
    from verifyless.task import load_task

    folder, path, db = _toy_task(tmp_path), tmp_path / "w" / "toy.jsonl", tmp_path / "ledger.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", _COLLECT, str(folder), str(path), str(db)], env=env)
    run_id = "world-toy_world-s1"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            with RunStore(db) as store:
                if any(r.run_id == run_id for r in store.runs()) and sum(_charged(store, run_id).values()) >= 2:
                    break
        time.sleep(0.05)
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")  # as if killed between a stored verification and its line
    with RunStore(db) as store:
        before = _charged(store, run_id)
        assert before and set(before.values()) == {1}
        world = collect_world(load_task(folder), path, n=6, seed=1, store=store)
        after = _charged(store, run_id)
    assert len(world) == 6 and len({p.key for p in world.points}) == 6
    assert set(after.values()) == {1} and len(after) == 6  # each configuration paid once, the killed ones included
    assert {f"w{p.program_hash[:16]}" for p in world.points} == set(after)


def test_world_files_that_are_not_worlds_fail_naming_the_file_and_line(tmp_path):
    from verifyless.offline.fidelity import attach
    from verifyless.offline.worlds import load_world

    empty, other, broken = tmp_path / "empty.jsonl", tmp_path / "other.jsonl", tmp_path / "broken.jsonl"
    empty.write_text("\n")
    other.write_text('{"kind": "level_world"}\n')
    broken.write_text('{"kind": "world"}\n\n{"assignment": \n')
    with pytest.raises(ValueError, match=r"empty\.jsonl: empty world file; collect one"):
        load_world(empty)
    with pytest.raises(ValueError, match=r"other\.jsonl:1: not a world header \(kind='level_world'\)"):
        load_world(other)
    with pytest.raises(ValueError, match=r"broken\.jsonl:3: not a world line"):
        load_world(broken)
    world = synthetic_world(n_points=5)
    with pytest.raises(ValueError, match=r"broken\.jsonl:1: not a level-world header"):
        attach(world, broken)
