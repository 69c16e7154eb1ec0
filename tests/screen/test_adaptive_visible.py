"""The adaptive screener's state is visible (issue 46, item 6): one line per state change on the run's output, the
state in the end-of-run table, no test-time adapter line for a screener without one, and a progress line that
is not cut at 80 columns. The real engine, adaptive screener and SQLite store; the harmful inner screener and the
task are ``adaptive_world``'s (tests/support)."""

from __future__ import annotations

import asyncio
import io

from adaptive_world import Inverted, Unbounded, _adaptive, _engine
from rich.console import Console

from verifyless._cli.progress import LiveProgress
from verifyless._cli.run import print_result
from verifyless._cli.show import show_data
from verifyless.report.svg import curves_svg
from verifyless.report.views.curves import best_curve
from verifyless.store import RunStore


def _harmful_run(tmp_path):
    events: list[tuple[str, dict]] = []
    store = RunStore(tmp_path / "s.db")
    screener = _adaptive(Inverted())
    engine = _engine(store, screener, budget=24, executor=Unbounded(), progress=lambda k, d: events.append((k, d)))
    result = asyncio.run(engine.run())
    return store, result, screener, events


def test_each_state_change_is_one_line_and_the_end_of_run_table_and_show_say_the_state(tmp_path, capsys):
    store, result, screener, events = _harmful_run(tmp_path)
    assert screener.state == "off", screener.reason
    out = io.StringIO()
    live = LiveProgress(Console(file=out, width=80), cap=24)
    for kind, data in events:
        live(kind, data)
    live.close()
    lines = [line for line in out.getvalue().splitlines() if "safety net" in line]
    changes = [d for d in screener.decisions if "state" in d]
    assert len(lines) == len(changes) == 1, out.getvalue()
    assert lines[0].startswith("  safety net: screening is ") and "switched off at verification" in lines[0], lines
    print_result(result, store)
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.strip().startswith("safety net"))
    assert f"off since verification {screener.rule.decided_at}" in row, table
    data = show_data(store, result.run_id, 5)
    assert data["adapters"] == [], "an adaptive screener has no test-time adapter"
    curve = best_curve(store, result.run_id)
    assert [label for _, label in curve.markers] == ["safety net off"], curve.markers
    assert curve.markers[0][0] >= screener.rule.decided_at and 'class="marker"' in curves_svg([curve])
    store.close()


def test_the_progress_line_keeps_every_part_at_80_columns():
    out = io.StringIO()
    live = LiveProgress(Console(file=out, width=80, force_terminal=True, color_system=None), cap=40)
    live("start", {"run_id": "20261204-185229-6267c9", "task": "diabetes"})
    live.audit = " · adaptive trial: +0.40 on 12 units (p 0.21 / 0.64), needs ~14 more, k 3"
    live("round", {"round": 13, "budget": {"verifications": 12, "cap": 40, "best": 49.0921}})
    live.out.print(live.bar.get_renderable())
    live.close()
    drawn = out.getvalue().split("\x1b[2K")[-1] if "\x1b[2K" in out.getvalue() else out.getvalue()
    text = " ".join(out.getvalue().split())
    assert "…" not in drawn, drawn
    for part in ("round 13", "needs ~14 more, k 3", "12/40", "best 49.092", "ETA"):
        assert part in text, (part, out.getvalue())
