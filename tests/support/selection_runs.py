"""Runs of the fake task whose selection split disagrees with validation: the selection score's optimum (a = 20)
is not validation's (a = 13), so the final choice on the selection split can overrule the strategy's pick."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from verifyless.config import load_config
from verifyless.node import Status
from verifyless.screen.baselines import RandomScreener
from verifyless.store import RunStore
from verifyless.testing import FakeExecutor, fake_engine, fake_task, value


class HeldOutExecutor(FakeExecutor):
    """The fake executor, plus a selection score whose optimum (a = 20) differs from validation's (a = 13)."""

    async def verify(self, task, program):
        v = await super().verify(task, program)
        if v.status is not Status.OK:
            return v
        return dataclasses.replace(v, test_metrics={**v.test_metrics, "sel_loss": float((value(program) - 20) ** 2)})


def held_out_run(tmp_path: Path, *overrides: str) -> tuple[RunStore, str]:
    """A finished run (8 verifications, 3 candidates, random pick, ``overrides``) of the fake task with a selection
    metric ``sel_loss``, in ``tmp_path/s.db``: the open store and the returned node's id."""
    task = dataclasses.replace(fake_task(), selection_metric="sel_loss")
    cfg = load_config(overrides=["budget.verifications=8", "engine.candidates=3", *overrides])
    store = RunStore(tmp_path / "s.db")
    engine = fake_engine(store, cfg, RandomScreener(), task=task, executor=HeldOutExecutor())
    result = asyncio.run(engine.run())
    return store, result.best_id
