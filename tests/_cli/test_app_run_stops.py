"""How a run stops (issue #25, defects 2-5): a broken evaluator, Ctrl-C, replies that never parse, resume.

Each stop has a documented exit code and a message that says what to do next.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_signals import with_default_sigint

ROOT = Path(__file__).resolve().parents[2]
SCRIPTED = f"roles.models.default=scripted:{ROOT / 'examples/scripted/diabetes.yaml'}"
PROGRAM = "# EVOLVE-BLOCK-START\ndef f():\n    return 1.0\n# EVOLVE-BLOCK-END\n"
GOOD_EVALUATOR = (
    "import importlib.util\n"
    "def evaluate(program_path):\n"
    "    spec = importlib.util.spec_from_file_location('p', program_path)\n"
    "    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
    "    return {'combined_score': m.f()}\n"
)


def cli(*args: str, timeout: int = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "verifyless", *args], capture_output=True, text=True, timeout=timeout)


def openevolve_task(folder: Path, evaluator: str, program: str = PROGRAM) -> Path:
    folder.mkdir()
    (folder / "initial_program.py").write_text(program)
    (folder / "evaluator.py").write_text(evaluator)
    return folder


def _events(store: Path) -> int:
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]


def verifications(store: Path) -> int:
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT COUNT(*) FROM ledger WHERE verifications > 0").fetchone()[0]


@pytest.mark.parametrize(
    "evaluator, error",
    [
        ("import no_such_module_anywhere\ndef evaluate(p):\n    return {'combined_score': 1.0}\n", "No module named"),
        pytest.param(  # the same stop; this evaluator's failure is classified by the verify test below
            "def evaluate(p):\n    return 0.5\n", "returned float", marks=pytest.mark.slow
        ),
    ],
)
def test_a_broken_evaluator_stops_the_run_with_exit_3_after_one_verification(tmp_path, evaluator, error):
    task = openevolve_task(tmp_path / "broken", evaluator)
    store = tmp_path / "s.db"
    out = cli("run", str(task), "--budget", "5", "--quiet", "--store", str(store), "roles.kind=llm", SCRIPTED)
    assert out.returncode == 3, out.stdout + out.stderr
    assert error in out.stderr and f"verifyless verify {task}" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr.split("last lines of its stderr")[0]
    assert verifications(store) == 1
    listing = json.loads(cli("runs", "--store", str(store), "--json").stdout)
    assert listing[0]["status"] == "failed"
    shown = cli("show", listing[0]["run_id"], "--store", str(store))
    assert "stopped: BaselineFailed (exit 3)" in shown.stdout and error in shown.stdout, shown.stdout


def _failing_baseline_run(tmp_path: Path) -> tuple[str, ...]:
    task = openevolve_task(tmp_path / "buggy", GOOD_EVALUATOR, PROGRAM.replace("return 1.0", "return 1 / 0"))
    return ("run", str(task), "--budget", "2", "--quiet", "--store", str(tmp_path / "s.db"), "roles.kind=llm", SCRIPTED)


def test_a_failing_baseline_program_stops_the_run_and_names_the_override(tmp_path):
    stopped = cli(*_failing_baseline_run(tmp_path))
    assert stopped.returncode == 3 and "engine.allow_failed_baseline=true" in stopped.stderr, stopped.stderr
    assert "ZeroDivisionError" in stopped.stderr


@pytest.mark.slow  # covered by engine/test_core_rooms.py::test_a_repair_never_takes_a_slot_after_the_budget_is_spent
def test_a_failing_baseline_program_runs_on_when_allowed(tmp_path):
    allowed = cli(*_failing_baseline_run(tmp_path), "engine.allow_failed_baseline=true")
    assert allowed.returncode == 0, allowed.stderr


def test_verify_exits_0_on_a_failing_program_unless_strict_and_3_on_a_broken_evaluator(tmp_path):
    buggy = openevolve_task(tmp_path / "buggy", GOOD_EVALUATOR, PROGRAM.replace("return 1.0", "return 1 / 0"))
    assert cli("verify", str(buggy)).returncode == 0
    assert cli("verify", str(buggy), "--strict").returncode == 1
    assert cli("verify", str(buggy), "--json", "--strict").returncode == 1
    broken = openevolve_task(tmp_path / "broken", "def evaluate(p):\n    return 0.5\n")
    assert cli("verify", str(broken)).returncode == 3
    good = openevolve_task(tmp_path / "good", GOOD_EVALUATOR)
    assert cli("verify", str(good), "--strict").returncode == 0


def _start_run(store: Path, budget: int) -> subprocess.Popen[str]:
    """A run in a child that Ctrl-C reaches (SIGINT at its default, even where the test runner ignores it)."""
    return subprocess.Popen(
        with_default_sigint(
            [
                sys.executable,
                "-m",
                "verifyless",
                "run",
                "circle_packing",
                "--budget",
                str(budget),
                "--store",
                str(store),
            ]
            + ["--quiet", "engine.candidates=2", "strategy.name=greedy"]
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_verifications(store: Path, n: int, proc: subprocess.Popen[str], limit: float = 240.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if store.exists() and verifications(store) >= n:
                return
        except sqlite3.Error:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the run never reached {n} verifications")


@pytest.mark.parametrize("presses", [1, 2])
def test_ctrl_c_exits_130_with_a_resume_hint_and_a_consistent_store(tmp_path, presses):
    store = tmp_path / "s.db"
    proc = _start_run(store, 400)
    _wait_for_verifications(store, 2, proc)  # the baseline and a child: a search under way
    for _ in range(presses):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "verifyless run --resume" in err, err
    with sqlite3.connect(store) as conn:
        (status,) = conn.execute("SELECT status FROM runs").fetchone()
    assert status == "interrupted"
    assert cli("show", "2", "--store", str(store)).returncode == 0


class _SilentImplementer:
    """An implementer whose model never writes code: every reply is prose."""

    async def implement(self, task, parent, idea):
        from verifyless.roles.base import Implementation, RoleFailure

        return Implementation(None, RoleFailure("parse-error", "the reply contains no code", raw="I would try it."))

    async def repair(self, task, program, idea, error):
        return await self.implement(task, None, idea)


def test_an_implementer_that_never_writes_code_stops_the_run_with_exit_code_7(tmp_path, caplog):
    import asyncio

    from verifyless.engine.health import stored_role_health
    from verifyless.errors import ParseError
    from verifyless.events import NodeRecorded
    from verifyless.roles.base import Roles
    from verifyless.store import RunStore
    from verifyless.testing import Briefer, Proposer, Summarizer, make_engine

    roles = Roles(Briefer(), Proposer(), _SilentImplementer(), Summarizer())
    with RunStore(tmp_path / "s.db") as store:
        engine = make_engine(store, budget=10, roles=roles, **{"engine.max_unparsed_replies": 6})
        with pytest.raises(ParseError) as stop:
            asyncio.run(engine.run())
        assert stop.value.exit_code == 7
        assert "6 children in a row" in str(stop.value) and "I would try it." in str(stop.value)
        assert "fenced code block" in str(stop.value), "names the expected format"
        warnings = [r.getMessage() for r in caplog.records if "parsed only" in r.getMessage()]
        assert len(warnings) == 1 and "round 1: the role 'implementer'" in warnings[0], (
            "warned once per expansion first"
        )
        run_id = engine.run_id
        assert store.run(run_id).status == "failed"
        nodes = [e.record for e in store.events(run_id, NodeRecorded)]
        assert len(nodes) == 1 + 8, "stopped in round 2, at its second child (4 per round)"
        health = stored_role_health(nodes)
        assert health["implementer"] == {"parsed": 0, "total": 8, "rate": 0.0}
        assert health["proposer"]["rate"] == 1.0


def test_show_lists_the_parse_rate_of_the_child_making_roles(finished_run):
    store, run_id = finished_run.store, finished_run.run_id
    shown = cli("show", run_id, "--store", str(store))
    assert "replies parsed: proposer" in shown.stdout and "implementer" in shown.stdout, shown.stdout
    data = json.loads(cli("show", run_id, "--store", str(store), "--json").stdout)
    assert set(data["role_health"]) == {"proposer", "implementer"}


@pytest.mark.slow  # covered by engine/test_core.py's resume after an interruption, _cli/test_app.py's resume + replay, Ctrl-C above
def test_an_interrupted_run_resumes_where_it_stopped_and_replays_identically(tmp_path):
    store = tmp_path / "s.db"
    proc = _start_run(store, 24)
    _wait_for_verifications(store, 4, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    run_id = err.split("--resume ")[1].split()[0]
    paid = verifications(store)
    resumed = cli("run", "--resume", run_id, "--store", str(store))
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming at round" in resumed.stdout and f": {paid} of 24 verifications paid" in resumed.stdout
    assert verifications(store) == 24
    replayed = cli("replay", run_id, "--store", str(store))
    assert replayed.returncode == 0 and "identical" in replayed.stdout, replayed.stdout + replayed.stderr


def test_resume_of_a_finished_run_says_so_at_once_and_the_raised_cap_is_shown(finished_copy):
    store, run_id = finished_copy.store, finished_copy.run_id
    events_before = _events(store)
    again = cli("run", "--resume", run_id, "--store", str(store))
    assert again.returncode == 0 and "is finished" in again.stdout and "--budget N" in again.stdout, again.stdout
    assert "resuming at round" not in again.stdout and _events(store) == events_before, "at once: nothing ran"
    assert verifications(store) == 3
    with sqlite3.connect(store) as conn:
        assert conn.execute("SELECT COUNT(*) FROM events WHERE kind = 'run_status'").fetchone()[0] == 2
    more = cli("run", "--resume", run_id, "--store", str(store), "--budget", "4")
    assert more.returncode == 0, more.stderr
    assert "resuming at round" in more.stdout and ": 3 of 4 verifications paid" in more.stdout, more.stdout
    from verifyless.report.views.runs import runs_list
    from verifyless.store import RunStore

    with RunStore(store) as st:
        (row,) = runs_list(st)
        assert (row.verifications, row.cap) == (4, 4), "the cap in force, not the first config's"
        assert st.run(run_id).config["budget"]["verifications"] == 4


@pytest.mark.slow  # covered by store/test_sqlite.py's run whose writer died reads as interrupted (the same reader code)
def test_runs_shows_a_run_whose_process_was_killed_as_interrupted(tmp_path):
    store = tmp_path / "s.db"
    proc = _start_run(store, 400)
    _wait_for_verifications(store, 2, proc)
    proc.kill()
    proc.wait(timeout=30)
    (row,) = json.loads(cli("runs", "--store", str(store), "--json").stdout)
    assert row["status"] == "interrupted"
    with sqlite3.connect(store) as conn:
        (stored,) = conn.execute("SELECT status FROM runs").fetchone()
    assert stored == "running", "the stored row is left as the killed process wrote it; readers check its pid"


def test_replay_exits_9_when_a_decision_differs(tmp_path):
    import shutil

    task = tmp_path / "circle"
    shutil.copytree(ROOT / "tasks" / "circle_packing", task)
    store = str(tmp_path / "s.db")
    out = cli("run", str(task), "--budget", "2", "--quiet", "--store", store, "engine.candidates=2")
    assert out.returncode == 0, out.stderr
    run_id = out.stdout.split("verifyless show ")[1].split()[0]
    program = task / "initial_program.py"
    program.write_text(program.read_text() + "\n# changed after the run\n")
    refused = cli("replay", run_id, "--store", store)  # the task's fingerprint names the change first (exit 3)
    assert refused.returncode == 3 and "(program)" in refused.stderr, refused.stdout + refused.stderr
    replayed = cli("replay", run_id, "--store", store, "--allow-changed-task")
    assert replayed.returncode == 9 and "never verified" in replayed.stderr, replayed.stdout + replayed.stderr
