"""A toy task with a banded program and a fake model whose replies come from a function or a queue."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from verifyless.model.base import Choice, ModelReply, ModelRequest, Usage
from verifyless.task.base import Band, Metric, Task

PROGRAM = '''import numpy as np


def load(path):
    return np.load(path)

# EVOLVE-BLOCK-START
def model(xs):
    """Baseline: the mean."""
    total = 0.0
    for v in xs:
        total += v
    return total / len(xs)
# EVOLVE-BLOCK-END

if __name__ == "__main__":
    print(f"{model([1.0, 2.0, 3.0])}")
'''


def make_task(**changes) -> Task:
    base = dict(
        name="toy",
        root=Path("/tmp"),
        kind="native",
        statement="Predict the centre of a noisy sample. Keep {braces} literal.",
        program_file="solution.py",
        baseline_program=PROGRAM,
        band=Band(),
        metric=Metric("mae", "minimize"),
    )
    base.update(changes)
    return Task(**base)


class FakeModel:
    """A Model whose replies come from ``respond(request)``; records every request."""

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
    queue = list(texts)

    def respond(_: ModelRequest) -> str | None:
        if not queue:
            raise AssertionError("the fake model ran out of scripted replies")
        return queue.pop(0)

    return respond
