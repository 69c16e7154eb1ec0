"""One typed configuration tree for a run, validated early and recorded with it.

Sources, later wins: built-in defaults < ``--config run.yaml`` < CLI flags <
dotted overrides (``engine.candidates=4 screener.options.k=8``). The resolved
tree is the run's first stored event, so a run can always be re-created.

Errors are ``ConfigError`` naming the key and the fix, never a pydantic dump.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Mapping

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifyless.errors import ConfigError
from verifyless.guards.config import GuardsConfig
from verifyless.roles.options import LLMRoleOptions


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Named(_Strict):
    """A component chosen by name, with free-form options checked by its factory."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class Budget(_Strict):
    """Hard caps. ``None`` means no cap on that axis; at least one cap must be set."""

    verifications: int | None = Field(30, ge=1, description="paid verifications, repairs and the baseline included")
    evaluator_seconds: float | None = Field(None, gt=0)
    tokens: int | None = Field(None, ge=1, description="prompt + completion tokens over all roles")
    cost: float | None = Field(None, gt=0, description="in the price table's currency")
    wall_seconds: float | None = Field(None, gt=0)


class Roles(_Strict):
    """Which roles make children.

    ``kind: space`` uses the task's idea space (no LLM). ``kind: llm`` uses models:
    ``models.default`` plus optional per-role entries (``brief``, ``proposer``,
    ``implementer``, ``summarizer``, ``critic``, ``judge``), each a spec string
    (``scripted:FILE``, ``openai:MODEL``, ``env``) or a mapping of endpoint settings.
    """

    kind: Literal["space", "llm"] = "space"
    models: dict[str, Any] = Field(default_factory=dict)
    implement_mode: Literal["full", "diff"] = "full"
    llm: LLMRoleOptions = Field(default_factory=LLMRoleOptions, description="options of the LLM roles (kind: llm)")


class Engine(_Strict):
    candidates: int = Field(8, ge=1, description="N candidates made per expansion")
    expansions_per_round: int = Field(1, ge=1)
    verify_per_expansion: int = Field(1, ge=1, description="how many of the N the screener may send to verification")
    llm_concurrency: int = Field(8, ge=1)
    verify_concurrency: int = Field(1, ge=1)
    pipeline: bool = Field(True, description="overlap LLM work of round r+1 with verification of round r")
    repair_attempts: int = Field(3, ge=0, le=10)
    audit_rate: float = Field(0.0, ge=0.0, le=1.0, description="fraction of screened-out candidates verified anyway")
    verify_uncertain: bool = Field(False, description="also verify candidates whose vote uncertainty u >= T")
    uncertainty_threshold: float = Field(0.25, ge=0.0, le=1.0)
    memory: bool | None = Field(None, description="None: on for mcgs, off otherwise")
    max_rounds: int | None = Field(None, ge=1)
    max_idle_rounds: int = Field(
        20, ge=1, description="stop when this many rounds in a row send nothing to verification (search exhausted)")
    final_selection: int | None = Field(
        None, ge=2, description="top-N validation nodes for an end-of-run judged round-robin (needs a judge model)")


class Executor(_Strict):
    name: Literal["local", "ray"] = "local"
    options: dict[str, Any] = Field(default_factory=dict)


class RunConfig(_Strict):
    task: str = "diabetes"
    seed: int = 0
    strategy: Named = Named(name="mcgs")
    screener: Named = Named(name="surrogate")
    roles: Roles = Roles()
    budget: Budget = Budget()
    engine: Engine = Engine()
    executor: Executor = Executor()
    guards: GuardsConfig = Field(default_factory=GuardsConfig,
                                 description="checks on every implementation before it is verified (MLEvolve)")
    store: Path = Path("runs/verifyless.db")


def load_config(path: Path | None = None, overrides: Mapping[str, Any] | list[str] = ()) -> RunConfig:
    """Defaults, then ``path`` (YAML), then overrides (``a.b=c`` strings or a mapping)."""
    data: dict[str, Any] = RunConfig().model_dump(mode="json")
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} not found: pass an existing YAML file to --config")
        try:
            loaded = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path} is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path} must hold a mapping at the top level, got {type(loaded).__name__}")
        _merge(data, loaded)
    items = overrides.items() if isinstance(overrides, Mapping) else (_split_override(o) for o in overrides)
    for key, value in items:
        _set_dotted(data, key, value)
    return validate(data)


def validate(data: Mapping[str, Any]) -> RunConfig:
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown key; check the spelling (see `verifyless run --help` and docs/configuration.md)"
            problems.append(f"  {where}: {msg}")
        raise ConfigError("invalid configuration:\n" + "\n".join(problems)) from None
    b = cfg.budget
    if all(v is None for v in (b.verifications, b.evaluator_seconds, b.tokens, b.cost, b.wall_seconds)):
        raise ConfigError("budget: every cap is empty; set at least one, e.g. budget.verifications=30")
    return cfg


RESUMABLE_KEYS = ("budget.", "engine.max_rounds", "engine.max_idle_rounds")


def stored_config(store: Any, run_id: str) -> dict[str, Any]:
    """A run's configuration as stored: its first event plus every later ``config_update`` (e.g. a budget raised on resume)."""
    data: dict[str, Any] | None = None
    for ev in store.events(run_id, kinds=["config", "config_update"]):
        if ev.kind == "config":
            data = dict(ev.payload["config"])
        elif data is not None:
            for key, value in ev.payload.get("changes", {}).items():
                _set_dotted(data, key, value)
    if data is None:
        raise ConfigError(f"run {run_id} has no stored configuration")
    return data


def resume_changes(overrides: list[str]) -> dict[str, Any]:
    """The overrides allowed when resuming (budgets and round limits); anything else is a ConfigError."""
    changes: dict[str, Any] = {}
    for text in overrides:
        key, value = _split_override(text)
        if key in ("store", "task"):
            continue  # naming the same store/task again is harmless; the stored run decides
        if not key.startswith(RESUMABLE_KEYS):
            raise ConfigError(
                f"{key} cannot change when resuming: a resumed run keeps its stored configuration, "
                "except budget.* and engine.max_rounds / engine.max_idle_rounds (e.g. --budget 60 to extend it)"
            )
        changes[key] = value
    return changes


def apply_changes(data: Mapping[str, Any], changes: Mapping[str, Any]) -> RunConfig:
    merged = dict(data)
    for key, value in changes.items():
        _set_dotted(merged, key, value)
    return validate(merged)


def _split_override(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key.path=value, e.g. engine.candidates=4")
    key, raw = text.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else ""
    except yaml.YAMLError:
        value = raw
    return key.strip(), value


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ConfigError(f"override {key}: {part!r} is a value, not a section")
        node = nxt
    node[parts[-1]] = value


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            _merge(base[k], v)
        else:
            base[k] = v


__all__ = ["Budget", "Engine", "Executor", "Named", "Roles", "RunConfig", "apply_changes", "load_config",
           "resume_changes", "stored_config", "validate"]
