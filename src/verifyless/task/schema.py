"""The ``task.yaml`` schema (pydantic) and readable messages for its errors.

Only the *shape* of the file is checked here (keys, types, allowed values).
Everything that needs the file system (referenced files, the band, the idea
space rendering) is checked by ``verifyless.task.loader``. Both report
problems as one line each: ``<file>: <key path>: <what is wrong>; <fix>``.

The full reference with an example lives in ``docs/design/task-format.md``.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from verifyless.registry import error_text
from verifyless.task.base import Limits

DEFAULT_RUN = "{python} {program} --data {public} --out {outdir}"
RUN_PLACEHOLDERS = ("python", "program", "public", "workdir", "outdir", "fidelity")
SCORE_PLACEHOLDERS = ("outdir", "hidden", "public", "python")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class BandSpec(_Strict):
    """Marker comments, or an explicit 1-based inclusive line range (not both)."""

    start_marker: str | None = None
    end_marker: str | None = None
    lines: list[int] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> BandSpec:
        if self.lines is not None:
            if self.start_marker is not None or self.end_marker is not None:
                raise ValueError("give either start_marker/end_marker or lines, not both")
            if len(self.lines) != 2 or not (1 <= self.lines[0] <= self.lines[1]):
                raise ValueError("lines must be [first, last] with 1 <= first <= last")
        return self


class MetricSpec(_Strict):
    name: str = Field(min_length=1)
    direction: Literal["minimize", "maximize"]
    lower: float | None = None
    upper: float | None = None

    @model_validator(mode="after")
    def _bounds(self) -> MetricSpec:
        if self.lower is not None and self.upper is not None and self.lower >= self.upper:
            raise ValueError(f"lower ({self.lower}) must be below upper ({self.upper})")
        return self


class MetricsSpec(_Strict):
    validation: list[str] = Field(default_factory=list)
    test: list[str] = Field(default_factory=list)
    # A scorer key measured on rows search never optimised (a held-out selection split, repeated or
    # cross-validated scoring): hidden from search, used to choose the final node (engine.selection_pool).
    selection: str | None = None


class AnchorsSpec(_Strict):
    floor: float | None = None
    reference: float | None = None
    bound: float | None = Field(default=None, validation_alias=AliasChoices("bound", "optimum"))
    sota: float | None = None


class TargetSpec(_Strict):
    """The prediction target: a column of the public training file(s) and the kind of problem."""

    column: str = Field(min_length=1)
    kind: Literal["regression", "classification"]
    files: list[str] = Field(min_length=1)  # public training files holding the column (listed in data.public)


class DataSpec(_Strict):
    public: list[str] = Field(default_factory=list)
    hidden: list[str] = Field(default_factory=list)
    target: TargetSpec | None = None


class FidelityLevelSpec(_Strict):
    """One cheaper level: a seeded share of the training rows, or a knob value the program reads."""

    description: str = ""
    data_fraction: float | None = Field(default=None, gt=0, lt=1)
    seed: int = 0
    knob: str | int | float | None = None

    @model_validator(mode="after")
    def _one_way(self) -> FidelityLevelSpec:
        if (self.data_fraction is None) == (self.knob is None):
            raise ValueError("a fidelity level sets exactly one of data_fraction (0 < f < 1) or knob (a value)")
        return self


class FidelitySpec(_Strict):
    """``fidelity:`` in task.yaml: named cheaper levels (cheapest first); ``full`` is always there."""

    env: str = Field(default="VERIFYLESS_FIDELITY", pattern=r"^[A-Z_][A-Z0-9_]*$")
    full: str | int | float | None = None  # the knob's value at full fidelity, for {fidelity} in the run command
    levels: dict[str, FidelityLevelSpec] = Field(min_length=1)

    @field_validator("levels")
    @classmethod
    def _names(cls, value: dict[str, FidelityLevelSpec]) -> dict[str, FidelityLevelSpec]:
        for name in value:
            if name == "full" or not name.isidentifier():
                raise ValueError(f"level name {name!r}: use an identifier other than 'full' (full fidelity is implied)")
        return value


class LimitsSpec(_Strict):
    wall_seconds: float = Field(default=Limits.wall_seconds, gt=0)
    memory_mb: int = Field(default=Limits.memory_mb, gt=0)
    cpu_seconds: float | None = Field(default=None, gt=0)
    processes: int = Field(default=Limits.processes, gt=0)
    output_bytes: int = Field(default=Limits.output_bytes, gt=0)
    file_size_mb: int = Field(default=Limits.file_size_mb, gt=0)
    open_files: int = Field(default=Limits.open_files, gt=0)
    threads: int = Field(default=Limits.threads, gt=0)
    workspace_mb: int = Field(default=Limits.workspace_mb, gt=0)
    gpus: int = Field(default=Limits.gpus, ge=0, le=64)
    score_seconds: float | None = Field(default=None, gt=0)

    def to_limits(self) -> Limits:
        return Limits(**self.model_dump())


class OptionSpec(_Strict):
    """One option: a description and the code it puts in its dimension's slot(s)."""

    description: str = Field(min_length=1)
    code: Any = ""
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("code")
    @classmethod
    def _code_shape(cls, value: Any) -> Any:
        if value is None:
            return ""
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return repr(value)
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
            return value
        raise ValueError("code must be a string, a number, or a mapping of part name -> string")


class DimensionSpec(_Strict):
    description: str = ""
    options: dict[str, OptionSpec]

    @field_validator("options")
    @classmethod
    def _two_or_more(cls, value: dict[str, OptionSpec]) -> dict[str, OptionSpec]:
        if len(value) < 2:
            raise ValueError("a dimension needs at least two options to search over")
        return value


class IdeaSpaceSpec(_Strict):
    template: str = Field(min_length=1)
    baseline: dict[str, str]
    dimensions: dict[str, DimensionSpec] = Field(min_length=1)


class PolicySpec(_Strict):
    """What a candidate program may use (read by the guards; the sandbox cuts the network regardless).

    ``allow`` (default): no finding; ``warn``: an advisory guard finding; ``forbid``: a
    blocking ``guard-failed`` finding (unless ``guards.policy`` is configured ``advisory``).
    """

    network: Literal["allow", "warn", "forbid"] = "allow"
    subprocess: Literal["allow", "warn", "forbid"] = "allow"


class EnsembleSpec(_Strict):
    """How several programs' outputs combine into one submission (optional; MCGS top-K ensembles)."""

    combine: Literal["mean", "vote"] = "mean"
    files: list[str] = Field(min_length=1)
    key: list[str] = Field(default_factory=list)  # CSV files with a header, rows matched on these columns
    opt_in: bool = False  # used only when the strategy asks for ensembles on every task (ensemble_tasks: all)

    @field_validator("files")
    @classmethod
    def _plain_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or "/" in name or "\\" in name or name.startswith("."):
                raise ValueError(f"ensemble files are plain file names inside the output folder, got {name!r}")
        return value


class TaskSpec(_Strict):
    """The top level of ``task.yaml``."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    statement: str
    program: str
    band: BandSpec = Field(default_factory=BandSpec)
    metric: MetricSpec
    metrics: MetricsSpec = Field(default_factory=MetricsSpec)
    anchors: AnchorsSpec = Field(default_factory=AnchorsSpec)
    data: DataSpec = Field(default_factory=DataSpec)
    run: Any = DEFAULT_RUN
    score: str = Field(min_length=1)
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    stochastic: bool = False
    idea_space: IdeaSpaceSpec | None = None
    policy: PolicySpec = Field(default_factory=PolicySpec)
    ensemble: EnsembleSpec | None = None
    fidelity: FidelitySpec | None = None

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise ValueError("description must be one line (put details in the statement file)")
        return value.strip()

    @field_validator("run")
    @classmethod
    def _argv(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value
        raise ValueError("run must be a non-empty command string or a list of strings")


class SidecarSpec(_Strict):
    """``verifyless.yaml`` next to an OpenEvolve folder's ``evaluator.py`` (all optional)."""

    description: str = ""
    statement: str | None = None
    anchors: AnchorsSpec = Field(default_factory=AnchorsSpec)
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    stochastic: bool = False
    idea_space: IdeaSpaceSpec | None = None
    policy: PolicySpec = Field(default_factory=PolicySpec)


# ------------------------------------------------------------------ messages


def explain(exc: ValidationError, filename: str, model: type[BaseModel]) -> list[str]:
    """One ``<file>: <key path>: <problem>; <fix>`` line per pydantic error."""
    lines = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        where = key_path(loc) or "(top level)"
        lines.append(f"{filename}: {where}: {_describe(err, loc, model)}")
    return lines


def key_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _describe(err: Any, loc: tuple[Any, ...], model: type[BaseModel]) -> str:
    kind = err.get("type", "")
    msg = error_text(err)
    got = err.get("input")
    if kind == "missing":
        return f"required key '{loc[-1]}' is missing; add it (see docs/design/task-format.md)"
    if kind == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1])
        hint = f"; allowed keys here: {', '.join(allowed)}" if allowed else ""
        return f"unknown key '{loc[-1]}'; remove it or fix its spelling{hint}"
    if kind == "literal_error":
        return f"got {got!r}; {msg.replace('Input should be', 'use')}"
    if kind == "string_pattern_mismatch":
        return f"got {got!r}; use letters, digits, '_', '-' or '.' (starting with a letter or digit)"
    if kind in ("value_error", "assertion_error"):
        return f"{msg}"
    if msg.startswith("Input should be"):
        return f"got {_short(got)}; {msg.replace('Input should be', 'the value should be')}"
    return f"{msg} (got {_short(got)}); fix the value"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _allowed_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names (and aliases) of the model found by walking ``loc`` from ``model``."""
    current: Any = model
    skip = 0  # dict keys / list indices still to step over before the next model
    for part in loc:
        if skip:
            skip -= 1
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return []
        info = current.model_fields.get(str(part))
        if info is None:
            return []
        current, skip = _unwrap(info.annotation)
    if skip or not (isinstance(current, type) and issubclass(current, BaseModel)):
        return []
    names = []
    for name, info in current.model_fields.items():
        names.append(name)
        alias = info.validation_alias
        if isinstance(alias, AliasChoices):
            names.extend(str(c) for c in alias.choices if c != name)
    return names


def _unwrap(annotation: Any) -> tuple[Any, int]:
    """The model inside ``annotation`` and how many container levels wrap it."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _unwrap(inner[0]) if len(inner) == 1 else (None, 0)
    if origin in (dict, list):
        model, depth = _unwrap(typing.get_args(annotation)[-1])
        return model, depth + 1
    return annotation, 0


__all__ = [
    "AnchorsSpec",
    "BandSpec",
    "DEFAULT_RUN",
    "DataSpec",
    "DimensionSpec",
    "FidelityLevelSpec",
    "FidelitySpec",
    "IdeaSpaceSpec",
    "LimitsSpec",
    "MetricSpec",
    "MetricsSpec",
    "OptionSpec",
    "RUN_PLACEHOLDERS",
    "SCORE_PLACEHOLDERS",
    "SidecarSpec",
    "TargetSpec",
    "TaskSpec",
    "explain",
    "key_path",
]
