"""The composition root: build an Engine from a RunConfig, read top to bottom.

``build_engine`` does two things in order. First ``resolve`` settles, before anything is built, what the
validated configuration leaves to the run's start: the model specs that read the environment (pinned to a
model name and base URL), ``engine.memory_embedder: auto``, a learnt ``critic-rm``'s warm start, encoder or
weights, and which ``roles.models`` keys the final-selection and novelty judges use. The answer is one frozen
``Resolved``; the validated configuration is never changed after that. Then every part is built once, in
order, from the configuration and ``Resolved``: the ledger (which owns the run's id, read by the model call
recorders: ``models_wiring.RunIdOf``), the models, roles, executor, screener (``critic-ttl``'s torch learner
injected from ``train/``), strategy, memory, guards and ``Peers``; the engine gets them all, with the
validated configuration and ``Resolved.pins``: a new run stores the configuration as given and, beside it, what
was resolved (the ``config_resolved`` event), never one written into the other.

The parts shared with the other loops (models, roles, guards) come from ``verifyless.models_wiring``;
nothing below this module imports it.
"""

from __future__ import annotations

import contextlib
import logging
import random
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from verifyless.config import RunConfig, apply_changes
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
    endpoint_pins,
    model_specs,
    novelty_judge_key,
)
from verifyless.screen.novelty import NoveltyGate
from verifyless.screen.registry import SCREENERS
from verifyless.screen.registry import build_screener as _build_screener
from verifyless.screen.reward import COLD, RewardModelOptions, WarmHead, critic_pins, resolve_encoder
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


def screener_pins(cfg: RunConfig, warm: WarmHead | None) -> dict[str, Any]:
    """What a learnt ``critic-rm`` (the screener, or ``adaptive``'s inner) resolves when the run starts
    (``screen.reward.critic_pins``) and its options do not already say, as dotted keys under ``screener.options``
    (``screener.options.options`` for ``adaptive``), and for ``adaptive`` around it in a new run ``sizing: evidence``
    (``screen/adaptive.py``); {} for every other screener and for a stored configuration."""
    opts = learned_critic_options(cfg)
    if opts is None:
        return {}
    adaptive = cfg.screener.name == "adaptive"
    prefix = "screener.options.options." if adaptive else "screener.options."
    # a pin fills what the options left open; a value they hold (a stored run's) is never replaced: a resume on a
    # head whose folder changed keeps the recorded weights, and the critic refuses it
    pins = {prefix + key: value for key, value in critic_pins(opts, warm).items() if _open(getattr(opts, key), value)}
    sizing = getattr(cfg.screener.options, "sizing", None)
    if adaptive and opts.warm is None and sizing is None:  # a new run: audits sized by the evidence (issue 55)
        pins["screener.options.sizing"] = "evidence"
    return pins


def _open(given: Any, resolved: Any) -> bool:
    """Whether an option given as ``given`` is pinned to ``resolved``: it differs and was left open (unset or auto)."""
    return given != resolved and given in (None, "auto")


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


def build_novelty(cfg: RunConfig, task: Task, models: dict[str, Any], judge_key: str | None) -> NoveltyGate | None:
    """The ``novelty:`` section as a gate (None when off); its judge is ``models[judge_key]`` (``Resolved.novelty_judge``)."""
    if not cfg.novelty.enabled:
        return None
    judge = models[judge_key] if judge_key is not None else None
    with constructor_errors("the novelty gate", "novelty"):
        return NoveltyGate(task, cfg.novelty, judge=judge)


def memory_enabled(cfg: RunConfig) -> bool:
    return cfg.engine.memory if cfg.engine.memory is not None else cfg.strategy.name == "mcgs"


def memory_pin(cfg: RunConfig) -> dict[str, Any]:
    """``engine.memory_embedder: auto`` -> the embedder it means here (``auto_embedder``), so the run records which
    one it used and its replay uses the same one anywhere; {} when the memory is off or names its embedder."""
    if cfg.engine.memory_embedder != "auto" or not memory_enabled(cfg):
        return {}
    return {"engine.memory_embedder": auto_embedder()}


def build_memory(cfg: RunConfig, task: Task) -> Memory | None:
    """The search memory of ``task`` when ``memory_enabled``, else None."""
    if not memory_enabled(cfg):
        return None
    return Memory(embedder=cfg.engine.memory_embedder, task_text=f"{task.name}\n{task.description}\n{task.statement}")


def final_judge_key(cfg: RunConfig, keys: set[str]) -> str | None:
    """The ``roles.models`` key judging ``engine.final_selection`` (``judge``, else ``default``; None when it is
    off); a ConfigError when neither is among ``keys``."""
    if cfg.engine.final_selection is None:
        return None
    check_final_judge(cfg, keys)
    return "judge" if "judge" in keys else "default"


@dataclass(frozen=True)
class Resolved:
    """What the composition root settled from a validated configuration before it built anything (``resolve``).

    ``pins`` maps dotted option keys to what the start decided where the configuration left it open: the endpoint
    pins (``models_wiring.endpoint_pins``), the memory embedder ``auto`` stood for (``memory_pin``) and the learnt
    critic's pins (``screener_pins``). A new run stores them beside its configuration (the ``config_resolved``
    event), and ``config.stored_config`` applies them, so a resume or replay starts from a configuration that
    resolves to no pins at all (runs stored before that event hold the same pins inside their configuration).
    ``config`` is the validated configuration with the pins applied: the one the models and the memory are built
    from. ``warm`` is the critic's starting head and its line; ``final_judge`` and ``novelty_judge`` the
    ``roles.models`` keys of those judges (None: no such judge).
    """

    config: RunConfig
    pins: dict[str, Any]
    warm: WarmStart
    final_judge: str | None
    novelty_judge: str | None


def resolve(cfg: RunConfig, store: RunStoreProtocol, task: Task, *, replay: bool = False) -> Resolved:
    """``Resolved`` for ``cfg`` (validated) in ``store`` on ``task``; ``cfg`` itself is left as it is.

    A new run pins its endpoints and memory embedder (nothing to pin on a stored configuration, which holds them);
    a replay takes the stored ones as they are. A missing final-selection or novelty judge is a ConfigError here,
    before a model, executor or screener is built.
    """
    pins = {} if replay else {**endpoint_pins(cfg), **memory_pin(cfg)}
    pinned = with_pins(cfg, pins)
    keys = set(model_specs(pinned))
    final_judge = final_judge_key(pinned, keys)
    novelty_judge = novelty_judge_key(pinned, keys)
    warm = resolve_warm_start(pinned, store, task)
    critic = screener_pins(pinned, warm.head)
    return Resolved(with_pins(pinned, critic), {**pins, **critic}, warm, final_judge, novelty_judge)


def with_pins(cfg: RunConfig, pins: dict[str, Any]) -> RunConfig:
    """``cfg`` with each pinned option (dotted key) set, validated again (as a resume reads a stored run)."""
    return apply_changes(cfg.model_dump(mode="json"), pins) if pins else cfg


def build_engine(
    cfg: RunConfig,
    store: RunStoreProtocol,
    *,
    task: Task | None = None,
    progress: Progress | None = None,
    replay_executor: Executor | None = None,
    replay: bool = False,
) -> Engine:
    """Everything an Engine needs, from configuration alone: ``resolve`` first, then each part once.

    The models are built from the pinned specs (the run records each model and base URL, never a key, so replay
    and resume need no endpoint variables); the screener from the pinned options too (a new run's critic behaves
    as its resume and replay will read it: ``gate``, ``sizing``) and the resolved warm head; a stored run's
    recorded ``weights`` are checked against its folder.
    """
    task = task or load_task(cfg.task)
    resolved = resolve(cfg, store, task, replay=replay)
    run = resolved.config
    ledger = Ledger(store, cfg.budget, task.metric, progress, gpus=task.limits.gpus)  # run id set when the run exists
    models = build_models(run, store, lambda: ledger.run_id, replay=replay)
    roles = build_roles(cfg, task, models)
    executor = replay_executor or build_executor(
        cfg.executor.name,
        cfg.executor.options,
        hide=[Path(cfg.store).resolve().parent],
        capacity=cfg.engine.verify_concurrency,
    )
    screener = build_screener(run, task, models, executor.sandbox, resolved.warm.head)
    if resolved.warm.line is not None:
        log.info("%s", resolved.warm.line)
        (progress or _silent)("warm_start", {"line": resolved.warm.line})
    return Engine(
        task=task,
        roles=roles,
        screener=screener,
        strategy=build_strategy(cfg),
        executor=executor,
        store=store,
        config=cfg,
        resolved=resolved.pins,
        memory=build_memory(run, task),
        final_judge=models[resolved.final_judge] if resolved.final_judge is not None else None,
        guards=build_guards(cfg, models),
        peers=Peers(
            build_novelty(cfg, task, models, resolved.novelty_judge),
            {key: m for key, m in models.items() if isinstance(m, ModelEnsemble)},
        ),
        ledger=ledger,
    )


__all__ = [
    "Resolved",
    "WarmStart",
    "build_engine",
    "build_guards",
    "build_memory",
    "build_models",
    "build_novelty",
    "build_roles",
    "build_screener",
    "build_strategy",
    "constructor_errors",
    "final_judge_key",
    "learned_critic_options",
    "memory_enabled",
    "memory_pin",
    "resolve",
    "resolve_warm_start",
    "with_pins",
    "screener_pins",
]
