"""Harvest from stored runs (audited screen-outs included) and the critic benchmark over a dataset."""

from __future__ import annotations

import re
from pathlib import Path

from critic_data_rows import row
from typer.testing import CliRunner

from verifyless._cli.app import app
from verifyless.critic_data.dataset import card_data, load_critic_dataset, save_dataset
from verifyless.critic_data.harvest import harvest_runs
from verifyless.model.scripted import ScriptedModel, last_user_text
from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.offline.benchmark import run_critic_bench, write_report
from verifyless.screen.critic import CriticOptions, PointwiseCritic
from verifyless.store import RunStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "scripted"


def _node(store: RunStore, run_id: str, nid: str, parent: str | None, status: str, score: float | None) -> None:
    program = f"x = {nid!r}\n"
    cand = Candidate(
        id=nid,
        parent_id=parent,
        operator=Operator.IMPROVE if parent else Operator.BASELINE,
        idea=Idea(f"idea {nid}"),
        program=program,
        program_hash=content_hash(program),
        summary=f"summary of {nid}",
    )
    store.add_candidate(run_id, cand, status=status)
    if score is not None or status == "failed":
        v = Verification(Status.OK if score is not None else Status.FAILED, score=score)
        store.add_verification(run_id, nid, v, score)


def test_from_runs_takes_every_verified_pair_with_provenance(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with RunStore(db) as st:
        rid = st.create_run("diabetes-like", {"strategy": "greedy"}, seed=0)
        st.append(rid, "brief", {"understanding": "U", "criteria": ["c1", "c2"]})
        _node(st, rid, "root", None, "implemented", 1.0)
        _node(st, rid, "a", "root", "implemented", 1.5)  # chosen and verified
        _node(st, rid, "b", "root", "screened-out", None)  # screened out, never verified: no example
        _node(st, rid, "c", "root", "screened-out", 0.5)  # audited screen-out: verified, so an example
        _node(st, rid, "d", "root", "implemented", None)  # chosen, verification failed: infeasible
        st.add_verification(rid, "d", Verification(Status.FAILED, reason="boom"), None)
        _node(st, rid, "e", "a", "implemented", 1.5)  # a tie with its parent a
    harvest = harvest_runs(RunStore(db), [rid[:10]])
    got = {r["child_id"]: r for r in harvest.rows}
    assert set(got) == {"a", "c", "e"}
    assert (got["a"]["label3"], got["c"]["label3"], got["e"]["label3"]) == ("improve", "lose", "tie")
    assert got["a"]["delta"] == 0.5 and got["c"]["delta"] == -0.5
    assert got["e"]["parent_summary"] == "summary of a" and got["e"]["child_summary"] == "summary of e"
    assert got["a"]["understanding"] == "U" and got["a"]["criteria"] == ["c1", "c2"]
    assert got["a"]["source"] == "run" and got["a"]["run_id"] == rid and got["a"]["example_id"] == f"{rid}/a"
    assert harvest.infeasible == {("diabetes-like", f"{rid}/root"): 1}

    out = tmp_path / "ds"
    result = CliRunner().invoke(
        app, ["data", "from-runs", rid, "--store", str(db), "--out", str(out), "--bench-fraction", "0"]
    )
    assert result.exit_code == 0, result.output
    dd = load_critic_dataset(out)
    assert sorted(dd["sft"]["child_id"]) == ["a", "c", "e"] and len(dd["bench"]) == 0


def test_from_runs_labels_each_run_with_its_own_tie_tolerance(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as st:
        rid = st.create_run("toy", {"tie_tolerance": 0.01}, seed=0)
        _node(st, rid, "root", None, "implemented", 1.0)
        _node(st, rid, "a", "root", "implemented", 1.005)  # a 0.5 % gain: a tie under the run's tolerance
        _node(st, rid, "b", "root", "implemented", 1.02)
        labels = {r["child_id"]: r["label3"] for r in harvest_runs(st, [rid]).rows}
        exact = {r["child_id"]: r["label3"] for r in harvest_runs(st, [rid], tolerance=0.0).rows}
    assert labels == {"a": "tie", "b": "improve"}
    assert exact == {"a": "improve", "b": "improve"}  # an explicit --tie-tolerance overrides the run's


def _critic_model() -> ScriptedModel:
    """Predicts improve/medium for children named win*, lose for the others (k samples alike)."""

    def answer(request) -> str:
        child = re.search(r"(\w+): a changed model", last_user_text(request)).group(1)
        if child.startswith("win"):
            return "Reasoning.\n[IMPROVEMENT] improve --- better\n[WINTIER] medium --- moderate"
        return "Reasoning.\n[IMPROVEMENT] lose --- worse\n[WINTIER] NA --- none"

    return ScriptedModel(function=answer)


def test_critic_bench_metrics_per_stratum(tmp_path: Path) -> None:
    rows = [
        row("toy", "p", "win1", "improve", label5="MediumWin", stratum="sampled"),
        row("toy", "p", "win2", "lose", label5="Lose", stratum="sampled"),
        row("toy", "q", "los1", "lose", label5="Lose", stratum="revised"),
        row("toy", "q", "los2", "improve", label5="BigWin", stratum="guided"),
    ]
    rep = run_critic_bench(rows, PointwiseCritic(_critic_model(), CriticOptions(k=4)))
    all_ = rep.groups["all"]
    assert (all_.improve_accuracy, all_.dir3, all_.ladder5) == (0.5, 0.5, 0.5)
    assert all_.f1 == 0.5  # precision 1/2, recall 1/2
    assert rep.groups["stratum=sampled"].dir3 == 0.5 and rep.groups["stratum=revised"].dir3 == 1.0
    assert rep.groups["stratum=guided"].dir3 == 0.0
    assert [p.k for p in rep.auroc] == [1, 4, 8, 16, 32] and rep.auroc[1].n == 4 and rep.auroc[2].n == 0
    assert rep.routing[0].routed_fraction == 1.0 and rep.routing[-1].routed_fraction == 0.0
    md = write_report(rep, tmp_path / "rep")[0].read_text()
    assert "stratum=guided" in md and "AUROC vs k" in md

    from verifyless.screen.baselines import RandomScreener

    none = run_critic_bench(rows, RandomScreener())
    assert none.no_verdict == 4 and not none.records


def test_bench_critic_command_on_a_dataset(tmp_path: Path) -> None:
    rows = [
        row("toy", "p", f"c{i}", lab, label5=l5, stratum=s)
        for i, (lab, l5, s) in enumerate(
            [("improve", "BigWin", "sampled"), ("lose", "Lose", "revised"), ("tie", "Tie", "guided")]
        )
    ]
    splits = {"sft": [], "grpo": [], "bench": rows}
    ds = save_dataset(splits, tmp_path / "ds", card_data(splits, settings={}))
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app,
        [
            "bench",
            "critic",
            "--dataset",
            str(ds),
            "--screener",
            "critic",
            "--model",
            f"scripted:{EXAMPLES / 'teacher.yaml'}",
            "--option",
            "k=2",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "3 of 3 examples got a verdict" in result.output
    assert "stratum=revised" in (out / "critic_bench.md").read_text()
    empty = save_dataset({"bench": []}, tmp_path / "empty", card_data({}, settings={}))
    result = CliRunner().invoke(app, ["bench", "critic", "--dataset", str(empty), "--screener", "random"])
    assert result.exit_code != 0 and "empty" in str(result.exception)
