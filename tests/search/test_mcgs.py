"""Progressive MCGS: credit along primary edges only, schedules, elite sampling, stagnation operators."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from diabetes_variants import diabetes_variants
from hypothesis import given, settings
from hypothesis import strategies as st
from scripted_runs import run_to_end

from verifyless.node import Node, Operator, Status
from verifyless.search.base import SearchView
from verifyless.search.mcgs import (
    DEFAULT_HORIZON,
    MCGSConfig,
    MCGSStrategy,
    anneal,
    effective_branches,
    inverse_rank_sample,
)

VIEW = SearchView()  # MCGS reads only told state; the view argument is not consulted


def ok(nid: str, parent: str | None, fitness: float, op: Operator = Operator.IMPROVE, refs=()) -> Node:
    return Node(nid, parent, op, Status.OK, fitness=fitness, reference_ids=tuple(refs))


def bad(nid: str, parent: str | None, op: Operator = Operator.IMPROVE) -> Node:
    return Node(nid, parent, op, Status.FAILED, reason="crash")


def base() -> Node:
    return ok("root", None, 0.0, Operator.BASELINE)


# ------------------------------------------------------------------- credit
@st.composite
def graphs(draw):
    """Random trees told in parent-first order, each node with random reference edges to earlier nodes."""
    n = draw(st.integers(1, 25))
    nodes = [base()]
    for i in range(n):
        parent = draw(st.sampled_from([x.id for x in nodes]))
        refs = draw(st.lists(st.sampled_from([x.id for x in nodes]), max_size=3, unique=True))
        kind = draw(st.sampled_from(["ok", "bad", "screened"]))
        nid = f"v{i}"
        if kind == "ok":
            node = ok(nid, parent, draw(st.floats(-5, 5, allow_nan=False)), refs=refs)
        elif kind == "bad":
            node = Node(nid, parent, Operator.IMPROVE, Status.FAILED, reference_ids=tuple(refs))
        else:
            node = Node(nid, parent, Operator.IMPROVE, Status.SCREENED_OUT, reference_ids=tuple(refs))
        nodes.append(node)
    return nodes


@settings(max_examples=60, deadline=None)
@given(graphs())
def test_credit_flows_only_along_primary_edges(nodes):
    with_refs = MCGSStrategy(random.Random(0))
    without = MCGSStrategy(random.Random(0))
    for node in nodes:
        with_refs.tell(node)
        without.tell(node.replace(reference_ids=()))
    assert with_refs.N == without.N and with_refs.W == without.W  # reference edges change nothing
    # N(u) = verified non-baseline nodes in u's primary subtree; W(u) = the sum of their rewards.
    by_id = {n.id: n for n in nodes}
    for u, count in with_refs.N.items():
        subtree = [v for v in with_refs.reward if _is_primary_descendant(by_id, v, u)]
        assert count == len(subtree)
        assert with_refs.W[u] == pytest.approx(sum(with_refs.reward[v] for v in subtree))
        assert with_refs.Q(u) == pytest.approx(with_refs.W[u] / (count + with_refs.config.eps))


def _is_primary_descendant(by_id, v, u):
    while v is not None:
        if v == u:
            return True
        v = by_id[v].parent_id
    return False


def test_rewards_minus_one_plus_one_plus_two():
    s = MCGSStrategy(random.Random(0))
    for node in [
        base(),
        ok("a", "root", 1.0, Operator.DRAFT),
        ok("a1", "a", 0.5),
        ok("a2", "a", 2.0),
        bad("a3", "a2"),
        ok("b", "root", 0.1, Operator.DRAFT),
        ok("b1", "b", 0.2),
    ]:
        s.tell(node)
    assert s.reward == {"a": 2, "a1": 1, "a2": 2, "a3": -1, "b": 2, "b1": 2}
    assert s.N["root"] == 6 and s.W["root"] == 8
    assert s.N["a"] == 4 and s.W["a"] == 4 and s.N["a2"] == 2 and s.W["a2"] == 1


# ---------------------------------------------------------------- schedules
@settings(max_examples=80, deadline=None)
@given(st.floats(0.5, 3), st.floats(0, 0.5), st.integers(1, 500), st.sampled_from(["linear", "cosine"]))
def test_anneal_monotone_with_endpoints(start, end, horizon, kind):
    values = [anneal(start, end, t, horizon, kind) for t in range(0, horizon + 20)]
    assert values[0] == pytest.approx(start)
    assert values[horizon] == pytest.approx(end) and values[-1] == pytest.approx(end)
    assert all(b <= a + 1e-12 for a, b in zip(values, values[1:], strict=False))


def test_c_and_w_decay_over_steps():
    s = MCGSStrategy(random.Random(0), MCGSConfig(horizon=10, schedule="cosine", w_min=0.2))
    assert s.c(0) == pytest.approx(1.414) and s.c(10) == pytest.approx(0.1) and s.c(50) == pytest.approx(0.1)
    assert s.w(0) == pytest.approx(1.0) and s.w(10) == pytest.approx(0.2)
    ws = [s.w(t) for t in range(15)]
    assert all(b <= a for a, b in zip(ws, ws[1:], strict=False))
    s.tell(base())
    for i in range(5):
        s.tell(ok(f"d{i}", "root", float(i), Operator.DRAFT))
    assert s.t == 5 and s.w() == pytest.approx(0.6)


# ----------------------------------------------------------- elite sampling
def test_inverse_rank_sampling_frequencies():
    rng = random.Random(1234)
    ranked = ["a", "b", "c", "d", "e"]
    draws = Counter(inverse_rank_sample(rng, ranked) for _ in range(20000))
    norm = sum(1 / r for r in range(1, 6))
    for rank, item in enumerate(ranked, start=1):
        assert draws[item] / 20000 == pytest.approx((1 / rank) / norm, abs=0.015)


def test_elite_guided_selection_uses_top_k_by_inverse_rank():
    s = MCGSStrategy(
        random.Random(3), MCGSConfig(num_drafts=1, w_min=0.0, horizon=1, top_k=3, tau_branch=10**6, tau_global=10**6)
    )
    s.tell(base())
    s.tell(ok("a", "root", 0.0, Operator.DRAFT))
    for i, f in enumerate([5.0, 4.0, 3.0, 2.0, 1.0]):
        s.tell(ok(f"x{i}", "a", f))
    parents = Counter(e.parent_id for e in s.ask(VIEW, 3000))
    assert set(parents) == {"x0", "x1", "x2"}
    norm = 1 + 1 / 2 + 1 / 3
    for rank, nid in enumerate(["x0", "x1", "x2"], start=1):
        assert parents[nid] / 3000 == pytest.approx((1 / rank) / norm, abs=0.03)


# --------------------------------------------------------------- stagnation
def _stagnation_setup(tau_branch=3, tau_global=10**6):
    """Branch A holds the global best a2 (child of a); branch B has b. Elite-only with top_k=1 picks a2."""
    cfg = MCGSConfig(num_drafts=2, w_min=0.0, horizon=1, top_k=1, tau_branch=tau_branch, tau_global=tau_global)
    s = MCGSStrategy(random.Random(0), cfg)
    for node in [
        base(),
        ok("a", "root", 1.0, Operator.DRAFT),
        ok("b", "root", 0.5, Operator.DRAFT),
        ok("a2", "a", 2.0),
    ]:
        s.tell(node)
    return s


def test_branch_stagnation_fires_evolve_then_reference_at_exactly_tau():
    s = _stagnation_setup(tau_branch=3)
    for i in range(3):
        exp = s.ask(VIEW, 1)[0]
        assert (exp.operator, exp.parent_id) == (Operator.IMPROVE, "a2")
        s.tell(ok(f"s{i}", "a2", 1.0))  # not a new branch best
    exp = s.ask(VIEW, 1)[0]
    assert (exp.operator, exp.parent_id, exp.reference_ids) == (Operator.EVOLVE, "a2", ("a",))
    s.tell(ok("e1", "a2", 1.5, Operator.EVOLVE, refs=("a",)))
    exp = s.ask(VIEW, 1)[0]
    assert (exp.operator, exp.reference_ids) == (Operator.REFERENCE, ("b",))
    s.tell(ok("r1", "a2", 3.0, Operator.REFERENCE, refs=("b",)))  # a new branch best resets stagnation
    exp = s.ask(VIEW, 1)[0]
    assert (exp.operator, exp.parent_id) == (Operator.IMPROVE, "r1")
    assert s.N["b"] == 1  # referenced, never credited


def test_global_stagnation_fires_aggregate_at_exactly_tau_global():
    s = _stagnation_setup(tau_branch=10**6, tau_global=4)
    for i in range(3):
        s.tell(ok(f"s{i}", "a2", 0.0))
        assert all(e.operator is not Operator.AGGREGATE for e in s.ask(VIEW, 2))
    s.tell(bad("s3", "a2"))
    exps = s.ask(VIEW, 2)
    assert exps[0].operator is Operator.AGGREGATE and exps[0].parent_id == "root"
    assert exps[0].reference_ids == ("a2", "b")  # best node of each branch, best branch first
    assert exps[1].operator is not Operator.AGGREGATE  # at most one per ask
    s.tell(ok("g", "root", 1.0, Operator.AGGREGATE, refs=("a2", "b")))
    assert s.branch_of["g"] == "g" and s.global_stale == 0  # a new branch; the clock restarts
    assert s.N["a2"] == 5 and s.N["b"] == 1  # itself and its four children


def test_draft_phase_debug_and_final_ensemble():
    s = MCGSStrategy(random.Random(0), MCGSConfig(num_drafts=2, max_debug_depth=1))
    s.tell(base())
    assert [e.operator for e in s.ask(VIEW, 2)] == [Operator.DRAFT, Operator.DRAFT]
    s.tell(bad("a", "root", Operator.DRAFT))
    s.tell(ok("b", "root", 1.0, Operator.DRAFT))
    exps = s.ask(VIEW, 4)
    assert (exps[0].operator, exps[0].parent_id) == (Operator.DEBUG, "a")  # repaired before selection
    assert all(e.operator is Operator.IMPROVE for e in exps[1:])
    s.tell(bad("a1", "a", Operator.DEBUG))  # at the debug limit now: never selected again
    for i, f in enumerate([3.0, 2.0, 5.0]):
        s.tell(ok(f"b{i}", "b", f))
    assert all(e.parent_id not in ("a", "a1") for e in s.ask(VIEW, 20))
    assert s.final(VIEW) == "b2"
    assert s.final_ensemble(VIEW, 3) == ["b2", "b0", "b1"] and len(s.final_ensemble(VIEW)) == 5


# ------------------------------------------------------------------ top-K ensemble submission (MLEvolve)


def _diabetes_mcgs_config(tmp_path, *extra: str):
    """A 4-verification mcgs run on diabetes (it declares an ensemble), random screening, no memory."""
    from verifyless.config import load_config

    base = ["task=diabetes", "strategy.name=mcgs", "budget.verifications=4", "engine.candidates=2"]
    more = ["screener.name=random", "engine.memory=false", f"store={tmp_path / 's.db'}"]
    return load_config(overrides=[*base, *more, *extra])


def test_mcgs_run_records_an_ensemble_submission_only_where_the_task_declares_one(tmp_path):
    from verifyless.engine.submission import ensemble_members
    from verifyless.store import RunStore

    cfg = _diabetes_mcgs_config(tmp_path)
    with RunStore(cfg.store) as store:
        result = run_to_end(cfg, store)
        (sub,) = [e.payload for e in store.events(result.run_id, kinds=["submission"])]
        charged = sum(e.charge.evaluator_seconds for e in store.events(result.run_id, kinds=["submission"]))
        ok_nodes = [r for r in store.node_rows(result.run_id) if r["status"] == "ok"]
    assert sub["status"] == "ok" and len(sub["members"]) == min(5, len(ok_nodes)) >= 2
    assert sub["members"][0] == result.best_id and charged == pytest.approx(sub["seconds"])
    assert sub["test_score"] is not None
    # diabetes minimises RMSE: the ensemble beats the final node when its validation RMSE is lower
    assert sub["final_id"] == result.best_id and sub["beats_final"] is (sub["score"] < result.best_score)
    from verifyless._cli.show import submission_line

    worse = submission_line({**sub, "beats_final": False})
    assert "worse than the final node: submit the node" in worse
    assert "final node" not in submission_line({**sub, "beats_final": None})  # a run stored before the field
    off = MCGSStrategy(random.Random(0), MCGSConfig(submit_ensemble=False))
    on = MCGSStrategy(random.Random(0))
    for s in (off, on):
        s.tell(base())
        s.tell(ok("a", "root", 1.0, Operator.DRAFT))
    task, _ = diabetes_variants()
    assert ensemble_members(on, task, VIEW) == ["a", "root"] and ensemble_members(off, task, VIEW) == []
    from dataclasses import replace

    assert ensemble_members(on, replace(task, ensemble=None), VIEW) == []
    from verifyless.engine.submission import submits_ensemble
    from verifyless.search.greedy import GreedyStrategy

    greedy = GreedyStrategy(random.Random(0))  # not an EnsembleStrategy: its runs submit one program
    assert [submits_ensemble(s, task) for s in (on, off, greedy)] == [True, False, False]
    assert ensemble_members(greedy, task, VIEW) == []


def test_the_ensemble_is_the_runs_answer_when_asked_and_a_task_without_predictions_says_why(tmp_path):
    """Issue 56, item 3: with ``ensemble_answer`` the scored ensemble is the run's result; a task whose outputs do
    not combine (circle_packing) records one ``unsupported`` submission and answers with its final node."""
    from verifyless._cli.show import submission_line
    from verifyless.store import RunStore

    asked = ["strategy.options.ensemble_tasks=all", "strategy.options.ensemble_answer=true"]
    cfg = _diabetes_mcgs_config(tmp_path, *asked)
    with RunStore(cfg.store) as store:
        result = run_to_end(cfg, store)
        (sub,) = [e.payload for e in store.events(result.run_id, kinds=["submission"])]
    assert sub["status"] == "ok" and result.answer == "ensemble"
    assert (result.answer_score, result.answer_test_score) == (sub["score"], sub["test_score"])
    cfg = _diabetes_mcgs_config(tmp_path, *asked, "task=circle_packing", f"store={tmp_path / 'c.db'}")
    with RunStore(cfg.store) as store:
        result = run_to_end(cfg, store)
        events = list(store.events(result.run_id, kinds=["submission"]))
    (event,) = events
    assert event.payload["status"] == "unsupported" and event.payload["members"] == []
    assert event.charge is None or event.charge.evaluator_seconds == 0
    assert result.answer == "node" and result.answer_score == result.best_score
    assert submission_line(event.payload).startswith("ensemble submission: none (task 'circle_packing'")


def test_under_a_time_cap_the_search_leaves_room_for_the_ensemble_that_is_its_answer(tmp_path):
    """Issue 56, item 3: with ``ensemble_answer`` the search stops while the ensemble's re-runs still fit the
    evaluator-seconds cap, so the answer is scored; without it the search spends the cap and the ensemble is
    skipped."""
    from verifyless.store import RunStore

    statuses = {}
    for answer in (False, True):
        cfg = _diabetes_mcgs_config(
            tmp_path,
            "budget.verifications=null",
            "budget.evaluator_seconds=20",
            f"strategy.options.ensemble_answer={str(answer).lower()}",
            f"store={tmp_path / f'{answer}.db'}",
        )
        with RunStore(cfg.store) as store:
            result = run_to_end(cfg, store)
            (sub,) = [e.payload for e in store.events(result.run_id, kinds=["submission"])]
        statuses[answer] = (sub["status"], result.answer, result.stopped)
    assert statuses[False] == ("skipped", "node", "budget: evaluator seconds")
    assert statuses[True] == ("ok", "ensemble", "budget: evaluator seconds")


def test_a_run_whose_wall_time_is_spent_skips_the_ensemble_re_runs_and_says_why(tmp_path, monkeypatch):
    import asyncio

    from verifyless._cli.show import submission_line
    from verifyless.store import RunStore
    from verifyless.wiring import build_engine

    cfg = _diabetes_mcgs_config(tmp_path, "budget.wall_seconds=100000")
    with RunStore(cfg.store) as store:
        engine = build_engine(cfg, store)
        chosen = engine.lifecycle.select_final

        async def then_the_wall_clock_runs_out(best_id):
            final = await chosen(best_id)
            engine.ledger.gate.started -= 10**6  # the cap is spent once the final node is chosen
            return final

        monkeypatch.setattr(engine.lifecycle, "select_final", then_the_wall_clock_runs_out)
        try:
            result = asyncio.run(engine.run())
        finally:
            engine.executor.close()
        (event,) = list(store.events(result.run_id, kinds=["submission"]))
    assert event.payload["status"] == "skipped" and "budget: wall time" in event.payload["reason"]
    assert len(event.payload["members"]) >= 2 and (event.charge is None or event.charge.evaluator_seconds == 0)
    assert submission_line(event.payload).startswith("ensemble submission: skipped (budget: wall time")


# ------------------------------------------------------- schedules paced by the run's budget
def test_paced_schedules_reach_their_floors_at_the_last_ask():
    """With no fixed horizon, c and w follow t / (t + steps_left): at the floor once no step is left."""
    s = MCGSStrategy(random.Random(0))
    s.tell(base())
    for i in range(7):
        s.tell(ok(f"d{i}", "root", float(i), Operator.DRAFT))
    s.pace(3)
    assert s.progress() == pytest.approx(7 / 10)
    assert s.c() == pytest.approx(1.414 + (0.1 - 1.414) * 0.7) and s.w() == pytest.approx(1 + (0.2 - 1) * 0.7)
    s.pace(0)
    assert s.c() == pytest.approx(0.1) and s.w() == pytest.approx(0.2)
    s.pace(93)  # a budget raised on resume stretches what is left of the anneal
    assert s.progress() == pytest.approx(0.07)
    s.pace(None)  # nothing paces it: the documented default length
    assert s.progress() == pytest.approx(7 / DEFAULT_HORIZON)


def test_a_fixed_horizon_ignores_the_pace():
    s = MCGSStrategy(random.Random(0), MCGSConfig(horizon=100, w_horizon=10))
    s.tell(base())
    for i in range(5):
        s.tell(ok(f"d{i}", "root", float(i), Operator.DRAFT))
    s.pace(0)
    assert s.progress(None, 100) == pytest.approx(0.05) and s.w() == pytest.approx(1 + (0.2 - 1) * 0.5)


def test_effective_branches_is_exp_entropy():
    assert effective_branches([]) == 0.0
    assert effective_branches(["a"] * 5) == pytest.approx(1.0)
    assert effective_branches(["a", "b", "c", "d"]) == pytest.approx(4.0)
    s = MCGSStrategy(random.Random(2), MCGSConfig(num_drafts=2, tau_branch=10**6, tau_global=10**6))
    s.tell(base())
    s.tell(ok("a", "root", 1.0, Operator.DRAFT))
    s.tell(ok("b", "root", 0.5, Operator.DRAFT))
    s.ask(VIEW, 4)
    assert 1.0 <= s.schedule()["branches"] <= 2.0
