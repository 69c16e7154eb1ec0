"""Deterministic fakes for engine tests: roles that set one constant, an executor that scores it.

The task's program has a band holding ``a = <int>``; the hidden optimum is
a = 13 and the score is (a - 13)^2 (minimise). a == 3 crashes (to exercise
the repair path). Used in-process and from a subprocess (kill -9 tests).
"""

from __future__ import annotations

import asyncio
import random
import re
from pathlib import Path
from typing import Any

from verifyless.engine import Engine
from verifyless.node import Idea, Status, Verification, content_hash
from verifyless.program import extract, replace
from verifyless.roles.base import Implementation, RoleFailure, Roles, TaskBrief
from verifyless.search.registry import build_strategy
from verifyless.task.base import Band, Metric, Task

PROGRAM = "import sys\n# EVOLVE-BLOCK-START\na = 0\n# EVOLVE-BLOCK-END\nprint(a)\n"


def fake_task(root: Path = Path("/nonexistent-fake-task")) -> Task:
    return Task(
        name="fake",
        root=root,
        kind="native",
        statement="Pick a.",
        program_file="p.py",
        baseline_program=PROGRAM,
        band=Band(),
        metric=Metric("loss", "minimize"),
        validation_metrics=("loss",),
        test_metrics=("test_loss",),
    )


def value(program: str) -> int:
    return int(re.search(r"a = (-?\d+)", extract(program, Band())).group(1))


class Briefer:
    async def brief(self, task, data_report=""):
        return TaskBrief("choose a", ("closeness of a to the optimum",))


class Proposer:
    async def propose(self, ctx, n):
        rng = random.Random(ctx.seed)
        base = ctx.parent.idea.params.get("a", 0) if ctx.parent.idea and ctx.parent.idea.params else 0
        out = []
        for _ in range(n):
            a = base + rng.randint(-25, 25)
            out.append(
                Idea(
                    f"set a to {a} (up)" if a > base else f"set a to {a} (down)",
                    {"a": a},
                    ("up" if a > base else "down",),
                )
            )
        return out


class Implementer:
    def __init__(self, fix: bool = True) -> None:
        self.fix = fix

    async def implement(self, task, parent, idea):
        return Implementation(replace(parent.program, task.band, f"a = {idea.params['a']}\n"))

    async def repair(self, task, program, idea, error):
        if not self.fix:
            return Implementation(None, RoleFailure("guard-failed", "cannot repair"))
        return Implementation(replace(program, task.band, f"a = {value(program) + 1}\n"))


class Summarizer:
    async def summarize(self, task, program, idea=None):
        return f"The program sets a to {value(program)} and prints it."


def fake_roles(fix: bool = True) -> Roles:
    return Roles(Briefer(), Proposer(), Implementer(fix), Summarizer())


class FakeExecutor:
    name = "fake"
    sandbox = None  # nothing runs here: no ensemble submission, the data report in a local sandbox
    hide: tuple[str, ...] = ()

    def __init__(self, capacity: int = 1, delay: float = 0.0) -> None:
        self.capacity = capacity
        self.delay = delay
        self.calls: list[str] = []

    async def verify(self, task, program):
        self.calls.append(content_hash(program))
        if self.delay:
            await asyncio.sleep(self.delay)
        a = value(program)
        if a == 3:
            return Verification(
                Status.FAILED,
                "a must not be 3",
                program_hash=content_hash(program),
                stderr_tail="ValueError: a must not be 3",
                run_seconds=0.01,
            )
        loss = float((a - 13) ** 2)
        return Verification(
            Status.OK,
            "",
            {"loss": loss},
            {"test_loss": loss + 0.5},
            loss,
            loss + 0.5,
            run_seconds=0.01,
            program_hash=content_hash(program),
        )

    def close(self):
        pass


def fake_engine(
    store: Any,
    config: Any,
    screener: Any,
    *,
    task: Task | None = None,
    strategy: Any = None,
    executor: Any = None,
    roles: Roles | None = None,
) -> Any:
    """An ``Engine`` over the fakes: ``fake_task()``, ``fake_roles()``, greedy (``Random(0)``), ``FakeExecutor``."""
    return Engine(
        task=task or fake_task(),
        roles=roles or fake_roles(),
        screener=screener,
        strategy=strategy or build_strategy("greedy", None, random.Random(0)),
        executor=executor or FakeExecutor(),
        store=store,
        config=config,
    )
