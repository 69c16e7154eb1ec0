"""``show`` lists the failed verifications with their reasons (issue 54, item 6): before, only ``export`` had them.
A reason quotes the program's stderr, so it is one clipped line with its control characters escaped."""

from __future__ import annotations

import asyncio

from cli_runs import in_process

from verifyless.node import Status, Verification
from verifyless.store import RunStore
from verifyless.testing import FakeExecutor, make_engine, value

NASTY = "Traceback (most recent call last):\n  \x1b[2J\x1b]0;pwned\x07 ValueError: k = 100 > 64 rows " + "x" * 300


class FailingChildren(FakeExecutor):
    """The fake executor whose every child fails with ``NASTY`` as its reason (the baseline, a = 0, passes)."""

    async def verify(self, task, program):
        done = await super().verify(task, program)
        if value(program) == 0:
            return done
        return Verification(Status.FAILED, NASTY, program_hash=done.program_hash, run_seconds=0.01)


def test_show_prints_each_failed_node_s_reason_on_one_clipped_escaped_line(tmp_path, monkeypatch, capsys):
    path = tmp_path / "s.db"
    with RunStore(path) as store:
        result = asyncio.run(make_engine(store, budget=3, executor=FailingChildren(fails_at=None)).run())
    shown = in_process(monkeypatch, capsys, "show", result.run_id, "--store", str(path))
    assert shown.returncode == 0, shown.stderr
    lines = [line for line in shown.stdout.splitlines() if " failed: " in line]
    assert len(lines) == 2, shown.stdout  # the two children; the baseline passed
    for line in lines:
        assert "Traceback (most recent call last): \\x1b[2J\\x1b]0;pwned\\x07 ValueError: k = 100" in line, line
        assert line.endswith("…") and len(line) < 140, line
    assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout
