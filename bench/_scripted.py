"""Scripted LLM runs for benches: variants of the shipped script ``examples/scripted/diabetes.yaml`` with its
implementer replies rewritten (a model that crashes now and then, one that regularises too hard, one that
re-tries), and a run of a configuration to its end, timed.

Benches import it by name (``from _scripted import rewritten``): a bench runs as ``python bench/<name>.py``,
which puts ``bench/`` first on ``sys.path``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from verifyless.config import RunConfig
from verifyless.engine import RunResult
from verifyless.store import RunStore
from verifyless.wiring import build_engine

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "scripted" / "diabetes.yaml"


def rewritten(
    out: Path, rewrite: Callable[[list[str]], list[str]], *, name: str | None = None, source: Path = SCRIPT
) -> Path:
    """Write ``source`` to ``out`` with every implementer rule's replies replaced by ``rewrite(replies)`` (and the
    script's model name set to ``name`` when given); returns ``out``."""
    data = yaml.safe_load(source.read_text())
    for rule in data["rules"]:
        if rule.get("role") == "implementer":
            rule["replies"] = rewrite(rule["replies"])
    if name is not None:
        data["name"] = name
    out.write_text(yaml.safe_dump(data))
    return out


def run_timed(cfg: RunConfig, store: RunStore) -> tuple[RunResult, float]:
    """Build ``cfg``'s engine on ``store`` (``wiring.build_engine``), run it to its end and close its executor;
    the result and the run's wall seconds (the build not included)."""
    engine = build_engine(cfg, store)
    started = time.perf_counter()
    try:
        result = asyncio.run(engine.run())
    finally:
        engine.executor.close()
    return result, time.perf_counter() - started
