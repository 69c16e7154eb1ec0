"""``build_rewarder``: a ready ``PolicyRewarder`` from plain settings (what the trainer and its CLI call).

Child-making roles are built the way the engine and the data commands build
them (``verifyless.models_wiring``; same response cache in the store file, same LLM
call recorder charging tokens to the run). Without model specs the tasks'
offline idea-space roles are used. The critic is a ``PointwiseCritic`` on
``critic`` (a model spec such as ``scripted:FILE``, ``openai:MODEL`` or
``local:...``) with ``k = votes`` and ``T = threshold``; it is required for
``critic-in-loop`` and ``critic-only``. Verification runs through the
configured executor with the store's folder hidden from candidate programs.

Resume: pass ``resume`` (a run id or a unique prefix). The stored settings,
tasks, model specs and executor win over the arguments, so the reopened run
hands out the same prompts and never pays twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.child import ChildMaker
from verifyless.critic_data.pipeline import CollectWiring, collection_config
from verifyless.errors import ConfigError
from verifyless.executors.registry import build_executor
from verifyless.model import build_model
from verifyless.model.cache import ResponseCache
from verifyless.models_wiring import RunIdOf, build_guards, build_models, build_roles, call_recorder
from verifyless.screen.critic import CriticOptions, PointwiseCritic
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.train.policy.rewards import PolicyRewarder
from verifyless.train.policy.settings import RewardSettings
from verifyless.train.policy.verifying import LoopGate


@dataclass
class BuiltRewarder:
    """The rewarder and what it holds open; ``close()`` (or ``with``) releases the store and the executor."""

    rewarder: PolicyRewarder
    store: Any
    executor: Any

    @property
    def run_id(self) -> str:
        return self.rewarder.run_id

    def close(self) -> None:
        try:
            self.executor.close()
        finally:
            self.store.close()

    def __enter__(self) -> BuiltRewarder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_rewarder(
    tasks: Sequence[str],
    store_path: str | Path,
    *,
    mode: str = "critic-in-loop",
    parents: int = 16,
    ideas: int = 16,
    votes: int = 16,
    threshold: float = 0.25,
    repairs: int = 3,
    verifications: int | None = 10_000,
    audit_rate: float = 0.0,
    seed: int = 0,
    models: Sequence[str] = (),
    critic: str | None = None,
    executor: str | None = None,
    workers: int | None = None,
    config: Path | None = None,
    resume: str | None = None,
) -> BuiltRewarder:
    """Open the store and build (or reopen) a policy-training reward run; see the module docstring.

    ``tasks``: task names or folders; ``models``: child-role specs as in the
    data commands (``["SPEC", "implementer=SPEC2", "summarizer=SPEC3"]``);
    ``critic``: the critic's model spec.
    """
    store = RunStore(store_path)
    try:
        return _build(store, Path(store_path), tasks, locals_of(locals()), config, resume)
    except BaseException:
        store.close()
        raise


def locals_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """The settings and wiring arguments of ``build_rewarder`` (for storing and resuming)."""
    keys = ("mode", "parents", "ideas", "votes", "threshold", "repairs", "verifications", "audit_rate", "seed")
    return {
        "settings": {k: values[k] for k in keys},
        "models": list(values["models"]),
        "critic": values["critic"],
        "executor": values["executor"],
        "workers": values["workers"],
    }


def _build(
    store: Any, path: Path, tasks: Sequence[str], args: dict[str, Any], config: Path | None, resume: str | None
) -> BuiltRewarder:
    run_id = None
    if resume is not None:
        run_id = store.resolve_run(resume)
        stored = dict(store.run(run_id).config)
        if stored.get("kind") != "policy-grpo":
            raise ConfigError(f"run {run_id} is not a policy-training run; resume it with the command that made it")
        tasks, args = list(stored["wiring"]["tasks"]), {**dict(stored["wiring"]), "settings": stored["settings"]}
    if not tasks:
        raise ConfigError("policy training needs at least one task (a task name or folder)")
    settings = RewardSettings.of(dict(args["settings"]))
    refs = [str(Path(t).resolve()) if Path(t).exists() else str(t) for t in tasks]
    rewarder: PolicyRewarder | None = None

    def run_id_now() -> str | None:  # the model call recorders' run id: the rewarder's, once it exists
        return rewarder.run_id if rewarder is not None else run_id

    parts = CollectWiring(config=config, models=args["models"], executor=args["executor"], workers=args["workers"])
    cfgs = [collection_config(ref, path, parts, seed=settings.seed) for ref in refs]
    loaded = [load_task(cfg.task) for cfg in cfgs]
    built = build_models(cfgs[0], store, run_id_now)
    llm = LoopGate(8)
    makers = {}
    for cfg, task in zip(cfgs, loaded, strict=True):
        makers[task.name] = ChildMaker(
            task,
            build_roles(cfg, task, built),
            llm=llm,
            guards=build_guards(cfg, built),
            guard_repairs=cfg.guards.repair_attempts,
        )
    judge = _critic(args["critic"], settings, store, path, run_id_now)
    first = cfgs[0]
    execu = build_executor(
        first.executor.name,
        first.executor.options,
        hide=[path.resolve().parent],
        capacity=first.engine.verify_concurrency,
    )
    wiring = {
        "tasks": refs,
        "models": list(args["models"]),
        "critic": args["critic"],
        "executor": args["executor"],
        "workers": args["workers"],
    }
    try:
        rewarder = PolicyRewarder(loaded, makers, judge, execu, store, run_id, settings, run_config={"wiring": wiring})
    except BaseException:
        execu.close()
        raise
    return BuiltRewarder(rewarder, store, execu)


def _critic(spec: str | None, settings: RewardSettings, store: Any, path: Path, run_id: RunIdOf) -> Any:
    """The ``PointwiseCritic`` on model ``spec`` (None when the mode needs no critic)."""
    if spec is None:
        if settings.mode != "verify-all":
            raise ConfigError(
                f"mode {settings.mode} needs a critic model: pass critic=SPEC (e.g. scripted:FILE, openai:MODEL, "
                "local:PATH), or use mode verify-all"
            )
        return None

    model = build_model(spec, cache=ResponseCache(path), recorder=call_recorder(store, run_id))
    return PointwiseCritic(model, CriticOptions(k=settings.votes), route_threshold=settings.threshold)


__all__ = ["BuiltRewarder", "build_rewarder"]
