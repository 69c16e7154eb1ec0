"""MLEvolve's stage-adaptive coder (roles/staged.py): Base, Stepwise and Diff by the expansion's operator."""

from __future__ import annotations

import asyncio

import pytest
from role_models import PROGRAM, make_task

from verifyless.config import load_config
from verifyless.model.base import Usage
from verifyless.node import Idea, Operator
from verifyless.program import extract
from verifyless.roles.base import ParentInfo
from verifyless.roles.llm import llm_roles
from verifyless.roles.options import LLMRoleOptions
from verifyless.roles.staged import STAGE_MODES, StagedImplementer, plan_steps
from verifyless.task.base import Band
from verifyless.testing import ReplyModel, replies

PLAN = Idea(
    "Make the estimate robust to outliers.\n"
    "1. Sort the inputs before summing them.\n"
    "2. Drop the smallest and the largest value\n   from the sum.\n"
    "3. Divide by the number of values kept."
)
ONE = Idea("Replace the mean with the median so that outliers stop dragging the prediction.")


def edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


STEP_REPLIES = (
    edit("    for v in xs:", "    for v in sorted(xs):"),
    edit("        total += v", "        total += v\n    total -= min(xs) + max(xs)"),
    edit("    return total / len(xs)", "    return total / max(len(xs) - 2, 1)"),
)


def staged(model, **options) -> StagedImplementer:
    impl = llm_roles(model, implement_mode="stage", options=LLMRoleOptions(**options)).implementer
    assert isinstance(impl, StagedImplementer)
    return impl


def test_plan_steps_reads_numbered_and_bulleted_lines_with_their_continuations():
    assert plan_steps(PLAN.text, 4) == [
        "Sort the inputs before summing them.",
        "Drop the smallest and the largest value from the sum.",
        "Divide by the number of values kept.",
    ]
    assert plan_steps("- a\n- b\n* c\nStep 4: d\n• e", 3) == ["a", "b", "c d e"]  # the rest merged into the last
    assert plan_steps(ONE.text, 4) == [] and plan_steps("1. only one step", 4) == []
    assert plan_steps("Use 2.5 as the cap.\nThen - carefully - retrain.", 4) == []  # no line starts a step


def test_the_stage_rule_follows_the_papers_modes():
    impl = staged(ReplyModel(replies()))
    modes = {op: impl.mode_for(op, PLAN) for op in STAGE_MODES}
    assert modes[Operator.DRAFT] == "base"  # initial drafting: a full rewrite
    assert {modes[o] for o in (Operator.EVOLVE, Operator.REFERENCE, Operator.AGGREGATE)} == {"stepwise"}
    assert modes[Operator.IMPROVE] == modes[Operator.DEBUG] == "diff"  # localized refinement: patches
    assert impl.mode_for(Operator.EVOLVE, ONE) == "diff"  # a one-step idea is a single patch
    assert impl.mode_for(None, PLAN) == "base"  # outside an engine expansion: as implement_mode=full


def test_stepwise_codes_one_step_per_call_on_the_band_the_previous_steps_left():
    model = ReplyModel(replies(*STEP_REPLIES))
    parent = ParentInfo("p", PROGRAM, operator=Operator.REFERENCE)
    result = asyncio.run(staged(model).implement(make_task(), parent, PLAN))
    assert result.ok, result.failure
    band = extract(result.program, Band())
    assert "for v in sorted(xs):" in band and "total -= min(xs) + max(xs)" in band
    assert "return total / max(len(xs) - 2, 1)" in band
    assert len(model.requests) == 3 and result.attempts == 3 and result.usage == Usage(300, 60, 1.5)
    first, last = (r.messages[-1].content for r in (model.requests[0], model.requests[-1]))
    assert "This step: 1 of 3" in first and "Sort the inputs" in first.split("This step")[1]
    assert "This step: 3 of 3" in last and "for v in sorted(xs):" in last  # earlier steps are in the band shown
    assert all(r.role == "implementer" for r in model.requests)


def test_a_failing_step_fails_the_child_and_names_the_step():
    nothing = "I would rather not."
    model = ReplyModel(replies(STEP_REPLIES[0], nothing, nothing, nothing))
    parent = ParentInfo("p", PROGRAM, operator=Operator.AGGREGATE)
    result = asyncio.run(staged(model, max_attempts=3).implement(make_task(), parent, PLAN))
    assert not result.ok and result.failure is not None
    assert result.failure.reason.startswith("step 2 of 3: ") and result.attempts == 4


@pytest.mark.parametrize(("operator", "template"), [(Operator.DRAFT, "```"), (Operator.DEBUG, "SEARCH")])
def test_drafts_rewrite_the_band_and_debug_steps_patch_it(operator, template):
    band = "def model(xs):\n    return float(np.median(xs))"
    reply = f"```python\n{band}\n```" if template == "```" else edit("    return total / len(xs)", "    return 0.0")
    model = ReplyModel(replies(reply))
    result = asyncio.run(staged(model).implement(make_task(), ParentInfo("p", PROGRAM, operator=operator), PLAN))
    assert result.ok, result.failure
    prompt = model.requests[0].messages[-1].content
    assert ("<<<<<<< SEARCH" in prompt) is (operator is Operator.DEBUG) and len(model.requests) == 1


def test_repairs_are_patches_and_the_mode_reaches_the_config():
    model = ReplyModel(replies(edit("    return total / len(xs)", "    return total / max(len(xs), 1)")))
    result = asyncio.run(staged(model).repair(make_task(), PROGRAM, ONE, "ZeroDivisionError"))
    assert result.ok and model.requests[0].role == "repair"
    assert "SEARCH" in model.requests[0].messages[-1].content
    cfg = load_config(overrides=["roles.implement_mode=stage", "roles.llm.stepwise_max_steps=3"])
    assert cfg.roles.implement_mode == "stage" and cfg.roles.llm.stepwise_max_steps == 3
