"""Runs of built-in tasks with scripted LLM roles (examples/scripted/<task>.yaml), and a model wrapper that records what it was sent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from verifyless.config import load_config
from verifyless.wiring import build_engine

SCRIPTS = Path(__file__).resolve().parents[2] / "examples" / "scripted"


class Recorder:
    """Delegates to a model and keeps every request it was sent."""

    def __init__(self, inner):
        self.inner, self.requests = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    async def generate(self, request):
        self.requests.append(request)
        return await self.inner.generate(request)


def scripted_overrides(tmp_path: Path, task: str, *, budget: int, candidates: int) -> list[str]:
    """Config overrides for a greedy run (one draft) of built-in ``task`` with every role played by the scripted
    model of examples/scripted/<task>.yaml, ``budget`` verifications, ``candidates`` per round, its store in
    ``tmp_path``. No screener: callers add theirs."""
    return [
        f"task={task}",
        f"budget.verifications={budget}",
        f"engine.candidates={candidates}",
        "strategy.name=greedy",
        "strategy.options.num_drafts=1",
        f"store={tmp_path / 's.db'}",
        "roles.kind=llm",
        f"roles.models.default=scripted:{SCRIPTS / f'{task}.yaml'}",
    ]


def config(tmp_path: Path, task: str = "diabetes", *extra: str):
    """Two verifications of ``task``, two candidates a round, screened by the critic (k=2); ``extra`` overrides
    come last and win."""
    overrides = scripted_overrides(tmp_path, task, budget=2, candidates=2)
    return load_config(overrides=[*overrides, "screener.name=critic", "screener.options.k=2", *extra])


def run_to_end(cfg, store):
    """Build ``cfg``'s engine on ``store`` (``wiring.build_engine``), run it to its end and close its executor;
    the ``RunResult``."""
    engine = build_engine(cfg, store)
    try:
        return asyncio.run(engine.run())
    finally:
        engine.executor.close()
