"""One typed configuration tree for a run, validated early and recorded with it.

Sources, later wins: built-in defaults < ``--config run.yaml`` < CLI flags <
dotted overrides (``engine.candidates=4 screener.options.k=8``). The resolved
tree is the run's first stored event, so a run can always be re-created.

Errors are ``ConfigError`` naming the key and the fix, never a pydantic dump.

``screener`` and ``executor`` are discriminated unions by ``name``: each name has its own record whose
``options`` is that component's typed options class (defined beside the component), so
``cfg.screener.options.k`` is checked when the config loads and has the component's one default; the
options are stored and dumped as given (unset options stay unset, so later defaults still apply).
``strategy`` is the same kind of union, its options the strategy's typed config. The unions are built
from ``verifyless.components.COMPONENTS``, the one map from names to components; ``check_components`` runs
the registries' checks first, for their one-line messages.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

import yaml
from pydantic import (
    BaseModel,
    Field,
    TypeAdapter,
    ValidationError,
    create_model,
    field_serializer,
    field_validator,
    model_validator,
)

from verifyless.components import COMPONENTS
from verifyless.errors import ConfigError
from verifyless.events import ConfigResolved, ConfigUpdated, RunCreated
from verifyless.guards.config import GuardsConfig
from verifyless.ledger.budget import BudgetConfig  # the budget lives with the kernel for paid work
from verifyless.model.ensemble import BanditOptions
from verifyless.presets import load_preset
from verifyless.registry import NOT_ADDED, StrictOptions, added_later, error_text, stored_default
from verifyless.roles.options import LLMRoleOptions
from verifyless.screen.novelty import NoveltyOptions
from verifyless.search.islands import IslandsConfig
from verifyless.store.protocol import RunStoreProtocol
from verifyless.yamlfile import read_yaml


class RolesConfig(StrictOptions):
    """Which roles make children.

    ``kind: space`` uses the task's idea space (no LLM). ``kind: llm`` uses models:
    ``models.default`` plus optional entries for the child-making roles (``brief``,
    ``proposer``, ``implementer``, ``summarizer``) and for whatever a screener or
    the final selection asks for (``critic``, ``judge``, ``arbiter``, keys named
    in a screener's ``model`` option), each a spec string (``scripted:FILE``,
    ``openai:MODEL``, ``env``) or a mapping of endpoint settings.
    """

    kind: Literal["space", "llm"] = Field("space", description="space: the task's idea space; llm: language models")
    models: dict[str, Any] = Field(default_factory=dict, description="model spec per role key (default, critic, ...)")
    implement_mode: Literal["full", "diff", "stage"] = Field(
        "full",
        description="full: the implementer rewrites the band; diff: it returns search/replace edits; stage: "
        "MLEvolve's coder modes by the expansion's operator (draft: full; evolve/reference/aggregate: stepwise, one "
        "edit call per step of the idea's plan; improve, debug, repairs: diff; roles/staged.py)",
    )
    llm: LLMRoleOptions = Field(default_factory=LLMRoleOptions, description="options of the LLM roles (kind: llm)")


class EngineConfig(StrictOptions):
    """How rounds are run: pool sizes, concurrency, repairs, routing and resume snapshots."""

    candidates: int = Field(8, ge=1, description="N candidates made per expansion")
    expansions_per_round: int = Field(1, ge=1, description="expansions the strategy is asked for per round")
    verify_per_expansion: int = Field(
        1, ge=1, description="how many of the N the screener may send to verification (at most engine.candidates)"
    )
    llm_concurrency: int = Field(8, ge=1, description="LLM calls in flight at once, over all roles")
    verify_concurrency: int = Field(1, ge=1, description="verifications in flight at once")
    pipeline: bool = Field(True, description="overlap LLM work of round r+1 with verification of round r")
    repair_attempts: int = Field(3, ge=0, le=10, description="repairs of a failed verification, keeping its idea")
    smoke: str | None = Field(
        None,
        description="smoke-run each candidate at this fidelity level before its full verification; 'off': never; "
        "None: the task's cheapest level for LLM roles (off when the task declares no level)",
    )
    smoke_wall_seconds: float = Field(30.0, gt=0, description="wall limit of a smoke run (the task's when smaller)")

    @field_validator("smoke", mode="before")
    @classmethod
    def _smoke_off(cls, value: object) -> object:
        """``engine.smoke=off`` reads as YAML's false: it means off."""
        return "off" if value is False else value

    audit_rate: float = Field(0.0, ge=0.0, le=1.0, description="fraction of screened-out candidates verified anyway")
    verify_uncertain: bool = Field(
        False,
        description="routing: also verify candidates whose screener reports vote uncertainty u >= T "
        "(vote-based screeners only; random, agentic and a surrogate without votes never trigger it)",
    )
    uncertainty_threshold: float = Field(0.25, ge=0.0, le=1.0, description="T for verify_uncertain")
    memory: bool | None = Field(None, description="MLEvolve-style memory for the proposer; None: on for mcgs only")
    memory_embedder: Literal["auto", "minilm", "hashing"] = Field(
        "auto",
        description="the memory's dense vectors: minilm (semantic; about 5 s of CPU to load, and a snapshot does not "
        "carry it), hashing (fast, identical on every machine), auto (minilm when installed, else hashing; "
        "$VERIFYLESS_MEMORY_EMBEDDER, if set, decides)",
    )
    max_rounds: int | None = Field(None, ge=1, description="stop after this many rounds")
    max_idle_rounds: int = Field(
        20, ge=1, description="stop when this many rounds in a row send nothing to verification (search exhausted)"
    )
    final_selection: int | None = Field(
        None, ge=2, description="top-N validation nodes for an end-of-run judged round-robin (needs a judge model)"
    )
    selection_pool: int = added_later(
        5,
        stored=0,  # the final node was the strategy's (issue 46)
        ge=0,
        description="where the task holds out a selection split (task new does), re-rank the top-N validation nodes "
        "and the baseline by their score on it and return the best: evidence search never optimised (0: off; "
        "final_selection, when on, decides instead)",
    )
    snapshot_every: int = Field(
        50, ge=0, description="rounds between resume snapshots of the engine state (0: never; resume replays all)"
    )
    data_report: bool = added_later(
        True,
        stored=False,
        description="compute the task's data report once, in the sandbox, at the start of a new run and give it to "
        "the brief, the critic and the judges (a resumed run keeps the one it stored, or none)",
    )
    screener_data_report: bool = Field(
        True,
        description="give the run's data report to the screeners and the final judge too (critic, judges, "
        "arbiter); false: only the brief reads it, as in the papers (the critic paper's critic reads five fields, "
        "Table 9; the RPM paper's judges read no static data report, Section 6)",
    )
    tried_ideas: Literal["proposed", "verified"] = Field(
        "proposed",
        description="which earlier children of the parent the proposer is told were tried: proposed = every child "
        "made from it (screened-out ones included); verified = only those whose program was run, as the papers' "
        "proposers see only executed solutions, so screening arms with the same verified history get the same prompt",
    )
    allow_failed_baseline: bool = Field(
        False,
        description="search on when the baseline program itself fails (a failing evaluator always stops the "
        "run, exit 3)",
    )
    min_parse_rate: float = Field(
        0.5, ge=0.0, le=1.0, description="warn when a child-making role's replies parse below this rate"
    )
    max_unparsed_replies: int = Field(
        10, ge=1, description="stop the run (exit 7) after this many children in a row whose role reply never parsed"
    )
    on_screener_error: Literal["fallback", "stop"] = added_later(
        "fallback",
        stored="fallback",
        description="when the screener's model endpoint fails (retries exhausted): fallback = a seeded random pick "
        "for that expansion, counted (a screener_fallback event; the live line, runs, show and the report show the "
        "count); stop = stop the run at once (exit 6)",
    )
    max_screener_fallbacks: int | None = added_later(
        3,
        stored=None,  # such runs fell back for ever, silently
        ge=1,
        description="with fallback: stop the run (exit 6) after this many screenings in a row fell back, and end a "
        "run whose screener never answered with exit 6; None: fall back for ever",
    )


class _Component(StrictOptions):
    """A component chosen by ``name`` with its typed ``options`` (stored and dumped as the options given)."""

    name: str
    options: BaseModel

    @field_serializer("options")
    def _given(self, options: BaseModel) -> dict[str, Any]:
        return options.model_dump(mode="json", exclude_unset=True)


class _ScreenerComponent(_Component):
    """The screener section: a component, plus the warm start switch of a critic learnt from paid outcomes."""

    warm_start: bool = added_later(
        True,
        stored=False,  # no critic learnt from earlier runs existed (issue 45)
        description="a critic-rm without a path starts from a head fitted on the store's earlier runs of the same "
        "task (seconds; recorded in the run); false: it starts cold and learns from this run only",
    )


def _choice(kind: str, name: str, options: type) -> type[BaseModel]:
    """The config record of one component: ``name`` fixed to ``name``, ``options`` of its own options class."""
    tag: Any = Literal[name]
    return create_model(
        f"{kind.title()}_{name.replace('-', '_')}",
        __base__=_ScreenerComponent if kind == "screener" else _Component,
        name=(tag, Field(description=f"registered name of the {kind}")),
        options=(options, Field(default_factory=options, description=f"options of {kind} {name!r} (below)")),
    )


def _union(kind: str) -> Any:
    """The discriminated union of every component of ``kind`` registered in ``COMPONENTS``."""
    members = tuple(_choice(kind, c.name, c.options) for c in COMPONENTS[kind].components() if c.options)
    return Annotated[Union[members], Field(discriminator="name")]  # noqa: UP007 (a runtime tuple of members)


if TYPE_CHECKING:  # one record per name at run time; its shape, for the type checker
    ScreenerConfig = _ScreenerComponent
    ExecutorConfig = _Component
    StrategyConfig = _Component
else:
    StrategyConfig = _union("strategy")
    ScreenerConfig = _union("screener")
    ExecutorConfig = _union("executor")

# The component each chosen-by-name section gets when it names none.
DEFAULT_STORE = Path("runs/verifyless.db")  # the run store every command opens when --store is not given
# The default screener is adaptive screening around critic-rm (warm-started from the store's earlier runs of the
# task, refitted in the run): docs/design/screening.md, "The default screener".
DEFAULT_COMPONENT = {"screener": "adaptive", "strategy": "mcgs", "executor": "local"}


def _default(kind: str) -> Any:
    union = {"screener": ScreenerConfig, "executor": ExecutorConfig, "strategy": StrategyConfig}[kind]
    return TypeAdapter(union).validate_python({"name": DEFAULT_COMPONENT[kind]})


class RunConfig(StrictOptions):
    """One run: the task, the search, the screener, the roles, the caps and where it is stored."""

    task: str = Field("diabetes", description="built-in task name or a task folder")
    seed: int = Field(0, description="seed of every random generator in the run")
    strategy: StrategyConfig = Field(
        default_factory=lambda: _default("strategy"), description="search strategy that picks what to expand"
    )
    screener: ScreenerConfig = Field(
        default_factory=lambda: _default("screener"), description="screener that picks what to verify"
    )
    roles: RolesConfig = Field(RolesConfig(), description="how children are made")
    budget: BudgetConfig = Field(BudgetConfig(), description="hard caps of the run")
    engine: EngineConfig = Field(EngineConfig(), description="round mechanics")
    executor: ExecutorConfig = Field(
        default_factory=lambda: _default("executor"),
        description="where verifications run (local: sandboxed subprocesses; ray: a Ray cluster)",
    )
    preset: str | None = Field(
        None,
        description="the preset the configuration started from (set by --preset NAME[:VARIANT]; recorded for the "
        "run card, it changes nothing by itself)",
    )
    tie_tolerance: float = Field(
        0.0,
        ge=0.0,
        description="relative change |Delta| at or below which a child ties its parent, for every learner "
        "of the run (surrogate, critic-ttl) and its critic metrics; 0: exact equality (the paper)",
    )

    @model_validator(mode="after")
    def _derived_options(self) -> RunConfig:
        """Options whose default follows another section, unless set: under ``islands``, ``critic-ttl`` learns once
        per island-round.

        The paper updates once per OpenEvolve round on its new pairs, one per island (SDFT on 3, TT-GRPO on 6
        every 2 rounds), while an engine round is one expansion by default: unless set, the screener's
        ``pairs_per_update`` is the strategy's ``n_islands``. The derived value stays unset (the stored
        configuration keeps the options as given and derives it again when read).
        """
        options = self.screener.options
        if (
            self.screener.name == "critic-ttl"
            and isinstance(self.strategy.options, IslandsConfig)
            and "pairs_per_update" not in options.model_fields_set
        ):
            derived = type(options).model_construct(
                options.model_fields_set, **{**dict(options), "pairs_per_update": self.strategy.options.n_islands}
            )
            # frozen: the record is replaced before anyone reads it
            object.__setattr__(self, "screener", self.screener.model_copy(update={"options": derived}))
        return self

    guards: GuardsConfig = Field(
        default_factory=GuardsConfig, description="checks on every implementation before it is verified (MLEvolve)"
    )
    novelty: NoveltyOptions = Field(
        default_factory=NoveltyOptions,
        description="the novelty gate between implementation and screening (judge model: roles.models.novelty_judge)",
    )
    ensemble: BanditOptions = Field(
        default_factory=BanditOptions,
        description="how a role whose roles.models entry is a list of specs chooses its member per call",
    )
    store: Path = Field(DEFAULT_STORE, description="the SQLite run store file")


def load_config(
    path: Path | None = None,
    overrides: Sequence[str] = (),
    *,
    values: Mapping[str, Any] | None = None,
    preset: str | None = None,
) -> RunConfig:
    """Defaults, then ``preset`` (a paper's settings, ``verifyless.presets``), then ``path`` (YAML), then
    ``values``, then ``overrides``; later wins.

    ``values`` maps dotted keys to typed values, set as they are (the CLI's flags: ``{"strategy.name":
    "islands", "budget.verifications": 30}``); ``overrides`` are the user's ``a.b=c`` strings, each value
    read as YAML.
    """
    if isinstance(overrides, Mapping):
        raise TypeError("load_config: overrides are a.b=c strings; pass a mapping of typed values as values=")
    data: dict[str, Any] = RunConfig().model_dump(mode="json")
    if preset is not None:
        _merge(data, load_preset(preset))
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file {path} not found: pass an existing YAML file to --config")
        loaded = read_yaml(path, "config file") or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path} must hold a mapping at the top level, got {type(loaded).__name__}")
        _merge(data, relative_to(loaded, path.resolve().parent))
    for key, value in _dotted(values, overrides):
        _set_dotted(data, key, value)
    if preset is not None:
        data["preset"] = preset
    cfg = validate(data)
    _check_pool(cfg.engine)
    return cfg


def _check_pool(engine: EngineConfig) -> None:
    """``ConfigError`` when a new run would send more candidates of an expansion to verification than it makes.

    Checked where a configuration is made, not where a stored one is read: a run stored with such a pair still
    resumes and replays as it ran (every candidate verified).
    """
    per, made = engine.verify_per_expansion, engine.candidates
    if per > made:
        raise ConfigError(
            f"engine.verify_per_expansion={per} is above engine.candidates={made}: an expansion makes {made} "
            f"candidates, so at most {made} can go to verification; lower engine.verify_per_expansion or raise "
            "engine.candidates"
        )


PATH_OPTIONS = ("prompt_file", "adapter_root")  # screener options (at any depth) that name a file or folder


def relative_to(loaded: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """A config file's mapping with its relative paths made absolute against ``base``, the file's folder.

    So a ``--config`` file means the same from any working directory (and a dry run reads it as the run
    does). Paths: ``store``; ``task`` when it names a path (a bare built-in name stays, unless a folder of
    that name sits beside the file); in ``roles.models`` a ``scripted:FILE`` spec, a mapping's ``script``
    and ``adapter``, and a ``local`` model folder that exists there; the screener's ``prompt_file`` and
    ``adapter_root`` at any depth of its options. Dotted overrides on the command line keep the working
    directory.
    """
    out = dict(loaded)

    def under(value: Any) -> Any:
        return str(base / value) if isinstance(value, str) and value and not Path(value).is_absolute() else value

    if isinstance(out.get("store"), str):
        out["store"] = under(out["store"])
    task = out.get("task")
    if isinstance(task, str) and ("/" in task or "\\" in task or task.startswith(".") or (base / task).exists()):
        out["task"] = under(task)
    roles = out.get("roles")
    if isinstance(roles, Mapping) and isinstance(roles.get("models"), Mapping):
        models = {k: _spec_paths(v, under, base) for k, v in roles["models"].items()}
        out["roles"] = {**roles, "models": models}
    if isinstance(out.get("screener"), Mapping):
        out["screener"] = _option_paths(out["screener"], under)
    return out


def _spec_paths(spec: Any, under: Any, base: Path) -> Any:
    """One model spec (or a list of them) with its file paths under ``base`` (``relative_to``)."""
    if isinstance(spec, list):
        return [_spec_paths(s, under, base) for s in spec]
    if isinstance(spec, str):
        kind, sep, rest = spec.partition(":")
        if sep and (kind == "scripted" or (kind == "local" and (base / rest).exists())):
            return f"{kind}:{under(rest)}"
        return spec
    if not isinstance(spec, Mapping):
        return spec
    out = dict(spec)
    for key in ("script", "adapter"):
        value = out.get(key)
        out[key] = [under(v) for v in value] if isinstance(value, list) else under(value)
    if out.get("provider") == "local" and isinstance(out.get("model"), str) and (base / out["model"]).exists():
        out["model"] = under(out["model"])
    return {k: v for k, v in out.items() if k in spec}


def _option_paths(value: Any, under: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: under(v) if k in PATH_OPTIONS else _option_paths(v, under) for k, v in value.items()}
    if isinstance(value, list):
        return [_option_paths(v, under) for v in value]
    return value


def _user_path(loc: Sequence[Any]) -> Sequence[Any]:
    """A pydantic error's location as the user's key: a component section's union tag (the component's name,
    ``("screener", "adaptive", "warm_start")``) is not a key the user wrote, so it is left out."""
    return (loc[0], *loc[2:]) if len(loc) > 2 and loc[0] in DEFAULT_COMPONENT else loc


def validate(data: Mapping[str, Any]) -> RunConfig:
    check_components(data)
    try:
        cfg = RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in _user_path(err["loc"])) or "(top level)"
            msg = error_text(err)
            if err["type"] == "extra_forbidden":
                msg = "unknown key; check the spelling (see `verifyless run --help` and docs/configuration.md)"
            problems.append(f"  {where}: {msg}")
        if len(problems) == 1:
            raise ConfigError("invalid configuration: " + problems[0].strip()) from None
        raise ConfigError("invalid configuration:\n" + "\n".join(problems)) from None
    b = cfg.budget
    if all(v is None for v in (b.verifications, b.evaluator_seconds, b.gpu_seconds, b.tokens, b.cost, b.wall_seconds)):
        raise ConfigError("budget: every cap is empty; set at least one, e.g. budget.verifications=30")
    if (
        b.cost is not None
        and not priced(cfg)
        and all(v is None for v in (b.verifications, b.evaluator_seconds, b.tokens, b.wall_seconds))
    ):
        raise ConfigError(
            f"budget.cost={b.cost:g} is the only cap and cannot bind: no model in roles.models has a price table, "
            "so every call costs 0 and the run would never stop; add prices to the models ({provider: openai, "
            "model: M, prices: {prompt_per_mtok: 3, completion_per_mtok: 15}}) or a cap that binds, e.g. "
            "budget.verifications=30"
        )
    return cfg


def priced(cfg: RunConfig) -> bool:
    """Whether any model spec of ``roles.models`` (list members included) carries a price table."""
    specs = [s for v in cfg.roles.models.values() for s in (v if isinstance(v, list) else [v])]
    return any(isinstance(s, Mapping) and bool(s.get("prices")) for s in specs)


def check_components(data: Mapping[str, Any]) -> None:
    """The chosen components and their options checked by their registries before the tree is built.

    The screener's, strategy's and executor's ``name`` and ``options`` go to ``COMPONENTS[section].validate``
    (each component's options class sits beside it: ``screen/*``, ``search/*``, ``executors/*``), and
    ``roles.kind`` to ``COMPONENTS["roles"].get``: the registries name what is wrong in one line
    (``screener.options.k=0`` -> ``option k=0: ...``, ``screener.name='x' is unknown: use ...``), which
    the union's own errors would not. Nested stage options (a cascade's ``critic``, an ensemble's member
    specs) are checked when built. A section that is not a mapping is left to the model's errors.
    """
    for section, default in DEFAULT_COMPONENT.items():
        raw = data.get(section, {})
        if isinstance(raw, Mapping) and isinstance(raw.get("options", {}), Mapping):
            COMPONENTS[section].validate(str(raw.get("name", default)), raw.get("options", {}))
    roles = data.get("roles", {})
    if isinstance(roles, Mapping) and "kind" in roles:
        COMPONENTS["roles"].get(str(roles["kind"]))


RESUMABLE_KEYS = ("budget.", "engine.max_rounds", "engine.max_idle_rounds")
OLD_ADAPTIVE_INNER = "critic"  # adaptive's wrapped screener when a configuration stored before issue 45 named none


def _old_adaptive(screener: Any) -> Any:
    """A stored screener section from before ``warm_start`` existed: an ``adaptive`` one naming no wrapped screener
    wrapped the LLM critic then (the default is critic-rm now)."""
    if not isinstance(screener, Mapping) or "warm_start" in screener or screener.get("name") != "adaptive":
        return screener
    options = dict(screener.get("options") or {})
    options.setdefault("screener", OLD_ADAPTIVE_INNER)
    return {**screener, "options": options}


def added_options() -> dict[str, Any]:
    """``section.option`` -> its stored value, for every option of a ``RunConfig`` section declared with
    ``added_later`` (the options added after runs were stored, each with the value that reproduces such a run)."""
    out: dict[str, Any] = {}
    for section, field in RunConfig.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if not isinstance(default, BaseModel):
            continue
        for name, option in type(default).model_fields.items():
            stored = stored_default(option)
            if stored is not NOT_ADDED:
                out[f"{section}.{name}"] = stored
    return out


def with_absent_options(data: Mapping[str, Any]) -> dict[str, Any]:
    """A stored configuration with every option added later (``added_options``) that it lacks set to its stored
    value: the run reads as it behaved, not with today's defaults."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}
    if "screener" in out:
        out["screener"] = _old_adaptive(out["screener"])
    for key, value in added_options().items():
        section, name = key.split(".")
        part = out.setdefault(section, {})
        if isinstance(part, dict) and name not in part:
            part[name] = value
    return out


def stored_config(store: RunStoreProtocol, run_id: str) -> dict[str, Any]:
    """A run's configuration in force: its first event (the configuration as given), what was resolved when it
    started (``config_resolved``: pinned endpoints, embedder, critic) and every later ``config_update`` (e.g. a
    budget raised on resume). Options the run's version did not have read as that version behaved
    (``with_absent_options``). Runs stored before ``config_resolved`` existed hold their pins in the first event.
    """
    data: dict[str, Any] | None = None
    for ev in store.events(run_id, RunCreated, ConfigResolved, ConfigUpdated):
        match ev.record:
            case RunCreated(config=config):
                data = copy.deepcopy(dict(config))
            case ConfigResolved() | ConfigUpdated() as change if data is not None:
                change.apply_to(data)
    if data is None:
        raise ConfigError(f"run {run_id} has no stored configuration")
    return with_absent_options(data)


def resume_changes(values: Mapping[str, Any] | None = None, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """The ``values`` and ``overrides`` (as ``load_config`` takes them) allowed when resuming: budgets and round
    limits; anything else is a ConfigError."""
    changes: dict[str, Any] = {}
    for key, value in _dotted(values, overrides):
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


def _dotted(values: Mapping[str, Any] | None, overrides: Sequence[str]) -> Iterator[tuple[str, Any]]:
    """``values``' items, then each override string as (key, value read as YAML), in order."""
    yield from (values or {}).items()
    for text in overrides:
        yield _split_override(text)


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


__all__ = [
    "BudgetConfig",
    "DEFAULT_COMPONENT",
    "EngineConfig",
    "ExecutorConfig",
    "RolesConfig",
    "RunConfig",
    "ScreenerConfig",
    "StrategyConfig",
    "added_options",
    "apply_changes",
    "check_components",
    "load_config",
    "priced",
    "relative_to",
    "resume_changes",
    "stored_config",
    "validate",
    "with_absent_options",
]
