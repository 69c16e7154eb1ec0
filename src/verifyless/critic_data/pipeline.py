"""Wiring for the data commands: roles, models, executor and store from plain settings.

``run_collection`` builds a ``Collector`` from the parts (``verifyless.models_wiring``) ``verifyless.wiring`` builds
an engine (same role/model construction, the same LLM call recorder that
charges tokens and cost to the run, the same response cache in the store
file), runs it, and returns the run id and result. Roles default to the
task's offline idea-space roles; ``roles="llm"`` with model specs (or a
config file) uses LLM roles.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verifyless.config import load_config
from verifyless.critic_data.collect import NO_CAPS, Collector, CollectResult, CollectSettings, Progress
from verifyless.errors import ConfigError
from verifyless.executors.registry import build_executor
from verifyless.ledger import BudgetConfig, Ledger
from verifyless.models_wiring import build_guards, build_models, build_roles
from verifyless.store import RunStore
from verifyless.task import load_task


def parse_model_specs(specs: Sequence[str]) -> dict[str, str]:
    """``["SPEC", "critic=SPEC2"]`` -> ``{"default": "SPEC", "critic": "SPEC2"}``."""
    out: dict[str, str] = {}
    for item in specs:
        role, sep, spec = item.partition("=")
        if sep and role.isidentifier() and ":" not in role:
            out[role] = spec
        else:
            out["default"] = item
    return out


@dataclasses.dataclass(frozen=True)
class CollectWiring:
    """Where a collection's roles, models and executor come from; unset fields keep the config's (or defaults).

    ``config``: a run config YAML; ``roles``: ``space`` or ``llm`` (model specs alone mean ``llm``);
    ``models``: ``SPEC`` or ``ROLE=SPEC`` items (``parse_model_specs``); ``executor``: ``local`` or ``ray``;
    ``workers``: verifications at once; ``smoke``: a fidelity level or ``"off"`` (default: the config's
    ``engine.smoke``, which smoke-runs LLM roles' children at the task's cheapest level).
    """

    config: Path | None = None
    roles: str | None = None
    models: Sequence[str] = ()
    executor: str | None = None
    workers: int | None = None
    smoke: str | None = None


def collection_config(task: str, store: Path, wiring: CollectWiring = CollectWiring(), *, seed: int = 0) -> Any:
    """A ``RunConfig`` carrying the roles, models and executor of ``wiring`` for a collection."""
    overrides: dict[str, Any] = {"task": task, "store": str(store), "seed": seed}
    specs = parse_model_specs(wiring.models)
    if specs:
        overrides["roles.kind"] = wiring.roles or "llm"
        overrides.update({f"roles.models.{k}": v for k, v in specs.items()})
    elif wiring.roles is not None:
        overrides["roles.kind"] = wiring.roles
    if wiring.executor is not None:
        overrides["executor.name"] = wiring.executor
    if wiring.workers is not None:
        overrides["engine.verify_concurrency"] = wiring.workers
    if wiring.smoke is not None:
        overrides["engine.smoke"] = wiring.smoke
    return load_config(wiring.config, values=overrides)


def run_collection(
    task_name: str,
    store_path: Path,
    settings: CollectSettings,
    caps: BudgetConfig = NO_CAPS,
    wiring: CollectWiring = CollectWiring(),
    *,
    resume: str | None = None,
    progress: Progress | None = None,
) -> CollectResult:
    """Collect (or resume) into the run store at ``store_path``; see ``verifyless.critic_data.collect``.

    On resume the stored settings, roles, models, executor and smoke setting win over the arguments
    (``wiring``'s config file and workers still apply).
    """
    with RunStore(store_path) as store:
        if resume is not None:
            resume = store.resolve_run(resume)
            stored = dict(store.run(resume).config)
            if stored.get("kind") != "data-collect":
                raise ConfigError(f"run {resume} is not a data collection; resume it with `verifyless resume`")
            settings = CollectSettings(**{k: stored[k] for k in CollectSettings.__dataclass_fields__ if k in stored})
            task_name = str(stored.get("task_ref") or store.run(resume).task)
            wiring = _stored_wiring(wiring, stored.get("wiring", {}))
        cfg = collection_config(task_name, store_path, wiring, seed=settings.seed)
        task = load_task(cfg.task)
        ledger = Ledger(store, caps, task.metric)  # the collector sets its run id when the run exists
        built = build_models(cfg, store, lambda: ledger.run_id)
        role_set = build_roles(cfg, task, built)
        hide = [Path(store_path).resolve().parent]
        execu = build_executor(
            cfg.executor.name, cfg.executor.options, hide=hide, capacity=cfg.engine.verify_concurrency
        )
        task_ref = str(Path(task_name).resolve()) if Path(task_name).exists() else task_name
        wiring_record = {
            "roles": cfg.roles.kind,
            "models": [f"{k}={v}" for k, v in cfg.roles.models.items()],
            "executor": cfg.executor.name,
            "smoke": cfg.engine.smoke,
        }
        try:
            collector = Collector(
                task,
                role_set,
                execu,
                store,
                settings,
                caps,
                progress=progress,
                ledger=ledger,
                run_config={"wiring": wiring_record, "task_ref": task_ref},
                guards=build_guards(cfg, built),
                guard_repairs=cfg.guards.repair_attempts,
                smoke=cfg.engine.smoke,
                llm_roles=cfg.roles.kind == "llm",
                smoke_wall_seconds=cfg.engine.smoke_wall_seconds,
                data_report=cfg.engine.data_report,
                hide=tuple(hide),
            )
            return asyncio.run(collector.run(resume))
        finally:
            execu.close()


def _stored_wiring(wiring: CollectWiring, stored: Mapping[str, Any]) -> CollectWiring:
    """``wiring`` with the roles, models, executor and smoke setting a resumed collection recorded (where it recorded them)."""
    return dataclasses.replace(
        wiring,
        roles=stored.get("roles", wiring.roles),
        models=stored.get("models", wiring.models),
        executor=stored.get("executor", wiring.executor),
        smoke=stored.get("smoke", wiring.smoke),
    )


__all__ = ["CollectWiring", "collection_config", "parse_model_specs", "run_collection"]
