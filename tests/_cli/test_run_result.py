"""The end-of-run table names things as a user meets them (issue 54, item 9): the node the run returned is the
"returned node" (``runs`` and the dashboard show the best on validation, which may be another), the strategy's own
pick stands beside it with its hidden test when the selection split overruled it, and the line on that choice says
what was compared in plain words."""

from __future__ import annotations

from rich.console import Console
from selection_runs import held_out_run

from verifyless._cli.run import scores_table
from verifyless.report.views.final import final_view, selection_line


def _text(table) -> str:
    console = Console(width=160, record=True)
    console.print(table)
    return console.export_text()


def test_the_table_shows_the_returned_node_and_beside_it_the_strategy_s_pick(tmp_path):
    store, returned = held_out_run(tmp_path)
    with store:
        final = final_view(store, store.runs()[0].run_id)
    pick = final.strategy_pick
    assert final.held_out is not None and pick is not None, "the selection split overruled the strategy here"
    assert pick.node_id == final.held_out.strategy_best != returned
    rows = {
        line.split(")")[0].strip() + ")": line.split(")")[1].split()
        for line in _text(scores_table(final)).splitlines()
        if ")" in line
    }
    assert rows[f"returned node ({returned})"] == [
        f"{final.score:.6g}",
        f"{final.selection_score:.6g}",
        f"{final.test_score:.6g}",
    ]
    assert rows[f"strategy's pick ({pick.node_id})"] == [
        f"{pick.validation:.6g}",
        f"{pick.selection:.6g}",
        f"{pick.test:.6g}",
    ]
    assert "baseline (root)" in rows and not any("best node" in k for k in rows)
    assert final.chosen_line == selection_line(
        final.held_out.winner, pick.node_id, len(final.held_out.pool), len(final.held_out.eligible)
    )


def test_the_selection_line_says_what_was_compared_in_plain_words():
    kept = selection_line("n7", "n7", 5, 4)
    assert kept.startswith(
        "final node: the strategy's pick n7, kept: of the 5 nodes considered (the best on validation"
    )
    assert "4 were no worse than the baseline on validation, and n7 scored best of them on the selection split" in kept
    assert "training rows held out that search never saw" in kept and "top nodes" not in kept
    assert selection_line("n5", "n7", 5, 4).startswith("final node: n5, not the strategy's pick n7: of the 5 nodes")
    assert "no node had a score" in selection_line(None, "n7", 5, 0)
