"""What a finished run tells its user (issue 46): the baseline's hidden test beside the returned node's, and a warning
when the validation gain did not transfer. Real runs of a tiny task through the CLI (sandbox, scorer, SQLite)."""

from __future__ import annotations

import json

from cli_runs import in_process
from task_folders import toy_task

from verifyless.store import RunStore


def _run(tmp_path, monkeypatch, capsys, test_target: int) -> tuple[str, str, str]:
    store = tmp_path / "s.db"
    task = toy_task(tmp_path, test_target)
    out = in_process(monkeypatch, capsys, "run", str(task), "--budget", "2", "--store", str(store), "-q")
    assert out.returncode == 0, out.stderr
    with RunStore(store) as st:
        run_id = st.runs()[0].run_id
    return out.stdout, run_id, str(store)


def test_the_end_of_run_table_and_show_warn_when_the_validation_gain_did_not_transfer(tmp_path, monkeypatch, capsys):
    stdout, run_id, store = _run(tmp_path, monkeypatch, capsys, test_target=9)
    baseline = next(line for line in stdout.splitlines() if line.strip().startswith("baseline (root)"))
    assert baseline.split()[-2:] == ["4", "4"], stdout  # validation, hidden test
    assert (
        "warning: the validation gain did not transfer: the returned node beats the baseline on validation (4 -> "
        in stdout
    ), stdout
    shown = in_process(monkeypatch, capsys, "show", run_id, "--store", store)
    assert "baseline root: validation 4 · hidden test 4" in shown.stdout, shown.stdout
    assert "the validation gain did not transfer" in shown.stdout, shown.stdout
    data = json.loads(in_process(monkeypatch, capsys, "show", run_id, "--store", store, "--json").stdout)
    transfer = data["transfer"]
    assert transfer["baseline"] == {"node_id": "root", "validation": 4.0, "selection": None, "test": 4.0}, transfer
    assert transfer["final"]["validation"] < 4 and transfer["final"]["test"] > 4, transfer
    assert "did not transfer" in transfer["warning"]
    out = in_process(monkeypatch, capsys, "report", run_id, "--store", store, "--out", str(tmp_path / "report"))
    assert out.returncode == 0, out.stderr
    assert "Warning: the validation gain did not transfer" in (tmp_path / "report" / "report.html").read_text()


def test_no_warning_when_the_hidden_test_improved_too(tmp_path, monkeypatch, capsys):
    stdout, run_id, store = _run(tmp_path, monkeypatch, capsys, test_target=1)
    assert "hidden test" in stdout and "baseline (root)" in stdout and "did not transfer" not in stdout, stdout
    shown = in_process(monkeypatch, capsys, "show", run_id, "--store", store)
    assert "baseline root: validation 4 · hidden test 4" in shown.stdout and "did not transfer" not in shown.stdout


def test_the_run_card_is_in_show_json_the_report_and_the_export(tmp_path, monkeypatch, capsys):
    """Models and endpoints, the machine, wall and evaluator time, budgets and spend, the seed, the data splits
    and what search could see, the task fingerprint: one record, the same in show --json, the report and export."""
    from verifyless.task import load_task
    from verifyless.task.fingerprint import task_fingerprint

    stdout, run_id, store = _run(tmp_path, monkeypatch, capsys, test_target=1)
    card = json.loads(in_process(monkeypatch, capsys, "show", run_id, "--store", store, "--json").stdout)["run_card"]
    assert card["task"]["fingerprint"] == task_fingerprint(load_task(str(tmp_path / "toy_transfer"))).digest
    assert card["data"]["public"] == ["public/readme.txt"] and card["data"]["hidden"] == []
    assert "hidden test" in card["data"]["search_saw"]
    assert card["budget"]["caps"]["verifications"] == 2 and card["budget"]["spent"]["verifications"] == 2
    assert card["seed"] == 0 and card["screener"] == "adaptive" and card["strategy"] == "mcgs"
    assert card["time"]["wall_seconds"] > 0 and card["time"]["evaluator_seconds"] > 0
    (machine,) = card["machines"]
    assert machine["cpus"] >= 1 and machine["python"] and machine["platform"]
    assert card["models"] == {}, "space roles and the surrogate use no model"
    report = tmp_path / "report"
    assert in_process(monkeypatch, capsys, "report", run_id, "--store", store, "--out", str(report)).returncode == 0
    assert (
        'id="run-card"' in (report / "report.html").read_text()
        and card["task"]["fingerprint"][:16] in (report / "report.html").read_text()
    )
    trace = tmp_path / "trace.jsonl"
    assert in_process(monkeypatch, capsys, "export", run_id, "--store", store, "--out", str(trace)).returncode == 0
    exported = json.loads((tmp_path / "trace.card.json").read_text())
    assert exported["task"] == card["task"] and exported["budget"] == card["budget"]


def test_run_out_writes_the_returned_program_its_outputs_and_the_resolved_config(tmp_path, monkeypatch, capsys):
    import yaml

    from verifyless.store import RunStore

    store, out = tmp_path / "s.db", tmp_path / "best"
    task = toy_task(tmp_path, 1)
    args = ("run", str(task), "--budget", "2", "--store", str(store), "-q", "--out", str(out))
    done = in_process(monkeypatch, capsys, *args)
    assert done.returncode == 0, done.stderr
    with RunStore(store) as st:
        run_id = st.runs()[0].run_id
        final = next(e.payload["node_id"] for e in st.events(run_id, kinds=["final"]))
        program = st.candidate(run_id, final).program
    assert (out / "prog.py").read_text() == program and "A = 5" not in program, "the returned node, not the baseline"
    value = (out / "submission" / "value.txt").read_text()
    assert value == program.split("A = ")[1].split()[0], "the outputs of the returned program itself"
    config = yaml.safe_load((out / "config.yaml").read_text())
    assert config["budget"]["verifications"] == 2 and config["task"] == str(task)
    assert f"wrote {out}" in done.stdout, done.stdout
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    refused = in_process(
        monkeypatch, capsys, "run", str(task), "--budget", "2", "--store", str(store), "--out", str(blocker)
    )
    assert refused.returncode == 2 and "--out" in refused.stderr and "Traceback" not in refused.stderr, refused.stderr
