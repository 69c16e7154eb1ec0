"""The fake task without an optimum and screeners of known quality on it, for the adaptive screener's tests."""

from __future__ import annotations

import random
from dataclasses import replace

from verifyless.config import load_config
from verifyless.engine import Engine
from verifyless.node import Evidence, Screening
from verifyless.screen.adaptive import AdaptiveOptions, AdaptiveScreener
from verifyless.search.registry import build_strategy
from verifyless.testing import FakeExecutor, fake_roles, fake_task, value


class Perfect:
    """Ranks by the true validation loss of the fake task ((a - 13)^2, a = 3 crashes and goes last)."""

    name = "perfect"

    async def screen(self, ctx, candidates):
        def loss(c):
            a = value(c.program)
            return float("inf") if a == 3 else (a - 13) ** 2

        ranking = tuple(c.id for c in sorted(candidates, key=loss))
        evidence = {cid: Evidence(cid, float(-i)) for i, cid in enumerate(ranking)}
        return Screening(self.name, ranking, ranking[: ctx.n_verify], evidence, 0.0)


class Unbounded(FakeExecutor):
    """The fake task with no optimum: the loss is -a, so a larger a is always better (improvements never run out)."""

    async def verify(self, task, program):
        v = await super().verify(task, program)
        if v.score is None:
            return v
        loss = -float(value(program))
        return replace(v, score=loss, test_score=loss, metrics={"loss": loss}, test_metrics={"test_loss": loss})


class PerfectUp(Perfect):
    """Ranks by the true loss of ``Unbounded`` (-a; a = 3 crashes and goes last)."""

    name = "perfect-up"

    async def screen(self, ctx, candidates):
        def loss(c):
            a = value(c.program)
            return float("inf") if a == 3 else -a

        ranking = tuple(c.id for c in sorted(candidates, key=loss))
        evidence = {cid: Evidence(cid, float(-i)) for i, cid in enumerate(ranking)}
        return Screening(self.name, ranking, ranking[: ctx.n_verify], evidence, 0.0)


class Inverted(PerfectUp):
    """A harmful critic on ``Unbounded``: ranks the worst first (a crash first of all); counts its calls."""

    name = "inverted"

    def __init__(self):
        self.calls = 0

    async def screen(self, ctx, candidates):
        self.calls += 1
        done = await super().screen(ctx, candidates)
        ranking = tuple(reversed(done.ranking))
        evidence = {cid: Evidence(cid, float(-i)) for i, cid in enumerate(ranking)}
        return Screening(self.name, ranking, ranking[: ctx.n_verify], evidence, 0.0)


class Voting(PerfectUp):
    """``PerfectUp`` with votes and a ``k`` the adaptive rule may set: unanimous for even a, split for odd a."""

    name = "voting"

    def __init__(self, k=3):
        self.k = k
        self.ks = []  # k at each screening

    async def screen(self, ctx, candidates):
        self.ks.append(self.k)
        done = await super().screen(ctx, candidates)
        by_id = {c.id: value(c.program) for c in candidates}
        votes = {cid: {"improve": 1.0} if by_id[cid] % 2 == 0 else {"improve": 2 / 3, "lose": 1 / 3} for cid in by_id}
        return replace(done, evidence={cid: replace(ev, votes=votes[cid]) for cid, ev in done.evidence.items()})


def _engine(store, screener, budget=40, executor=None, progress=None, **over):
    overrides = ["strategy.name=greedy", f"budget.verifications={budget}", "engine.candidates=6"]
    cfg = load_config(overrides=overrides + [f"{k}={v}" for k, v in over.items()])
    return Engine(
        task=fake_task(),
        roles=fake_roles(),
        screener=screener,
        strategy=build_strategy("greedy", None, random.Random(cfg.seed)),
        executor=executor or FakeExecutor(),
        store=store,
        config=cfg,
        progress=progress,
    )


def _adaptive(inner, **over):
    return AdaptiveScreener(inner, AdaptiveOptions(**over))


def _voting():
    """A voting screener whose k the rule chooses in [1, 5]."""
    return _adaptive(Voting(), k_min=1, k_max=5)
