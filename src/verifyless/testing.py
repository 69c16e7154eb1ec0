"""Test doubles that ship with the package: a fake task, fake roles, a fake executor, engines over them, and
fake models. The package's own tests and benches use them; so can a user's tests of their own components.

The fake task's program has a band holding ``a = <int>``. Its hidden optimum is a = 13 and its score is
(a - 13)^2, minimised; a == 3 crashes, so the repair path has something to do. Everything here is
deterministic: the roles draw from ``random.Random(ctx.seed)``, the executor's score is a function of the
program, and the fake models answer from a function or a queue given to them. Nothing here imports pytest
or touches the network, and nothing runs a program: ``FakeExecutor`` reads ``a`` from the program text.
The fakes work in-process and from a subprocess (the kill -9 tests import them there).
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from verifyless.config import load_config
from verifyless.engine import Engine
from verifyless.events import Verified
from verifyless.model.base import Choice, ModelReply, ModelRequest, Usage
from verifyless.model.scripted import ScriptedModel
from verifyless.node import Idea, Status, Verification, content_hash
from verifyless.program import extract, replace
from verifyless.roles.base import Implementation, RoleFailure, Roles, TaskBrief
from verifyless.screen.registry import build_screener
from verifyless.search.registry import build_strategy
from verifyless.task.base import Band, Metric, Task

__all__ = [
    "PROGRAM",
    "TASK",
    "Briefer",
    "FakeExecutor",
    "Implementer",
    "Proposer",
    "ReplyModel",
    "SampleFnModel",
    "Summarizer",
    "fake_engine",
    "fake_roles",
    "fake_task",
    "make_engine",
    "replies",
    "squared_distance",
    "value",
    "verification_events",
]

PROGRAM = "import sys\n# EVOLVE-BLOCK-START\na = 0\n# EVOLVE-BLOCK-END\nprint(a)\n"


def fake_task(root: Path = Path("/nonexistent-fake-task")) -> Task:
    """The fake task: baseline ``PROGRAM`` (a = 0), metric ``loss`` (minimise), test metric ``test_loss``."""
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
    """The ``a`` a fake-task program sets in its band; raises ``ValueError`` when the band sets none."""
    found = re.search(r"a = (-?\d+)", extract(program, Band()))
    if found is None:
        raise ValueError("the band sets no a")
    return int(found.group(1))


class Briefer:
    """Always the same brief: one criterion, closeness of a to the optimum."""

    async def brief(self, task: Any, data_report: str = "") -> TaskBrief:
        return TaskBrief("choose a", ("closeness of a to the optimum",))


class Proposer:
    """``n`` ideas, each the parent's a plus a draw in [-25, 25] from ``Random(ctx.seed)``; ``params={"a": a}``."""

    async def propose(self, ctx: Any, n: int) -> list[Idea | RoleFailure]:
        rng = random.Random(ctx.seed)
        base = ctx.parent.idea.params.get("a", 0) if ctx.parent.idea and ctx.parent.idea.params else 0
        out: list[Idea | RoleFailure] = []
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
    """Writes the idea's a into the band; a repair adds one to a, or fails as guard-failed when ``fix`` is off."""

    def __init__(self, fix: bool = True) -> None:
        self.fix = fix

    async def implement(self, task: Task, parent: Any, idea: Idea) -> Implementation:
        return Implementation(replace(parent.program, task.band, f"a = {idea.params['a']}\n"))

    async def repair(self, task: Task, program: str, idea: Idea, error: str) -> Implementation:
        if not self.fix:
            return Implementation(None, RoleFailure("guard-failed", "cannot repair"))
        return Implementation(replace(program, task.band, f"a = {value(program) + 1}\n"))


class Summarizer:
    """One sentence that names the program's a."""

    async def summarize(self, task: Task, program: str, idea: Idea | None = None) -> str:
        return f"The program sets a to {value(program)} and prints it."


def fake_roles(fix: bool = True) -> Roles:
    """The four fake roles; ``fix=False`` makes every repair fail."""
    return Roles(Briefer(), Proposer(), Implementer(fix), Summarizer())


def squared_distance(a: int) -> float:
    """The fake task's loss: (a - 13)^2."""
    return float((a - 13) ** 2)


class FakeExecutor:
    """Scores a fake-task program without running it: loss (a - 13)^2, test loss 0.5 more; a == 3 fails.

    ``capacity`` verifications may run at once, each taking ``delay`` seconds; ``calls`` holds the hash of
    every program it was asked to verify, in order, and ``spans`` the (start, end) ``time.monotonic()`` of
    every verification, in the order they finished. ``loss`` (a function of a) and ``fails_at`` (the a that
    fails; None: none does) set another one-constant problem; the defaults are the fake task's.
    """

    name = "fake"
    sandbox = None  # nothing runs here: no ensemble submission, the data report in a local sandbox
    hide: tuple[str, ...] = ()

    def __init__(
        self,
        capacity: int = 1,
        delay: float = 0.0,
        *,
        loss: Callable[[int], float] = squared_distance,
        fails_at: int | None = 3,
    ) -> None:
        self.capacity = capacity
        self.delay = delay
        self.loss = loss
        self.fails_at = fails_at
        self.calls: list[str] = []
        self.spans: list[tuple[float, float]] = []

    async def verify(self, task: Task, program: str) -> Verification:
        self.calls.append(content_hash(program))
        start = time.monotonic()
        if self.delay:
            await asyncio.sleep(self.delay)
        self.spans.append((start, time.monotonic()))
        a = value(program)
        if a == self.fails_at:
            return Verification(
                Status.FAILED,
                f"a must not be {a}",
                program_hash=content_hash(program),
                stderr_tail=f"ValueError: a must not be {a}",
                run_seconds=0.01,
            )
        loss = self.loss(a)
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

    def close(self) -> None:
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
    memory: Any = None,
) -> Engine:
    """An ``Engine`` over the fakes: ``fake_task()``, ``fake_roles()``, greedy (``Random(0)``), ``FakeExecutor``;
    no memory unless ``memory`` is given."""
    return Engine(
        task=task or fake_task(),
        roles=roles or fake_roles(),
        screener=screener,
        strategy=strategy or build_strategy("greedy", None, random.Random(0)),
        executor=executor or FakeExecutor(),
        store=store,
        config=config,
        memory=memory,
    )


def make_engine(
    store: Any,
    *,
    strategy: str = "greedy",
    screener: str = "random",
    budget: int = 10,
    executor: Any = None,
    memory: Any = None,
    roles: Roles | None = None,
    **over: Any,
) -> Engine:
    """An ``Engine`` over the fakes with strategy and screener built by name (screener seed 0, no models).

    The configuration is the defaults plus ``budget`` paid verifications, four candidates a round and one
    dotted override per keyword in ``over`` (``make_engine(store, **{"engine.snapshot_every": 1})``).
    """
    overrides = [
        f"strategy.name={strategy}",
        f"screener.name={screener}",
        f"budget.verifications={budget}",
        "engine.candidates=4",
        *[f"{k}={v}" for k, v in over.items()],
    ]
    cfg = load_config(overrides=overrides)
    return Engine(
        task=fake_task(),
        roles=roles or fake_roles(),
        screener=build_screener(screener, models={}, seed=0),
        strategy=build_strategy(strategy, None, random.Random(cfg.seed)),
        executor=executor or FakeExecutor(),
        store=store,
        config=cfg,
        memory=memory,
    )


def verification_events(store: Any, run_id: str) -> list[Any]:
    """The run's ``verification`` events, in order."""
    return list(store.events(run_id, Verified))


# A tiny native task for screener tests: nothing is executed, the screeners only read it.
TASK = Task(
    name="toy",
    root=Path("."),
    kind="native",
    statement="Classify digits.",
    program_file="s.py",
    baseline_program="x = 1\n",
    band=Band(),
    metric=Metric("accuracy", "maximize"),
)


class SampleFnModel:
    """A model whose i-th sample of a request is ``fn(request, i)``; records every request it gets.

    Built on ScriptedModel's function mode (which sees one single-sample request per
    sample, its ``sample_offset`` being the sample index).
    """

    def __init__(self, fn: Callable[[ModelRequest, int], str], name: str = "fake") -> None:
        self.name = name
        self.requests: list[ModelRequest] = []
        self._script = ScriptedModel(function=lambda sample: fn(sample, sample.sample_offset))

    async def generate(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        await asyncio.sleep(0)  # yield like a real endpoint, so concurrent callers interleave
        return dataclasses.replace(await self._script.generate(request), model=self.name)


class ReplyModel:
    """A model whose one reply to a request is ``respond(request)`` (``None``: a reply with no choice).

    Records every request; ``in_flight`` / ``max_in_flight`` count concurrent calls, each of which waits
    ``delay`` seconds; every reply reports the same usage (100 prompt, 20 completion tokens, 0.5 cost).
    """

    def __init__(self, respond: Callable[[ModelRequest], str | None], delay: float = 0.0) -> None:
        self.name = "fake"
        self.respond = respond
        self.delay = delay
        self.requests: list[ModelRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def generate(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
            text = self.respond(request)
        finally:
            self.in_flight -= 1
        choices = () if text is None else (Choice(text),)
        return ModelReply(choices=choices, usage=Usage(100, 20, 0.5), model=self.name)


def replies(*texts: str | None) -> Callable[[ModelRequest], str | None]:
    """A ``respond`` for ``ReplyModel`` that gives ``texts`` in order and fails loudly when they run out."""
    queue = list(texts)

    def respond(_: ModelRequest) -> str | None:
        if not queue:
            raise AssertionError("the fake model ran out of scripted replies")
        return queue.pop(0)

    return respond
