"""Issue 45: the default screener learns as it goes. A new run of a task warm-starts ``critic-rm`` from the store's
earlier runs of that task (recorded in the run, reused by a resume after kill -9 and by a replay), refits on its own
paid outcomes on a fixed schedule, and another task's runs or heads are never used without being forced.

Real parts: the SQLite store, the local sandbox running ``tests/data_task`` (score = 2A + B - C), the engine and
real logistic fits; the text encoder is the package's ``hashing`` one (conftest), the same code path as MiniLM.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from data_world import DATA_TASK, data_task_world

from verifyless._cli.show import show_data
from verifyless.config import RunConfig, load_config, stored_config
from verifyless.engine.replay import replay_run
from verifyless.errors import ConfigError
from verifyless.outcome import Outcome
from verifyless.report.render import write_report
from verifyless.report.views.learned import learned_critic_line
from verifyless.screen.reward import COLD, RewardModelCritic, RewardModelOptions, learned_critic, refit_points
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.task.identity import same_task
from verifyless.wiring import build_engine


def config(store: Path, task: Path = DATA_TASK, seed: int = 0, budget: int = 10, *extra: str) -> RunConfig:
    """A short greedy run of ``task`` with the default screener (adaptive around critic-rm)."""
    return load_config(
        overrides=[
            f"task={task}",
            "strategy.name=greedy",
            f"budget.verifications={budget}",
            "engine.candidates=4",
            f"seed={seed}",
            f"store={store}",
            *extra,
        ]
    )


EARLIER = "screener.options.options.gate=always"  # a first run that ranks from its first head (and audits)


def run(cfg: RunConfig, run_id: str | None = None) -> tuple[str, list[tuple[str, dict]]]:
    """Run (or resume) ``cfg``; the run id and what the composition root said (progress events)."""
    said: list[tuple[str, dict]] = []
    with RunStore(cfg.store) as store:
        engine = build_engine(cfg, store, progress=lambda kind, data: said.append((kind, data)))
        try:
            result = asyncio.run(engine.run(run_id))
        finally:
            engine.executor.close()
    return result.run_id, said


def warm_of(store: RunStore, run_id: str) -> tuple[dict, list[dict]]:
    """The inner critic-rm options the run stored, and its ``warm_start`` events."""
    inner = stored_config(store, run_id)["screener"]["options"]["options"]
    return inner, [e.payload for e in store.events(run_id, kinds=["warm_start"])]


def tags(store: RunStore, run_id: str) -> set[str]:
    """The head tags the run's screenings recorded (``cold`` before a head existed)."""
    found = set()
    for e in store.events(run_id, kinds=["screening"]):
        for ev in e.payload["evidence"].values():
            if "weights" in (ev.get("detail") or {}):
                found.add(ev["detail"]["weights"])
    return found


def copy_task(tmp_path: Path, name: str, baseline_a: str | None = None) -> Path:
    """``data_task`` copied under another folder name (another task), or with another baseline program (A = 2)."""
    folder = tmp_path / "tasks" / name
    shutil.copytree(DATA_TASK, folder)
    if baseline_a is not None:
        program, spec = folder / "initial_program.py", folder / "verifyless.yaml"
        program.write_text(program.read_text().replace("A = 1", f"A = {baseline_a}"))
        spec.write_text(spec.read_text().replace("baseline: {a: a1", f"baseline: {{a: a{baseline_a}"))
    return folder


def test_a_second_run_warm_starts_from_the_first_and_records_the_tag_and_the_pairs(tmp_path):
    db = tmp_path / "runs.db"
    first, said_first = run(config(db, DATA_TASK, 0, 12, EARLIER))
    second, said = run(config(db, seed=1))
    with RunStore(db) as store:
        inner, events = warm_of(store, first)
        assert inner["warm"] == COLD and not events  # nothing to start from
        assert any("no earlier run of data_task" in d.get("line", "") for k, d in said_first if k == "warm_start")
        inner, events = warm_of(store, second)
        (event,) = events
        assert inner["warm"] == event["blob"] and event["runs"] == [first]
        assert event["tag"].startswith("warm@") and event["pairs"]
        assert {p["run_id"] for p in event["pairs"]} == {first}
        assert {p["label"] for p in event["pairs"]} <= {"improve", "tie", "lose"}
        line = next(d["line"] for k, d in said if k == "warm_start")
        assert line.startswith(f"warm start: critic-rm from 1 earlier run, {len(event['pairs'])} pairs, ")
        assert "warning: only" in line  # a dozen verifications make far fewer pairs than a head needs
        assert {t.split("+")[0] for t in tags(store, second)} == {event["tag"]}  # every screening used it
        shown = show_data(store, second, 3)["learned_critic"]
        assert show_data(store, first, 3)["learned_critic"]["start"]["tag"] == COLD
        html = write_report(store, second, tmp_path / "report", figures=False).html.read_text()
    assert 'id="learned-critic"' in html and "warm start: critic-rm from 1 earlier run" in html  # report + dashboard
    assert shown["start"]["tag"] == event["tag"] and shown["pairs"] == len(event["pairs"])
    assert shown["heads"][0] == event["tag"] and shown["pairwise"] is not None  # the audit's live pairwise
    assert learned_critic_line(shown).startswith("learned critic: warm start: critic-rm from 1 earlier run")


def test_a_run_of_another_task_or_another_baseline_does_not_pick_it_up_and_warm_start_false_turns_it_off(tmp_path):
    db = tmp_path / "runs.db"
    run(config(db, DATA_TASK, 0, 12, EARLIER))
    other = copy_task(tmp_path, "other_task")
    changed = copy_task(tmp_path / "b", "data_task", baseline_a="2")
    off = run(config(db, DATA_TASK, 2, 10, "screener.warm_start=false"))[0]
    with RunStore(db) as store:
        runs = store.runs()
        assert [same_task(store, r, load_task(str(other))) for r in runs] == [False, False]
        assert [same_task(store, r, load_task(str(changed))) for r in runs] == [False, False]
        assert [same_task(store, r, load_task(str(DATA_TASK))) for r in runs] == [True, True]
    ids = [run(config(db, task, 3))[0] for task in (other, changed)]
    with RunStore(db) as store:
        for run_id in [*ids, off]:
            inner, events = warm_of(store, run_id)
            assert inner["warm"] == COLD and not events


KILL_SCRIPT = """
import asyncio, sys
sys.path[:0] = [{tests!r}, {tests!r} + "/../support"]
from test_reward_warm_start import config, run
run(config({db!r}, seed=1, budget=60))
"""


def test_a_resume_after_kill_9_reuses_the_recorded_head_even_when_the_store_has_grown(tmp_path):
    db = tmp_path / "runs.db"
    run(config(db, DATA_TASK, 0, 12, EARLIER))
    script = tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT.format(tests=str(Path(__file__).parent), db=str(db)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline, paid = time.monotonic() + 120, 0
    with RunStore(db) as probe:
        while time.monotonic() < deadline and proc.poll() is None and paid < 6:
            runs = probe.runs()
            paid = probe.budget(runs[1].run_id).verifications if len(runs) > 1 else 0
            time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL and paid >= 6, (proc.stderr.read() if proc.stderr else b"")[-2000:]
    with RunStore(db) as store:
        killed = store.runs()[1].run_id
        assert store.budget(killed).verifications < 60
        before, (event,) = warm_of(store, killed)
    run(config(db, seed=2, budget=12))  # the store now holds another earlier run: a new fit would differ
    with RunStore(db) as store:
        cfg = RunConfig.model_validate(stored_config(store, killed))
        engine = build_engine(cfg, store)
        critic = learned_critic(engine.screener)
        engine.executor.close()
        assert critic is not None and critic.warm is not None and critic.base is not None
        assert critic.base.tag == event["tag"] and critic.warm.digest == before["warm"]
    resumed, _ = run(cfg, killed)
    with RunStore(db) as store:
        after, events = warm_of(store, killed)
        assert resumed == killed and after == before and len(events) == 1  # recorded once, reused
        assert store.run(killed).status == "finished" and store.budget(killed).verifications > paid
        assert {t.split("+")[0] for t in tags(store, killed)} == {event["tag"]}


def outcome(i: int, label: str) -> Outcome:
    parent, child = 1.0, {"improve": 2.0, "tie": 1.0, "lose": 0.5}[label]
    return Outcome(
        "p",
        f"c{i}",
        "ok",
        parent,
        child,
        parent,
        child,
        True,
        parent_summary="A is one. B is one.",
        child_summary=f"A is {'two' if label == 'improve' else 'zero' if label == 'lose' else 'one'}. B is one. n{i}.",
    )


def test_the_refit_schedule_is_fixed_by_the_pairs_told_so_two_critics_told_the_same_fit_the_same_heads():
    assert refit_points(4, 30) == [4, 6, 8, 10, 12, 15, 18, 22, 27]
    told = [outcome(i, ("improve", "lose", "tie")[i % 3]) for i in range(20)]
    one, two = (
        RewardModelCritic(RewardModelOptions(encoder="hashing")),
        RewardModelCritic(RewardModelOptions(encoder="hashing")),
    )
    assert one.current() is None  # cold
    for i, o in enumerate(told):
        one.observe(o)
        if i % 3 == 0:
            one.current()  # screened now and then (a live run) ...
    for o in told:
        two.observe(o)  # ... or told everything first (a resume)
    a, b = one.current(), two.current()
    assert a is not None and b is not None and a.tag == b.tag == f"{COLD}+18"
    assert np.array_equal(a.coef, b.coef) and np.array_equal(a.intercept, b.intercept)
    # a fit happens at a screening, on the pairs up to the last point passed (screened after 1, 4, 7, ... pairs)
    assert [r["own"] for r in one.refits] == [4, 6, 10, 12, 15, 18] and [r["own"] for r in two.refits] == [18]
    probs = a.probs(one.featurizer.transform([("A is one. B is one.", "A is two. B is one. n99.")]))
    assert int(np.argmax(probs[0])) == 0  # it learnt that A two improves


def test_replay_of_a_warm_started_run_that_refits_is_exact(tmp_path):
    db = tmp_path / "runs.db"
    run(config(db, DATA_TASK, 0, 12, EARLIER))
    second, _ = run(config(db, seed=1, budget=16))
    with RunStore(db) as store:
        assert any("+" in t for t in tags(store, second))  # it refitted within the run
        report = asyncio.run(replay_run(store, second, build=build_engine))
    assert report.equal, report.differences


def test_a_head_of_another_task_is_refused_unless_forced(tmp_path):
    from verifyless.screen.registry import SCREENERS, build_screener
    from verifyless.task.identity import identity_of
    from verifyless.train.reward import HeadSettings, train_from_store

    HASHING = HeadSettings(encoder="hashing", C=1.0)

    db = tmp_path / "runs.db"
    run(config(db, DATA_TASK, 0, 12, EARLIER))
    run(config(db, seed=1, budget=12))
    with RunStore(db) as store:
        identity = identity_of(load_task(str(DATA_TASK))).to_dict()
        train_from_store(store, str(DATA_TASK), tmp_path / "rm", settings=HASHING, task_identity=identity)
    other = load_task(str(copy_task(tmp_path, "other_task")))
    options = {"path": str(tmp_path / "rm")}
    with pytest.raises(ConfigError, match="trained on task 'data_task', not 'other_task'.*force=true"):
        build_screener("critic-rm", models={}, options=SCREENERS.validate("critic-rm", options), task=other)
    forced = SCREENERS.validate("critic-rm", {**options, "force": True})
    assert build_screener("critic-rm", models={}, options=forced, task=other) is not None
    same = build_screener(
        "critic-rm", models={}, options=SCREENERS.validate("critic-rm", options), task=load_task(str(DATA_TASK))
    )
    assert same is not None


def train_cli(db: Path, out: Path, *args: str):
    from typer.testing import CliRunner

    from verifyless._cli.app import app

    argv = ["train", "critic-rm", str(DATA_TASK), "--store", str(db), "--out", str(out), "--encoder", "hashing"]
    return CliRunner().invoke(app, [*argv, *args])


def test_train_critic_rm_warns_on_few_pairs_and_ends_with_a_verdict(tmp_path):
    db = tmp_path / "runs.db"
    run(config(db, DATA_TASK, 0, 24, "screener.name=random"))
    result = train_cli(db, tmp_path / "rm")
    assert result.exit_code == 0, result.output
    pairs = int(result.output.split(" pairs from 1 runs")[0].rsplit("(", 1)[1])
    assert pairs < 20 and f"warning: only {pairs} pairs: fewer than 20" in result.output
    verdict_line = next(x for x in result.output.splitlines() if x.startswith("verdict: "))
    assert verdict_line.startswith(("verdict: helps", "verdict: no better than random", "verdict: too little data"))


def test_train_critic_rm_refuses_another_tasks_runs_unless_forced_and_says_when_its_head_is_worse_than_random(tmp_path):
    inverted = copy_task(tmp_path / "inv", "data_task")  # the same name, but its program scores -(2A + B - C)
    program = inverted / "initial_program.py"
    program.write_text(program.read_text().replace("return 2 * A + B - C", "return -(2 * A + B - C)"))
    db = tmp_path / "runs.db"
    theirs = run(config(db, inverted, 0, 16, "screener.name=random"))[0]
    ours = run(config(db, DATA_TASK, 1, 16, "screener.name=random"))[0]
    refused = train_cli(db, tmp_path / "rm", "--runs", f"{theirs},{ours}")
    assert refused.exit_code != 0 and "not runs of task 'data_task'" in str(refused.exception)
    assert "--force" in str(refused.exception)
    plain = train_cli(db, tmp_path / "rm")  # without --runs: only this task's runs, by identity not by name
    assert plain.exit_code == 0 and "pairs from 1 runs" in plain.output, plain.output
    forced = train_cli(db, tmp_path / "rm", "--runs", f"{theirs},{ours}", "--force")
    assert forced.exit_code == 0, forced.output
    line = next(x for x in forced.output.splitlines() if x.startswith("verdict: "))
    assert line.startswith("verdict: no better than random") and "worse than random on its held-out pairs" in line


def test_the_demo_comparison_computes_its_verdict_from_the_runs(tmp_path):
    from verifyless._cli.demo import WORLD_ARMS, demo_comparison

    world, task = data_task_world(flat=True)  # nothing to gain: every seed ties random
    flat = demo_comparison(world, task, budget=8, candidates=4, seeds=6, encoder="hashing")
    tied = flat.rows[WORLD_ARMS[1]]
    assert tied.p_beat == (0.5, 0.5, 0.5) and tied.ties == 1.0 and tied.margin == (0.0, 0.0, 0.0)
    assert flat.verdict.startswith("No clear win for screening here. Won: nothing beyond noise")
    assert "the 100% of seeds that tied counted as half a win" in flat.verdict
    world, task = data_task_world()  # A two or three is a big win, a negative C a loss: easy to learn
    steep = demo_comparison(world, task, budget=8, candidates=4, seeds=12, encoder="hashing")
    warmed, oracle = steep.rows[WORLD_ARMS[1]], steep.rows[WORLD_ARMS[2]]
    assert steep.warm_line.startswith("warm start: critic-rm from 2 earlier runs")
    assert oracle.p_beat is not None and oracle.p_beat[1] > 0.5  # the ceiling beats random here
    p, margin, saved = warmed.p_beat, warmed.margin, warmed.saved
    assert p is not None and margin is not None and saved is not None
    expected = (
        "Screening LOSES"
        if margin[2] < 0
        else "Screening wins here"
        if margin[1] > 0
        else "Screening is faster here, not better"
        if saved[1] > 0
        else "Screening is slower"
        if saved[2] < 0
        else "No clear win"
    )
    assert steep.verdict.startswith(expected) and f"{p[0]:.2f} [{p[1]:.2f}, {p[2]:.2f}]" in steep.verdict
    assert f"(margin {margin[0]:+.3f} [{margin[1]:+.3f}, {margin[2]:+.3f}])" in steep.verdict


def test_changed_data_under_the_same_name_is_another_task_by_its_fingerprint(tmp_path):
    """Same name, same baseline program, other evaluator bytes: the fingerprint tells them apart (issue 45 + 46)."""
    db = tmp_path / "runs.db"
    run(config(db, DATA_TASK, 0, 12, EARLIER))
    changed = copy_task(tmp_path / "c", "data_task")
    evaluator = changed / "evaluator.py"
    evaluator.write_text(evaluator.read_text() + "\n# scored differently from now on\n")
    with RunStore(db) as store:
        (first,) = store.runs()
        assert same_task(store, first, load_task(str(DATA_TASK)))
        assert not same_task(store, first, load_task(str(changed)))
