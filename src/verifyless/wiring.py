"""The composition root: build an Engine from a RunConfig.

The parts shared with the other loops (models, roles, guards) come from ``verifyless.models_wiring``;
this module adds the screener (injecting ``critic-ttl``'s torch learner from ``train/``), the strategy,
the executor, the novelty gate and the run's ``Ledger``, and nothing below it imports it. Every part is
passed to its constructor: the ledger is built first and owns the run's id, which the model call
recorders read from it (``models_wiring.RunIdOf``); the engine gets the ledger and the ``Peers``.
"""

from __future__ import annotations

import contextlib
import logging
import random
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from verifyless.config import RunConfig
from verifyless.engine import Engine, Peers
from verifyless.errors import ConfigError
from verifyless.executors.base import Executor
from verifyless.executors.registry import build_executor
from verifyless.ledger import Ledger
from verifyless.ledger.record import Progress
from verifyless.model.ensemble import ModelEnsemble
from verifyless.models_wiring import (
    build_guards,
    build_models,
    build_roles,
    check_final_judge,
    novelty_judge_key,
    pin_endpoints,
)
from verifyless.screen.novelty import NoveltyGate
from verifyless.screen.registry import SCREENERS
from verifyless.screen.registry import build_screener as _build_screener
from verifyless.screen.reward import COLD, RewardModelOptions, WarmHead, resolve_encoder
from verifyless.search.memory import Memory, auto_embedder
from verifyless.search.registry import build_strategy as _build_strategy
from verifyless.store import RunStore
from verifyless.store.protocol import RunStoreProtocol
from verifyless.task import load_task
from verifyless.task.base import Task
from verifyless.train.ttl_learner import LoRALearner
from verifyless.train.warm import load_warm, warm_head

log = logging.getLogger(__name__)


def _silent(kind: str, data: dict[str, Any]) -> None:
    return None


def learned_critic_options(cfg: RunConfig) -> RewardModelOptions | None:
    """The options of the ``critic-rm`` the screener is or wraps (``adaptive``'s inner), else None."""
    opts: Any = cfg.screener.options
    if cfg.screener.name == "critic-rm":
        return typing.cast(RewardModelOptions, opts)
    if cfg.screener.name == "adaptive" and opts.screener == "critic-rm":
        return typing.cast(RewardModelOptions, SCREENERS.validate("critic-rm", opts.options))
    return None


class WarmStart(NamedTuple):
    """What the composition root resolved for a ``critic-rm`` learnt in the run: its starting head (None: cold)
    and the line that says so (None when nothing is to be said: a resume, a fixed head, another screener)."""

    head: WarmHead | None
    line: str | None


def resolve_warm_start(cfg: RunConfig, store: RunStoreProtocol, task: Task) -> WarmStart:
    """A new run fits its warm start (``train/warm.py``); a run that recorded one reloads it from the store."""
    opts = learned_critic_options(cfg)
    if opts is None or opts.path is not None or opts.warm == COLD:
        return WarmStart(None, None)
    if opts.warm is not None:  # recorded by the run: reloaded, never fitted again
        return WarmStart(recorded_warm(cfg, store, opts.warm), None)
    if not cfg.screener.warm_start:
        return WarmStart(None, "warm start: off (screener.warm_start: false); critic-rm starts cold")
    head, line = warm_head(store, task, encoder=resolve_encoder(opts.encoder), C=opts.C, tie=cfg.tie_tolerance)
    return WarmStart(head, line)


def recorded_warm(cfg: RunConfig, store: RunStoreProtocol, digest: str) -> WarmHead:
    """The warm start blob ``digest`` from ``store``, else from the run's own store file ``cfg.store`` (a replay
    writes into a temporary store and reads what it replays from the original)."""
    try:
        return load_warm(store, digest)
    except ConfigError:
        origin = Path(cfg.store)
        if not origin.is_file() or origin.resolve() == Path(str(getattr(store, "path", ""))).resolve():
            raise
    with RunStore(origin) as original:
        return load_warm(original, digest)


def build_screener(
    cfg: RunConfig, task: Task, models: dict[str, Any], sandbox: Any = None, warm: WarmHead | None = None
) -> Any:
    with constructor_errors(f"screener {cfg.screener.name!r}", "screener.options"):
        return _build_screener(
            cfg.screener.name,
            models=models,
            options=cfg.screener.options,
            seed=cfg.seed,
            task=task,
            sandbox=sandbox,
            learner=LoRALearner,
            threshold=cfg.engine.uncertainty_threshold,
            warm=warm,
        )


def pinned(cfg: RunConfig, screener: Any) -> RunConfig:
    """``cfg`` with the screener's ``pins`` (options it resolved when built: ``critic-rm``'s weights tag) written
    into its options, so the run's stored config records them and a resume or replay checks them."""
    pins = getattr(screener, "pins", None)  # optional: only a screener that resolves options when built has it
    if not pins:
        return cfg
    options = cfg.screener.options.model_copy(update=dict(pins))
    return cfg.model_copy(update={"screener": cfg.screener.model_copy(update={"options": options})})


def build_strategy(cfg: RunConfig) -> Any:
    with constructor_errors(f"search strategy {cfg.strategy.name!r}", "strategy.options"):
        return _build_strategy(cfg.strategy.name, cfg.strategy.options, random.Random(cfg.seed))


@contextlib.contextmanager
def constructor_errors(what: str, key: str) -> Iterator[None]:
    """A ``ValueError``/``TypeError`` raised while building a component from config becomes a ConfigError."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise ConfigError(f"{what}: {exc}; fix {key} (see docs/configuration.md)") from exc


def build_novelty(cfg: RunConfig, task: Task, models: dict[str, Any]) -> NoveltyGate | None:
    """The ``novelty:`` section as a gate (None when off); its judge is ``novelty.judge_model``, else the
    ``novelty_judge`` role key, else ``default``."""
    opts = cfg.novelty
    if not opts.enabled:
        return None
    key = novelty_judge_key(cfg, models)
    judge = models[key] if key is not None else None
    with constructor_errors("the novelty gate", "novelty"):
        return NoveltyGate(task, opts, judge=judge)


def memory_enabled(cfg: RunConfig) -> bool:
    return cfg.engine.memory if cfg.engine.memory is not None else cfg.strategy.name == "mcgs"


def pin_memory_embedder(cfg: RunConfig) -> RunConfig:
    """``engine.memory_embedder: auto`` becomes the embedder it means here (``auto_embedder``), so the
    configuration a run stores says which one it used and its replay uses the same one anywhere."""
    if cfg.engine.memory_embedder != "auto" or not memory_enabled(cfg):
        return cfg
    engine = cfg.engine.model_copy(update={"memory_embedder": auto_embedder()})
    return cfg.model_copy(update={"engine": engine})


def build_memory(cfg: RunConfig, task: Task) -> Memory | None:
    """The search memory of ``task`` when ``memory_enabled``, else None."""
    if not memory_enabled(cfg):
        return None
    return Memory(embedder=cfg.engine.memory_embedder, task_text=f"{task.name}\n{task.description}\n{task.statement}")


def build_final_judge(cfg: RunConfig, models: dict[str, Any]) -> Any:
    """The model judging ``engine.final_selection`` (the ``judge`` key, else ``default``); None when it is off."""
    if cfg.engine.final_selection is None:
        return None
    check_final_judge(cfg, models)
    return models.get("judge") or models["default"]


def build_engine(
    cfg: RunConfig,
    store: RunStoreProtocol,
    *,
    task: Task | None = None,
    progress: Progress | None = None,
    replay_executor: Executor | None = None,
    replay: bool = False,
) -> Engine:
    """Everything an Engine needs, from configuration alone.

    A new run's model specs that read the environment are pinned first (``models_wiring.pin_endpoints``): the
    configuration the run stores names each model and base URL (never a key), so replay and resume need
    no endpoint variables.
    """
    if not replay:
        cfg = pin_memory_embedder(pin_endpoints(cfg))
    task = task or load_task(cfg.task)
    ledger = Ledger(
        store, cfg.budget, task.metric, progress, gpus=task.limits.gpus
    )  # the engine sets its run id when the run exists
    models = build_models(cfg, store, lambda: ledger.run_id, replay=replay)
    roles = build_roles(cfg, task, models)
    hide = [Path(cfg.store).resolve().parent]
    executor = replay_executor or build_executor(
        cfg.executor.name, cfg.executor.options, hide=hide, capacity=cfg.engine.verify_concurrency
    )
    final_judge = build_final_judge(cfg, models)  # a missing judge fails before the screener is built
    warm = resolve_warm_start(cfg, store, task)
    screener = build_screener(cfg, task, models, executor.sandbox, warm.head)
    if warm.line is not None:
        log.info("%s", warm.line)
        (progress or _silent)("warm_start", {"line": warm.line})
    cfg = pinned(cfg, screener)
    ensembles = {key: m for key, m in models.items() if isinstance(m, ModelEnsemble)}
    return Engine(
        task=task,
        roles=roles,
        screener=screener,
        strategy=build_strategy(cfg),
        executor=executor,
        store=store,
        config=cfg,
        memory=build_memory(cfg, task),
        final_judge=final_judge,
        guards=build_guards(cfg, models),
        peers=Peers(build_novelty(cfg, task, models), ensembles),
        ledger=ledger,
    )


__all__ = [
    "WarmStart",
    "build_engine",
    "build_final_judge",
    "build_guards",
    "build_memory",
    "build_models",
    "build_novelty",
    "build_roles",
    "build_screener",
    "build_strategy",
    "constructor_errors",
    "learned_critic_options",
    "memory_enabled",
    "pin_memory_embedder",
    "pinned",
    "resolve_warm_start",
]
