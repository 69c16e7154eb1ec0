"""``verify.produce`` (issue 54, item 2: ``run --out``): the program runs as a verification would and its outputs are
kept, nothing is scored, and an output the trusted side must not read is a contract violation, copied nowhere."""

from __future__ import annotations

from task_folders import hanging_scorer_task

from verifyless.node import Status
from verifyless.sandbox.local import LocalSandbox
from verifyless.task import load_task
from verifyless.verify import produce

WRITES = """import argparse, os
from pathlib import Path
p = argparse.ArgumentParser(); p.add_argument("--out"); out = Path(p.parse_args().out)
(out / "value.txt").write_text("7")
(out / "more").mkdir(); (out / "more" / "notes.txt").write_text("kept")
"""


def test_produce_keeps_the_outputs_and_scores_nothing(tmp_path):
    task = load_task(hanging_scorer_task(tmp_path))  # its scorer would sleep for ever: produce never calls it
    done = produce(task, WRITES, LocalSandbox(), tmp_path / "kept")
    assert done.status is Status.OK and done.reason == "", done
    assert (tmp_path / "kept" / "value.txt").read_text() == "7"
    assert (tmp_path / "kept" / "more" / "notes.txt").read_text() == "kept"


def test_a_symlink_out_of_the_workspace_is_a_contract_violation_and_nothing_is_copied(tmp_path):
    task = load_task(hanging_scorer_task(tmp_path))
    link = WRITES + 'os.symlink("/etc/hostname", out / "leak")\n'
    done = produce(task, link, LocalSandbox(), tmp_path / "kept")
    assert done.status is Status.CONTRACT_VIOLATION and "outside the workspace" in done.reason
    assert not (tmp_path / "kept").exists()


def test_a_failing_program_is_its_status_with_its_reason(tmp_path):
    task = load_task(hanging_scorer_task(tmp_path))
    done = produce(task, "raise SystemExit('no data here')\n", LocalSandbox(), tmp_path / "kept")
    assert done.status is Status.FAILED and "no data here" in done.reason and not (tmp_path / "kept").exists()
