"""MLE-bench competitions, loaded unchanged: a prepared folder becomes a ``Task`` of kind ``competition``.

MLE-bench (openai/mle-bench) prepares a competition ``ID`` as ``DATA/ID/prepared/public/`` (``description.md``,
``train.csv``, ``test.csv``, a sample submission) and ``DATA/ID/prepared/private/`` (the answers, usually
``test.csv``); its grader reads the agent's ``submission.csv`` and the answers with the competition's metric
(``mlebench/competitions/ID/config.yaml`` names it, e.g. ``grader: {name: auc-roc}``). ``find_layout`` recognises
``DATA/ID`` or ``DATA/ID/prepared``. The metric comes from a ``verifyless.yaml`` sidecar (``metric: auc``), else
from an MLE-bench ``config.yaml`` copied into the folder, else from the known grader of the competition id
(``MLEBENCH_GRADERS``); the registry is ``grading.METRICS``.

What the program sees (``split_competition``): verifyless holds out a seeded share of the public ``train.csv``
rows (by time or group when the sidecar says so) and keeps that split in a cache folder keyed by the data's bytes
(``$VERIFYLESS_CACHE_DIR``, default ``~/.cache/verifyless``). The workspace's ``train.csv`` lacks the held-out
rows; its ``test.csv`` and sample submission hold the competition's test rows and the held-out rows, shuffled,
so one ``submission.csv`` answers both: the held-out rows give the validation score (``val_<metric>``, the only
score search sees) and the competition's test rows, graded against the private answers, the hidden test score
(``test_<metric>``). The held-out labels and the private answers are hidden data: never copied into the
workspace and masked from the sandbox, like a native task's ``hidden/``. A submission whose columns, rows or ids
do not match the sample submission is an ``InvalidSubmission`` (a candidate's ``contract-violation``).

Limits: the split needs a ``train.csv`` that holds the sample submission's prediction columns, or one label
column whose values are their names (per-class probability submissions); competitions whose training data is
images or JSON load with a clear error. The program trains on the public rows less the held-out share, so its
hidden test score is that of a model fitted on slightly less data than MLE-bench's agents use.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from verifyless.errors import TaskError, listed
from verifyless.program import Band, BandError, split, syntax_error
from verifyless.task.base import Anchors, Ensemble, IdeaSpace, Metric, Target, Task
from verifyless.task.folder import not_utf8
from verifyless.task.schema import AnchorsSpec, IdeaSpaceSpec, LimitsSpec, PolicySpec, explain
from verifyless.task.tabular.grading import (
    Grading,
    MetricDef,
    Output,
    known_metrics,
    metric_def,
    own_grade,
)
from verifyless.task.tabular.split import FeatureKinds, SplitSettings, feature_kinds, split_held
from verifyless.yamlfile import yaml_problem

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "baseline.py"
SPACE = HERE / "space.yaml"
SCORER = HERE / "score.py"
SIDECAR = "verifyless.yaml"
OWN_GRADER = "grade.py"  # MLE-bench's grade(submission, answers) -> float, in the competition folder
SPEC_FILE = "verifyless_task.json"  # the public file that tells a program the submission's shape
SUBMISSION = "submission.csv"
VAL_ANSWERS = "val_answers.csv"  # the hidden folder's validation answers ...
SEL_ANSWERS = "sel_answers.csv"  # ... and the selection split's, when the task holds one out
CACHE_VERSION = "2"  # 2: verifyless_task.json names the feature columns by kind
RUN = ("{python}", "{program}", "--data", "{public}", "--out", "{outdir}")

# The graders of MLE-bench lite (mlebench/competitions/ID/config.yaml, grader.name), by competition id.
MLEBENCH_GRADERS = {
    "aerial-cactus-identification": "auc-roc",
    "aptos2019-blindness-detection": "quadratic-weighted-kappa",
    "denoising-dirty-documents": "root-mean-squared-error",
    "detecting-insults-in-social-commentary": "auc-roc",
    "dog-breed-identification": "multi-class-log-loss",
    "dogs-vs-cats-redux-kernels-edition": "log-loss",
    "histopathologic-cancer-detection": "auc-roc",
    "jigsaw-toxic-comment-classification-challenge": "column-wise-roc-auc",
    "leaf-classification": "multi-class-log-loss",
    "mlsp-2013-birds": "auc-roc",
    "new-york-city-taxi-fare-prediction": "root-mean-squared-error",
    "nomad2018-predict-transparent-conductors": "mean-column-wise-rmsle",
    "plant-pathology-2020-fgvc7": "mean-column-wise-roc-auc",
    "random-acts-of-pizza": "auc-roc",
    "ranzcr-clip-catheter-line-classification": "auc-roc",
    "siim-isic-melanoma-classification": "auc-roc",
    "spooky-author-identification": "multi-class-log-loss",
    "tabular-playground-series-dec-2021": "multi-class-classification-accuracy",
    "tabular-playground-series-may-2022": "auc-roc",
    "text-normalization-challenge-english-language": "accuracy",
    "text-normalization-challenge-russian-language": "accuracy",
    "the-icml-2013-whale-challenge-right-whale-redux": "auc-roc",
}

SpaceCheck = Callable[[IdeaSpaceSpec, str, str, list[str]], IdeaSpace | None]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SplitSpec(_Strict):
    validation: float = Field(0.2, gt=0, lt=1, description="share of the public training rows held out")
    seed: int = Field(0, description="seed of the random (stratified) split")
    group: str | None = Field(None, description="hold out whole groups of this column")
    time: str | None = Field(None, description="hold out the latest rows by this column")
    selection: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="share of the public training rows held out to choose the final node (never shown to search)",
    )

    @model_validator(mode="after")
    def _shares(self) -> SplitSpec:
        if self.validation + self.selection >= 1:
            raise ValueError(
                f"validation ({self.validation:g}) + selection ({self.selection:g}) hold out every training row; "
                "keep their sum below 1"
            )
        return self


class GraderSpec(_Strict):
    """How a competition's own ``grade.py`` scores (``grader:`` in ``verifyless.yaml``)."""

    file: str = Field(OWN_GRADER, description="Python file in the competition folder")
    function: str = Field("grade", description="grade(submission, answers) -> float")
    name: str = Field("score", pattern=r"^[A-Za-z][A-Za-z0-9_]*$", description="metric name (val_<name>, test_<name>)")
    direction: Literal["maximize", "minimize"] = Field(description="whether higher or lower scores are better")
    output: Output = Field(description="what each prediction is: probability, label or value")
    lower: float | None = None
    upper: float | None = None


class CompetitionSpec(_Strict):
    """``verifyless.yaml`` beside a competition's ``prepared/`` folder (all keys optional)."""

    name: str | None = None
    description: str = ""
    metric: str | None = Field(None, description="registry metric or MLE-bench grader name")
    grader: GraderSpec | None = Field(None, description="the competition's own grade.py and how it scores")
    id: str | None = Field(None, description="id column (default: the sample submission's first column)")
    target: str | None = Field(None, description="train column of labels when the submission has one column per class")
    split: SplitSpec = Field(default_factory=SplitSpec)
    anchors: AnchorsSpec = Field(default_factory=AnchorsSpec)
    limits: LimitsSpec = Field(default_factory=LimitsSpec)
    stochastic: bool = False
    program: str | None = Field(None, description="baseline program file (default: verifyless's tabular baseline)")
    idea_space: IdeaSpaceSpec | Literal["tabular"] | None = None
    policy: PolicySpec = Field(default_factory=PolicySpec)


@dataclass(frozen=True)
class Layout:
    """Where a prepared competition's parts are."""

    root: Path  # the competition folder: the one holding prepared/ (also when the user named prepared/ itself)
    public: Path
    private: Path
    sample: Path
    answers: Path
    config: dict[str, Any]  # MLE-bench's config.yaml when one is in the folder, else {}


def find_layout(root: Path) -> Layout | None:
    """The competition layout of ``root`` (``ID/`` or ``ID/prepared/``), or None when it is not one."""
    prepared = root / "prepared" if (root / "prepared").is_dir() else root
    public, private = prepared / "public", prepared / "private"
    if not (public.is_dir() and private.is_dir()):
        return None
    home = root.parent if prepared == root and root.name == "prepared" else root  # the sidecar and grade.py are here
    config = _mlebench_config(home)
    sample = _sample_submission(public, config)
    if sample is None:
        return None
    return Layout(home, public, private, sample, _answers(private, config), config)


def is_competition(root: Path) -> bool:
    return find_layout(root) is not None


def missing_sample(root: Path) -> str | None:
    """What keeps ``root`` from being a competition folder when it has ``prepared/public`` and ``prepared/private``
    but no sample submission (None when that is not the case): one line naming the file to add."""
    prepared = root / "prepared" if (root / "prepared").is_dir() else root
    public, private = prepared / "public", prepared / "private"
    if not (public.is_dir() and private.is_dir()) or find_layout(root) is not None:
        return None
    return (
        f"{root} looks like a competition folder ({public.relative_to(root.parent)} and "
        f"{private.relative_to(root.parent)}) but {public} has no sample submission; add sample_submission.csv "
        "(the id column and the prediction columns, one row per test id: MLE-bench's prepare step writes it)"
    )


def _mlebench_config(root: Path) -> dict[str, Any]:
    path = root / "config.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) and isinstance(data.get("grader"), dict) else {}


def _sample_submission(public: Path, config: dict[str, Any]) -> Path | None:
    named = (config.get("dataset") or {}).get("sample_submission")
    if isinstance(named, str) and (public / Path(named).name).is_file():
        return public / Path(named).name
    found = sorted(p for p in public.glob("*.csv") if p.name.lower().replace("_", "").startswith("samplesubmission"))
    return found[0] if found else None


def _answers(private: Path, config: dict[str, Any]) -> Path:
    named = (config.get("dataset") or {}).get("answers")
    candidates = [Path(named).name] if isinstance(named, str) else []
    for name in [*candidates, "test.csv", "answers.csv"]:
        if (private / name).is_file():
            return private / name
    csvs = sorted(private.glob("*.csv"))
    return csvs[0] if len(csvs) == 1 else private / "test.csv"


# ------------------------------------------------------------------ loading


def load_competition(root: Path, check_space: SpaceCheck) -> Task:
    """The ``Task`` of the competition folder ``root``; ``TaskError`` naming the fix when it cannot be used.

    ``check_space(spec, program_text, program_name, problems)`` builds and checks an idea space (the loader's).
    """
    layout = find_layout(root)
    if layout is None:
        raise TaskError(f"{root} is not an MLE-bench prepared folder (prepared/public + prepared/private)")
    spec = _sidecar(layout.root)
    frames = _read_public(layout, spec)
    grading = _grading(layout, spec, frames)
    _check_answers(layout, grading, frames["test"])
    _check_own_grader(layout, grading, frames["sample"])
    settings = _settings(spec, grading, frames["train"])
    kinds = _kinds(layout, spec, grading, frames)
    cache = split_competition(layout, grading, settings, frames, kinds, name=spec.name)
    program_name, program = _program(layout.root, spec)
    space = _space(spec, program, program_name, check_space, kinds, _train_rows(cache, grading.id_column))
    return _task(layout, spec, grading, cache, program_name, program, space)


def _sidecar(root: Path) -> CompetitionSpec:
    path = root / SIDECAR
    if not path.is_file():
        return CompetitionSpec()
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        return CompetitionSpec.model_validate(data)
    except UnicodeDecodeError as exc:
        raise _invalid(root, [not_utf8(path, exc)]) from None
    except yaml.YAMLError as exc:
        raise TaskError(f"{path}: YAML syntax error at {yaml_problem(exc)}; fix the YAML syntax") from None
    except ValidationError as exc:
        raise _invalid(root, explain(exc, SIDECAR, CompetitionSpec)) from None


def _invalid(root: Path, problems: list[str]) -> TaskError:
    head = f"task folder {root} is invalid ({len(problems)} problem{'s' if len(problems) != 1 else ''}):"
    return TaskError("\n".join([head, *(f"  - {p}" for p in problems)]))


def _read_public(layout: Layout, spec: CompetitionSpec) -> dict[str, Any]:
    """train.csv, test.csv and the sample submission as frames (ids read as text)."""
    import pandas as pd

    for name in ("train.csv", "test.csv"):
        if not (layout.public / name).is_file():
            raise TaskError(
                f"{layout.public} has no {name}; verifyless holds validation rows out of a public train.csv and "
                "grades submissions for test.csv (competitions whose data is images or JSON are not supported yet)"
            )
    sample = pd.read_csv(layout.sample, nrows=5)
    id_column = spec.id or str(sample.columns[0])
    ids = {id_column: str}
    frames = {name: _read_csv(layout.public / f"{name}.csv", ids) for name in ("train", "test")}
    frames["sample"] = _read_csv(layout.sample, ids)
    for name, frame in frames.items():
        if id_column not in frame.columns:
            raise TaskError(
                f"{layout.public}: {name} file has no id column {id_column!r}; set 'id:' in {SIDECAR} to the column "
                "that the sample submission, train.csv and test.csv share"
            )
    return frames


def _read_csv(path: Path, dtype: dict[str, Any], **options: Any) -> Any:
    import pandas as pd

    try:
        return pd.read_csv(path, dtype=dtype, **options)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path} {unreadable_csv(exc)}") from None


def unreadable_csv(exc: Exception) -> str:
    """Why a CSV could not be read, and the fix (text that follows the file's name)."""
    if isinstance(exc, UnicodeDecodeError):
        return (
            f"is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); it may be latin-1 or "
            "Windows-1252: save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8 IN.csv > OUT.csv`)"
        )
    return f"is not a readable CSV ({str(exc).splitlines()[0]}); fix the file"


def _grading(layout: Layout, spec: CompetitionSpec, frames: dict[str, Any]) -> Grading:
    grader, own = _own_grader(layout, spec)
    metric = own.name if own else _metric_name(layout, spec)
    sample, train = frames["sample"], frames["train"]
    id_column = spec.id or str(sample.columns[0])
    columns = tuple(str(c) for c in sample.columns if c != id_column)
    if not columns:
        raise TaskError(f"{layout.sample} has no prediction column besides the id column {id_column!r}")
    if all(c in train.columns for c in columns) and spec.target is None:
        return Grading(metric, id_column, columns, None, grader, own)
    label = spec.target or _label_column(train, frames["test"], columns)
    if label is None or label not in train.columns:
        raise TaskError(
            f"{layout.public}/train.csv holds neither the sample submission's columns {list(columns)[:6]} nor a "
            f"label column whose values are their names; set 'target:' in {SIDECAR} to the column of labels"
        )
    if (own or metric_def(metric)).output == "value":
        raise TaskError(f"metric {metric!r} scores numbers, but this submission has one probability column per class")
    return Grading(metric, id_column, columns, label, grader, own)


def _own_grader(layout: Layout, spec: CompetitionSpec) -> tuple[str | None, MetricDef | None]:
    """``("FILE:FUNCTION", its metric)`` when the competition brings its own grader, else ``(None, None)``."""
    g = spec.grader
    if g is None:
        if (layout.root / OWN_GRADER).is_file() and spec.metric is None:
            raise TaskError(
                f"{layout.root / OWN_GRADER}: say how it scores in {SIDECAR}: grader: {{direction: maximize or "
                "minimize, output: probability, label or value}} (or name a built-in 'metric:' to leave it unused)"
            )
        return None, None
    if spec.metric is not None:
        raise TaskError(f"{SIDECAR}: both 'metric' and 'grader' given; keep one (grader: the folder's own grade.py)")
    path = (layout.root / g.file).resolve()
    if not path.is_relative_to(layout.root.resolve()) or not path.is_file():
        raise TaskError(f"{SIDECAR}: grader.file: {g.file!r} not found in {layout.root}; fix the path")
    best = g.upper if g.direction == "maximize" else g.lower
    own = MetricDef(g.name, g.direction, g.output, best, g.lower, g.upper, f"{g.file}:{g.function}")
    return f"{path}:{g.function}", own


def _check_own_grader(layout: Layout, grading: Grading, sample: Any) -> None:
    """The own grader scores the sample submission against the private answers to a finite number; a grader
    that cannot is the task's problem, found at load rather than blamed on every candidate."""
    if grading.grader is None:
        return
    answers = _read_csv(layout.answers, {grading.id_column: str})
    file, _, function = grading.grader.rpartition(":")
    name = f"{Path(file).name}: {function}()"
    try:
        value = own_grade(grading.grader, sample, answers)
    except TaskError:
        raise
    except Exception as exc:
        raise TaskError(
            f"{name} fails on the sample submission against the private answers ({type(exc).__name__}: {exc}); "
            "fix the grader"
        ) from None
    if not math.isfinite(value):
        raise TaskError(f"{name} gives the sample submission {value}, not a finite number; fix the grader")


def _check_answers(layout: Layout, grading: Grading, test: Any) -> None:
    """The private answers hold one row per test id and the columns the grader reads; else a ``TaskError``.

    They are the trusted side's own file: a missing or short one is the task's problem, found here rather than
    blamed on every candidate whose submission cannot be graded against it.
    """
    path = layout.answers
    if not path.is_file():
        raise TaskError(
            f"{path}: the competition's private answers are missing; the hidden test is graded against them "
            "(MLE-bench's prepare step writes them)"
        )
    columns = list(_read_csv(path, {}, nrows=0).columns)
    readable = all(c in columns for c in grading.columns) or grading.label_column in columns
    if grading.id_column not in columns or not (readable or grading.grader):
        wanted = [grading.id_column, *([] if readable or grading.grader else grading.columns)]
        lacking = [c for c in wanted if c not in columns]
        label = f" (or the label column {grading.label_column!r})" if grading.label_column and not readable else ""
        raise TaskError(
            f"{path}: the private answers lack the column(s) {listed(lacking)}{label}; they have {listed(columns)}"
        )
    answers = _read_csv(path, {grading.id_column: str}, usecols=[grading.id_column])
    expected, got = set(test[grading.id_column].astype(str)), set(answers[grading.id_column].astype(str))
    if expected - got or len(answers) != len(expected):
        raise TaskError(
            f"{path}: the private answers hold {len(expected & got)} of test.csv's {len(expected)} ids "
            f"({len(answers)} rows); they need exactly one row per test id"
        )


def _label_column(train: Any, test: Any, columns: tuple[str, ...]) -> str | None:
    for name in train.columns:
        if name in test.columns:
            continue
        values = set(train[name].dropna().astype(str))
        if len(values) >= 2 and values <= set(columns):
            return str(name)
    return None


def _metric_name(layout: Layout, spec: CompetitionSpec) -> str:
    grader = (layout.config.get("grader") or {}).get("name")
    name = spec.metric or grader or MLEBENCH_GRADERS.get(_competition_id(layout))
    if name is None:
        raise TaskError(
            f"cannot tell the metric of competition {_competition_id(layout)!r}: add a {SIDECAR} with 'metric: NAME' "
            f"(one of {known_metrics()}), or copy MLE-bench's config.yaml for it into {layout.root}"
        )
    try:
        return metric_def(str(name)).name
    except KeyError:
        raise TaskError(
            f"metric {name!r} of competition {_competition_id(layout)!r} is not supported; use one of {known_metrics()}"
        ) from None


def _competition_id(layout: Layout) -> str:
    return str(layout.config.get("id") or layout.root.name)


def _kinds(layout: Layout, spec: CompetitionSpec, grading: Grading, frames: dict[str, Any]) -> FeatureKinds:
    """The feature columns by kind: test.csv's columns less the id, the answers and the group of a group split
    (held-out groups are unseen, so their names teach nothing). ``TaskError`` when the tabular baseline would
    run (no ``program``, or ``idea_space: tabular``) and none is usable: every verification would fail."""
    answers = (*grading.columns, *([grading.label_column] if grading.label_column else []))
    exclude = (grading.id_column, *answers, *([spec.split.group] if spec.split.group else []))
    kinds = feature_kinds(frames["train"], frames["test"], exclude)
    tabular = spec.program is None or spec.idea_space == "tabular"
    if tabular and not (kinds.numeric or kinds.categorical or kinds.text):
        raise TaskError(
            f"{layout.public}: test.csv has no column the tabular baseline can use (numbers, categories or free "
            f"text; left out: {list(kinds.left_out)[:6]}); name a program that reads them in {SIDECAR} (program:)"
        )
    return kinds


def _settings(spec: CompetitionSpec, grading: Grading, train: Any) -> SplitSettings:
    for key in ("group", "time"):
        column = getattr(spec.split, key)
        if column is not None and column not in train.columns:
            raise TaskError(f"{SIDECAR}: split.{key}: train.csv has no column {column!r}; name one of its columns")
    labels = grading.label_column or grading.columns[0]
    output = grading.definition.output
    return SplitSettings(
        fraction=spec.split.validation,
        seed=spec.split.seed,
        group=spec.split.group,
        time=spec.split.time,
        stratify=labels if output != "value" else None,
        selection=spec.split.selection,
    )


# ------------------------------------------------------------------ the kept split


def cache_root() -> Path:
    """Where competition splits are kept: ``$VERIFYLESS_CACHE_DIR``, else ``$XDG_CACHE_HOME/verifyless``."""
    override = os.environ.get("VERIFYLESS_CACHE_DIR")
    if override:
        return Path(override).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base, "verifyless").resolve()


def split_competition(
    layout: Layout,
    grading: Grading,
    settings: SplitSettings,
    frames: dict[str, Any],
    kinds: FeatureKinds,
    *,
    name: str | None = None,
) -> Path:
    """The cache folder of this competition's split (made once; the same bytes and settings reuse it).

    It is named by the task's ``name`` (the sidecar's, else the competition id) and a hash of the data, so a
    folder written under a staging name and then renamed (``task new``) finds its split again.
    """
    key = _split_key(layout, grading, settings)
    dest = cache_root() / "competitions" / f"{name or _competition_id(layout)}-{key}"
    if (dest / "done").is_file():
        return dest
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        _write_split(tmp, layout, grading, settings, frames, kinds)
        (tmp / "done").write_text("ok\n")
        if dest.exists():
            shutil.rmtree(dest)
        tmp.rename(dest)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise TaskError(
            f"cannot keep the validation split under {dest.parent}: {exc}; set VERIFYLESS_CACHE_DIR"
        ) from exc
    return dest


def _split_key(layout: Layout, grading: Grading, settings: SplitSettings) -> str:
    # A split without a selection share keeps the key it had before the share existed (its cache is reused).
    described = repr(settings).replace(", selection=0.0)", ")")
    digest = hashlib.sha256(f"{CACHE_VERSION}|{grading}|{described}|{layout.sample.name}".encode())
    for path in (layout.public / "train.csv", layout.public / "test.csv", layout.sample):
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def _write_split(
    tmp: Path, layout: Layout, grading: Grading, settings: SplitSettings, frames: dict[str, Any], kinds: FeatureKinds
) -> None:
    import pandas as pd

    train, test, sample = frames["train"], frames["test"], frames["sample"]
    kept, validation, selection = split_held(train, settings)
    held_rows = train.iloc[validation + selection]
    missing = [c for c in test.columns if c not in train.columns]
    if missing:
        raise TaskError(f"test.csv has column(s) {missing[:6]} that train.csv lacks; the held-out rows need them")
    id_col = grading.id_column
    if set(sample[id_col]) != set(test[id_col]):
        raise TaskError(
            f"{layout.sample.name} and test.csv list different ids; the sample submission has one row per test id"
        )
    overlap = set(held_rows[id_col]) & set(test[id_col])
    if overlap:
        raise TaskError(f"train.csv and test.csv share ids (e.g. {sorted(overlap)[0]!r}); ids must be unique")
    inputs = pd.concat([test, held_rows[list(test.columns)]]).sample(frac=1.0, random_state=settings.seed)
    defaults = {c: sample[c].iloc[0] for c in grading.columns}
    extra = pd.DataFrame({id_col: held_rows[id_col], **defaults})
    combined = pd.concat([sample, extra]).set_index(id_col).loc[inputs[id_col]].reset_index()
    (tmp / "public").mkdir(parents=True)
    (tmp / "hidden").mkdir()
    train.iloc[kept].to_csv(tmp / "public" / "train.csv", index=False)
    inputs.to_csv(tmp / "public" / "test.csv", index=False)
    combined[list(sample.columns)].to_csv(tmp / "public" / layout.sample.name, index=False)
    _held_answers(train.iloc[validation], grading, layout.answers).to_csv(tmp / "hidden" / VAL_ANSWERS, index=False)
    if selection:
        _held_answers(train.iloc[selection], grading, layout.answers).to_csv(tmp / "hidden" / SEL_ANSWERS, index=False)
    info = _spec_json(grading, layout.sample.name)
    (tmp / "public" / SPEC_FILE).write_text(json.dumps({**info, "features": kinds.to_json()}, indent=1) + "\n")
    own = {"grader": grading.grader, "lower": grading.definition.lower, "upper": grading.definition.upper}
    (tmp / "hidden" / "grading.json").write_text(json.dumps({**info, **own}, indent=1) + "\n")


def _held_answers(held_rows: Any, grading: Grading, answers: Path) -> Any:
    """The held-out rows' answers: their label or prediction columns; for an own grader, in the private
    answers' shape (its columns from train.csv, or one 0/1 column per class from the label column)."""
    import pandas as pd

    id_col = grading.id_column
    if grading.grader is None:
        truth = [grading.label_column] if grading.label_column else list(grading.columns)
        return held_rows[[id_col, *truth]]
    shaped = pd.DataFrame({id_col: held_rows[id_col]})
    for column in (str(c) for c in pd.read_csv(answers, nrows=0).columns if c != id_col):
        if column in held_rows.columns:
            shaped[column] = held_rows[column]
        elif grading.label_column and column in grading.columns:
            shaped[column] = (held_rows[grading.label_column].astype(str) == column).astype(int)
        else:
            raise TaskError(
                f"{answers}: column {column!r} of the private answers is not in train.csv, so the held-out "
                "validation rows cannot be given to the grader in the same shape; add it to train.csv"
            )
    return shaped


def _spec_json(grading: Grading, sample_name: str) -> dict[str, Any]:
    metric = grading.definition
    return {
        "metric": metric.name,
        "direction": metric.direction,
        "output": metric.output,
        "id": grading.id_column,
        "columns": list(grading.columns),
        "label_column": grading.label_column,
        "sample_submission": sample_name,
    }


# ------------------------------------------------------------------ program, statement, task


def _program(root: Path, spec: CompetitionSpec) -> tuple[str, str]:
    path = (root / spec.program).resolve() if spec.program else BASELINE
    if spec.program and (not path.is_relative_to(root.resolve()) or not path.is_file()):
        raise TaskError(f"{SIDECAR}: program: file {spec.program!r} not found in {root}; fix the path")
    text = path.read_text(encoding="utf-8")
    problem = syntax_error(text, path.name)
    try:
        split(text, Band())
    except BandError as exc:
        problem = problem or str(exc)
    if problem:
        raise TaskError(f"{path.name}: {problem}; the baseline program must parse and mark its band")
    return ("solution.py" if not spec.program else Path(spec.program).name), text


def _train_rows(cache: Path, id_column: str) -> int:
    """The rows of the split's ``train.csv``: the training rows a program sees."""
    return len(_read_csv(cache / "public" / "train.csv", {id_column: str}, usecols=[id_column]))


def _space(
    spec: CompetitionSpec, program: str, name: str, check_space: SpaceCheck, kinds: FeatureKinds, rows: int
) -> IdeaSpace | None:
    chosen = spec.idea_space
    if chosen is None and spec.program is None:
        chosen = "tabular"
    if chosen is None:
        return None
    if chosen == "tabular":
        chosen = _tabular_space(kinds, rows)
    assert isinstance(chosen, IdeaSpaceSpec)
    problems: list[str] = []
    space = check_space(chosen, program, name, problems)
    if problems:
        raise TaskError("\n".join([f"the idea space does not fit {name}:", *(f"  - {p}" for p in problems)]))
    return space


def _tabular_space(kinds: FeatureKinds, rows: int) -> IdeaSpaceSpec:
    """The tabular baseline's space for data with feature columns ``kinds`` and ``rows`` training rows: less the
    encodings of column kinds this data has none of (moves that cannot change a prediction would only tie their
    parents at full price), and with options bounded by the rows (``TRAIN_ROWS`` in ``space.yaml``: k-NN's k)."""
    text = SPACE.read_text(encoding="utf-8").replace("TRAIN_ROWS", str(max(1, rows)))
    space = IdeaSpaceSpec.model_validate(yaml.safe_load(text))
    for dim, columns in (("numeric", kinds.numeric), ("categorical", kinds.categorical), ("text", kinds.text)):
        if not columns:
            space = _fixed(space, dim)
    return space


def _fixed(space: IdeaSpaceSpec, dim: str) -> IdeaSpaceSpec:
    """``space`` with dimension ``dim`` fixed at its baseline option: that option's code is written into the
    template where ``{{dim}}`` stood alone on its line (indented to it), so every band renders as before."""
    code = space.dimensions[dim].options[space.baseline[dim]].code
    assert isinstance(code, str), "only a one-slot dimension can be fixed"

    def indented(match: re.Match[str]) -> str:
        return "\n".join(match.group(1) + line if line else line for line in code.splitlines())

    alone = re.compile(rf"^([ \t]*)\{{\{{\s*{re.escape(dim)}\s*\}}\}}[ \t]*$", re.MULTILINE)
    return IdeaSpaceSpec(
        template=alone.sub(indented, space.template),
        baseline={k: v for k, v in space.baseline.items() if k != dim},
        dimensions={k: v for k, v in space.dimensions.items() if k != dim},
    )


def _statement(layout: Layout, grading: Grading, split: SplitSpec, program: str) -> str:
    description = layout.public / "description.md"
    head = description.read_text(encoding="utf-8") if description.is_file() else f"# {layout.root.name}\n"
    metric = grading.definition
    columns = [grading.id_column, *grading.columns]
    return (
        f"{head.rstrip()}\n\n## How verifyless runs this competition\n\n"
        f"The program runs as `python {program} --data DATA --out OUT`. DATA holds train.csv, test.csv, "
        f"{layout.sample.name}, {SPEC_FILE} (the submission's shape and the feature columns by kind: numeric, categorical, "
        f"free text) and the other public files. Write "
        f"OUT/{SUBMISSION} with exactly the columns {columns[:8]} and one row per id of test.csv "
        f"(each prediction a {metric.output}). {split.validation:.0%} of the training rows are held out of "
        f"train.csv and appear unlabelled among the rows of test.csv: they give the validation score "
        f"`val_{metric.name}`; {_selection_sentence(split)}the other rows are graded against the private answers "
        f"(`test_{metric.name}`, reported only). Metric: {metric.description}, {metric.direction}d. A submission whose columns, rows "
        "or ids differ from the sample submission's (or whose class probabilities do not sum to 1) is rejected.\n"
    )


def _selection_sentence(split: SplitSpec) -> str:
    if not split.selection:
        return ""
    return (
        f"another {split.selection:.0%} are held out the same way to choose the final node among the best by "
        "validation (their score is never shown to the search); "
    )


def _task(
    layout: Layout,
    spec: CompetitionSpec,
    grading: Grading,
    cache: Path,
    program_name: str,
    program: str,
    space: IdeaSpace | None,
) -> Task:
    metric = grading.definition
    others = sorted(
        p for p in layout.public.iterdir() if p.name not in {"train.csv", "test.csv", layout.sample.name, SPEC_FILE}
    )
    public = (cache / "public" / "train.csv", cache / "public" / "test.csv", cache / "public" / layout.sample.name)
    a = spec.anchors
    return Task(
        name=spec.name or _competition_id(layout),
        root=layout.root.resolve(),
        kind="competition",
        statement=_statement(layout, grading, spec.split, program_name),
        program_file=program_name,
        baseline_program=program,
        band=Band(),
        metric=Metric(f"val_{metric.name}", metric.direction, metric.lower, metric.upper),
        anchors=Anchors(floor=a.floor, reference=a.reference, bound=a.bound, sota=a.sota),
        public_data=(*public, cache / "public" / SPEC_FILE, *others),
        hidden_data=(cache / "hidden", layout.answers),
        run_command=RUN,
        scorer=f"{SCORER}:score",
        validation_metrics=(f"val_{metric.name}",),
        test_metrics=(f"test_{metric.name}",),
        selection_metric=f"sel_{metric.name}" if spec.split.selection else None,
        limits=spec.limits.to_limits(),
        stochastic=spec.stochastic,
        idea_space=space,
        description=spec.description or f"MLE-bench competition {_competition_id(layout)} ({metric.name})",
        policy=spec.policy.model_dump(),
        ensemble=_ensemble(grading),
        target=Target(
            grading.label_column or grading.columns[0],
            "regression" if metric.output == "value" else "classification",
            (cache / "public" / "train.csv",),
        ),
    )


def _ensemble(grading: Grading) -> Ensemble:
    """The top-K ensemble rule of a competition: ``submission.csv`` rows matched on the id column, probabilities
    and values averaged, labels voted; ``opt_in`` (only for runs asking for ensembles on every task)."""
    combine: Literal["mean", "vote"] = "vote" if grading.definition.output == "label" else "mean"
    return Ensemble((SUBMISSION,), combine, key=(grading.id_column,), opt_in=True)


# ------------------------------------------------------------------ trusted scoring


__all__ = [
    "MLEBENCH_GRADERS",
    "CompetitionSpec",
    "Layout",
    "cache_root",
    "find_layout",
    "is_competition",
    "load_competition",
    "split_competition",
    "unreadable_csv",
]
