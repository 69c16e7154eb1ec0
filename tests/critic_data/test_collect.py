"""Outcome collection on a tiny real task: two stages, improvement-driven pool, budgets, kill -9 and resume."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from verifyless.critic_data.collect import CollectSettings
from verifyless.critic_data.dataset import split_rows
from verifyless.critic_data.harvest import harvest_runs
from verifyless.critic_data.pipeline import CollectWiring, run_collection
from verifyless.ledger import BudgetConfig
from verifyless.store import RunStore

TASK = str(Path(__file__).parents[1] / "data_task")
ROOT = Path(__file__).resolve().parents[2]


def _verifications(store: RunStore, run_id: str) -> Counter[str]:
    return Counter(e.node_id for e in store.events(run_id, kinds=["verification"]))


def _paid(store: RunStore, run_id: str) -> int:
    """Charged verification events (a program already verified in the run is recorded without a charge)."""
    return sum(e.charge is not None for e in store.events(run_id, kinds=["verification"]))


def test_two_stage_collection_records_every_child_and_resume_pays_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    seen: list[tuple[str, dict]] = []
    result = run_collection(TASK, db, CollectSettings(parents=2, children=3), progress=lambda k, d: seen.append((k, d)))
    assert result.stopped == "finished" and result.parents[0] == "root" and len(result.parents) == 2
    with RunStore(db) as st:
        info = st.run(result.run_id)
        assert info.config["kind"] == "data-collect" and info.config["mode"] == "sft" and info.status == "finished"
        nodes = {r["node_id"]: r for r in st.node_rows(result.run_id)}
        pool = [n for n in nodes if n.startswith(("p0c", "p1c"))]
        assert len(pool) == 6
        counts = _verifications(st, result.run_id)
        assert set(counts.values()) == {1}  # nothing verified twice
        assert st.budget(result.run_id).verifications == _paid(st, result.run_id) <= len(counts)
        for nid in result.parents:
            assert nodes[nid]["summary"] and nodes[nid]["score"] is not None  # neutral summary, verified parent
        for nid in pool:
            row = nodes[nid]
            assert row["parent_id"] == ("root" if nid.startswith("p0") else result.parents[1])
            if row["status"] not in ("duplicate", "guard-failed", "parse-error"):
                assert row["summary"] and nid in counts
        rows = harvest_runs(st, [result.run_id]).rows
        assert {r["child_id"] for r in rows} <= set(counts) - {"root"}
        assert all(r["source"] == "collect-sft" and r["understanding"] and r["criteria"] for r in rows)
    stages = [d["stage"] for k, d in seen if k == "stage"]
    assert stages == ["stage 1: evolution", "stage 2: children"]

    again = run_collection(TASK, db, CollectSettings(parents=5, children=9), resume=result.run_id[:12])
    with RunStore(db) as st:
        assert _verifications(st, result.run_id) == counts  # the stored settings win; nothing paid again
    assert again.reused == len(counts) and again.run_id == result.run_id


def test_improvement_driven_pool_moves_to_improving_children_and_balances(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    result = run_collection(TASK, db, CollectSettings(parents=1, children=6, mode="grpo", seed=1))
    with RunStore(db) as st:
        nodes = {r["node_id"]: r for r in st.node_rows(result.run_id)}
        fit = {nid: r["fitness"] for nid, r in nodes.items()}
        chain = list(result.parents)
        assert len(chain) >= 2, f"the pool never moved off the root: {chain}"  # else the checks below are vacuous
        assert all(
            fit[b] > fit[a] for a, b in zip(chain, chain[1:], strict=False)
        )  # each new parent improved on the last
        for nid in chain[1:]:
            assert nodes[nid]["parent_id"] == chain[chain.index(nid) - 1]
        rows = harvest_runs(st, [result.run_id]).rows
    assert rows and all(r["source"] == "collect-grpo" for r in rows)
    splits, report = split_rows(rows, seed=3)
    before, after = report["grpo_balance"]["before"], report["grpo_balance"]["after"]
    present = [c for c, n in before.items() if n]
    smallest = min(before[c] for c in present)
    assert sum(before.values()) == len(rows) and {after[c] for c in present} == {smallest}
    assert len(splits["grpo"]) == smallest * len(present) and report["grpo_balance"]["absent"] == [
        c for c in before if not before[c]
    ]
    assert not splits["sft"] and not splits["bench"]


def test_verification_cap_stops_cleanly(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    result = run_collection(TASK, db, CollectSettings(parents=2, children=4), BudgetConfig(verifications=3))
    assert result.stopped == "budget: verifications"
    with RunStore(db) as st:
        assert st.budget(result.run_id).verifications == 3 and st.run(result.run_id).status == "stopped"


def _count(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=1) as conn:
            return conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'verification'").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_collection_killed_mid_stage_resumes_without_paying_twice(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "verifyless",
        "data",
        "collect",
        TASK,
        "--parents",
        "2",
        "--children",
        "4",
        "--store",
        str(db),
        "--out",
        str(tmp_path / "ds"),
    ]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while _count(db) < 4 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "collection ended before the kill"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with RunStore(db) as st:
        run_id = st.runs()[0].run_id
        before = _verifications(st, run_id)
        # killed while running: readers see the dead writer's run as interrupted (store/reads.py)
        assert st.run(run_id).status == "interrupted" and 4 <= sum(before.values())
    done = subprocess.run(
        cmd[:-4] + ["--store", str(db), "--resume", run_id, "--out", str(tmp_path / "ds")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    with RunStore(db) as st:
        after = _verifications(st, run_id)
        assert set(after.values()) == {1}, after  # every node verified exactly once across the crash
        assert all(after[n] == 1 for n in before)
        assert st.budget(run_id).verifications == _paid(st, run_id)
        assert st.run(run_id).status == "finished"
        nodes = {r["node_id"] for r in st.node_rows(run_id)}
        assert {f"p{i}c{j}" for i in range(2) for j in range(4)} <= nodes
        assert st.rebuild_views(run_id).consistent
    assert (tmp_path / "ds" / "card.json").is_file()


def test_llm_roles_are_recorded_and_token_cap_stops_before_more_llm_work(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    script = ROOT / "examples" / "scripted" / "diabetes.yaml"
    result = run_collection(
        "diabetes",
        db,
        CollectSettings(parents=2, children=2),
        BudgetConfig(verifications=None, tokens=1),
        CollectWiring(models=[f"scripted:{script}"]),
    )
    assert result.stopped == "budget: tokens" and result.verified == 0
    with RunStore(db) as st:
        info = st.run(result.run_id)
        assert info.config["wiring"]["roles"] == "llm" and info.config["wiring"]["models"] == [
            f"default=scripted:{script}"
        ]
        calls = list(st.events(result.run_id, kinds=["llm_call"]))
        assert [e.payload["role"] for e in calls] == ["brief"]
        assert st.budget(result.run_id).tokens_in > 0 and st.budget(result.run_id).verifications == 0


@pytest.mark.slow
def test_collection_verifies_on_ray(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    db = tmp_path / "ray.db"
    result = run_collection(
        TASK, db, CollectSettings(parents=1, children=3), wiring=CollectWiring(executor="ray", workers=2)
    )
    with RunStore(db) as st:
        assert st.run(result.run_id).config["wiring"]["executor"] == "ray"
        counts = _verifications(st, result.run_id)
        assert result.stopped == "finished" and set(counts.values()) == {1} and len(counts) >= 3


def test_an_exhausted_idea_space_ends_the_pool_cleanly(tmp_path: Path) -> None:
    import asyncio

    from verifyless.critic_data.collect import Collector
    from verifyless.executors.local import LocalExecutor
    from verifyless.roles.space import space_roles
    from verifyless.task import load_task
    from verifyless.task.base import IdeaOption, IdeaSpace

    task = load_task(TASK)
    small = IdeaSpace(
        dimensions={"a": (IdeaOption("a1", "sets A to one"), IdeaOption("a2", "sets A to two"))},
        template="{{a}}\nB = 1\nC = 0\n",
        baseline={"a": "a1"},
        fragments={"a": {"a1": "A = 1", "a2": "A = 2"}},
    )
    tiny = task.__class__(**{**task.__dict__, "idea_space": small})
    with RunStore(tmp_path / "x.db") as st:
        result = asyncio.run(
            Collector(
                tiny, space_roles(tiny), LocalExecutor(), st, CollectSettings(parents=1, children=5, mode="grpo")
            ).run()
        )
        assert result.stopped == "finished" and result.parents == ("root", "g0")
        # from g0 (A=2) the only move left is back to A=1, the root's program: recorded, not paid again
        assert _verifications(st, result.run_id) == Counter({"root": 1, "g0": 1, "g1": 1})
        assert st.budget(result.run_id).verifications == 2
        reused = [e.payload for e in st.events(result.run_id, kinds=["verification"]) if e.node_id == "g1"]
        assert reused[0]["reused_from"] == "root" and reused[0]["score"] == 3.0


def test_a_failing_baseline_stops_collection_with_the_engines_diagnosis(tmp_path: Path) -> None:
    import asyncio

    from verifyless.critic_data.collect import Collector
    from verifyless.engine.baseline import BaselineFailed
    from verifyless.executors.local import LocalExecutor
    from verifyless.roles.space import space_roles
    from verifyless.task import load_task

    task = load_task(TASK)
    broken = task.__class__(**{**task.__dict__, "baseline_program": task.baseline_program + "\nraise SystemExit(3)\n"})
    with RunStore(tmp_path / "x.db") as st:
        collector = Collector(broken, space_roles(broken), LocalExecutor(), st, CollectSettings(parents=1, children=2))
        with pytest.raises(BaselineFailed) as stopped:
            asyncio.run(collector.run())
        assert stopped.value.exit_code == 3
        message = str(stopped.value)
        assert "the program itself failed, and data collection needs a working starting solution" in message
        assert "verifyless verify" in message and "allow_failed_baseline" not in message
        assert _verifications(st, collector.run_id) == Counter({"root": 1}), "nothing paid after the baseline"
