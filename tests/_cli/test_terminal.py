"""Candidate output never reaches the terminal raw (issue 54, item 3): control characters are made visible and
rich markup in candidate text is shown literally, at the one boundary (``_cli/terminal.py``)."""

from __future__ import annotations

import io
import os
import subprocess
import sys

from cli_runs import in_process
from rich.text import Text
from task_folders import toy_task

from verifyless._cli.terminal import TerminalConsole, shown, visible
from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.store import RunStore

EVIL = "\x1b[2J\x1b]0;pwned\x07 [bold]BOLD[/bold] [/] \u202eabc"
RAW = ("\x1b", "\x07", "\u202e")


def test_visible_escapes_control_characters_and_keeps_newlines_and_tabs():
    assert visible("a\tb\nc\r\nd") == "a\tb\nc\nd"
    assert visible(EVIL) == "\\x1b[2J\\x1b]0;pwned\\x07 [bold]BOLD[/bold] [/] \\u202eabc"
    assert visible("\x00\x7f\x9b\rok") == "\\x00\\x7f\\x9b\\x0dok"


def test_the_console_writes_no_control_character_from_strings_text_or_markup():
    out = io.StringIO()
    console = TerminalConsole(file=out, width=200, color_system=None)  # no colours: any escape would be content
    console.print(f"[red]reason:[/] {shown(EVIL)}")  # untrusted text inside our markup
    console.print(Text("text object " + EVIL))  # a Text built elsewhere skips render_str: caught per segment
    console.print("plain " + EVIL, markup=False)
    written = out.getvalue()
    assert not any(c in written for c in RAW)
    assert written.count("\\x1b[2J") == 3 and written.count("[bold]BOLD[/bold] [/]") == 3


def test_verify_shows_what_a_candidate_wrote_to_stderr_literally(tmp_path, monkeypatch, capsys):
    folder = toy_task(tmp_path, 1)
    program = tmp_path / "evil.py"
    program.write_text(f"import sys\nsys.stderr.write({EVIL!r} + '\\n')\nsys.exit(1)\n")
    out = in_process(monkeypatch, capsys, "verify", str(folder), str(program))
    assert out.returncode == 0, out.stderr
    assert not any(c in out.stdout + out.stderr for c in RAW)
    assert "\\x1b[2J\\x1b]0;pwned\\x07 [bold]BOLD[/bold] [/] \\u202eabc" in out.stdout


def test_an_error_message_quoting_untrusted_text_is_one_literal_line(tmp_path, monkeypatch, capsys):
    folder = toy_task(tmp_path, 1)
    out = in_process(monkeypatch, capsys, "verify", str(folder), str(tmp_path / "no[/]such\x1b[2J.py"))
    assert out.returncode == 2
    assert "no[/]such\\x1b[2J.py not found" in out.stderr and "\x1b" not in out.stderr


def test_show_prints_an_llm_idea_and_a_stop_reason_literally(tmp_path, monkeypatch, capsys):
    store = tmp_path / "s.db"
    with RunStore(store) as st:
        run_id = st.create_run("toy", {})
        for cid, parent in (("root", None), ("c1", "root")):
            program = f"a = {cid!r}\n"
            idea = Idea(EVIL if parent else "baseline")
            st.add_candidate(run_id, Candidate(cid, parent, Operator.IMPROVE, idea, program, content_hash(program)))
            ok = Verification(Status.OK, metrics={"m": 1.0}, score=1.0, program_hash=content_hash(program))
            st.add_verification(run_id, cid, ok, 1.0)
        st.set_status(run_id, "failed", reason="the model wrote " + EVIL)
    out = in_process(monkeypatch, capsys, "show", run_id, "--store", str(store))
    assert out.returncode == 0, out.stderr
    assert not any(c in out.stdout for c in RAW)
    assert out.stdout.count("\\x1b[2J\\x1b]0;pwned\\x07 [bold]BOLD[/bold] [/]") == 2  # the idea and the reason


def test_a_run_whose_reader_goes_away_finishes_and_is_not_marked_interrupted(tmp_path):
    """``verifyless run ... | head``: rich's SystemExit(1) on the broken pipe stopped the run where it printed and
    left it interrupted. The pipe here has no reader from the start, so the very first line breaks it."""
    folder = toy_task(tmp_path, 1)
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "verifyless",
                "run",
                str(folder),
                "--budget",
                "2",
                "--store",
                str(tmp_path / "s.db"),
            ],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=240,
        )
    finally:
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    with RunStore(tmp_path / "s.db") as st:
        (info,) = st.runs()
        assert info.status == "finished" and st.budget(info.run_id).verifications == 2
