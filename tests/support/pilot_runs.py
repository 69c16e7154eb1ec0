"""Pilot runs of the fake task at two fidelity levels: a levelled task, a scripted run per level, a ledger, one pilot screening."""

from __future__ import annotations

import asyncio
import dataclasses
import random

from verifyless.ledger import BudgetConfig, Ledger, LowFidelity
from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import ScreenContext
from verifyless.screen.pilot import PilotOptions, PilotScreener
from verifyless.store import RunStore
from verifyless.task.base import Fidelity, FidelityLevel
from verifyless.testing import PROGRAM, fake_task, value


def levelled_task():
    levels = (FidelityLevel("tiny", knob="0.1"), FidelityLevel("half", knob="0.5"))
    return dataclasses.replace(fake_task(), fidelity=Fidelity(levels=levels, full="1"))


def _cand(cid: str, a: int, idea: str | None = None) -> Candidate:
    program = PROGRAM.replace("a = 0", f"a = {a}")
    return Candidate(cid, None, Operator.IMPROVE, Idea(idea or f"set a to {a}"), program, content_hash(program))


def fake_run(calls: list[tuple[int, str]], crash_odd: bool = False, crash_at: str = "tiny"):
    """A ``RunAt``: loss (a - 13)^2 plus level noise; odd a crashes at level ``crash_at`` when ``crash_odd``."""

    async def run(task, program, level):
        a = value(program)
        calls.append((a, level))
        if crash_odd and a % 2 and level == crash_at:
            return Verification(Status.FAILED, "odd a", stderr_tail="ValueError: odd", run_seconds=0.5)
        noise = {"tiny": 7.0, "half": 2.0}.get(level, 0.0) * ((a * 37) % 5 - 2)
        loss = float((a - 13) ** 2) + noise
        return Verification(Status.OK, "", {"loss": loss}, {}, loss, None, run_seconds=0.25)

    return run


def _ledger(store: RunStore) -> Ledger:
    ledger = Ledger(store, BudgetConfig(verifications=None), fake_task().metric)
    ledger.run_id = store.create_run("fake", {})
    return ledger


def run_screening(ledger: Ledger, run) -> object:
    """The pilot screening of a fixed pool of 8 (eta 2, two levels), candidates recorded once."""
    task = levelled_task()
    pool = [_cand(f"c{k}", 4 + 2 * k) for k in range(8)]
    for c in pool:
        if c.id not in ledger.state.staged:
            ledger.record_candidate(c, Status.IMPLEMENTED)
    low = LowFidelity(ledger, task, run)
    ctx = ScreenContext(task, ParentInfo(None, PROGRAM), random.Random(0), n_verify=1, pilot=low.pilot)
    return asyncio.run(PilotScreener(PilotOptions(eta=2)).screen(ctx, pool))
