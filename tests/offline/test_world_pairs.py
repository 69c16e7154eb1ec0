"""The pool-world critic data builder, and bench/critic_learning.py --quick on the tiny Llama.

The data tests check the builder against the one label rule (``outcome.label3``), the class balance and the
world split; the smoke run checks the result's shape (a curve point per step, a CI per point, one search row
per arm on the same seeds), never whether the tiny model learned: it is random and trained for eight steps.
"""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

from verifyless.offline.replay import hamming
from verifyless.offline.world_pairs import balance, by_world, compact_prompt, world_rows
from verifyless.offline.worlds import synthetic_world
from verifyless.outcome import THREE, label3, pair_outcome

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_critic_learning", BENCH / "critic_learning.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def worlds():
    return {w.task: w for w in (synthetic_world(seed=s) for s in (0, 1, 2))}


def test_rows_carry_label3_of_the_pair_and_stay_within_max_moves(worlds):
    world = next(iter(worlds.values()))
    rows = world_rows(world, {}, max_moves=2, tie=0.05)
    assert rows, "a synthetic world has pairs within two moves"
    for r in rows:
        outcome = pair_outcome(str(r.parent), str(r.child), world.fitness(r.child), world.fitness(r.parent), tie=0.05)
        assert r.label == label3(outcome)
        assert 1 <= r.moves == hamming(world, r.parent, r.child) <= 2
        assert world.fitness(r.parent) is not None and world.fitness(r.child) is not None


def test_prompt_names_each_changed_dimension_and_no_score(worlds):
    world = next(iter(worlds.values()))
    row = world_rows(world, {}, max_moves=1)[0]
    changed = [
        d for d in world.dimensions if world.points[row.parent].assignment[d] != world.points[row.child].assignment[d]
    ]
    assert len(changed) == 1 and f"- {changed[0]}:" in row.prompt
    assert str(world.points[row.child].score) not in row.prompt
    descriptions = {changed[0]: {world.points[row.child].assignment[changed[0]]: "one two three four five"}}
    assert "(one two)" in compact_prompt(world, descriptions, row.parent, row.child, words=2)


def test_balance_gives_equal_classes(worlds):
    rows = world_rows(next(iter(worlds.values())), {}, max_moves=3, tie=0.05)
    counts = Counter(r.label for r in balance(rows, seed=1))
    assert set(counts) == set(THREE) and len(set(counts.values())) == 1
    assert Counter(r.label for r in balance(rows, seed=1, per_label=2)) == dict.fromkeys(THREE, 2)


def test_split_by_world_keeps_the_bench_world_out_of_training(worlds):
    names = list(worlds)
    data = by_world(worlds, {}, names[0], tie=0.05, max_moves=3)
    assert data.bench_world == names[0] and set(data.train_worlds) == set(names[1:])
    assert {r.world for r in data.bench} == {names[0]}
    assert {r.world for r in data.train} <= set(names[1:]) and data.train


def test_rank_auc_is_one_when_improve_rows_rank_above_lose_rows():
    module = load_bench()
    rows = [module.CriticRow("w", 0, i, 1, 0.0, label, "") for i, label in enumerate(["improve", "lose", "tie"])]
    assert module.rank_auc([2.0, 0.0, 1.0], rows) == 1.0
    assert module.rank_auc([0.0, 2.0, 1.0], rows) == 0.0
    assert module.rank_auc([1.0, 1.0, 1.0], rows) == 0.5


@pytest.mark.slow  # a bench script end to end; the data builder is tested above, training in train/test_sft.py
def test_quick_run_reports_a_curve_with_cis_and_a_matched_search(tmp_path, capsys):
    result = load_bench().main(["--quick", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| step |" in out and "| critic (trained) |" in out
    assert result["labels_match"] is True
    assert [p["step"] for p in result["curve"]] == [0, 4, 8]
    first = result["curve"][0]
    assert first["diff"] == 0.0, "step 0 is the base model itself (LoRA B starts at zero)"
    for p in result["curve"]:
        assert 0.0 <= p["dir3"] <= 1.0 and sum(p["said"].values()) == result["bench_rows"]
        assert p["lo"] is None or p["lo"] <= p["diff"] <= p["hi"]
        assert 0.0 <= p["auc"] <= 1.0
    assert result["bench_rows"] % 3 == 0 and result["train_rows"] % 3 == 0
    assert [r["arm"] for r in result["search"]] == ["random", "critic (base)", "critic (trained)"]
    for r in result["search"]:
        assert r["reached"].endswith("/2") and 0.0 <= r["p_improve"] <= 1.0
    assert result["seconds_per_step"] > 0 and (tmp_path / "result.json").is_file()
