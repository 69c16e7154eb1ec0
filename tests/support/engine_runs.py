"""An engine over the fakes of verifyless.testing, configured by dotted overrides."""

from __future__ import annotations

import random

from verifyless.config import load_config
from verifyless.engine import Engine
from verifyless.search.registry import build_strategy
from verifyless.testing import FakeExecutor, fake_roles, fake_task


def make_engine(
    store, *, strategy="greedy", screener="random", budget=10, executor=None, memory=None, roles=None, **over
):
    from verifyless.screen.registry import build_screener

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


def verification_events(store, run_id):
    return list(store.events(run_id, kinds=["verification"]))
