"""Greedy search's start: with ``baseline_counts`` off (AIRA-dojo on AIRS-Bench, issue 56 item 6) only drafts and
their descendants are improved and returned; the baseline is not a candidate."""

from __future__ import annotations

import random

from verifyless.node import Node, Operator, Status
from verifyless.search.base import SearchView
from verifyless.search.greedy import GreedyConfig, GreedyStrategy


def ok(nid: str, parent: str | None, op: Operator, fitness: float) -> Node:
    return Node(nid, parent, op, Status.OK, fitness=fitness)


def told(strategy: GreedyStrategy, *nodes: Node) -> SearchView:
    view = SearchView()
    for n in nodes:
        strategy.tell(n)
        view.add(n)
    return view


def test_the_baseline_competes_by_default_and_not_when_it_does_not_count():
    nodes = (
        ok("root", None, Operator.BASELINE, 10.0),  # the best score of all
        ok("d1", "root", Operator.DRAFT, 3.0),
        ok("d2", "root", Operator.DRAFT, 5.0),
        Node("d3", "root", Operator.DRAFT, Status.SCREENED_OUT),
    )
    plain = GreedyStrategy(random.Random(0), GreedyConfig(num_drafts=2))
    view = told(plain, *nodes)
    assert plain.ask(view, 1)[0].parent_id == "root" and plain.final(view) == "root"
    drafted = GreedyStrategy(random.Random(0), GreedyConfig(num_drafts=2, baseline_counts=False))
    view = told(drafted, *nodes)
    (step,) = drafted.ask(view, 1)
    assert (step.parent_id, step.operator) == ("d2", Operator.IMPROVE) and drafted.final(view) == "d2"


def test_without_a_usable_draft_the_search_drafts_again_rather_than_improve_the_baseline():
    strategy = GreedyStrategy(random.Random(0), GreedyConfig(num_drafts=1, max_debug_depth=0, baseline_counts=False))
    view = told(
        strategy,
        ok("root", None, Operator.BASELINE, 10.0),
        Node("d1", "root", Operator.DRAFT, Status.FAILED, reason="crash"),
    )
    (step,) = strategy.ask(view, 1)
    assert (step.parent_id, step.operator) == ("root", Operator.DRAFT) and strategy.final(view) is None
