"""The critic paper's arms differ only in screening (issue 56, item 4): same proposer prompts for the same history.

Two arms run on the fake task with one function-mode model behind every LLM role: ``critic-paper`` (16 ideas a
round, the k = 16 critic keeps one) and ``critic-paper:none`` (one idea a round, nothing screened). The model's
proposer writes an idea from the request's seed alone, and its critic favours exactly the ideas the None arm drew
(each round's first draw, whose seed both arms share), so both arms verify the same programs in the same order.
The paper lets the arms' proposer prompts differ only through what was verified (Appendix I.1: the population
holds evaluated solutions); with the same verified history they must be byte-identical. Under the other context
rule (``engine.tried_ideas=proposed``) the 16-idea arm's proposer is also told the 15 ideas a round screened out,
and the prompts differ: the test can fail.
"""

from __future__ import annotations

import asyncio
import random
import re

from verifyless.config import RunConfig, load_config
from verifyless.engine import Engine
from verifyless.model.base import ModelRequest
from verifyless.model.scripted import ScriptedModel, last_user_text
from verifyless.roles.llm import llm_roles
from verifyless.screen.registry import build_screener
from verifyless.search.registry import build_strategy
from verifyless.store import RunStore
from verifyless.testing import FakeExecutor, fake_task

BRIEF = "## Task understanding\nChoose the integer a.\n\n[CRITERIA]\n1. Fit\n2. Risk\n3. Size\n4. Robustness\n"
FILLER = " It leaves every other line of the program as it was, prints the value and reads no data at all." * 8
ROUNDS = 6


class Arm:
    """One function-mode model for every role; ``favoured``: the proposer seeds the critic ranks first."""

    def __init__(self, favoured: frozenset[int] = frozenset()) -> None:
        self.favoured = favoured
        self.proposals: dict[int, str] = {}  # request seed -> the proposer's user message

    def reply(self, request: ModelRequest) -> str:
        text = last_user_text(request)
        if request.role == "brief":
            return BRIEF
        if request.role == "proposer":
            seed = int(request.seed or 0)
            self.proposals[seed] = text
            return f"## Approach\nSet a to {seed % 41 - 20} (seed {seed}) so that the loss falls."
        if request.role in ("implementer", "repair"):
            a, seed = re.search(r"Set a to (-?\d+) \(seed (\d+)\)", text).groups()  # type: ignore[union-attr]
            return f"```python\na = {a}  # seed {seed}\n```"
        if request.role == "summarizer":
            found = re.search(r"a = (-?\d+)(?:  # seed (\d+))?", text)
            a, seed = found.groups() if found else ("0", None)  # type: ignore[union-attr]
            return f"The program sets a to {a} (seed {seed or 'none'})." + FILLER
        child = text.split("## Child", 1)[1].split("\n## ", 1)[0]
        seed = re.search(r"seed (\d+)", child)
        if seed is not None and int(seed.group(1)) in self.favoured:
            return "[IMPROVEMENT] improve --- closer\n[WINTIER] big --- much closer"
        return "[IMPROVEMENT] lose --- farther\n[WINTIER] NA --- not an improvement"


def run_arm(tmp_path, preset: str, arm: Arm, *extra: str) -> list[str]:
    """Run ``preset`` for ``ROUNDS`` rounds on the fake task; the verified programs, in order."""
    cfg: RunConfig = load_config(preset=preset, overrides=[f"budget.verifications={ROUNDS + 1}", *extra])
    model = ScriptedModel(function=arm.reply)
    screener = build_screener(cfg.screener.name, models={"default": model}, options=cfg.screener.options)
    executor = FakeExecutor()
    with RunStore(tmp_path / f"{preset.replace(':', '-')}-{len(extra)}.db") as store:
        engine = Engine(
            task=fake_task(),
            roles=llm_roles(model, options=cfg.roles.llm),
            screener=screener,
            strategy=build_strategy("islands", cfg.strategy.options, random.Random(cfg.seed)),
            executor=executor,
            store=store,
            config=cfg,
        )
        result = asyncio.run(engine.run())
    assert result.rounds == ROUNDS
    return executor.calls


def test_the_critic_paper_arms_show_the_proposer_the_same_prompts_for_the_same_verified_history(tmp_path):
    none = Arm()
    verified_none = run_arm(tmp_path, "critic-paper:none", none)
    screened = Arm(favoured=frozenset(none.proposals))
    verified_screened = run_arm(tmp_path, "critic-paper", screened)
    assert verified_screened == verified_none, "the critic kept each round's first draw: the same programs ran"
    assert len(screened.proposals) == 16 * ROUNDS and len(none.proposals) == ROUNDS
    shared = {seed: screened.proposals[seed] for seed in none.proposals}
    assert shared == none.proposals  # every round's prompt, byte for byte

    told_all = Arm(favoured=frozenset(none.proposals))
    assert run_arm(tmp_path, "critic-paper", told_all, "engine.tried_ideas=proposed") == verified_none
    differing = [seed for seed in none.proposals if told_all.proposals[seed] != none.proposals[seed]]
    assert differing, "told the screened-out ideas too, the 16-idea arm's proposer sees what the None arm never made"
    assert all("Already proposed" in told_all.proposals[seed] for seed in differing)
