"""Replies real models gave, read as they should be (issue 53).

``tests/fixtures/real_replies.yaml`` holds each reply verbatim with the role, the model and what went wrong
before its fix; ``expect`` says what reading it must give. Every role's entries are checked here through the
parser that role uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from verifyless.roles import parse
from verifyless.screen.agentic import block_call
from verifyless.screen.critic import parse_verdict
from verifyless.screen.novelty import parse_judge
from verifyless.screen.prompting import parse_choice

REPLIES = yaml.safe_load((Path(__file__).parents[1] / "fixtures" / "real_replies.yaml").read_text())


def _check(entry: dict[str, Any]) -> None:
    expect, reply = entry["expect"], entry["reply"]
    role = entry["role"]
    if role == "brief":
        understanding, criteria = parse.parse_brief(reply)
        assert len(criteria) == expect["criteria"]
        assert understanding.startswith(expect["understanding_starts"])
        assert "[CRITERIA]" not in understanding
    elif role == "proposer":  # as LLMProposer reads it: an Approach that does not repeat the prompt
        approach = parse.extract_approach(reply)
        if approach is not None and parse.echoes(approach, expect.get("prompt_tail", "")):
            approach = None
        assert (approach is not None) == expect["parsed"]
        for word in expect.get("contains", []):
            assert approach is not None and word in approach
    elif role == "critic":
        verdict = parse_verdict(reply)
        assert (verdict.label if verdict else None) == expect["label"]
    elif role == "novelty_judge":
        assert parse_judge(reply) == expect["answer"]
    elif role in ("judge", "arbiter", "agentic-final"):
        assert parse_choice(reply, expect["options"]) == expect["choice"]
    elif role == "implementer":
        block = parse.pick_code_block(reply)
        assert (block is not None) == expect["code"]
        for word in expect.get("contains", []):
            assert block is not None and word in block
    elif role == "agentic-pilot":  # a reply without a tool call: its first python or bash block is the pilot
        call = block_call(reply)
        assert (call.name if call else None) == expect["tool"]
        if call is not None:
            assert expect["runs"] in next(iter(json.loads(call.arguments).values()))
    else:  # pragma: no cover - a new role needs its reader here
        raise AssertionError(f"no reader for role {role!r}")


@pytest.mark.parametrize("entry", REPLIES, ids=[f"{e['role']}-{i}" for i, e in enumerate(REPLIES)])
def test_a_real_reply_is_read_as_expected(entry: dict[str, Any]) -> None:
    assert {"role", "model", "problem", "expect", "reply"} <= set(entry), "each entry says who said it and what broke"
    _check(entry)


def test_an_echo_is_a_copy_of_the_prompt_not_a_shared_phrase() -> None:
    prompt = "## Approach\nThe change, stated concretely, and why it should improve `val_rmse` (lower is better)."
    assert parse.echoes("The change, stated concretely, and why it should improve val_rmse (lower is better).", prompt)
    idea = "Replace Ridge with a gradient-boosted tree model; it should improve val_rmse by fitting interactions."
    assert not parse.echoes(idea, prompt) and not parse.echoes("improve", prompt)
