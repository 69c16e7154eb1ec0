"""Small test doubles shared by several test files (the engine's fakes live in engine_fakes.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from verifyless.model.base import ModelReply, ModelRequest
from verifyless.model.scripted import ScriptedModel
from verifyless.task.base import Band, Metric, Task

# A tiny native task for screener tests (nothing is executed).
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
    """A Model whose i-th sample of a request is ``fn(request, i)``; records every request it gets.

    Built on ScriptedModel's function mode (which sees one single-sample request per
    sample, its ``sample_offset`` being the sample index).
    """

    def __init__(self, fn, name: str = "fake") -> None:
        self.name = name
        self.requests: list[ModelRequest] = []
        self._script = ScriptedModel(function=lambda sample: fn(sample, sample.sample_offset))

    async def generate(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        await asyncio.sleep(0)  # yield like a real endpoint, so concurrent callers interleave
        return replace(await self._script.generate(request), model=self.name)
