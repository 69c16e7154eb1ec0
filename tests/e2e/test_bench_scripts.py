"""Smoke runs of bench/pipeline.py, bench/scale.py and bench/efficiency.py with --quick.

They check that each script runs end to end and that its table rows exist
with sane values (counts, ranges, orderings that hold by construction), never
timing targets: the machine is shared and its speed varies.
"""

from __future__ import annotations

import math

import pytest
from bench_modules import load


def test_pipeline_quick_reports_both_modes_on_the_same_budget(capsys):
    rows = load("pipeline").main(["--quick"])
    out = capsys.readouterr().out
    assert "| sequential |" in out and "| pipelined |" in out
    seq, pipe = rows
    assert (seq.mode, pipe.mode) == ("sequential", "pipelined")
    for r in rows:
        assert r.verifications == 6 and r.rounds == 5, "both modes must spend the same budget, one per round"
        assert r.busy_s >= 6 * 0.1 * 0.99  # six sleeps of 0.1 s each (a lower bound, whatever the load)
        assert 0.0 < r.utilisation <= 1.0 and r.wall_s >= r.busy_s
        assert r.best_score is not None and r.best_score <= 40  # never worse than the baseline (a = 0)


def test_scale_quick_reports_every_strategy_and_retrieval(capsys):
    (res,) = load("scale").main(["--quick"])
    out = capsys.readouterr().out
    assert "| 1000 |" in out and "hashing" in out
    assert res.n == 1000 and res.events > res.n  # nodes plus verifications, tells and rounds
    for name in ("mcgs", "greedy", "islands"):
        assert 0.0 < res.resume[name] < 60.0
        p50, p95 = res.ask[name]
        assert 0.0 < p50 <= p95
    mem = res.memory["hashing"]
    assert 400 < mem["records"] < 600  # half of the 1000 nodes are verified
    assert 0.0 < mem["p50_ms"] <= mem["p95_ms"]
    assert 50 < res.rss_mb < 4096


def test_scale_restore_rebuilds_every_node(tmp_path):
    scale = load("scale")
    from verifyless.store import RunStore

    with RunStore(tmp_path / "s.db") as store:
        run_id = scale.write_run(store, 200)
    engine, secs, store = scale.restore(tmp_path / "s.db", run_id, "greedy")
    try:
        assert len(engine.state.view) == 200 and not engine.state.staged
        assert engine.state.view.best is not None and engine.state.rounds_done == 50
        assert engine.strategy.ask(engine.state.view, 1)
    finally:
        store.close()


@pytest.mark.slow  # a bench script end to end; the engine paths it drives are tested in engine/test_core.py and e2e/test_screeners.py
def test_efficiency_quick_runs_every_arm_on_the_real_sandbox(capsys, tmp_path):
    from verifyless.store import RunStore

    rows = load("efficiency").main(
        ["--quick", "--arms", "random", "iid", "surrogate", "oracle", "--store", str(tmp_path / "e.db")]
    )
    out = capsys.readouterr().out
    for arm in ("random", "iid", "surrogate", "oracle"):
        assert f"| {arm} |" in out
    assert "| circle_packing |" in out
    assert {r.arm for r in rows} == {"random", "iid", "surrogate", "oracle"}
    for r in rows:
        assert r.task == "circle_packing" and r.verifications == 4  # matched charged budget
        assert 0.0 <= r.score <= 1.0 and math.isfinite(r.score)
        assert r.raw is not None and r.raw >= 1.49  # the final node is at least the baseline (1.5)
    oracle = next(r for r in rows if r.arm == "oracle")
    rand = next(r for r in rows if r.arm == "random")
    assert oracle.peeks > 0  # it looked at candidates it was not charged for
    # Same seed, same first pool: the oracle's round-1 pick is at least as good as random's.
    with RunStore(tmp_path / "e.db") as store:

        def first_pick(run_id):
            (row,) = [
                r
                for r in store.node_rows(run_id)
                if r["round"] == 1 and r["verified_seq"] is not None and r["operator"] != "debug"
            ]
            return -math.inf if row["fitness"] is None else row["fitness"]

        assert first_pick(oracle.run_id) >= first_pick(rand.run_id)
        iid = next(r for r in rows if r.arm == "iid")
        assert {r["parent_id"] for r in store.node_rows(iid.run_id) if r["operator"] == "improve"} == {"root"}


def test_pools_script_refuses_to_overwrite_a_shipped_world_without_out_or_force(capsys, monkeypatch):
    import pytest

    from verifyless.builtin import worlds_dir

    world = worlds_dir() / "diabetes.jsonl"
    before = world.read_bytes()
    pools = load("pools")
    monkeypatch.setattr(pools, "collect_world", lambda *a, **k: pytest.fail("must not collect"))
    with pytest.raises(SystemExit) as info:
        pools.main(["diabetes", "--n", "2"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--out" in err and "--force" in err and str(world.name) in err
    assert world.read_bytes() == before


def test_mcgs_anneal_quick_shows_the_paced_schedules_at_their_floors(capsys):
    assert load("mcgs_anneal").main(["--quick", "--worlds", "diabetes"]) == 0
    out = capsys.readouterr().out
    paced = next(line for line in out.splitlines() if line.startswith("| diabetes | paced |"))
    fixed = next(line for line in out.splitlines() if line.startswith("| diabetes | fixed-100 |"))
    assert paced.rstrip(" |").endswith("0.10, 0.20") and not fixed.rstrip(" |").endswith("0.10, 0.20")
    assert "| all |" in out
