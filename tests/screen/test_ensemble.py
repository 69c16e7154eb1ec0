"""Ensembles (majority vote, arbiter), baselines, final-node selection and the registry."""

from __future__ import annotations

import asyncio
import random
import re
from collections import Counter

import pytest
from ensemble_pool import cands

from verifyless.errors import ConfigError
from verifyless.node import Evidence, Node, Operator, Screening, Status
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import ScreenContext
from verifyless.screen.baselines import OracleScreener, RandomOptions, RandomScreener
from verifyless.screen.critic import CriticOptions, PointwiseCritic
from verifyless.screen.ensemble import Arbiter, MajorityVote, PollOptions
from verifyless.screen.final import select_final
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.screen.tournament import PairwiseRPM
from verifyless.testing import TASK, SampleFnModel


def FakeModel(fn, name: str = "fake") -> SampleFnModel:
    return SampleFnModel(fn, name)


class FixedScreener:
    """A member that always returns the same ranking (and records the rngs it was given)."""

    def __init__(self, ranking: list[str], name: str = "fixed") -> None:
        self.ranking = ranking
        self.name = name
        self.rngs: list[random.Random] = []

    async def screen(self, ctx, candidates) -> Screening:
        self.rngs.append(ctx.rng)
        ev = {
            cid: Evidence(cid, rank_value=-i, n_valid=1, detail={"critiques": [f"I like {cid}"]})
            for i, cid in enumerate(self.ranking)
        }
        return Screening(self.name, tuple(self.ranking), tuple(self.ranking[:1]), ev)


def ctx(seed: int = 0, n_verify: int = 1) -> ScreenContext:
    return ScreenContext(
        task=TASK, parent=ParentInfo(id="p", program="x = 1\n"), rng=random.Random(seed), n_verify=n_verify
    )


def run(screener, c, items):
    return asyncio.run(screener.screen(c, items))


# ------------------------------------------------------------------ majority vote


def test_majority_vote_counts_top_choices() -> None:
    members = [FixedScreener(["a", "b", "c"]), FixedScreener(["a", "c", "b"]), FixedScreener(["b", "c", "a"])]
    s = run(MajorityVote(members, PollOptions(rollouts=1)), ctx(n_verify=2), cands("a", "b", "c"))
    assert s.ranking == ("a", "b", "c")  # a: 2 votes; b: 1 vote; c: 0 votes
    assert s.chosen == ("a", "b")
    assert s.evidence["a"].detail["top_votes"] == 2
    assert s.evidence["a"].votes["top"] == pytest.approx(2 / 3)
    assert s.evidence["a"].uncertainty == pytest.approx(1 / 3)
    assert len(s.evidence["a"].detail["ballots"]) == 3


def test_majority_vote_rollouts_use_distinct_reproducible_rngs() -> None:
    member = FixedScreener(["a", "b"])
    run(MajorityVote([member], PollOptions(rollouts=3)), ctx(seed=4), cands("a", "b"))
    assert len(member.rngs) == 3 and len({r.random() for r in member.rngs}) == 3
    r1 = run(MajorityVote([RandomScreener()], PollOptions(rollouts=3)), ctx(seed=9), cands(*"abcdef"))
    r2 = run(MajorityVote([RandomScreener()], PollOptions(rollouts=3)), ctx(seed=9), cands(*"abcdef"))
    assert r1.ranking == r2.ranking and len(r1.evidence["a"].detail["ballots"]) == 3


def test_majority_vote_ties_are_uniformly_random_over_seeds() -> None:
    # a, b and c have one top vote each: the paper breaks such ties uniformly at random (seeded)
    members = [FixedScreener(["a", "b", "c"]), FixedScreener(["b", "a", "c"]), FixedScreener(["c", "a", "b"])]
    tops = Counter()
    for seed in range(300):
        s = run(MajorityVote(members, PollOptions(rollouts=1)), ctx(seed), cands("a", "b", "c"))
        again = run(MajorityVote(members, PollOptions(rollouts=1)), ctx(seed), cands("a", "b", "c"))
        assert s.ranking == again.ranking  # reproducible for a seed
        tops[s.ranking[0]] += 1
    assert set(tops) == {"a", "b", "c"}
    assert all(70 <= n <= 130 for n in tops.values()), tops  # 100 expected each; mean position plays no part
    # a candidate with more votes is never outranked by a random draw
    members = [FixedScreener(["a", "b", "c"]), FixedScreener(["a", "c", "b"]), FixedScreener(["b", "c", "a"])]
    assert {
        run(MajorityVote(members, PollOptions(rollouts=1)), ctx(seed), cands("a", "b", "c")).ranking[:2]
        for seed in range(20)
    } == {("a", "b")}


def test_majority_vote_position_tie_break_option() -> None:
    members = [FixedScreener(["a", "b", "c"]), FixedScreener(["b", "a", "c"]), FixedScreener(["c", "a", "b"])]
    s = run(MajorityVote(members, PollOptions(rollouts=1, tie_break="position")), ctx(0), cands("a", "b", "c"))
    assert s.ranking == ("a", "b", "c")  # equal votes: the better mean position wins
    with pytest.raises(ValueError, match="tie_break"):
        MajorityVote(members, PollOptions(tie_break="coin"))


def test_majority_vote_over_models_with_tournaments() -> None:
    def perfect(request, i):
        text = request.messages[-1].content
        qa = int(re.search(r"## Candidate A\n.*?Q=(\d+)", text, re.S).group(1))
        qb = int(re.search(r"## Candidate B\n.*?Q=(\d+)", text, re.S).group(1))
        return "[CHOICE] A" if qa > qb else "[CHOICE] B"

    def worst(request, i):
        return "[CHOICE] B" if perfect(request, i).endswith("A") else "[CHOICE] A"

    models = {"m1": FakeModel(perfect, "m1"), "m2": FakeModel(perfect, "m2"), "m3": FakeModel(worst, "m3")}
    ens = build_screener(
        "ensemble",
        models=models,
        options=SCREENERS.validate("ensemble", {"members": ["m1", "m2", "m3"], "rollouts": 3}),
    )
    assert isinstance(ens, MajorityVote) and len(ens.screeners) == 3
    s = run(ens, ctx(1), cands("a", "b", "c", "d", q={"a": 1, "b": 9, "c": 4, "d": 2}))
    assert s.ranking[0] == "b" and s.evidence["b"].detail["top_votes"] == 6
    assert s.evidence["a"].detail["top_votes"] == 3  # the contrarian judge's pick


# ------------------------------------------------------------------ arbiter


def critic_member(label_for: dict[str, str], name: str) -> PointwiseCritic:
    verdicts = {"win": "[IMPROVEMENT] improve --- r\n[WINTIER] big", "lose": "[IMPROVEMENT] lose --- r\n[WINTIER] NA"}

    def fn(request, i):
        cid = re.search(r"ID=(\w+)", request.messages[-1].content).group(1)
        return f"As {name} I think so.\n" + verdicts[label_for[cid]]

    return PointwiseCritic(FakeModel(fn, name), CriticOptions(k=2))


def test_arbiter_overrides_majority_and_sees_anonymised_reasoning() -> None:
    members = [
        critic_member({"a": "win", "b": "lose", "c": "lose"}, "gpt-secret"),
        critic_member({"a": "win", "b": "lose", "c": "lose"}, "claude-hidden"),
        critic_member({"a": "lose", "b": "lose", "c": "win"}, "gemini-x"),
    ]
    arbiter_model = FakeModel(lambda r, i: "Reviewer 3 is right.\n[CHOICE] 3 --- sound argument", "arb-model")
    s = run(Arbiter(arbiter_model, members), ctx(), cands("a", "b", "c"))
    assert s.ranking[0] == "c" and s.chosen == ("c",)
    assert s.ranking[1] == "a"  # then majority order
    assert s.evidence["c"].detail["fallback"] is False and s.evidence["c"].detail["arbiter_pick"] == "c"
    prompt = arbiter_model.requests[0].messages[-1].content
    assert "Reviewer 1" in prompt and "Candidate 3" in prompt and "I think so" in prompt
    for secret in ("gpt-secret", "claude-hidden", "gemini-x"):
        assert secret not in prompt
    assert arbiter_model.requests[0].role == "arbiter"


def test_arbiter_falls_back_to_majority_on_parse_failure() -> None:
    members = [FixedScreener(["b", "a", "c"]), FixedScreener(["b", "c", "a"]), FixedScreener(["a", "b", "c"])]
    arbiter_model = FakeModel(lambda r, i: "Hard to say. [CHOICE] 7")
    s = run(Arbiter(arbiter_model, members), ctx(), cands("a", "b", "c"))
    assert s.ranking == ("b", "a", "c")
    assert all(e.detail["fallback"] is True for e in s.evidence.values())
    # one format reminder (the default), then the majority: both replies are kept
    assert s.evidence["b"].detail["arbiter_raw"] == "Hard to say. [CHOICE] 7\nHard to say. [CHOICE] 7"
    assert (
        len(arbiter_model.requests) == 2
        and "could not read your choice" in arbiter_model.requests[1].messages[-1].content
    )
    assert s.evidence["b"].n_invalid == 1


# ------------------------------------------------------------------ baselines


def test_random_screener_is_uniform_and_reproducible() -> None:
    tops = Counter(run(RandomScreener(), ctx(seed), cands("a", "b", "c")).chosen[0] for seed in range(60))
    assert set(tops) == {"a", "b", "c"} and min(tops.values()) >= 8
    assert (
        run(RandomScreener(), ctx(5), cands(*"abcd")).ranking == run(RandomScreener(), ctx(5), cands(*"abcd")).ranking
    )
    assert len(run(RandomScreener(RandomOptions(n_verify=2)), ctx(), cands(*"abcd")).chosen) == 2


def test_oracle_chooses_every_candidate() -> None:
    s = run(OracleScreener(), ctx(n_verify=1), cands("a", "b", "c"))
    assert s.chosen == ("a", "b", "c") and s.ranking == ("a", "b", "c")


# ------------------------------------------------------------------ final-node selection


def nodes_with(fitness: dict[str, float], status: Status = Status.OK) -> list[Node]:
    return [
        Node(id=k, parent_id=None, operator=Operator.IMPROVE, status=status, fitness=v, score=v, idea=f"idea {k}")
        for k, v in fitness.items()
    ]


def test_final_selection_picks_the_node_a_perfect_judge_prefers() -> None:
    fitness = {"n1": 0.90, "n2": 0.89, "n3": 0.88, "n4": 0.87, "n5": 0.86, "n6": 0.85, "n7": 0.10}
    hidden = {"n1": 2, "n2": 5, "n3": 9, "n4": 1, "n5": 3, "n6": 4, "n7": 99}
    summaries = {k: f"ID={k} Q={q}" for k, q in hidden.items()}

    def judge(request, i):
        text = request.messages[-1].content
        shown = re.findall(r"### Solution ([A-Z])\n.*?Q=(\d+)", text, re.S)
        assert 2 <= len(shown) <= 5
        return "[CHOICE] " + max(shown, key=lambda x: int(x[1]))[0]

    model = FakeModel(judge)
    result = asyncio.run(
        select_final(nodes_with(fitness), model, top_n=6, rng=random.Random(0), task=TASK, summaries=summaries)
    )
    assert result.winner == "n3"  # n7 has the best hidden quality but is outside the top-6 pool
    assert "n7" not in result.pool and len(result.pool) == 6
    assert len(result.matches) == 30 and len(model.requests) == 30
    assert all(len(m["shown"]) == 5 for m in result.matches)
    assert sum(result.points.values()) == 30


def rotating_judge():
    """Names node a in match 0, b in match 1, c in match 2 (whatever letter it got): three matches, a full tie."""

    def fn(request, i):
        blocks = re.findall(r"### Solution ([A-Z])\n.*?idea (\w)", request.messages[-1].content, re.S)
        want = "abc"[i % 3]
        return "[CHOICE] " + next(letter for letter, node in blocks if node == want)

    return FakeModel(fn)


def test_final_selection_ties_are_random_unless_configured() -> None:
    nodes = nodes_with({"a": 0.5, "b": 0.7, "c": 0.6})
    winners = Counter()
    for seed in range(90):
        result = asyncio.run(select_final(nodes, rotating_judge(), top_n=3, matches=3, rng=random.Random(seed)))
        assert result.points == {"a": 1, "b": 1, "c": 1}
        again = asyncio.run(select_final(nodes, rotating_judge(), top_n=3, matches=3, rng=random.Random(seed)))
        assert again.winner == result.winner  # reproducible for a seed
        winners[result.winner] += 1
    assert set(winners) == {"a", "b", "c"} and min(winners.values()) >= 15, winners  # the paper: uniform ties
    for seed in range(10):
        result = asyncio.run(
            select_final(nodes, rotating_judge(), top_n=3, matches=3, rng=random.Random(seed), tie_break="fitness")
        )
        assert result.winner == "b"  # configured: tied points go to the higher validation fitness
    with pytest.raises(ValueError, match="tie_break"):
        asyncio.run(select_final(nodes, rotating_judge(), top_n=3, rng=random.Random(0), tie_break="coin"))


def test_final_selection_without_parsed_replies_has_no_winner(caplog) -> None:
    fitness = {"a": 0.5, "b": 0.7, "c": 0.6}
    silent = FakeModel(lambda r, i: "no idea")
    with caplog.at_level("WARNING"):
        none = asyncio.run(select_final(nodes_with(fitness), silent, top_n=3, matches=4, rng=random.Random(1)))
    assert none.winner is None and sum(none.points.values()) == 0  # nothing parsed: no coin-flip winner
    assert "0 of 4 replies parsed" in caplog.text and "no idea" in caplog.text
    single = asyncio.run(select_final(nodes_with({"z": 1.0}), silent, top_n=3, rng=random.Random(1)))
    assert single.winner == "z" and len(silent.requests) == 4
    empty = asyncio.run(select_final(nodes_with({"q": 1.0}, Status.FAILED), silent, top_n=3, rng=random.Random(1)))
    assert empty.winner is None
    with pytest.raises(ValueError, match="rng"):
        asyncio.run(select_final([], silent, top_n=3))


# ------------------------------------------------------------------ registry


def test_registry_names_and_errors() -> None:
    assert {"critic", "tournament", "ensemble", "arbiter", "random", "oracle", "surrogate", "agentic"} <= set(SCREENERS)
    m = FakeModel(lambda r, i: "")
    assert isinstance(build_screener("random", models={}, task=TASK, seed=1, sandbox=None), RandomScreener)
    assert isinstance(build_screener("oracle", models={}), OracleScreener)
    arb = build_screener(
        "arbiter",
        models={"default": m, "arbiter": m},
        options=SCREENERS.validate(
            "arbiter", {"members": [{"screener": "critic", "model": "default", "k": 3}, "default"]}
        ),
        task=TASK,
        seed=2,
    )
    assert isinstance(arb, Arbiter) and isinstance(arb.members[0], PointwiseCritic) and arb.members[0].k == 3
    assert isinstance(arb.members[1], PairwiseRPM)
    with pytest.raises(ConfigError, match="members"):
        build_screener("ensemble", models={"default": m})
    with pytest.raises(ConfigError, match="sandbox"):
        build_screener("agentic", models={"default": m})


def test_registry_imports_surrogate_lazily_with_seed() -> None:
    s = build_screener("surrogate", models={}, seed=3, options=SCREENERS.validate("surrogate", {"min_examples": 4}))
    assert type(s).__name__ == "SurrogateScreener" and s.name == "surrogate"
