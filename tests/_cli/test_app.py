"""The command line: clear messages and documented exit codes, never a traceback."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from cli_runs import cli, in_process
from readonly_media import read_only_prefix, unprivileged_prefix
from task_folders import hanging_scorer_task

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "args, code, message",
    [
        (("verify", "/no/such/task"), 2, "/no/such/task"),
        (("verify", "diabetis"), 2, "did you mean 'diabetes'"),
        (("run", "/no/such/task"), 2, "/no/such/task"),
        (("verify", "diabetes", "/no/such/program.py"), 2, "not found"),
        (("tasks", "/no/such/folder"), 2, "not a folder"),
        (("runs", "--store", "/no/such/store.db"), 5, "no run store"),
        (("show", "nope", "--store", "/no/such/store.db"), 5, "no run store"),
        (("run", "diabetes", "engine.candidatez=3"), 2, "engine.candidatez"),
        (("run", "diabetes", "--budget", "0"), 2, "budget.verifications"),
        (("run", "diabetes", "--strategy", "anneal", "--budget", "2"), 2, "anneal"),
        (("run", "diabetes", "nonsense"), 2, "key.path=value"),
        (("run", "diabetes", "--bogus"), 2, "No such option: --bogus"),
        (("show",), 2, "Missing argument"),
        (("runs", "--store"), 2, "requires an argument"),
        (
            (
                "run",
                "diabetes",
                "--screener",
                "critic",
                "screener.options.k=0",
                f"roles.models.default=scripted:{ROOT / 'examples/scripted/diabetes.yaml'}",
            ),
            2,
            "option k=0",
        ),
        (("run", "diabetes", "roles.models.critik=openai:m"), 2, "critik"),
    ],
)
def test_bad_input_gets_a_clear_message_and_exit_code(tmp_path, monkeypatch, capsys, args, code, message):
    """Each case runs through the CLI's ``main`` in this process (1.5 s of imports saved per case);
    ``test_bad_input_in_a_real_process`` checks that a real process exits the same way."""
    args = tuple(a.replace("runs/", str(tmp_path) + "/") for a in args)
    if args[0] == "run":
        args = (*args, "--store", str(tmp_path / "s.db"))
    out = in_process(monkeypatch, capsys, *args)
    assert out.returncode == code, out.stderr
    assert message in out.stderr + out.stdout
    assert "Traceback" not in out.stderr + out.stdout
    if code == 2:
        assert len(out.stderr.strip().splitlines()) == 1, f"not one line: {out.stderr!r}"


def test_tasks_given_one_task_folder_lists_it_or_says_all_that_is_wrong(tmp_path, monkeypatch, capsys):
    from verifyless.task import builtin_tasks_dir

    out = in_process(monkeypatch, capsys, "tasks", str(builtin_tasks_dir() / "diabetes"))
    assert out.returncode == 0 and out.stdout.splitlines()[1].split()[:2] == ["diabetes", "native"], out.stdout
    broken = tmp_path / "mine"
    broken.mkdir()
    (broken / "task.yaml").write_text("name: [mine\n")
    out = in_process(monkeypatch, capsys, "tasks", str(broken))
    assert out.returncode == 3 and "task.yaml: YAML syntax error at line 2" in out.stderr, out.stderr


def test_a_config_file_with_a_yaml_typo_is_one_line_naming_the_line_and_column(tmp_path, monkeypatch, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("engine:\n  candidates: [4\n")
    out = in_process(monkeypatch, capsys, "run", "diabetes", "--config", str(config), "--store", str(tmp_path / "s.db"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f"config file {config} is not valid YAML: line 3, column 1" in out.stderr, out.stderr
    config.write_bytes(b"\xff\xfeengine: {}\n")  # saved as UTF-16 by an editor
    out = in_process(monkeypatch, capsys, "run", "diabetes", "--config", str(config), "--store", str(tmp_path / "s.db"))
    assert out.returncode == 2 and "is not UTF-8 text" in out.stderr, out.stderr


@pytest.mark.parametrize(
    "args, code, message",
    [
        (("show", "nope", "--store", "/no/such/store.db"), 5, "no run store"),
        (("run", "diabetes", "--bogus"), 2, "No such option: --bogus"),
    ],
)
def test_bad_input_in_a_real_process(args, code, message):
    out = cli(*args)
    assert out.returncode == code, out.stderr
    assert message in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.endswith("\n"), f"not one line: {out.stderr!r}"


@pytest.mark.parametrize("command", [False, True], ids=["function", "command"])
def test_verify_stops_a_scorer_that_hangs_at_its_limit_exit_3_naming_it(tmp_path, command):
    """Issue 54, item 4: such a scorer used to hang ``verify`` for ever."""
    folder = hanging_scorer_task(tmp_path, command=command)
    out = cli("verify", str(folder), timeout=120)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 3 and len(lines) == 1, out.stderr
    assert "its trusted scorer " in lines[0] and " did not finish within 1s (limits.score_seconds)" in lines[0]


def test_tasks_lists_every_builtin_task():
    out = cli("tasks")
    assert out.returncode == 0, out.stderr
    for name in ("diabetes", "sunspots", "moons_torch", "circle_packing"):
        assert name in out.stdout


def test_verify_json_on_an_openevolve_folder():
    out = cli("verify", "circle_packing", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "ok" and data["metrics"]["combined_score"] > 0


def test_run_show_runs_resume_and_replay(finished_copy):
    """The session's finished run (``verifyless run`` end to end): listed, shown by prefix, as JSON, replayed."""
    store, run_id = str(finished_copy.store), finished_copy.run_id
    assert "returned node (" in finished_copy.stdout
    listing = cli("runs", "--store", store)
    assert listing.returncode == 0 and "circle_packing" in listing.stdout
    assert listing.stdout.split("circle_packing")[0].split()[-1] == run_id
    shown = cli("show", run_id[:12], "--store", store)
    assert shown.returncode == 0 and "verifications 3" in shown.stdout, shown.stdout + shown.stderr
    as_json = json.loads(cli("runs", "--store", store, "--json").stdout)
    assert [r["run_id"] for r in as_json] == [run_id] and as_json[0]["verifications"] == 3
    detail = json.loads(cli("show", run_id, "--store", store, "--json").stdout)
    assert detail["budget"]["verifications"] == 3 and detail["final"]["node_id"]
    assert detail["best_nodes"] and all({"role", "calls", "cached"} <= set(c) for c in detail["llm_calls"])
    replayed = cli("replay", run_id, "--store", store)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "identical" in replayed.stdout


def test_resume_can_raise_the_budget_but_nothing_else(finished_copy):
    store, run_id = str(finished_copy.store), finished_copy.run_id
    assert "snapshot of run" in finished_copy.stderr, "-vv shows the library's debug log"
    refused = cli("run", "--resume", run_id, "--store", store, "--strategy", "greedy")
    assert refused.returncode == 2 and "cannot change when resuming" in refused.stderr
    more = cli("run", "--resume", run_id, "--store", store, "--budget", "5", "--quiet")
    assert more.returncode == 0, more.stderr
    shown = cli("show", run_id, "--store", store)
    assert "verifications 5" in shown.stdout, shown.stdout
    replayed = cli("replay", run_id, "--store", store)
    assert replayed.returncode == 0 and "identical" in replayed.stdout, replayed.stdout + replayed.stderr
    assert "part 2 of 2" not in replayed.stdout, "no difference in either part"


def _read_only_copy(finished, folder: Path, how: str, journal: str) -> tuple[str, list[str]]:
    """Copy the finished store into ``folder`` in ``journal`` mode; return it and the prefix that reads it read-only.

    ``mount``: the folder is a real read-only bind mount for the command (a user namespace; no other user, so
    the clone's path and permissions do not matter). ``chmod``: file 0444 and folder 0555, read by a process
    without root's override of mode bits.
    """
    folder.mkdir()
    store = folder / "s.db"
    shutil.copy(finished.store, store)
    conn = sqlite3.connect(store)  # WAL as a run leaves it; DELETE as `sqlite3 .backup` or VACUUM INTO leave a copy
    assert conn.execute(f"PRAGMA journal_mode = {journal}").fetchone()[0] == journal
    conn.close()
    if how == "chmod":
        store.chmod(0o444)
        folder.chmod(0o555)
    prefix, reason = unprivileged_prefix(folder) if how == "chmod" else read_only_prefix(folder)
    if prefix is None:
        pytest.skip(reason)
    return str(store), prefix


@pytest.mark.parametrize("how", ["mount", "chmod"])
@pytest.mark.parametrize("journal", ["wal", "delete"])
def test_read_only_store_opens_for_runs_show_and_bench(finished_run, tmp_path, how, journal):
    """A finished store the reader cannot write (on a read-only mount, or file and folder read-only to it) lists,
    shows, reports, exports and measures: these commands open it read-only (immutable where SQLite cannot create
    the WAL's -shm), say so in one line, never migrate or set WAL, and leave the store's bytes as they were."""
    store, prefix = _read_only_copy(finished_run, tmp_path / "ro", how, journal)
    run_id = finished_run.run_id
    before = Path(store).read_bytes()
    try:
        listing = cli("runs", "--store", store, prefix=prefix)
        assert listing.returncode == 0, listing.stderr
        header = listing.stdout.splitlines()[0].split()
        assert header[:4] == ["run", "task", "strategy", "screener"]
        row = next(line for line in listing.stdout.splitlines() if run_id in line).split()
        assert row[2:4] == ["mcgs", "adaptive"], row  # the default screener (issue 45)
        notes = [line for line in listing.stderr.splitlines() if line]
        assert len(notes) == 1 and "cannot be written here" in notes[0], listing.stderr
        assert ("immutable" in notes[0]) == (journal == "wal"), "a rollback-journal store needs no -shm"
        shown = cli("show", run_id, "--store", store, prefix=prefix)
        assert shown.returncode == 0 and "verifications 3" in shown.stdout, shown.stderr
        if (journal, how) == ("wal", "mount"):  # the other commands open the store the same way: once is enough
            out = tmp_path / "out"
            for args in (
                ("bench", "selection", run_id),
                ("report", run_id, "--out", str(out / "report")),
                ("export", run_id, "--out", str(out / "trace.jsonl")),
            ):
                done = cli(*args, "--store", store, prefix=prefix)
                assert done.returncode == 0, (args, done.stderr)
                assert done.stderr.count("cannot be written here") == 1, (args, done.stderr)
            assert (out / "report" / "report.html").is_file() and (out / "trace.jsonl").stat().st_size > 0
    finally:
        Path(store).parent.chmod(0o755)
    assert Path(store).read_bytes() == before
    assert sorted(p.name for p in Path(store).parent.iterdir()) == ["s.db"], "no -wal/-shm left beside it"


def test_an_output_place_that_cannot_be_written_is_one_clear_line(finished_run, tmp_path):
    """``--out`` is checked before any work (exit 2, one usage line naming the option); a default output place
    that turns out unwritable (a read-only working folder) is one ``error:`` line too, never "unexpected error"."""
    run_id, store = finished_run.run_id, str(finished_run.store)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for args, says in (
        (("export", run_id, "--out", str(blocker / "trace.jsonl")), "cannot write the output file"),
        (("export", run_id, "--out", str(tmp_path)), "is a folder; give a file path"),
        (("report", run_id, "--out", str(blocker)), "is a file; give a folder path"),
        (("bench", "selection", run_id, "--out", str(blocker / "bench")), "cannot write the output folder"),
    ):
        out = cli(*args, "--store", store)
        lines = out.stderr.splitlines()
        assert out.returncode == 2 and len(lines) == 1, (args, out.stderr)
        assert "Invalid value for '--out'" in lines[0] and says in lines[0], (args, out.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"], "a refused --out creates nothing"
    folder = tmp_path / "ro-cwd"
    folder.mkdir()
    prefix, reason = read_only_prefix(folder)
    if prefix is None:
        pytest.skip(reason)
    in_folder = [*prefix, "sh", "-c", 'cd "$0" && exec "$@"', str(folder)]  # cd after the mount, not before
    out = cli("report", run_id, "--store", store, prefix=in_folder)  # writes reports/RUN under the read-only cwd
    assert out.returncode == 1 and out.stderr.startswith("error: cannot write reports"), out.stderr
    assert "Read-only file system" in out.stderr and "unexpected" not in out.stderr, out.stderr
    assert "is not writable" in out.stderr and "free some space" not in out.stderr, "a read-only place is no full disk"


def test_an_unreadable_store_gets_one_error_line_once(tmp_path):
    """``show`` and ``runs`` on a file that is not a store: exit 5, one newline-terminated line, said once."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database " * 200)
    for args in (("show", "r1"), ("runs",)):
        out = cli(*args, "--store", str(junk))
        assert out.returncode == 5, out.stderr
        assert out.stderr.endswith("\n") and len(out.stderr.splitlines()) == 1, repr(out.stderr)
        assert out.stderr.count("not a readable verifyless run store") == 1, out.stderr


def test_runs_on_a_missing_default_store_says_no_runs_yet(tmp_path):
    out = cli("runs", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "no runs yet" in out.stdout
    assert not (tmp_path / "runs").exists(), "listing must not create the store"


def test_run_help_lists_every_registered_screener_and_strategy():
    from verifyless.screen.registry import SCREENERS
    from verifyless.search.registry import STRATEGIES

    out = cli("run", "--help")
    text = " ".join(out.stdout.split())
    for name in (*SCREENERS, *STRATEGIES):
        assert name in text, name
    assert {"cascade", "critic-ttl", "critic-probs"} <= set(SCREENERS)


def test_components_lists_every_registered_name_with_its_kind():
    from verifyless.components import COMPONENTS

    out = cli("components")
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    listed = {(row[0], row[1]) for row in rows if len(row) > 1}
    assert {(kind, name) for kind, registry in COMPONENTS.items() for name in registry} <= listed
    only = cli("components", "executor")
    assert only.returncode == 0 and "local" in only.stdout and "critic" not in only.stdout
    bad = cli("components", "widget")
    assert bad.returncode == 2 and "component kind 'widget' is unknown" in bad.stderr


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_live_progress_knows_the_cap_from_the_start_and_shows_an_eta():
    import io

    from rich.console import Console

    from verifyless._cli.progress import LiveProgress

    clock = _Clock()
    live = LiveProgress(Console(file=io.StringIO(), width=160), cap=4, clock=clock)
    live("start", {"run_id": "r", "task": "t"})
    (task,) = live.bar.tasks
    assert task.total == 4 and task.fields["count"] == "0/4", "never '0/None'"
    for done in (1, 2):
        clock.now += 10.0
        live("verification", {"node_id": f"n{done}", "status": "ok", "score": 1.0, "budget": _budget(done)})
    assert task.fields["count"] == "2/4"
    eta = live.eta(task)
    assert eta == "ETA 0:00:20", eta  # 10 s per verification, two to go
    live("verification", {"node_id": "n4", "status": "ok", "score": 1.0, "budget": _budget(4)})
    assert "final" in task.description, "after the last verification the bar says what it waits for"
    live.close()


def _budget(done: int) -> dict:
    return {"verifications": done, "cap": 4, "best": 1.0}


def test_show_reports_the_ensemble_submission(tmp_path):
    from report_fixtures import _with_submission

    run_id = _with_submission(tmp_path / "e.db")
    shown = cli("show", run_id, "--store", str(tmp_path / "e.db"))
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.startswith("ensemble submission"))
    assert "c1, root" in line and "2.5" in line and "3.5 evaluator s" in line
    detail = json.loads(cli("show", run_id, "--store", str(tmp_path / "e.db"), "--json").stdout)
    assert detail["submission"]["members"] == ["c1", "root"] and detail["submission"]["seconds"] == 3.5


def test_printed_lines_are_never_broken_so_paths_copy_whole():
    from verifyless._cli import common

    for console in (common.console, common.err):
        with console.capture() as captured:
            console.print("path " + "/very/long/folder" * 30 + " and more words " * 10)
        assert captured.get().count("\n") == 1, "rich broke a printed line"


def test_every_command_option_and_argument_says_what_it_is():
    import typer

    from verifyless._cli.app import app

    missing = []

    def walk(command, path):
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*path, name])
        if not getattr(command, "commands", None):
            missing.extend(f"{' '.join(path)} {p.name}" for p in command.params if not getattr(p, "help", None))

    walk(typer.main.get_command(app), ["verifyless"])
    assert not missing, f"parameters without help text in --help: {missing}"
