"""The critic paper's multi-round probing brief (issue 56, item 8): bounded rounds, one model call each."""

from __future__ import annotations

import asyncio

import pytest
from role_models import make_task
from scripted_runs import scripted_overrides

from verifyless.config import load_config
from verifyless.errors import ConfigError
from verifyless.model.scripted import ScriptedModel
from verifyless.roles.llm import LLMBriefer, llm_roles
from verifyless.roles.options import LLMRoleOptions

BRIEF = (
    "[TASK UNDERSTANDING]\nModality: numbers\nMetric: error, lower is better\n\n"
    "[CRITERIA]\n1. Robustness - heavy tails\n2. Bias - offset\n3. Variance - stability\n4. Interface - a float\n"
)
NOTES = ["setup notes", "data notes", "metric notes", "constraint notes"]


def test_each_probing_round_is_one_call_in_one_conversation_and_the_last_writes_the_brief():
    model = ScriptedModel(replies=[*NOTES[:3], BRIEF])
    brief = asyncio.run(LLMBriefer(model, rounds=4).brief(make_task(), data_report="## Data report\n100 rows"))
    assert brief.criteria[0].startswith("Robustness") and len(brief.criteria) == 4
    requests = [c.request for c in model.calls]
    assert len(requests) == 4 and {r.role for r in requests} == {"brief"}
    asked = [r.messages[-1].content for r in requests]
    assert "Round 1 of 4" in asked[0] and "Examine the task setup" in asked[0] and "100 rows" in asked[0]
    assert "Round 2 of 4" in asked[1] and "Examine the data" in asked[1]
    assert "Round 3 of 4" in asked[2] and "Examine the evaluation metric" in asked[2]
    assert "Round 4 of 4: the briefing" in asked[3] and "[CRITERIA]" in asked[3]
    last = requests[-1].messages  # every earlier round's notes are in the conversation the briefing is asked in
    assert [m.content for m in last if m.role == "assistant"] == NOTES[:3]
    assert [m.role for m in last] == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]


def test_one_round_is_the_one_call_brief_and_rounds_are_bounded():
    one = ScriptedModel(replies=[BRIEF])
    asyncio.run(LLMBriefer(one).brief(make_task()))
    (call,) = one.calls
    assert "Round" not in call.request.messages[-1].content and "[CRITERIA]" in call.request.messages[-1].content
    with pytest.raises(ConfigError, match="between 1 and 5"):
        LLMBriefer(one, rounds=6)
    roles = llm_roles(one, options=LLMRoleOptions(brief_rounds=3))
    assert roles.briefer.rounds == 3
    with pytest.raises(ConfigError, match="roles.llm.brief_rounds"):
        load_config(overrides=["roles.llm.brief_rounds=9"])


def test_a_briefing_that_does_not_parse_gets_the_one_reminder_after_the_probes():
    model = ScriptedModel(replies=[NOTES[0], "no tags", BRIEF])
    brief = asyncio.run(LLMBriefer(model, rounds=2).brief(make_task()))
    assert len(brief.criteria) == 4 and len(model.calls) == 3
    assert "I could not read that reply" in model.calls[-1].request.messages[-1].content


def test_a_run_charges_every_probing_round_as_an_llm_call(tmp_path):
    from scripted_runs import run_to_end

    from verifyless.store import RunStore

    overrides = scripted_overrides(tmp_path, "diabetes", budget=1, candidates=1)
    cfg = load_config(overrides=[*overrides, "screener.name=random", "roles.llm.brief_rounds=5"])
    with RunStore(cfg.store) as store:
        result = run_to_end(cfg, store)
        calls = [e for e in store.events(result.run_id, kinds=["llm_call"]) if e.payload.get("role") == "brief"]
        (brief,) = list(store.events(result.run_id, kinds=["brief"]))
    assert len(calls) == 5 and all(e.charge is not None and e.charge.tokens_in > 0 for e in calls)
    assert brief.payload["criteria"]
