"""PairwiseRPM: perfect judges win, position bias cancels, BFS context, bracket records."""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter

from cascade_pool import child
from context_nodes import scored_node

from verifyless.model.base import ModelRequest
from verifyless.node import Candidate, Node, Status
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import ScreenContext
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.screen.tournament import PairwiseRPM, TournamentOptions, collect_context
from verifyless.testing import TASK, SampleFnModel


def FakeModel(fn, name: str = "fake-judge") -> SampleFnModel:
    return SampleFnModel(fn, name)


def ctx(seed=0, nodes=None, summaries=None, n_verify=1, parent="p") -> ScreenContext:
    return ScreenContext(
        task=TASK,
        parent=ParentInfo(id=parent, program="x = 1\n"),
        rng=random.Random(seed),
        nodes=nodes or {},
        summaries=summaries or {},
        n_verify=n_verify,
    )


def cand(cid: str, quality: int) -> Candidate:
    return child(cid, f"model = 'm{cid}'  # Q={quality}\n", f"ID={cid} Q={quality}")


def quality(request: ModelRequest, letter: str) -> int:
    text = request.messages[-1].content
    return int(re.search(rf"## Candidate {letter}\n.*?Q=(\d+)", text, re.S).group(1))


def perfect(request: ModelRequest, i: int) -> str:
    better = "A" if quality(request, "A") > quality(request, "B") else "B"
    return f"Looking at the evidence...\n[CHOICE] {better} --- higher expected accuracy"


def play(judge, cands, **kw):
    c = kw.pop("context", None) or ctx(**kw)
    return asyncio.run(judge.screen(c, cands))


def test_perfect_judge_always_picks_the_best_with_byes() -> None:
    qualities = [3, 9, 1, 7, 5, 2, 8]  # odd count: byes happen
    cands = [cand(f"c{i}", q) for i, q in enumerate(qualities)]
    for seed in range(6):
        s = play(PairwiseRPM(FakeModel(perfect)), cands, seed=seed, n_verify=2)
        assert s.ranking[0] == "c1" and s.chosen[0] == "c1" and len(s.chosen) == 2
        assert sorted(s.ranking) == sorted(c.id for c in cands)
        # a knockout over 7 candidates plays exactly 6 matches; each appears under both players
        matches = {(m["round"], tuple(m["pair"])) for e in s.evidence.values() for m in e.detail["matches"]}
        assert len(matches) == 6
        assert s.evidence["c1"].uncertainty == 0.0
        assert s.evidence["c1"].rank_value > max(e.rank_value for k, e in s.evidence.items() if k != "c1")


def test_ranking_follows_elimination_round() -> None:
    cands = [cand(f"c{q}", q) for q in range(8)]
    s = play(PairwiseRPM(FakeModel(perfect)), cands, seed=3)
    survived = [s.evidence[c].detail["rounds_survived"] for c in s.ranking]
    assert s.ranking[0] == "c7"
    assert survived == [4, 3, 2, 2, 1, 1, 1, 1]


def test_position_bias_cancels_into_rng_ties() -> None:
    always_a = FakeModel(lambda r, i: "[CHOICE] A --- first one looks fine")
    winners = Counter()
    for seed in range(40):
        s = play(PairwiseRPM(always_a), [cand("x", 1), cand("y", 9)], seed=seed)
        (match,) = s.evidence["x"].detail["matches"]
        assert match["decided_by"] == "rng" and match["votes"] == {"x": 2, "y": 2}
        assert len(match["samples"]) == 4  # both orders, then a second sample of both orders
        assert {tuple(smp["order"]) for smp in match["samples"]} == {("x", "y"), ("y", "x")}
        assert s.evidence[s.ranking[0]].uncertainty == 0.5
        winners[s.ranking[0]] += 1
    assert winners["x"] >= 8 and winners["y"] >= 8


def test_without_both_orders_a_biased_judge_wins_by_position() -> None:
    always_a = FakeModel(lambda r, i: "[CHOICE] A")
    s = play(PairwiseRPM(always_a, TournamentOptions(both_orders=False)), [cand("x", 1), cand("y", 9)], seed=0)
    (match,) = s.evidence["x"].detail["matches"]
    assert match["decided_by"] == "votes" and len(match["samples"]) == 1
    assert s.ranking[0] == match["pair"][0]


def test_split_first_pass_draws_second_sample() -> None:
    def judge(request, i):
        return "[CHOICE] A" if i == 0 else perfect(request, i)

    s = play(PairwiseRPM(FakeModel(judge)), [cand("x", 1), cand("y", 9)], seed=1)
    (match,) = s.evidence["y"].detail["matches"]
    assert match["votes"] == {"x": 1, "y": 3} or match["votes"] == {"y": 3, "x": 1}
    assert match["decided_by"] == "votes" and s.ranking[0] == "y"
    assert s.evidence["y"].uncertainty == 0.25


def test_unparseable_judge_falls_back_to_rng_and_counts_invalid() -> None:
    s = play(PairwiseRPM(FakeModel(lambda r, i: "Both look good.")), [cand("x", 1), cand("y", 2)], seed=5)
    e = s.evidence[s.ranking[0]]
    assert e.n_invalid == 4 and e.n_valid == 0 and e.uncertainty == 1.0
    assert e.detail["matches"][0]["decided_by"] == "rng"


def graph() -> dict[str, Node]:
    def node(nid, parent, status=Status.OK, score=0.5):
        return scored_node(nid, parent, score, status=status)

    nodes = [
        node("root", None, score=0.3),
        node("p", "root", score=0.6),
        node("sib", "root", score=0.55),
        node("bug", "p", Status.FAILED),
        node("fix", "bug", score=0.7),
        node("kid", "p", score=0.65),
        node("out", "p", Status.SCREENED_OUT),
        node("far", "sib", score=0.58),
    ]
    return {n.id: n for n in nodes}


def test_bfs_context_collects_executed_non_buggy_nodes_up_to_k() -> None:
    nodes = graph()
    all_ok = collect_context(ctx(nodes=nodes, summaries={"kid": "kid summary"}), 50)
    ids = [c.id for c in all_ok]
    assert ids[0] == "p"
    assert set(ids) == {"p", "root", "kid", "fix", "sib", "far"}  # fix is reached through the buggy node
    assert "bug" not in ids and "out" not in ids
    assert ids.index("root") < ids.index("sib") < ids.index("far")
    assert next(c for c in all_ok if c.id == "kid").summary == "kid summary"
    assert next(c for c in all_ok if c.id == "root").score == 0.3
    three = collect_context(ctx(nodes=nodes), 3)
    assert [c.id for c in three] == ids[:3]
    assert collect_context(ctx(nodes=nodes), 0) == []
    assert collect_context(ctx(nodes=nodes, parent="missing"), 5) == []


def test_context_and_code_reach_the_judge() -> None:
    judge = FakeModel(perfect)
    play(
        PairwiseRPM(judge, TournamentOptions(context_nodes=2, show="code")),
        [cand("x", 1), cand("y", 2)],
        context=ctx(nodes=graph(), summaries={"p": "parent summary text"}),
    )
    user = judge.requests[0].messages[-1].content
    assert "parent summary text" in user and "validation score: 0.6" in user
    assert "validation score: 0.3" in user or "validation score: 0.65" in user
    assert user.count("(validation score:") == 2
    assert "```python" in user and "plan x" in user
    assert judge.requests[0].role == "judge"


def test_registry_builds_tournament() -> None:
    judge = FakeModel(perfect)
    rpm = build_screener(
        "tournament",
        models={"judge": judge},
        options=SCREENERS.validate("tournament", {"context_nodes": 4, "show": "code"}),
    )
    assert isinstance(rpm, PairwiseRPM) and rpm.model is judge and rpm.options.context_nodes == 4


def test_default_prompt_shows_both_candidates_code_and_context_code_within_a_token_budget() -> None:
    judge = FakeModel(perfect)
    programs = {nid: f"def fit_{nid}():\n    return '{nid}'  # context code\n" for nid in graph()}
    context = ctx(nodes=graph(), summaries={"p": "parent summary text"})
    context.program_of = programs.__getitem__
    s = play(PairwiseRPM(judge), [cand("x", 1), cand("y", 2)], context=context)  # defaults: plan + code
    user = judge.requests[0].messages[-1].content
    assert "model = 'mx'  # Q=1" in user and "model = 'my'  # Q=2" in user  # both candidates' code
    assert "Plan: plan x" in user and "Plan: plan y" in user
    assert "def fit_p():" in user and "validation score: 0.6" in user  # context nodes with code and score
    assert user.count("(validation score:") == 6  # every executed node fits the default budget
    assert s.evidence["y"].detail["context_ids"][0] == "p"
    # K is as many nodes as fit the budget: one node's block is ~25 tokens here
    small = FakeModel(perfect)
    play(PairwiseRPM(small, TournamentOptions(context_tokens=60)), [cand("x", 1), cand("y", 2)], context=context)
    assert small.requests[0].messages[-1].content.count("(validation score:") == 2
    summaries = FakeModel(perfect)
    play(PairwiseRPM(summaries, TournamentOptions(show="summary")), [cand("x", 1), cand("y", 2)], context=context)
    text = summaries.requests[0].messages[-1].content
    assert "ID=x Q=1" in text and "model = 'mx'" not in text


def test_replies_and_tokens_are_counted_once_per_match() -> None:
    cands = [cand(f"c{i}", q) for i, q in enumerate([3, 9, 1, 7, 5])]
    s = play(PairwiseRPM(FakeModel(perfect)), cands, seed=2)
    from verifyless.screen.health import reply_stats

    stats = reply_stats(s.evidence)
    samples = {
        (m["round"], tuple(m["pair"]), i)
        for e in s.evidence.values()
        for m in e.detail["matches"]
        for i, _ in enumerate(m["samples"])
    }
    assert stats.total == len(samples) and stats.parsed == stats.total
    assert sum(e.detail["tokens"] for e in s.evidence.values()) > 0
    bad = play(PairwiseRPM(FakeModel(lambda r, i: "Both good.")), cands[:2], seed=2)
    stats = reply_stats(bad.evidence)
    # each unreadable reply was sent back once with the format reminder; the record keeps both replies
    assert (stats.parsed, stats.total, stats.example) == (0, 4, "Both good. Both good.")
