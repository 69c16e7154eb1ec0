"""Offline selector replay: synthetic pools with known outcomes, and one real collection on diabetes."""

from __future__ import annotations

import random

import pytest

from verifyless.errors import ConfigError
from verifyless.node import content_hash
from verifyless.offline.pools import (
    PoolCandidate,
    PoolRecord,
    ScoreOracle,
    evaluate_screener,
    load_pools,
    pool_candidates,
    save_pools,
)


def _cand(cid: str, fit: float | None, test: float | None = None, status: str = "ok", program: str | None = None):
    prog = f"# {cid}\n" if program is None else program
    return PoolCandidate(
        id=cid,
        idea=f"idea {cid}",
        status=status,
        program=prog,
        program_hash=content_hash(prog) if prog else "",
        summary=f"child {cid}",
        score=None if fit is None else -fit,
        test_score=None if test is None else -test,
        fitness=fit,
        test_fitness=test,
    )


def _pool(i: int, cands) -> PoolRecord:
    return PoolRecord(
        task="diabetes",
        pool_id=f"syn:{i}",
        step=i,
        parent_id=f"p{i}",
        parent_program="# parent\n",
        parent_summary="the parent",
        parent_score=-1.0,
        parent_fitness=1.0,
        candidates=tuple(cands),
        understanding="regression",
        criteria=("features", "regularisation"),
    )


def _synthetic(n_pools: int = 40, size: int = 6, seed: int = 0) -> list[PoolRecord]:
    rng = random.Random(seed)
    pools = []
    for i in range(n_pools):
        cands = [_cand(f"s{i}c{j}", rng.gauss(0, 1), rng.gauss(0, 1)) for j in range(size)]
        pools.append(_pool(i, cands))
    return pools


def test_save_load_round_trip(tmp_path):
    pools = _synthetic(3, 3)
    path = save_pools(pools, tmp_path / "sub" / "pools.jsonl")
    assert load_pools(path) == pools
    (tmp_path / "bad.jsonl").write_text('{"task": 1}\n')
    with pytest.raises(ConfigError, match="bad.jsonl:1: not a pool record"):
        load_pools(tmp_path / "bad.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ConfigError, match="holds no pools"):
        load_pools(tmp_path / "empty.jsonl")
    with pytest.raises(ConfigError, match="no pool file at"):
        load_pools(tmp_path / "missing.jsonl")


def test_oracle_scores_one_and_anti_oracle_scores_below_zero():
    pools = _synthetic()
    oracle = evaluate_screener(pools, ScoreOracle.from_pools(pools, "validation"), n_boot=200)
    s = oracle.summary
    assert s.n_pools == 40 and s.normalized == pytest.approx(1.0)
    assert s.regret == pytest.approx(0.0) and s.top1 == 1.0 and s.pairwise.accuracy == 1.0
    anti = ScoreOracle({c.id: -c.fitness for p in pools for c in p.candidates}, name="anti")
    bad = evaluate_screener(pools, anti, n_boot=200).summary
    assert bad.normalized < -0.5 and bad.top1 == 0.0 and bad.pairwise.accuracy == 0.0


def test_random_screener_is_zero_in_expectation():
    from verifyless.screen.registry import build_screener

    pools = _synthetic(n_pools=150, size=8, seed=1)
    rep = evaluate_screener(pools, build_screener("random", models={}), n_boot=500, seed=2)
    assert rep.normalized_ci.low < 0.0 < rep.normalized_ci.high
    assert abs(rep.summary.normalized) < 0.15
    assert 0.05 < rep.summary.top1 < 0.25  # 1/8 in expectation
    again = evaluate_screener(pools, build_screener("random", models={}), n_boot=500, seed=2)
    assert again.chosen == rep.chosen  # per-pool seeded generators


def test_test_oracle_beats_validation_oracle_on_test():
    pools = [_pool(0, [_cand("a", 2.0, 0.0), _cand("b", 1.0, 3.0), _cand("c", 0.0, 1.0)])]
    on_test = {
        name: evaluate_screener(pools, ScoreOracle.from_pools(pools, t), target="test", n_boot=50).summary
        for name, t in (("val", "validation"), ("test", "test"))
    }
    assert on_test["test"].normalized == pytest.approx(1.0)
    # validation oracle picks a (test 0.0): mean 4/3, max 3 -> (0 - 4/3) / (3 - 4/3)
    assert on_test["val"].normalized == pytest.approx(-0.8)
    assert ScoreOracle.from_pools(pools, "test").name == "test-oracle"


def test_failures_in_pools():
    pool = _pool(
        0,
        [
            _cand("a", 1.0),
            _cand("b", None, status="failed"),
            _cand("c", 3.0),
            PoolCandidate("d", "never implemented", "guard-failed", reason="fixed region changed"),
        ],
    )
    assert [c.id for c in pool_candidates(pool)] == ["a", "b", "c"]  # d is not screened
    rep = evaluate_screener([pool], ScoreOracle({"b": 10.0}, name="likes-b"), n_boot=50)
    # b crashed: scored as the worst working child (1.0); pool {1, 1, 3}: mean 5/3
    assert rep.chosen["syn:0"] == "b"
    assert rep.summary.pools[0].advantage == pytest.approx(1.0 - 5 / 3)
    assert rep.summary.pools[0].regret == pytest.approx(2.0)


def test_replay_pools_cli(tmp_path):
    from typer.testing import CliRunner

    from verifyless._cli.bench import app

    path = save_pools(_synthetic(10, 4), tmp_path / "pools.jsonl")
    res = CliRunner().invoke(
        app,
        [
            "replay-pools",
            str(path),
            "--screener",
            "random",
            "--screener",
            "validation-oracle",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert res.exit_code == 0, res.output
    md = (tmp_path / "out" / "replay.md").read_text()
    assert "validation-oracle | 10 |" in md and "| random | 10 |" in md


def test_collect_pools_on_diabetes(tmp_path):
    pytest.importorskip("verifyless.roles.space")
    from typer.testing import CliRunner

    from verifyless._cli.bench import app
    from verifyless.store import RunStore

    # Through the CLI (the same function the lead mounts as `verifyless collect-pools`).
    res = CliRunner().invoke(
        app,
        [
            "collect-pools",
            "diabetes",
            "--parents",
            "1",
            "--n",
            "3",
            "--out",
            str(tmp_path / "pools.jsonl"),
            "--store",
            str(tmp_path / "runs.db"),
        ],
    )
    assert res.exit_code == 0, res.output
    pools = load_pools(tmp_path / "pools.jsonl")
    with RunStore(tmp_path / "runs.db") as store:
        run = store.runs()[-1]
        verified = store.budget(run.run_id).verifications
        rows = store.node_rows(run.run_id)
    assert len(pools) == 1
    pool = pools[0]
    assert pool.parent_id == "root" and pool.parent_score == pytest.approx(50.79, abs=0.01)
    assert len(pool.candidates) == 3
    distinct = {c.program_hash for c in pool.candidates if c.implemented}
    assert verified == 1 + len(distinct)  # baseline + each distinct program once
    assert {r["node_id"] for r in rows} >= {"root", *(c.id for c in pool.candidates if c.implemented)}
    for c in pool.candidates:
        if c.status == "ok":
            assert c.fitness == pytest.approx(-c.score) and c.test_score is not None
    rep = evaluate_screener(pools, ScoreOracle.from_pools(pools, "validation"), n_boot=50)
    assert rep.summary.top1 == 1.0 and rep.summary.regret == pytest.approx(0.0)


def test_collect_pools_pays_a_repeated_program_once(tmp_path):
    """The kernel's reuse by program hash: a child identical to an earlier one is read back, not charged."""
    pytest.importorskip("verifyless.roles.space")
    from verifyless.offline.pools import collect_pools
    from verifyless.roles.space import space_roles
    from verifyless.store import RunStore
    from verifyless.task.loader import load_task

    task = load_task("diabetes")
    roles = space_roles(task, 0)

    class Twice:  # proposes its first idea twice
        async def propose(self, ctx, n):
            first = (await roles.proposer.propose(ctx, 1))[0]
            return [first, first]

    twice = roles.__class__(roles.briefer, Twice(), roles.implementer, roles.summarizer)
    with RunStore(tmp_path / "runs.db") as store:
        pools = collect_pools(task, parents=1, n_per_parent=2, store=store, roles=twice)
        run_id = store.runs()[-1].run_id
        reused = [ev for ev in store.events(run_id, kinds=["verification"]) if "reused_from" in ev.payload]
        assert store.budget(run_id).verifications == 2  # the baseline and the one distinct child
    first, second = pools[0].candidates
    assert first.program_hash == second.program_hash and first.score == second.score
    assert [ev.node_id for ev in reused] == [second.id] and reused[0].payload["reused_from"] == first.id


def test_replay_pools_finds_a_folder_task_by_its_recorded_folder_or_by_task(tmp_path):
    """Issue 46 item 10: pools collected from a task folder (not a built-in name) are replayable."""
    import dataclasses
    import shutil

    from typer.testing import CliRunner

    from verifyless._cli.bench import app
    from verifyless.task import load_task

    folder = tmp_path / "my_diabetes"
    shutil.copytree(load_task("diabetes").root, folder)
    (folder / "task.yaml").write_text((folder / "task.yaml").read_text().replace("name: diabetes", "name: my_diabetes"))
    pools = [dataclasses.replace(p, task="my_diabetes", task_folder=str(folder)) for p in _synthetic(4, 3)]
    path = save_pools(pools, tmp_path / "pools.jsonl")
    runner = CliRunner()
    recorded = runner.invoke(app, ["replay-pools", str(path), "--screener", "random"])
    assert recorded.exit_code == 0, recorded.output
    moved = tmp_path / "moved"
    folder.rename(moved)
    gone = runner.invoke(app, ["replay-pools", str(path), "--screener", "random"])
    assert gone.exit_code != 0 and "name its folder with --task" in str(gone.exception or gone.output)
    named = runner.invoke(app, ["replay-pools", str(path), "--screener", "random", "--task", str(moved)])
    assert named.exit_code == 0, named.output
