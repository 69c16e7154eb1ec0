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

ROOT = Path(__file__).resolve().parents[1]
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


def verifications(store: Path) -> int:
    with sqlite3.connect(store) as conn:
        return conn.execute("SELECT COUNT(*) FROM ledger WHERE verifications > 0").fetchone()[0]


@pytest.mark.parametrize(
    "evaluator, error",
    [
        ("import no_such_module_anywhere\ndef evaluate(p):\n    return {'combined_score': 1.0}\n", "No module named"),
        ("def evaluate(p):\n    return 0.5\n", "returned float"),
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


def test_a_failing_baseline_program_stops_unless_allowed(tmp_path):
    task = openevolve_task(tmp_path / "buggy", GOOD_EVALUATOR, PROGRAM.replace("return 1.0", "return 1 / 0"))
    store = str(tmp_path / "s.db")
    args = ("run", str(task), "--budget", "2", "--quiet", "--store", store, "roles.kind=llm", SCRIPTED)
    stopped = cli(*args)
    assert stopped.returncode == 3 and "engine.allow_failed_baseline=true" in stopped.stderr, stopped.stderr
    assert "ZeroDivisionError" in stopped.stderr
    allowed = cli(*args, "engine.allow_failed_baseline=true")
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


def _start_long_run(store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "verifyless", "run", "circle_packing", "--budget", "400", "--store", str(store)]
        + ["--quiet", "engine.candidates=2", "strategy.name=greedy"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_verifications(store: Path, n: int, proc: subprocess.Popen[str], limit: float = 120.0) -> None:
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
    proc = _start_long_run(store)
    _wait_for_verifications(store, 3, proc)
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
