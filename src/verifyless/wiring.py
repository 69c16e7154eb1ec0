"""Build an Engine from a RunConfig: the only place that maps names to classes."""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from verifyless.config import RunConfig
from verifyless.errors import ConfigError
from verifyless.task.base import Task


def build_models(cfg: RunConfig, store: Any, run_ref: dict[str, str | None], *, replay: bool = False) -> dict[str, Any]:
    """One model per role from ``roles.models``; every call is recorded in the store.

    ``run_ref["run_id"]`` is filled once the run exists (calls before that are
    not possible: the first LLM call is the brief, after the run is created).
    """
    from verifyless.model import build_model
    from verifyless.model.cache import CachedModel, ResponseCache

    specs = dict(cfg.roles.models)
    if "default" not in specs:
        if cfg.roles.kind == "llm":
            if os.environ.get("VERIFYLESS_BASE_URL") or os.environ.get("VERIFYLESS_MODEL"):
                specs["default"] = "env"
            else:
                raise ConfigError(
                    "roles.kind=llm needs a model: set roles.models.default (e.g. scripted:FILE or openai:MODEL) "
                    "or the environment variables VERIFYLESS_BASE_URL, VERIFYLESS_API_KEY, VERIFYLESS_MODEL"
                )
        else:
            return {}
    cache = ResponseCache(Path(cfg.store))

    def recorder(rec: Any) -> None:
        run_id = run_ref.get("run_id")
        if run_id is None:
            return
        from verifyless.store import Charge

        payload = {"role": rec.role, "model": rec.model, "prompt_hash": rec.prompt_hash,
                   "prompt_tokens": rec.usage.prompt_tokens, "completion_tokens": rec.usage.completion_tokens,
                   "cost": rec.usage.cost, "cached": rec.cached, "latency_s": rec.latency_s, "n": rec.n,
                   "error": rec.error}
        charge = None if rec.cached else Charge(tokens_in=rec.usage.prompt_tokens,
                                                tokens_out=rec.usage.completion_tokens, cost=rec.usage.cost)
        store.append(run_id, "llm_call", payload, charge=charge)

    models: dict[str, Any] = {}
    built: dict[str, Any] = {}
    for role, spec in specs.items():
        key = repr(spec)
        if key not in built:
            inner = build_model(spec, recorder=recorder)
            built[key] = CachedModel(inner, cache, mode="replay" if replay else "readwrite")
        models[role] = built[key]
    return models


def build_roles(cfg: RunConfig, task: Task, models: dict[str, Any]):
    if cfg.roles.kind == "space":
        if task.idea_space is None:
            raise ConfigError(
                f"task {task.name!r} declares no idea_space, so roles.kind=space cannot make children: "
                "use roles.kind=llm with a model, or add an idea_space to task.yaml"
            )
        from verifyless.roles.space import space_roles

        return space_roles(task, cfg.seed)
    from verifyless.roles.llm import _ROLE_KEYS, llm_roles

    # Screener keys (critic, judge, arbiter, ...) are for the screener, not the four roles.
    role_models = {k: v for k, v in models.items() if k in _ROLE_KEYS or k == "default"}
    return llm_roles(role_models, implement_mode=cfg.roles.implement_mode, options=cfg.roles.llm)


def build_screener(cfg: RunConfig, task: Task, models: dict[str, Any], sandbox: Any = None):
    from verifyless.screen.registry import build_screener as _build

    return _build(cfg.screener.name, models=models, options=dict(cfg.screener.options), seed=cfg.seed,
                  task=task, sandbox=sandbox)


def build_strategy(cfg: RunConfig):
    from verifyless.search.registry import build_strategy as _build

    return _build(cfg.strategy.name, dict(cfg.strategy.options), random.Random(cfg.seed))


def build_guards(cfg: RunConfig, models: dict[str, Any]):
    """The ``guards:`` section as a ``Guards`` (the reviewer uses ``guards.reviewer_model``, else ``default``)."""
    from verifyless.guards import Guards

    reviewer = None
    if cfg.guards.reviewer != "off":
        reviewer = models.get(cfg.guards.reviewer_model) or models.get("default")
    return Guards(cfg.guards, reviewer_model=reviewer)


def memory_enabled(cfg: RunConfig) -> bool:
    return cfg.engine.memory if cfg.engine.memory is not None else cfg.strategy.name == "mcgs"


def build_engine(cfg: RunConfig, store: Any, *, task: Task | None = None, progress=None, replay_executor=None,
                 replay: bool = False):
    """Everything an Engine needs, from configuration alone."""
    from verifyless.engine import Engine
    from verifyless.executors.ray import build_executor
    from verifyless.task import load_task

    task = task or load_task(cfg.task)
    run_ref: dict[str, str | None] = {"run_id": None}  # the engine fills it when the run exists
    models = build_models(cfg, store, run_ref, replay=replay)
    roles = build_roles(cfg, task, models)
    hide = [Path(cfg.store).resolve().parent]
    executor = replay_executor or build_executor(cfg.executor.name, dict(cfg.executor.options), hide=hide,
                                                 capacity=cfg.engine.verify_concurrency)
    memory = None
    if memory_enabled(cfg):
        from verifyless.search.memory import Memory

        memory = Memory(task_text=f"{task.name}\n{task.description}\n{task.statement}")
    final_judge = None
    if cfg.engine.final_selection is not None:
        final_judge = models.get("judge") or models.get("default")
        if final_judge is None:
            raise ConfigError("engine.final_selection needs a judge model: set roles.models.judge or roles.models.default")
    engine = Engine(task=task, roles=roles, screener=build_screener(cfg, task, models, getattr(executor, "sandbox", None)),
                    strategy=build_strategy(cfg), executor=executor, store=store, config=cfg, memory=memory,
                    progress=progress, final_judge=final_judge, guards=build_guards(cfg, models))
    engine.run_ref = run_ref
    return engine
