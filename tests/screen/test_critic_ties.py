"""Critic vote accounting over all k critiques, and tie-breaking inside the critic's ranking."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest
from critic_screens import VERDICT, cand, make_ctx, scripted

from verifyless.errors import ConfigError
from verifyless.screen.critic import CriticOptions, PointwiseCritic, evidence_from_critiques
from verifyless.screen.health import reply_stats
from verifyless.screen.ranking import route
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.testing import SampleFnModel


def run(screener, ctx, cands):
    return asyncio.run(screener.screen(ctx, cands))


def test_unparsed_critiques_count_in_the_vote_denominator() -> None:
    e = evidence_from_critiques("a", [VERDICT["SmallWin"]] * 12 + [VERDICT["junk"]] * 4)
    assert e.votes == {"improve": 0.75, "tie": 0.0, "lose": 0.0}
    assert e.uncertainty == pytest.approx(0.25) and route(e.uncertainty, 0.25)  # the paper's u; the old rule gave 0
    assert e.rank_value == pytest.approx(12 * 2 / 16)  # unparsed counts as Lose (0) in the mean
    assert (e.n_valid, e.n_invalid) == (12, 4)
    assert e.detail["replies"]["parsed"] == 12 and e.detail["replies"]["total"] == 16
    assert e.detail["replies"]["example"] == "I cannot decide."
    nothing = evidence_from_critiques("b", [VERDICT["junk"]] * 3)
    assert (nothing.rank_value, nothing.uncertainty) == (-1.0, 1.0)


def test_one_parsed_bigwin_among_unparsed_does_not_win() -> None:
    plan = {"lucky": ["BigWin"] + ["junk"] * 15, "steady": ["Tie"], "mixed": ["SmallWin", "Lose"]}
    s = run(
        PointwiseCritic(SampleFnModel(scripted(plan)), CriticOptions(k=16, format_reminders=0)),
        make_ctx(),
        [cand(x) for x in plan],
    )
    assert s.evidence["lucky"].rank_value == pytest.approx(0.25)
    assert s.ranking[0] in {"steady", "mixed"} and s.ranking[-1] == "lucky"
    assert s.evidence["lucky"].uncertainty == pytest.approx(1 - 1 / 16)


def test_votes_tie_break_prefers_the_higher_tier_share_for_every_seed() -> None:
    plan = {"spread": ["BigWin", "SmallWin"], "flat": ["MediumWin"], "low": ["Tie"]}  # spread and flat: mean 3
    for seed in range(12):
        for rule in ("auto", "votes"):
            s = run(
                PointwiseCritic(SampleFnModel(scripted(plan)), CriticOptions(k=2, tie_break=rule)),
                make_ctx(seed),
                [cand(x) for x in ("flat", "low", "spread")],
            )
            assert s.ranking == ("spread", "flat", "low")
            assert s.evidence["spread"].rank_value == s.evidence["flat"].rank_value
    tops = Counter(
        run(
            PointwiseCritic(SampleFnModel(scripted(plan)), CriticOptions(k=2, tie_break="none")),
            make_ctx(seed),
            [cand(x) for x in ("flat", "low", "spread")],
        ).ranking[0]
        for seed in range(30)
    )
    assert set(tops) == {"spread", "flat"}  # the paper's plain mean rank: a coin among the tied


class LabelScoringModel(SampleFnModel):
    """A critic model that can also score the five labels (as a local model with logits can)."""

    def __init__(self, fn, probs: dict[str, dict[str, float]]) -> None:
        super().__init__(fn, "local-critic")
        self.probs = probs

    async def label_probs(self, messages) -> dict[str, float]:
        cid = re.search(r"ID=(\w+)", messages[-1].content).group(1)
        return self.probs[cid]


def test_label_probability_mass_breaks_ties_between_identical_votes() -> None:
    plan = {"a": ["BigWin"], "b": ["BigWin"], "c": ["BigWin"]}  # a perfect critic that calls every gain big
    probs = {
        "a": {"BigWin": 0.55, "MediumWin": 0.45},
        "b": {"BigWin": 0.95, "MediumWin": 0.05},
        "c": {"BigWin": 0.7, "SmallWin": 0.3},
    }
    for seed in range(10):
        s = run(
            PointwiseCritic(LabelScoringModel(scripted(plan), probs), CriticOptions(k=4)),
            make_ctx(seed),
            [cand(x) for x in "abc"],
        )
        assert s.ranking == ("b", "a", "c")  # expected ranks 3.95, 3.55, 3.4
        assert s.evidence["b"].detail["label_probs"]["BigWin"] == 0.95
    tops = {
        run(
            PointwiseCritic(LabelScoringModel(scripted(plan), probs), CriticOptions(k=4, tie_break="votes")),
            make_ctx(seed),
            [cand(x) for x in "abc"],
        ).ranking[0]
        for seed in range(20)
    }
    assert len(tops) > 1  # votes alone cannot separate them


# every sample says BigWin for all three; only the three-way verdict probabilities (as a local model scores the
# verdict words) separate them: b has the most mass on improve, a and c tie on it and a has more on tie
ALL_BIG_WINS = {"a": ["BigWin"], "b": ["BigWin"], "c": ["BigWin"]}
THREE_WAY_PROBS = {
    "a": {"improve": 0.6, "tie": 0.3, "lose": 0.1},
    "b": {"improve": 0.8, "tie": 0.1, "lose": 0.1},
    "c": {"improve": 0.6, "tie": 0.1, "lose": 0.3},
}


def test_three_way_verdict_probabilities_through_a_cache_wrapper(tmp_path) -> None:
    from verifyless.model.cache import CachedModel, ResponseCache

    plan, probs = ALL_BIG_WINS, THREE_WAY_PROBS
    cached = CachedModel(LabelScoringModel(scripted(plan), probs), ResponseCache(tmp_path / "cache.db"))
    for seed in range(6):
        s = run(PointwiseCritic(cached, CriticOptions(k=2)), make_ctx(seed), [cand(x) for x in "abc"])
        assert s.ranking == ("b", "a", "c")  # mass on improve, then on tie
        assert s.evidence["a"].detail["label_probs"] == probs["a"]


class LabelProbingModel(SampleFnModel):
    """A critic model with an in-process label probe (as ``LocalModel.probe_labels``), recording what it was asked."""

    def __init__(self, fn, probs: dict[str, dict[str, float]]) -> None:
        super().__init__(fn, "local-critic")
        self.probs = probs
        self.asked: list[tuple[str, str, tuple[str, ...]]] = []

    async def probe_labels(self, messages, prefix, *, tag, labels) -> dict[str, float]:
        self.asked.append((prefix, tag, tuple(labels)))
        cid = re.search(r"ID=(\w+)", messages[-1].content).group(1)
        return self.probs[cid]


def test_an_in_process_label_probe_is_asked_for_the_verdict_words_through_a_cache_wrapper(tmp_path) -> None:
    from verifyless.model.cache import CachedModel, ResponseCache

    plan, probs = ALL_BIG_WINS, THREE_WAY_PROBS
    inner = LabelProbingModel(scripted(plan), probs)
    s = run(
        PointwiseCritic(CachedModel(inner, ResponseCache(tmp_path / "cache.db")), CriticOptions(k=2)),
        make_ctx(0),
        [cand(x) for x in "abc"],
    )
    assert s.ranking == ("b", "a", "c") and s.evidence["a"].detail["label_probs"] == probs["a"]
    assert set(inner.asked) == {("", "[IMPROVEMENT]", ("improve", "tie", "lose"))} and len(inner.asked) == 3


def quality_judge(request, i):
    text = request.messages[-1].content
    qa = int(re.search(r"## Candidate A\n.*?Q(\d)", text, re.S).group(1))
    qb = int(re.search(r"## Candidate B\n.*?Q(\d)", text, re.S).group(1))
    return "[CHOICE] A --- better" if qa > qb else "[CHOICE] B --- better"


def qcand(cid: str, q: int):
    return cand(cid).replace(summary=f"Child ID={cid} Q{q}; uses a forest.")


def test_pairwise_tie_break_plays_the_tied_within_its_token_budget() -> None:
    plan = {x: ["BigWin"] for x in "abcd"} | {"e": ["Tie"]}
    cands = [qcand("a", 2), qcand("b", 9), qcand("c", 5), qcand("d", 1), qcand("e", 8)]
    for seed in range(4):
        judge = SampleFnModel(quality_judge, "judge")
        s = run(
            PointwiseCritic(SampleFnModel(scripted(plan)), CriticOptions(k=2, tie_break="pairwise"), judge=judge),
            make_ctx(seed),
            cands,
        )
        assert s.ranking[0] == "b" and s.ranking[-1] == "e"  # the judge's best among the tied a-d
        info = s.evidence["b"].detail["tie_break"]
        assert info["rule"] == "pairwise" and sorted(info["tied"]) == ["a", "b", "c", "d"]
        assert all(r.role == "judge" for r in judge.requests) and judge.requests
        stats = reply_stats(s.evidence)
        assert stats.total == 10 + len(judge.requests) and stats.parsed == stats.total  # judge replies counted too
    # a budget for one match plays only two of the tied (the first two in votes-then-rng order)
    judge = SampleFnModel(quality_judge, "judge")
    critic = PointwiseCritic(SampleFnModel(scripted(plan)), CriticOptions(k=2, tie_break="pairwise"), judge=judge)
    s = run(critic, make_ctx(1), cands)
    per_match = s.evidence["a"].detail["tie_break"]["match_tokens_estimate"]
    critic = PointwiseCritic(
        SampleFnModel(scripted(plan)), CriticOptions(k=2, tie_break="pairwise", tie_break_tokens=per_match), judge=judge
    )
    s = run(critic, make_ctx(1), cands)
    assert len(s.evidence["a"].detail["tie_break"]["played"]) == 2
    # no budget: no judge call at all, votes-then-rng order stays
    silent = SampleFnModel(quality_judge, "judge")
    s = run(
        PointwiseCritic(
            SampleFnModel(scripted(plan)), CriticOptions(k=2, tie_break="pairwise", tie_break_tokens=0), judge=silent
        ),
        make_ctx(1),
        cands,
    )
    assert silent.requests == [] and s.evidence["a"].detail["tie_break"]["played"] == []


def test_tie_break_is_a_typed_option() -> None:
    model = SampleFnModel(scripted({}))
    judge = SampleFnModel(quality_judge, "judge")
    critic = build_screener(
        "critic",
        models={"default": model, "judge": judge},
        options=SCREENERS.validate("critic", {"tie_break": "pairwise"}),
    )
    assert critic.tie_break == "pairwise" and critic.judge is judge
    assert build_screener("critic", models={"default": model}).tie_break == "auto"
    with pytest.raises(ConfigError, match=r"tie_break.*auto.*none.*votes.*probs.*pairwise"):
        build_screener("critic", models={"default": model}, options=SCREENERS.validate("critic", {"tie_break": "coin"}))
