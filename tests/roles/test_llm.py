"""LLM roles against in-file fake models: rendering, parsing, retries, caching."""

from __future__ import annotations

import asyncio
import re

import pytest
from role_models import PROGRAM, make_task

from verifyless.errors import ConfigError, ParseError
from verifyless.model.base import Message, Usage
from verifyless.node import Idea, Operator
from verifyless.program import extract, fixed_region_violation, split
from verifyless.prompts import TemplateError, fill, load_template
from verifyless.roles.base import (
    Briefer,
    Implementer,
    ParentInfo,
    ProposeContext,
    Proposer,
    RoleFailure,
    Roles,
    Summarizer,
)
from verifyless.roles.llm import LLMBriefer, LLMImplementer, LLMProposer, LLMSummarizer, Summary, llm_roles
from verifyless.roles.options import LLMRoleOptions
from verifyless.task.base import Band
from verifyless.testing import ReplyModel as FakeModel
from verifyless.testing import replies

NEW_BAND = "def model(xs):\n    return float(np.median(xs))"
IDEA = Idea("Replace the mean with the median so that outliers in the inputs stop dragging the prediction.")
MY_PROMPTS = ("brief", "propose", "implement", "implement_diff", "repair", "summarize")


def run(coro):
    return asyncio.run(coro)


def fence(code: str) -> str:
    return f"Here you go.\n```python\n{code}\n```\n"


def all_placeholder_names() -> set[str]:
    names: set[str] = set()
    for prompt in MY_PROMPTS:
        names |= load_template(f"roles/{prompt}").declared
    return names


def assert_rendered(msgs) -> None:
    names = all_placeholder_names()
    for m in msgs:
        left = [n for n in names if "{{" + n + "}}" in m.content]
        assert not left, f"unrendered placeholders {left} in {m.role} message"


# ---------------------------------------------------------------- rendering


def test_prompt_files_have_system_and_user() -> None:
    for prompt in MY_PROMPTS:
        sections = load_template(f"roles/{prompt}").names()
        assert {"system", "user"} <= set(sections), prompt


def test_render_errors_on_missing_keys_and_keeps_value_braces() -> None:
    with pytest.raises(TemplateError, match="needs values for a, b"):
        fill("{{a}} and {{b}} and {c}", {})
    assert fill("{{a}} {x}", {"a": "{{b}}"}) == "{{b}} {x}"
    # an empty optional block takes its line with it
    assert fill("top\n\n{{opt}}\n\nbottom", {"opt": ""}) == "top\n\nbottom"
    # inserted code keeps its blank lines
    assert fill("```\n{{code}}\n```", {"code": "a\n\n\n\nb"}) == "```\na\n\n\n\nb\n```"


@pytest.mark.parametrize("op", [o for o in Operator if o is not Operator.BASELINE])
def test_proposer_prompt_has_every_part(op: Operator) -> None:
    task = make_task()
    parent = ParentInfo("p1", PROGRAM, score=0.42, idea=Idea("Use the mean."), error="ValueError: bad shape")
    ref = ParentInfo("r7", PROGRAM, score=0.4, summary="A trimmed-mean estimator with 10% trimming.")
    ctx = ProposeContext(
        task,
        parent,
        op,
        inspirations=("A median-of-means solution.",),
        memory=("Trimming helped before.",),
        avoid=("Use the mode.",),
        references=(ref,),
        seed=3,
    )
    system, user = LLMProposer(FakeModel(replies())).render(ctx, ctx.avoid)
    assert_rendered([system, user])
    text = user.content
    for part in (
        task.statement,
        "mae",
        "lower is better",
        "total += v",
        "A median-of-means solution.",
        "Trimming helped before.",
        "Use the mode.",
        "r7",
        "trimmed-mean",
        "## Approach",
        "Use the mean.",
    ):
        assert part in text, part
    assert "{braces}" in text  # statement braces are data, not placeholders
    assert "EVOLVE-BLOCK" not in text  # only the band is shown
    if op is Operator.DEBUG:
        assert "ValueError: bad shape" in text
    assert "no code" in system.content.lower() or "do not write any" in system.content.lower()


def test_proposer_prompt_without_optional_blocks() -> None:
    ctx = ProposeContext(make_task(), ParentInfo(None, PROGRAM), Operator.DRAFT)
    _, user = LLMProposer(FakeModel(replies())).render(ctx)
    assert "Already proposed" not in user.content and "scored well" not in user.content
    assert "\n\n\n" not in user.content.replace(PROGRAM, "")
    assert_rendered([user])


def test_implementer_and_repair_prompts() -> None:
    task = make_task()
    for mode in ("full", "diff"):
        impl = LLMImplementer(FakeModel(replies()), mode=mode)
        msgs = impl.render(task, ParentInfo("p", PROGRAM), IDEA)
        assert_rendered(msgs)
        user = msgs[1].content
        assert IDEA.text in user and "lines 8-13" in user and "import numpy as np" in user
        assert ("SEARCH" in user) == (mode == "diff")
        rep = impl.render_repair(task, PROGRAM, IDEA, "Traceback ...\nZeroDivisionError: division by zero")
        assert_rendered(rep)
        assert IDEA.text in rep[1].content and "ZeroDivisionError" in rep[1].content
        assert ("SEARCH" in rep[1].content) == (mode == "diff")


# ---------------------------------------------------------------- briefer

GOOD_BRIEF = """[TASK UNDERSTANDING]
Modality: univariate numeric samples
Metric: mae, lower is better
Data: small noisy samples
Submission interface: model(xs) -> float
Constraints: numpy only

[CRITERIA]
1. Outlier robustness - resistance to heavy tails
2. Bias - systematic offset of the estimate
3. Variance - stability across samples
4. Interface - keeps model(xs) returning a float
"""


def test_briefer_parses_and_memoises() -> None:
    model = FakeModel(replies(GOOD_BRIEF))
    briefer = LLMBriefer(model)
    brief = run(briefer.brief(make_task()))
    assert brief.criteria[0].startswith("Outlier robustness") and len(brief.criteria) == 4
    assert "Modality" in brief.understanding
    assert run(briefer.brief(make_task())) == brief and len(model.requests) == 1
    req = model.requests[0]
    assert req.role == "brief"
    assert_rendered(req.messages)
    assert PROGRAM.strip() in req.messages[1].content


def test_briefer_retries_once_then_raises() -> None:
    model = FakeModel(replies("no structure here", GOOD_BRIEF))
    assert len(run(LLMBriefer(model).brief(make_task())).criteria) == 4
    assert [m.role for m in model.requests[1].messages] == ["system", "user", "assistant", "user"]
    with pytest.raises(ParseError, match="could not be parsed twice.*still nothing"):
        run(LLMBriefer(FakeModel(replies("nothing", "still nothing"))).brief(make_task()))


# ---------------------------------------------------------------- proposer


def test_proposer_parses_variants_and_failures() -> None:
    model = FakeModel(
        replies(
            "**Approach:** Replace the mean by a 10% trimmed mean computed with numpy sorting.",
            "## Approach\nUse the median of means over 5 buckets.\n```python\nx = 1\n```\n## Notes\nnone",
            "sorry",
            None,
        )
    )
    ctx = ProposeContext(make_task(), ParentInfo("p", PROGRAM, score=1.0), seed=10)
    out = run(LLMProposer(model, format_reminders=0).propose(ctx, 4))
    assert isinstance(out[0], Idea) and out[0].text.startswith("Replace the mean by a 10% trimmed")
    assert isinstance(out[1], Idea) and out[1].text == "Use the median of means over 5 buckets."
    assert out[2] == RoleFailure(
        "parse-error", "the reply has no usable Approach section (none, or one that repeats the prompt)", raw="sorry"
    )
    assert isinstance(out[3], RoleFailure) and out[3].kind == "model-error"


def test_proposer_draws_independently_by_default() -> None:
    model = FakeModel(
        lambda r: f"## Approach\nIdea number {r.seed}: change the estimator in a distinct way.", delay=0.02
    )
    ctx = ProposeContext(make_task(), ParentInfo("p", PROGRAM), seed=100, avoid=("Tried before: the mode.",))
    ideas = run(LLMProposer(model).propose(ctx, 6))
    assert len(model.requests) == 6  # N calls, one idea each
    assert sorted(r.seed for r in model.requests) == list(range(100, 106))  # distinct seeds
    assert [i.text.split(":")[0] for i in ideas] == [f"Idea number {s}" for s in range(100, 106)]
    assert model.max_in_flight == 6  # all at once: no draw waits for another
    assert all(r.role == "proposer" and r.temperature == 0.8 for r in model.requests)  # the paper's 0.8
    for r in model.requests:  # none sees another draw's idea; all see the earlier rounds' ideas
        user = r.messages[1].content
        assert "Tried before: the mode." in user
        assert not any(f"Idea number {s}" in user for s in range(100, 106))
    assert LLMProposer(model, temperature=0.9).temperature == 0.9
    with pytest.raises(ConfigError, match="independent"):
        LLMProposer(model, mode="list")  # type: ignore[arg-type]


def test_proposer_waves_list_earlier_ideas_as_avoid() -> None:
    model = FakeModel(
        lambda r: f"## Approach\nIdea number {r.seed}: change the estimator in a distinct way.", delay=0.01
    )
    ctx = ProposeContext(make_task(), ParentInfo("p", PROGRAM), seed=0)
    ideas = run(LLMProposer(model, mode="waves", wave_size=2).propose(ctx, 5))
    assert len(ideas) == 5 and model.max_in_flight == 2
    by_seed = {r.seed: r.messages[1].content for r in model.requests}
    assert "Already proposed" not in by_seed[0] and "Already proposed" not in by_seed[1]
    assert "Idea number 0" in by_seed[2] and "Idea number 1" in by_seed[3]
    assert all(f"Idea number {k}" in by_seed[4] for k in range(4))
    assert run(LLMProposer(model).propose(ctx, 0)) == []


# ---------------------------------------------------------------- implementer


def test_implementer_full_mode_success() -> None:
    model = FakeModel(replies(fence(NEW_BAND)))
    result = run(LLMImplementer(model).implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert result.ok and result.attempts == 1 and result.failure is None
    assert extract(result.program, Band()).strip() == NEW_BAND
    assert fixed_region_violation(PROGRAM, result.program, Band()) is None
    assert result.usage == Usage(100, 20, 0.5)
    req = model.requests[0]
    assert req.role == "implementer" and req.temperature is not None and req.temperature <= 0.3


def test_implementer_accepts_whole_program_and_marker_wrapped_band() -> None:
    whole = PROGRAM.replace(split(PROGRAM, Band()).band, NEW_BAND + "\n")
    wrapped = f"# EVOLVE-BLOCK-START\n{NEW_BAND}\n# EVOLVE-BLOCK-END"
    for reply in (fence(whole), fence(wrapped)):
        result = run(LLMImplementer(FakeModel(replies(reply))).implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
        assert result.ok, result.failure
        assert result.program == whole


def test_implementer_rejects_fixed_region_change_then_retries() -> None:
    touched = PROGRAM.replace("import numpy as np", "import numpy as np\nimport scipy").replace(
        split(PROGRAM, Band()).band, NEW_BAND + "\n"
    )
    model = FakeModel(replies(fence(touched), fence(NEW_BAND)))
    result = run(LLMImplementer(model).implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert result.ok and result.attempts == 2
    assert result.usage == Usage(200, 40, 1.0)
    second = model.requests[1].messages
    assert [m.role for m in second] == ["system", "user", "assistant", "user"]
    assert second[2].content == fence(touched)
    assert "fixed region before the editable band was changed" in second[3].content
    assert "import scipy" in second[3].content  # the first differing line is named


def test_implementer_all_attempts_bad_is_guard_failed() -> None:
    bad = fence(f"{NEW_BAND}\n# EVOLVE-BLOCK-END\nprint('extra')")
    model = FakeModel(replies(bad, bad, bad))
    result = run(LLMImplementer(model, max_attempts=3).implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert not result.ok and result.program is None and result.attempts == 3
    assert result.failure.kind == "guard-failed" and "marker" in result.failure.reason
    assert result.failure.raw == bad and result.usage == Usage(300, 60, 1.5)
    assert len(model.requests[2].messages) == 6
    # each retry samples hotter (a real 0.5B model repeated the same unchanged band at 0.2)
    assert [r.temperature for r in model.requests] == pytest.approx([0.2, 0.5, 0.8])


def test_implementer_syntax_error_feedback() -> None:
    broken = "def model(xs)\n    return float(np.median(xs))"
    model = FakeModel(replies(fence(broken), fence(NEW_BAND)))
    result = run(LLMImplementer(model).implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert result.ok and result.attempts == 2
    feedback = model.requests[1].messages[-1].content
    assert "does not parse as Python: line 8" in feedback and "def model(xs)" in feedback


def test_implementer_unchanged_and_missing_code() -> None:
    same = split(PROGRAM, Band()).band.rstrip("\n")
    model = FakeModel(replies(fence(same), "I would use the median.", None))
    result = run(LLMImplementer(model).implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert not result.ok and result.attempts == 3 and result.failure.kind == "model-error"
    assert "identical" in model.requests[1].messages[-1].content
    assert "contains no code" in model.requests[2].messages[-1].content
    once = LLMImplementer(FakeModel(replies("no code")), max_attempts=1)
    result = run(once.implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert result.failure.kind == "parse-error" and result.attempts == 1


def test_implementer_parent_without_band_is_guard_failed() -> None:
    model = FakeModel(replies())
    result = run(LLMImplementer(model).implement(make_task(), ParentInfo("p", "print(1)\n"), IDEA))
    assert result.failure.kind == "guard-failed" and "no usable band" in result.failure.reason
    assert model.requests == []


def test_diff_mode_forgiving_matches() -> None:
    reply = (
        "<<<<<<< SEARCH\n"
        "total = 0.0\n"  # indentation lost
        "for v in xs:\n"
        "    total += v\n"
        "=======\n"
        "ordered = sorted(xs)\n"
        "total = sum(ordered[1:-1])\n"
        ">>>>>>> REPLACE\n"
        "<<<<<<< SEARCH\n"
        "    return total / len(xs)   \n"  # trailing spaces
        "=======\n"
        "    return total / max(len(xs) - 2, 1)\n"
        ">>>>>>> REPLACE\n"
    )
    model = FakeModel(replies(reply))
    result = run(LLMImplementer(model, mode="diff").implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert result.ok, result.failure
    band = extract(result.program, Band())
    assert "    ordered = sorted(xs)\n    total = sum(ordered[1:-1])\n" in band
    assert "    return total / max(len(xs) - 2, 1)\n" in band
    assert '"""Baseline: the mean."""' in band


def test_diff_mode_precise_error_for_non_matching_block() -> None:
    good = "<<<<<<< SEARCH\n    total = 0.0\n=======\n    total = 0\n>>>>>>> REPLACE\n"
    bad = "<<<<<<< SEARCH\n    for value in xs:\n        total += value\n=======\n    pass\n>>>>>>> REPLACE\n"
    fixed = "<<<<<<< SEARCH\nimport numpy as np\n=======\nimport scipy\n>>>>>>> REPLACE\n"
    model = FakeModel(replies(good + bad, fixed, good + bad))
    result = run(LLMImplementer(model, mode="diff").implement(make_task(), ParentInfo("p", PROGRAM), IDEA))
    assert not result.ok and result.failure.kind == "parse-error" and result.attempts == 3
    first = model.requests[1].messages[-1].content
    assert "SEARCH block 2 of 2 did not match" in first
    assert "for v in xs:" in first and "'for value in xs:'" in first
    second = model.requests[2].messages[-1].content
    assert "fixed code outside the editable band" in second


def test_repair_keeps_idea_and_checks_contract() -> None:
    child = PROGRAM.replace(split(PROGRAM, Band()).band, "def model(xs):\n    return 1 / 0\n")
    model = FakeModel(replies(fence(NEW_BAND)))
    result = run(LLMImplementer(model).repair(make_task(), child, IDEA, "ZeroDivisionError: division by zero"))
    assert result.ok and extract(result.program, Band()).strip() == NEW_BAND
    req = model.requests[0]
    assert req.role == "repair"
    assert IDEA.text in req.messages[1].content and "ZeroDivisionError" in req.messages[1].content
    assert "return 1 / 0" in req.messages[1].content


def test_line_range_band_repair_uses_moved_range() -> None:
    program = "HEADER = 1\nx = 1\ny = 2\nFOOTER = 2\n"
    task = make_task(baseline_program=program, band=Band(None, None, lines=(2, 3)))
    child = "HEADER = 1\nx = 1\ny = 2\nz = 3\nFOOTER = 2\n"  # the band grew by one line
    model = FakeModel(replies(fence("x = 10\ny = 20\nz = 30")))
    result = run(LLMImplementer(model).repair(task, child, IDEA, "boom"))
    assert result.program == "HEADER = 1\nx = 10\ny = 20\nz = 30\nFOOTER = 2\n"
    assert "lines 2-4" in model.requests[0].messages[1].content


# ---------------------------------------------------------------- summarizer

SUMMARY = " ".join(["The code computes a robust centre estimate with numpy."] * 15)  # 135 words


def test_summarizer_caches_by_program_hash() -> None:
    model = FakeModel(lambda r: SUMMARY, delay=0.01)
    summarizer = LLMSummarizer(model)
    task = make_task()

    async def go():
        return await asyncio.gather(*(summarizer.summarize(task, PROGRAM, IDEA) for _ in range(3)))

    assert run(go()) == [SUMMARY] * 3
    assert run(summarizer.summarize(task, PROGRAM)) == SUMMARY
    assert len(model.requests) == 1 and summarizer.calls == 1
    run(summarizer.summarize(task, PROGRAM + "\n# changed\n"))
    assert len(model.requests) == 2
    req = model.requests[0]
    assert req.role == "summarizer" and IDEA.text in req.messages[1].content and "total += v" in req.messages[1].content
    assert_rendered(req.messages)


def test_summarizer_length_handling() -> None:
    model = FakeModel(replies("**Summary:** Too short.", "Summary:\n" + SUMMARY))
    summary = run(LLMSummarizer(model).summarize(make_task(), PROGRAM))
    assert summary == SUMMARY and summary.warning == ""
    assert all(r.temperature == 0.4 for r in model.requests)  # the paper's summarizer temperature
    retry = model.requests[1].messages[-1].content
    assert "has 2 words" in retry and "120 to 200" in retry
    assert "Write 120 to 200 words" in model.requests[0].messages[1].content
    with pytest.raises(ParseError, match="empty summary"):
        run(LLMSummarizer(FakeModel(replies("", "```python\nx\n```"))).summarize(make_task(), PROGRAM))


def test_summary_outside_the_range_is_asked_again_once_then_kept_with_a_warning() -> None:
    long = " ".join(["The model sorts the inputs and averages the middle values."] * 25)  # 250 words
    longer = long + " " + long
    model = FakeModel(replies(longer, long))
    summarizer = LLMSummarizer(model)
    summary = run(summarizer.summarize(make_task(), PROGRAM))
    assert len(model.requests) == 2  # asked again exactly once
    assert isinstance(summary, Summary) and summary == long  # the nearer reply, kept whole (never cut)
    assert summary.warning == "length-warning: 250 words, asked for 120-200"
    assert list(summarizer.warnings.values()) == [summary.warning]
    short = FakeModel(replies("A short note on the code.", "Still a short note."))
    kept = run(LLMSummarizer(short).summarize(make_task(), PROGRAM))
    assert kept == "A short note on the code." and kept.warning.startswith("length-warning: 6 words")


# ---------------------------------------------------------------- bundle


def test_llm_roles_binds_models_per_role() -> None:
    a, b = FakeModel(replies()), FakeModel(replies())
    roles = llm_roles(
        {"proposer": a, "default": b},
        implement_mode="diff",
        options=LLMRoleOptions(proposer_mode="waves", summary_min_words=100),
    )
    assert isinstance(roles, Roles)
    assert isinstance(roles.briefer, Briefer) and isinstance(roles.proposer, Proposer)
    assert isinstance(roles.implementer, Implementer) and isinstance(roles.summarizer, Summarizer)
    assert roles.proposer.model is a and roles.implementer.model is b and roles.summarizer.model is b
    assert roles.implementer.mode == "diff" and roles.proposer.mode == "waves"
    assert roles.proposer.temperature == 0.8 and roles.summarizer.temperature == 0.4
    assert (roles.summarizer.min_words, roles.summarizer.max_words) == (100, 200)
    assert llm_roles(a).proposer.mode == "independent"
    assert llm_roles(a).briefer.model is a
    with pytest.raises(ConfigError, match="default"):
        llm_roles({"proposer": a})
    with pytest.raises(ConfigError, match="unknown role model keys"):
        llm_roles({"default": a, "critic": b})
    with pytest.raises(ConfigError):
        LLMImplementer(a, mode="patch")  # type: ignore[arg-type]


def test_messages_are_plain_text() -> None:
    msgs = LLMImplementer(FakeModel(replies())).render(make_task(), ParentInfo("p", PROGRAM), IDEA)
    assert all(isinstance(m, Message) and m.content.strip() for m in msgs)
    assert not re.search(r"<!--\s*section", "".join(m.content for m in msgs))


def test_role_options_are_typed_and_reach_the_config() -> None:
    from pydantic import ValidationError

    from verifyless.config import load_config

    cfg = load_config(overrides=["roles.llm.proposer_mode=waves", "roles.llm.summary_max_words=250"])
    assert cfg.roles.llm.proposer_mode == "waves" and cfg.roles.llm.summary_max_words == 250
    assert load_config().roles.llm == LLMRoleOptions()
    with pytest.raises(ConfigError, match="roles.llm.proposer_mode"):
        load_config(overrides=["roles.llm.proposer_mode=lists"])
    with pytest.raises(ValidationError, match="must not exceed"):
        LLMRoleOptions(summary_min_words=300)
    assert all(f.description for f in LLMRoleOptions.model_fields.values())


def test_the_engine_records_a_summary_length_warning_on_the_node_event(tmp_path) -> None:
    import dataclasses
    import random as _random

    from verifyless.config import load_config
    from verifyless.engine import Engine
    from verifyless.screen.registry import build_screener
    from verifyless.search.registry import build_strategy
    from verifyless.store import RunStore
    from verifyless.testing import FakeExecutor, fake_roles, fake_task

    class ShortSummaries:
        async def summarize(self, task, program, idea=None):
            return Summary("Sets a constant.", "length-warning: 3 words, asked for 120-200")

    roles = dataclasses.replace(fake_roles(), summarizer=ShortSummaries())
    cfg = load_config(overrides=["budget.verifications=2", "engine.candidates=2", "screener.name=random"])
    with RunStore(tmp_path / "s.db") as store:
        engine = Engine(
            task=fake_task(),
            roles=roles,
            screener=build_screener("random", models={}, seed=0),
            strategy=build_strategy("greedy", None, _random.Random(0)),
            executor=FakeExecutor(),
            store=store,
            config=cfg,
        )
        result = asyncio.run(engine.run())
        nodes = [e.payload for e in store.events(result.run_id, kinds=["node"])]
    assert nodes and all(
        n["summary_warning"] == "length-warning: 3 words, asked for 120-200" for n in nodes if n.get("summary")
    )
    assert all(n["summary"] == "Sets a constant." for n in nodes if n.get("summary"))
