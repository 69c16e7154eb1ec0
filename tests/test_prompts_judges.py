"""The judges' prompts carry the papers' structure, in our words (issue 47, item 5).

The pairwise judge: a principal-investigator persona, five criteria, tolerance of minor fixable issues, the tree
context read for open gaps and repeated directions. The arbiter: the payload its members judged (plan, program,
data report). The proposer: each inspiration with its verified validation score (critic paper, Table 5).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re

from ensemble_pool import cands
from role_models import PROGRAM, make_task

from verifyless.node import Candidate, Idea, Operator
from verifyless.roles.base import ParentInfo, ProposeContext
from verifyless.roles.llm import LLMProposer
from verifyless.screen.base import ScreenContext
from verifyless.screen.ensemble import Arbiter, ArbiterSettings
from verifyless.screen.tournament import PairwiseRPM
from verifyless.testing import TASK, SampleFnModel, replies
from verifyless.testing import ReplyModel as RoleModel


def _ctx() -> ScreenContext:
    return ScreenContext(
        task=TASK,
        parent=ParentInfo(id="p", program="x = 1\n"),
        rng=random.Random(0),
        data_report="## Data report\n282 rows, 10 numeric columns",
    )


def _cands() -> list[Candidate]:
    return [
        dataclasses.replace(
            c,
            idea=Idea(f"plan {c.id}: add gradient boosting"),
            program=f"x = 2  # program of {c.id}\n",
            summary=f"summary of {c.id}",
        )
        for c in cands("a", "b")
    ]


def test_the_pairwise_prompt_has_a_pi_a_five_point_rubric_tolerance_and_gap_finding():
    judge = SampleFnModel(lambda r, i: "A wins on fit.\n[CHOICE] A --- better fit", "judge")
    s = asyncio.run(PairwiseRPM(judge).screen(_ctx(), _cands()))
    assert s.chosen  # the reply format still parses
    system, user = (m.content for m in judge.requests[0].messages)
    assert "principal investigator" in system and "fixable" in system
    assert [int(n) for n in re.findall(r"^(\d)\. ", user, flags=re.M)] == [1, 2, 3, 4, 5]
    assert "not been tried" in user and "repeat a direction" in user and "quick fix" in user
    assert user.rstrip().endswith("Write exactly one letter after the tag.") and "[CHOICE] <A or B>" in user


def test_the_arbiter_sees_the_plans_programs_and_data_report_its_members_judged():
    member = PairwiseRPM(SampleFnModel(lambda r, i: "[CHOICE] A --- fine", "m"))
    arbiter_model = SampleFnModel(lambda r, i: "[CHOICE] 2 --- the second", "arb")
    s = asyncio.run(Arbiter(arbiter_model, [member], ArbiterSettings(rollouts=1)).screen(_ctx(), _cands()))
    assert s.chosen == ("b",)
    prompt = arbiter_model.requests[0].messages[-1].content
    for part in ("plan a: add gradient boosting", "# program of b", "282 rows, 10 numeric columns"):
        assert part in prompt
    summary_only = SampleFnModel(lambda r, i: "[CHOICE] 1 --- first", "arb2")
    asyncio.run(Arbiter(summary_only, [member], ArbiterSettings(rollouts=1, show="summary")).screen(_ctx(), _cands()))
    text = summary_only.requests[0].messages[-1].content
    assert "summary of a" in text and "# program of a" not in text


def test_proposer_inspirations_carry_their_validation_scores():
    task = make_task()
    ctx = ProposeContext(
        task,
        ParentInfo("p1", PROGRAM, score=0.42),
        Operator.IMPROVE,
        inspirations=("A median-of-means solution.", "A trimmed mean."),
        inspiration_scores=(0.31, None),
    )
    _, user = LLMProposer(RoleModel(replies())).render(ctx, ())
    assert f"### Solution 1 (validation {task.metric.name}: 0.31)\nA median-of-means solution." in user.content
    assert "### Solution 2\nA trimmed mean." in user.content  # no score known: none shown


def test_the_engine_hands_the_proposer_each_inspirations_score(tmp_path):
    from verifyless.config import load_config
    from verifyless.screen.registry import build_screener
    from verifyless.search.registry import build_strategy
    from verifyless.store import RunStore
    from verifyless.testing import Proposer, fake_engine, fake_roles

    seen: list[ProposeContext] = []

    class Recording(Proposer):
        async def propose(self, ctx, n):
            seen.append(ctx)
            return await super().propose(ctx, n)

    roles = fake_roles()
    roles = type(roles)(roles.briefer, Recording(), roles.implementer, roles.summarizer)
    cfg = load_config(overrides=["strategy.name=islands", "budget.verifications=10", "engine.candidates=3"])
    with RunStore(tmp_path / "s.db") as store:
        engine = fake_engine(
            store,
            cfg,
            build_screener("random", models={}, seed=0),
            strategy=build_strategy("islands", cfg.strategy.options, random.Random(0)),
            roles=roles,
        )
        asyncio.run(engine.run())
        scores = {n.id: n.score for n in engine.state.view.nodes.values()}
    shown = [c for c in seen if c.inspirations]
    assert shown and all(len(c.inspiration_scores) == len(c.inspirations) for c in shown)
    assert all(s is not None and s in scores.values() for c in shown for s in c.inspiration_scores)
