"""Issue 46 item 3(a): the final node is chosen on evidence search never optimised.

``task new`` keeps a selection split apart from validation and the hidden test; its score is hidden from search
like the test score; at the end of a run the top validation nodes are re-ranked on it (``choose_on_held_out``:
only nodes not worse than the baseline on validation may win), and the run's table, ``show`` and the report carry
it beside the baseline's.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from competitions import cache  # noqa: F401  (each test's own split cache, autouse)
from selection_runs import held_out_run
from sklearn.datasets import load_diabetes

from verifyless._cli.show import transfer_data, transfer_lines
from verifyless.config import load_config, with_absent_options
from verifyless.node import Node, Operator, Status, Verification
from verifyless.report.views.final import final_view
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.final import choose_on_held_out
from verifyless.task import load_task
from verifyless.task.tabular.prepare import Request, prepare_task
from verifyless.task.tabular.split import SplitSettings, split_held, split_rows
from verifyless.testing import fake_task
from verifyless.verify import verify

# ------------------------------------------------------------------ the split


def _frame(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"year": rng.integers(1900, 2000, n), "g": rng.integers(0, 20, n), "y": rng.normal(size=n)})


def test_without_a_selection_share_the_split_is_the_validation_split_of_before():
    frame = _frame()
    for settings in (SplitSettings(), SplitSettings(time="year"), SplitSettings(group="g")):
        kept, validation, selection = split_held(frame, settings)
        assert (kept, validation, selection) == (*split_rows(frame, settings), [])


@pytest.mark.parametrize("how", [{}, {"time": "year"}, {"group": "g"}])
def test_the_selection_rows_are_apart_from_training_and_validation(how):
    frame = _frame()
    settings = SplitSettings(fraction=0.2, selection=0.2, **how)
    kept, validation, selection = split_held(frame, settings)
    assert not (set(kept) & set(validation) or set(kept) & set(selection) or set(validation) & set(selection))
    assert sorted(kept + validation + selection) == list(range(len(frame)))
    assert 0.1 < len(selection) / len(frame) < 0.3 and 0.1 < len(validation) / len(frame) < 0.3
    if "time" in how:  # both come from the latest window, neither closer to the hidden test by construction
        latest = frame["year"].iloc[validation + selection].min()
        assert frame["year"].iloc[kept].max() <= latest
    if "group" in how:  # a group sits on one side only
        sides = [set(frame["g"].iloc[rows]) for rows in (kept, validation, selection)]
        assert not (sides[0] & sides[1] or sides[0] & sides[2] or sides[1] & sides[2])


# ------------------------------------------------------------------ the choice


def _node(node_id: str, fitness: float | None, status: Status = Status.OK) -> Node:
    return Node(node_id, None if node_id == "root" else "root", Operator.IMPROVE, status=status, fitness=fitness)


def test_the_winner_is_best_on_the_selection_split_among_nodes_not_worse_than_the_baseline():
    nodes = [_node("root", -10.0), _node("a", -5.0), _node("b", -7.0), _node("c", -12.0), _node("d", -1.0)]
    selection = {"root": 9.0, "a": 8.0, "b": 6.0, "c": 1.0, "d": 8.5}  # a loss: lower is better
    choice = choose_on_held_out(nodes, selection, lambda v: -v, top_n=3)
    assert choice.pool == ("d", "a", "b", "root")  # top 3 by validation, then the baseline
    assert choice.eligible == ("d", "a", "b", "root") and choice.winner == "b"
    # c is best on the selection split but worse than the baseline on validation, and outside the top 3
    kept = choose_on_held_out(nodes, selection, lambda v: -v, top_n=3, keep=("c",))
    assert "c" in kept.pool and "c" not in kept.eligible and kept.winner == "b"


def test_when_nothing_beats_the_baseline_on_validation_the_baseline_is_returned():
    nodes = [_node("root", 1.0), _node("a", 0.5), _node("b", 0.9)]
    choice = choose_on_held_out(nodes, {"root": 0.1, "a": 0.9, "b": 0.8}, float, top_n=5)
    assert choice.eligible == ("root",) and choice.winner == "root"


def test_ties_go_to_the_better_validation_then_the_smaller_id_and_no_scores_mean_no_choice():
    nodes = [_node("root", 0.0), _node("b", 2.0), _node("a", 2.0), _node("c", 3.0), _node("x", None, Status.FAILED)]
    assert choose_on_held_out(nodes, {"a": 1.0, "b": 1.0, "c": 1.0}, float, top_n=5).winner == "c"
    assert choose_on_held_out(nodes[:3], {"a": 1.0, "b": 1.0}, float, top_n=5).winner == "a"
    empty = choose_on_held_out(nodes, {}, float, top_n=5)
    assert empty.winner is None and "x" not in empty.pool


# ------------------------------------------------------------------ task new and verify


def _diabetes(path: Path) -> Path:
    load_diabetes(as_frame=True, scaled=False).frame.to_csv(path, index=False)
    return path


def test_task_new_holds_out_a_selection_split_whose_score_search_never_sees(tmp_path):
    prepared = prepare_task(tmp_path / "t", Request(_diabetes(tmp_path / "d.csv"), "target"))
    task = load_task(prepared.root)
    assert task.selection_metric == "sel_rmse" and "never shown to the search" in task.statement
    hidden = Path(task.hidden_data[0])
    held = {name: pd.read_csv(hidden / name)["id"] for name in ("val_answers.csv", "sel_answers.csv")}
    assert not set(held["val_answers.csv"]) & set(held["sel_answers.csv"])
    train = pd.read_csv(task.public_data[0])
    test_ids = set(pd.read_csv(task.public_data[1])["id"])
    assert set(held["sel_answers.csv"]) <= test_ids and not set(held["sel_answers.csv"]) & set(train["id"])
    assert "target" not in pd.read_csv(task.public_data[1]).columns
    v = verify(task, task.baseline_program, LocalSandbox())
    assert v.status is Status.OK, v.reason
    assert "sel_rmse" in v.test_metrics and "test_rmse" in v.test_metrics
    assert not any(k.startswith("sel_") for k in v.metrics)  # search reads metrics; the selection score is not there


def test_task_new_with_selection_zero_keeps_the_split_and_metrics_of_before(tmp_path):
    made = prepare_task(tmp_path / "t", Request(_diabetes(tmp_path / "d.csv"), "target", selection=0.0))
    task = load_task(made.root)
    assert task.selection_metric is None and "never shown to the search" not in task.statement
    assert not (Path(task.hidden_data[0]) / "sel_answers.csv").exists()
    assert yaml.safe_load((made.root / "verifyless.yaml").read_text())["split"]["selection"] == 0.0


def test_a_native_task_declares_a_selection_metric_apart_from_validation_and_test(tmp_path):
    from task_folders import minimal_task

    from verifyless.errors import TaskError

    root = minimal_task(tmp_path)
    yaml_text = (root / "task.yaml").read_text()
    (root / "task.yaml").write_text(yaml_text + "metrics: {validation: [val_rmse], selection: sel_rmse}\n")
    assert load_task(root).selection_metric == "sel_rmse"
    (root / "task.yaml").write_text(yaml_text + "metrics: {validation: [val_rmse], selection: val_rmse}\n")
    with pytest.raises(TaskError, match="metrics.selection"):
        load_task(root)


# ------------------------------------------------------------------ the engine's final choice


def test_the_run_returns_the_node_the_selection_split_chose_and_says_so(tmp_path):
    store, best_id = held_out_run(tmp_path)
    with store:
        run_id = store.runs()[0].run_id
        [held] = [e.payload for e in store.events(run_id, kinds=["selection_split"])]
        [final] = [e.payload for e in store.events(run_id, kinds=["final"])]
        nodes = {n.id: n for n in store.nodes(run_id)}
        rows = {r["node_id"]: r for r in store.node_rows(run_id)}
        base = nodes["root"].fitness
        eligible = [i for i in held["pool"] if nodes[i].fitness is not None and nodes[i].fitness >= base]
        assert held["eligible"] == eligible and final["selection_metric"] == "sel_loss"
        expected = min(eligible, key=lambda i: (rows[i]["test_metrics"]["sel_loss"], -nodes[i].fitness, i))
        assert held["winner"] == expected == best_id == final["node_id"]
        data = transfer_data(store, run_id)
        assert data["final"]["selection"] == rows[best_id]["test_metrics"]["sel_loss"]
        assert data["baseline"]["selection"] == rows["root"]["test_metrics"]["sel_loss"]
        lines = "\n".join(transfer_lines(data))
        assert (
            "selection split" in lines
            and "final node: " in lines
            and "scored best of them on the selection split" in lines
        )
        assert final_view(store, run_id).selection_metric == "sel_loss"


def test_selection_pool_zero_and_stored_runs_keep_the_strategys_pick(tmp_path):
    store, _ = held_out_run(tmp_path, "engine.selection_pool=0")
    with store:
        run_id = store.runs()[0].run_id
        assert not list(store.events(run_id, kinds=["selection_split"]))
    stored = load_config().model_dump(mode="json")
    del stored["engine"]["selection_pool"]
    assert with_absent_options(stored)["engine"]["selection_pool"] == 0  # a run stored before it existed


def test_verification_keeps_the_selection_score_out_of_what_search_sees():
    from verifyless.verify import split_metrics

    task = dataclasses.replace(fake_task(), selection_metric="sel_loss")
    metrics, hidden = split_metrics(task, {"loss": 1.0, "sel_loss": 2.0, "test_loss": 3.0})
    assert metrics == {"loss": 1.0} and hidden == {"sel_loss": 2.0, "test_loss": 3.0}
    assert Verification(Status.OK, metrics=metrics, test_metrics=hidden).test_metrics["sel_loss"] == 2.0
