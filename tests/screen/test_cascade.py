"""The critic-then-judge cascade, and typed screener options from the registry."""

from __future__ import annotations

import asyncio
import re

import pytest
from cascade_pool import LABELS, QUALITY, cand, critic_fn
from critic_screens import VERDICT, make_ctx

from verifyless.errors import ConfigError
from verifyless.screen.cascade import CascadeOptions, CriticThenJudge, confident_lose
from verifyless.screen.critic import CriticOptions, PointwiseCritic, evidence_from_critiques
from verifyless.screen.health import reply_stats
from verifyless.screen.registry import SCREENERS, build_screener, options_model
from verifyless.screen.tournament import PairwiseRPM
from verifyless.testing import SampleFnModel


def judge_fn(request, i):
    text = request.messages[-1].content
    qa = int(re.search(r"## Candidate A\n.*?# Q(\d)", text, re.S).group(1))
    qb = int(re.search(r"## Candidate B\n.*?# Q(\d)", text, re.S).group(1))
    return "[CHOICE] A" if qa > qb else "[CHOICE] B"


def cascade(m: int = 3, **kw) -> tuple[CriticThenJudge, SampleFnModel]:
    judge = SampleFnModel(judge_fn, "judge")
    critic = PointwiseCritic(SampleFnModel(critic_fn(LABELS), "critic"), CriticOptions(k=4))
    return CriticThenJudge(critic, PairwiseRPM(judge), CascadeOptions(m=m, **kw)), judge


def run(screener, seed=0):
    return asyncio.run(screener.screen(make_ctx(seed), [cand(c, q) for c, q in QUALITY.items()]))


def test_cascade_sends_exactly_m_to_the_tournament_and_records_both_stages() -> None:
    screener, judge = cascade(m=3)
    s = run(screener)
    sent = s.evidence["a"].detail["sent_to_tournament"]
    assert sorted(sent) == ["a", "b", "c"]  # the critic's top 3 by mean rank (4, 3.5, 3)
    shown = {cid for r in judge.requests for cid in re.findall(r"model = '(\w)'", r.messages[-1].content)}
    assert shown == {"a", "b", "c"}  # the tournament saw exactly those m candidates
    assert s.ranking[:3] == ("c", "b", "a")  # the judge's order of the m (quality 9 > 8 > 3)
    assert s.ranking[3:5] == ("d", "e") and set(s.ranking[5:]) == {"f", "g"}  # then critic order, Loses last
    assert s.chosen == ("c",)
    stages = s.evidence["c"].detail
    assert stages["stage"] == "tournament" and stages["critic"]["labels"] == ["MediumWin"] * 4
    assert stages["tournament"]["detail"]["matches"]
    assert s.evidence["d"].detail["stage"] == "filtered" and s.evidence["d"].detail["tournament"] is None
    assert s.evidence["f"].detail["stage"] == "dropped-lose"
    tokens = stages["stage_tokens"]
    assert tokens["critic"] > 0 and tokens["tournament"] > 0
    assert sum(e.detail["tokens"] for e in s.evidence.values()) == tokens["critic"] + tokens["tournament"]
    stats = reply_stats(s.evidence)
    assert stats.total == 7 * 4 + len(judge.requests) and stats.parsed == stats.total
    again = run(cascade(m=3)[0])
    assert again.ranking == s.ranking  # deterministic under a seed


def test_confident_lose_is_dropped_even_when_m_has_room() -> None:
    screener, judge = cascade(m=6)
    s = run(screener)
    assert sorted(s.evidence["a"].detail["sent_to_tournament"]) == ["a", "b", "c", "d", "e"]
    assert "f" not in {cid for r in judge.requests for cid in re.findall(r"model = '(\w)'", r.messages[-1].content)}
    kept, _ = cascade(m=6, drop_confident_lose=False)
    assert len(run(kept).evidence["a"].detail["sent_to_tournament"]) == 6
    lose = evidence_from_critiques("x", [VERDICT["Lose"]] * 13 + [VERDICT["Tie"]] * 3)
    unsure = evidence_from_critiques("y", [VERDICT["Lose"]] * 12 + [VERDICT["Tie"]] * 4)  # u = 0.25: not confident
    assert confident_lose(lose, 0.25) and not confident_lose(unsure, 0.25)


def test_all_confident_lose_passes_the_critics_best_alone() -> None:
    judge = SampleFnModel(judge_fn, "judge")
    critic = PointwiseCritic(SampleFnModel(critic_fn({c: ["Lose"] for c in "xyz"}), "critic"), CriticOptions(k=2))
    s = asyncio.run(
        CriticThenJudge(critic, PairwiseRPM(judge), CascadeOptions(m=2)).screen(
            make_ctx(0), [cand("x", 1), cand("y", 2), cand("z", 3)]
        )
    )
    assert judge.requests == [] and len(s.evidence["x"].detail["sent_to_tournament"]) == 1
    assert s.evidence["x"].detail["all_confident_lose"] is True and len(s.chosen) == 1


def test_cascade_by_name_with_stage_options() -> None:
    critic_model = SampleFnModel(critic_fn(LABELS), "critic")
    judge = SampleFnModel(judge_fn, "judge")
    s = build_screener(
        "cascade",
        models={"critic": critic_model, "judge": judge},
        options=SCREENERS.validate("cascade", {"m": 2, "critic": {"k": 4}, "tournament": {"context_tokens": 1000}}),
    )
    assert (
        isinstance(s, CriticThenJudge) and s.options.m == 2 and s.critic.k == 4 and s.tournament.context_tokens == 1000
    )
    assert s.critic.model is critic_model and s.tournament.model is judge
    assert s.health.model == "critic, judge" and s.health.screener == "cascade"
    with pytest.raises(ConfigError, match="screener.options.m"):
        build_screener("cascade", models={"default": judge}, options=SCREENERS.validate("cascade", {"m": 0}))
    with pytest.raises(ConfigError, match=r"screener 'critic'.*option k"):
        build_screener(
            "cascade", models={"default": judge}, options=SCREENERS.validate("cascade", {"critic": {"k": "many"}})
        )


@pytest.mark.parametrize(
    "name, options, message",
    [
        (
            "critic",
            {"k": 0},
            r"option k=0: .*greater than or equal to 1.*critiques sampled per candidate.*"
            r"fix screener.options.k or remove it to use the default 16",
        ),
        ("critic", {"kk": 3}, r"unknown option 'kk'; valid options are \[.*'k'"),
        ("critic", {"temperature": 3}, r"temperature=3"),
        ("critic", {"verify_uncertain": True}, r"verify_uncertain was removed; .*set engine.verify_uncertain=true"),
        ("critic-probs", {"route_threshold": 0.3}, r"route_threshold was removed; .*engine.uncertainty_threshold"),
        ("cascade", {"critic": {"verify_uncertain": True}}, r"screener.options.critic.verify_uncertain was removed"),
        ("tournament", {"show": "both"}, r"show='both'.*'code' or 'summary'"),
        ("ensemble", {"members": ["m"], "rollouts": 0}, r"rollouts=0"),
        ("ensemble", {}, r"members"),
        ("arbiter", {"members": ["m"], "tie_break": "coin"}, r"tie_break='coin'"),
        ("random", {"n_verify": -1}, r"n_verify=-1"),
        ("surrogate", {"min_examples": "x"}, r"min_examples='x'"),
        ("surrogate", {"bogus": 1}, r"unknown option 'bogus'"),
        ("critic", {"min_parse_rate": 1.5}, r"min_parse_rate=1.5"),
    ],
)
def test_bad_option_values_are_config_errors_that_name_the_fix(name, options, message) -> None:
    model = SampleFnModel(judge_fn, "m")
    with pytest.raises(ConfigError, match=message):
        build_screener(name, models={"default": model, "m": model}, options=SCREENERS.validate(name, options))


def test_every_screener_has_a_described_options_model() -> None:
    for name in ("critic", "tournament", "cascade", "ensemble", "arbiter", "random", "oracle"):
        fields = options_model(name).model_fields
        assert fields and all(f.description for f in fields.values()), name
    assert "min_examples" in options_model("surrogate").model_fields
    assert "budget_s" in options_model("agentic").model_fields
    critic = build_screener(
        "critic",
        models={"default": SampleFnModel(judge_fn, "m")},
        options=SCREENERS.validate("critic", {"max_unparsed_screenings": 5, "min_parse_rate": 0.2}),
    )
    assert (critic.health.max_unparsed_screenings, critic.health.min_parse_rate) == (5, 0.2)
