"""Deterministic row splits and problem inference for tabular data (no I/O).

``split_rows`` holds out a share of the rows: the latest ones by a time column, whole groups by a
group column, or a seeded (stratified where every class has two rows) random share. The same frame,
settings and seed always give the same split. ``infer_problem`` names the problem a target column
poses (binary, multiclass or regression) and ``default_metric`` the metric a task gets for it.
``feature_kinds`` sorts the input columns into numeric, categorical and free-text features.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from verifyless.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd

Problem = Literal["binary", "multiclass", "regression"]
MAX_CLASSES_FOR_INTEGERS = 10  # an integer column with at most this many values is a class label
TEXT_WORDS = 3.0  # free text: at least this many words per value on average ...
TEXT_DISTINCT = 0.3  # ... and at least this share of the values distinct


@dataclass(frozen=True)
class FeatureKinds:
    """Input columns by kind; ``left_out`` are text columns that are neither categories nor free text (codes)."""

    numeric: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()
    text: tuple[str, ...] = ()
    left_out: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        return {"numeric": list(self.numeric), "categorical": list(self.categorical), "text": list(self.text)}


@dataclass(frozen=True)
class SplitSettings:
    """How rows are held out: ``fraction`` of them, by ``time`` (latest), ``group`` (whole groups) or at random."""

    fraction: float = 0.2
    seed: int = 0
    group: str | None = None
    time: str | None = None
    stratify: str | None = None  # a label column to stratify a random split by
    selection: float = 0.0  # a further share of all rows held out to choose the final node (0: none)


def split_rows(frame: pd.DataFrame, settings: SplitSettings) -> tuple[list[int], list[int]]:
    """``(kept, held_out)`` row positions of ``frame``; both non-empty and sorted."""
    import numpy as np
    from sklearn.model_selection import GroupShuffleSplit, ShuffleSplit, StratifiedShuffleSplit

    n = len(frame)
    if n < 4:
        raise ConfigError(f"only {n} rows to split; a task needs at least 20 labelled rows")
    positions = np.arange(n)
    if settings.time is not None:
        order = _time_order(frame[settings.time], settings.time)
        cut = max(1, round(settings.fraction * n))
        held = sorted(order[n - cut :].tolist())
        return sorted(set(range(n)) - set(held)), held
    if settings.group is not None:
        groups = frame[settings.group].astype(str).to_numpy()
        if len(set(groups)) < 2:
            raise ConfigError(f"group column {settings.group!r} has one value; a group split needs two or more groups")
        splitter = GroupShuffleSplit(n_splits=1, test_size=settings.fraction, random_state=settings.seed)
        kept, held = next(splitter.split(positions, groups=groups))
    elif settings.stratify is not None and _stratifiable(frame[settings.stratify], settings.fraction):
        splitter = StratifiedShuffleSplit(n_splits=1, test_size=settings.fraction, random_state=settings.seed)
        kept, held = next(splitter.split(positions, frame[settings.stratify].astype(str)))
    else:
        kept, held = next(
            ShuffleSplit(n_splits=1, test_size=settings.fraction, random_state=settings.seed).split(positions)
        )
    return sorted(kept.tolist()), sorted(held.tolist())


def split_held(frame: pd.DataFrame, settings: SplitSettings) -> tuple[list[int], list[int], list[int]]:
    """``(kept, validation, selection)`` row positions of ``frame``, each sorted.

    ``settings.fraction + settings.selection`` of the rows are held out as ``split_rows`` does (the latest, whole
    groups, or a seeded stratified share); then ``selection / (fraction + selection)`` of those are set apart,
    at random (stratified, whole groups where the split is by group) but never by time, so that validation and
    selection rows come from the same period and neither is systematically closer to the hidden test. With
    ``selection == 0`` this is ``split_rows`` with an empty selection.
    """
    if settings.selection <= 0:
        kept, held = split_rows(frame, settings)
        return kept, held, []
    share = settings.fraction + settings.selection
    kept, held = split_rows(frame, replace(settings, fraction=share))
    inner = replace(settings, fraction=settings.selection / share, time=None)
    validation, selection = split_rows(frame.iloc[held].reset_index(drop=True), inner)
    return kept, [held[i] for i in validation], [held[i] for i in selection]


def _time_order(values: pd.Series, column: str) -> Any:
    """Row positions from earliest to latest (numbers, else dates; ties keep file order).

    ``ConfigError`` naming the rows whose value is neither (or missing): rows that sort nowhere would otherwise
    land silently on one side of the split.
    """
    import pandas as pd

    numbers = pd.to_numeric(values, errors="coerce")
    key = numbers
    if numbers.isna().any():
        dates = pd.to_datetime(values.astype("string"), errors="coerce", format="mixed")
        key = dates if dates.notna().sum() > numbers.notna().sum() else numbers
    bad = values[key.isna().to_numpy()]
    if len(bad):
        shown = ", ".join(f"row {i + 1} ({v!r})" for i, v in zip(bad.index[:5], bad.iloc[:5], strict=True))
        raise ConfigError(
            f"time column {column!r} has {len(bad)} value(s) that are neither numbers nor dates: {shown}; "
            "fix or drop those rows (rows are counted from 1 after the header)"
        )
    return key.reset_index(drop=True).sort_values(kind="stable").index.to_numpy()


def _stratifiable(labels: pd.Series, fraction: float) -> bool:
    counts = labels.astype(str).value_counts()
    return bool(counts.min() >= 2 and round(fraction * len(labels)) >= len(counts))


def feature_kinds(train: pd.DataFrame, test: pd.DataFrame, exclude: tuple[str, ...] = ()) -> FeatureKinds:
    """The input columns (in both files, not in ``exclude``) by kind, judged on ``train``.

    Numbers are numeric. Other columns are free text when their values average at least ``TEXT_WORDS`` words
    and at least ``TEXT_DISTINCT`` of them are distinct (sentences, reviews, titles); else categorical when
    they have at most ``max(50, rows / 20)`` distinct values; else left out (ids, codes, names).
    """
    import pandas as pd

    shared = [str(c) for c in test.columns if c in train.columns and c not in exclude]
    kinds: dict[str, list[str]] = {"numeric": [], "categorical": [], "text": [], "left_out": []}
    for column in shared:
        values = train[column]
        if pd.api.types.is_numeric_dtype(values):
            kinds["numeric"].append(column)
        elif is_free_text(values):
            kinds["text"].append(column)
        elif values.nunique() <= max(50, len(train) // 20):
            kinds["categorical"].append(column)
        else:
            kinds["left_out"].append(column)
    return FeatureKinds(**{k: tuple(v) for k, v in kinds.items()})


def is_free_text(values: pd.Series) -> bool:
    """Whether a column of text values is free text (``feature_kinds``'s rule), not categories or codes."""
    present = values.dropna().astype(str)
    if present.empty:
        return False
    words = float(present.str.split().str.len().mean())
    return words >= TEXT_WORDS and present.nunique() >= TEXT_DISTINCT * len(present)


def infer_problem(target: pd.Series, column: str) -> Problem:
    """The problem ``target`` poses; ``ConfigError`` when it has fewer than two distinct values."""
    import numpy as np
    import pandas as pd

    values = target.dropna()
    distinct = values.nunique()
    if distinct < 2:
        first = values.iloc[0] if distinct else None
        shown = first.item() if isinstance(first, np.generic) else first  # a numpy scalar prints as its plain value
        what = f"one value ({shown!r})" if distinct else "no values"
        raise ConfigError(
            f"target column {column!r} has {what} in {len(target)} rows; a task needs a target with at least "
            "two distinct values (pass another --target)"
        )
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        return "binary" if distinct == 2 else "multiclass"
    integral = bool((values == values.round()).all())
    if distinct == 2:
        return "binary"
    return "multiclass" if integral and distinct <= MAX_CLASSES_FOR_INTEGERS else "regression"


def checked_problem(target: pd.Series, column: str, problem: Problem | None) -> Problem:
    """The problem a task of ``target`` poses: ``problem`` (``--kind``) when given and ``target`` can pose it, else
    the inferred one; ``ConfigError`` (one line naming the fitting ``--kind``) when the target cannot pose it: a
    regression needs numbers, a binary task two classes, a multiclass task labels (text or whole numbers)."""
    inferred = infer_problem(target, column)
    if problem is None or problem == inferred:
        return inferred
    misfit = _misfit(target.dropna(), column, problem)
    if misfit:
        raise ConfigError(f"--kind {problem} {misfit}; use --kind {inferred} (what it holds), or leave --kind out")
    return problem


def _misfit(values: pd.Series, column: str, problem: Problem) -> str | None:
    """Why ``values`` cannot be the target of a ``problem`` task (None: they can)."""
    import pandas as pd

    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    if problem == "regression" and not numeric:
        return f"needs a numeric target, but {column!r} holds {_example(values, 'values such as')}"
    distinct = values.nunique()
    if problem == "binary" and distinct != 2:
        classes = sorted(values.unique().tolist(), key=str)
        shown = ", ".join(str(v) for v in classes[:5]) + (", ..." if len(classes) > 5 else "")
        return f"needs a target with two classes, but {column!r} has {distinct} distinct values ({shown})"
    if problem == "multiclass" and numeric and not bool((values == values.round()).all()):
        fractional = values[values != values.round()]
        return f"needs class labels, but {column!r} holds numbers that are not whole, {_example(fractional, 'like')}"
    return None


def _example(values: pd.Series, lead: str) -> str:
    """``lead`` and the first value, printed as its plain Python value (a numpy scalar as its number)."""
    first = values.iloc[0]
    return f"{lead} {first.item() if hasattr(first, 'item') else first!r}"


def default_metric(problem: Problem) -> str:
    """AUC for binary, log loss for multiclass, RMSE for regression (the metric registry's names)."""
    return {"binary": "auc", "multiclass": "logloss", "regression": "rmse"}[problem]


__all__ = [
    "FeatureKinds",
    "Problem",
    "checked_problem",
    "SplitSettings",
    "default_metric",
    "feature_kinds",
    "infer_problem",
    "is_free_text",
    "split_held",
    "split_rows",
]
