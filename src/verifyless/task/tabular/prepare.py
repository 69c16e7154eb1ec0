"""A competition folder from one CSV: what ``verifyless task new`` writes before it measures anchors.

``prepare_task(dest, data, target, ...)`` reads the CSV, infers the problem (binary, multiclass or regression)
and a default metric, holds out a hidden test share (the latest rows by ``time``, whole ``group``s, or a seeded
stratified share; or the labelled ``test`` file given), and writes MLE-bench's prepared layout::

    DEST/prepared/public/{train.csv, test.csv, sample_submission.csv, description.md}
    DEST/prepared/private/test.csv      # the hidden answers
    DEST/solution.py                    # the scikit-learn baseline (its band and idea space: tabular/)
    DEST/verifyless.yaml                # metric, id, split settings (anchors are added by the caller)

which ``competition.load_competition`` then loads like any MLE-bench folder (it makes the validation split).
Every problem with the input is a ``ConfigError`` of one line naming the fix.
"""

from __future__ import annotations

import difflib
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from verifyless.errors import ConfigError, listed
from verifyless.task.tabular.competition import BASELINE, SIDECAR, unreadable_csv
from verifyless.task.tabular.grading import known_metrics, metric_def
from verifyless.task.tabular.split import (
    Problem,
    SplitSettings,
    checked_problem,
    default_metric,
    feature_kinds,
    is_free_text,
    split_rows,
)

MIN_ROWS = 20
MIN_CLASS_ROWS = 5  # a binary class needs rows in training, validation and the hidden test
MAX_DESCRIBED_COLUMNS = 60  # the statement's column table stops here: every LLM prompt carries the statement
ID_NAMES = ("id", "row_id", "verifyless_id")  # an existing unique "id" column is the id; else the first free name


@dataclass(frozen=True)
class Prepared:
    """What ``prepare_task`` wrote."""

    root: Path
    problem: Problem
    metric: str
    id_column: str
    columns: tuple[str, ...]  # the submission's prediction columns
    train_rows: int
    test_rows: int
    dropped_rows: int  # rows without a target value


@dataclass(frozen=True)
class Request:
    """The ``task new`` arguments."""

    data: Path
    target: str
    metric: str | None = None
    id_column: str | None = None
    test: Path | None = None
    group: str | None = None
    time: str | None = None
    seed: int = 0
    problem: Problem | None = None
    test_fraction: float = 0.2
    selection: float = 0.2  # of the public rows, held out to choose the final node (0: no selection split)


def prepare_task(dest: Path, request: Request, *, name: str | None = None) -> Prepared:
    """Write the competition folder ``dest`` (which must not exist or be empty) from ``request``.

    ``name`` is the task's name (default: the folder's), for a caller that writes into a staging folder.
    """
    check_destination(dest)
    frame = _read(request.data, "--data")
    frame, dropped = _labelled(frame, request)
    frame, id_column = _with_ids(frame, request.id_column, start=0, path=request.data)
    _check_features(frame, request, id_column)
    problem = checked_problem(frame[request.target], request.target, request.problem)
    frame = _class_labels(frame, request.target, problem)
    metric = _metric(request, problem, frame[request.target])
    train, test = _hidden_test(frame, request, problem, id_column)
    columns, label_column = _submission_columns(frame[request.target], problem, metric, id_column)
    try:
        _write(
            dest, name or dest.name, train, test, request, id_column, columns, label_column, problem, metric, dropped
        )
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return Prepared(dest, problem, metric, id_column, columns, len(train), len(test), dropped)


def check_destination(dest: Path) -> None:
    """``ConfigError`` unless ``dest`` is absent or an empty folder."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise ConfigError(f"{dest} already exists and is not an empty folder; choose a new folder for the task")


def _read(path: Path, flag: str) -> Any:
    import pandas as pd

    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a folder; pass the CSV file with your data")
    if not path.is_file():
        raise ConfigError(f"{flag} {path}: no such file; pass the CSV file with your data")
    try:
        frame = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ConfigError(
            f"{flag} {path} is empty; pass a CSV with a header line and at least {MIN_ROWS} rows"
        ) from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{flag} {path} {unreadable_csv(exc)}") from None
    if frame.empty:
        raise ConfigError(f"{flag} {path} has no rows (only a header); a task needs at least {MIN_ROWS} labelled rows")
    if len(frame.columns) == 1:
        header = str(frame.columns[0])
        sep = next((s for s in (";", "\t", "|") if s in header), None)
        if sep is not None:
            shown = "tab" if sep == "\t" else repr(sep)
            raise ConfigError(
                f"{flag} {path} has one column; its header looks {shown}-separated ({header[:60]!r}); "
                "save the file with commas between columns"
            )
    return frame


def _labelled(frame: Any, request: Request) -> tuple[Any, int]:
    """The rows with a target value, and how many had none."""
    if request.target not in frame.columns:
        columns = [str(c) for c in frame.columns]
        close = difflib.get_close_matches(request.target, columns, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(
            f"{request.data} has no column {request.target!r}; {hint}its {len(columns)} columns are "
            f"{listed(columns, 30)}; pass one of them as --target"
        )
    for flag, column in (("--group", request.group), ("--time", request.time)):
        if column is not None and (column not in frame.columns or column == request.target):
            raise ConfigError(f"{flag} {column!r} is not a feature column of {request.data}; name another column")
    known = frame[request.target].notna()
    if known.sum() < MIN_ROWS:
        raise ConfigError(
            f"{request.data} has {int(known.sum())} rows with a {request.target!r} value; a task needs at least {MIN_ROWS}"
        )
    _check_finite(frame[request.target][known], request.target)
    return frame[known], int((~known).sum())  # the index keeps each row's place in the file, for messages


def _check_features(frame: Any, request: Request, id_column: str) -> None:
    """``ConfigError`` unless some column besides the target, the id and the group is an input the baseline can
    use (numbers, categories or free text): without one every verification would fail."""
    exclude = (request.target, id_column, *([request.group] if request.group else []))
    kinds = feature_kinds(frame, frame, exclude)
    if kinds.numeric or kinds.categorical or kinds.text:
        return
    left = f" (left out as ids or codes: {listed(kinds.left_out)})" if kinds.left_out else ""
    raise ConfigError(
        f"--data {request.data} has no input column besides --target {request.target!r}{left}; a task needs at "
        "least one feature column (numbers, categories or free text) to predict from"
    )


def _check_finite(target: Any, column: str) -> None:
    import numpy as np
    import pandas as pd

    if not pd.api.types.is_numeric_dtype(target) or pd.api.types.is_bool_dtype(target):
        return
    bad = target[~np.isfinite(target.astype(float))]
    if len(bad):
        raise ConfigError(
            f"target {column!r} has {len(bad)} value(s) that are not finite numbers (e.g. row {bad.index[0] + 1}: "
            f"{bad.iloc[0]}); drop or fix those rows"
        )


def _class_labels(frame: Any, target: str, problem: Problem) -> Any:
    """Class targets with every class in at least ``MIN_CLASS_ROWS`` rows (binary) and whole-number labels
    written as integers (0.0/1.0 are the classes 0 and 1)."""
    import pandas as pd

    if problem == "regression":
        return frame
    labels = frame[target]
    counts = labels.astype(str).value_counts()
    if problem == "binary" and counts.min() < MIN_CLASS_ROWS:
        rare, n = counts.index[-1], int(counts.iloc[-1])
        raise ConfigError(
            f"target {target!r} has class {rare!r} in only {n} row{'s' if n != 1 else ''}; each class needs at least "
            f"{MIN_CLASS_ROWS} so that the training rows, the validation rows and the hidden test all hold it "
            "(add rows of that class, or pass another --target)"
        )
    numeric = pd.api.types.is_numeric_dtype(labels) and not pd.api.types.is_bool_dtype(labels)
    if numeric and bool((labels == labels.round()).all()):
        return frame.assign(**{target: labels.astype("int64")})
    return frame


def _with_ids(frame: Any, id_column: str | None, *, start: int, path: Path) -> tuple[Any, str]:
    """``frame`` with its id column first: the one named, else an existing ``id`` column with unique values, else
    a new column of row numbers (``id``, or ``row_id`` when an ``id`` column is there but not unique)."""
    existing = ID_NAMES[0]
    if id_column is None and existing in frame.columns:
        values = frame[existing]
        if not (values.isna().any() or values.astype(str).duplicated().any()):
            id_column = existing
    if id_column is not None:
        if id_column not in frame.columns:
            raise ConfigError(f"{path} has no id column {id_column!r}; pass an existing column as --id, or omit --id")
        ids = frame[id_column]
        if ids.isna().any() or ids.astype(str).duplicated().any():
            raise ConfigError(f"--id {id_column!r} has missing or repeated values in {path}; ids must be unique")
        return frame[[id_column, *(c for c in frame.columns if c != id_column)]], id_column
    name = next(n for n in ID_NAMES if n not in frame.columns)
    frame = frame.copy()
    frame.insert(0, name, range(start, start + len(frame)))
    return frame, name


def _metric(request: Request, problem: Problem, target: Any) -> str:
    name = request.metric or default_metric(problem)
    try:
        spec = metric_def(name)
    except KeyError:
        raise ConfigError(f"--metric {name!r} is not known; use one of {known_metrics()}") from None
    if (spec.output == "value") != (problem == "regression"):
        kind = "numbers" if spec.output == "value" else "classes"
        raise ConfigError(
            f"--metric {spec.name} scores {kind}, but {request.target!r} is a {problem} target; choose a "
            f"{problem} metric (default {default_metric(problem)}) or set --kind"
        )
    if spec.name == "qwk" and not _integral(target):
        raise ConfigError(f"--metric qwk needs integer labels, but {request.target!r} holds other values")
    if spec.name == "rmsle" and float(target.min()) < 0:
        raise ConfigError(f"--metric rmsle needs a target >= 0, but {request.target!r} goes down to {target.min():g}")
    return spec.name


def _integral(values: Any) -> bool:
    import pandas as pd

    numbers = pd.to_numeric(values, errors="coerce")
    return bool(numbers.notna().all() and (numbers == numbers.round()).all())


def _hidden_test(frame: Any, request: Request, problem: Problem, id_column: str) -> tuple[Any, Any]:
    """(train rows, hidden test rows): the ``--test`` file, or a held-out share of ``--data``."""
    if request.test is not None:
        test = _read(request.test, "--test")
        if request.target not in test.columns:
            raise ConfigError(f"--test {request.test} has no {request.target!r} column; the hidden test needs labels")
        test = test[test[request.target].notna()].reset_index(drop=True)
        test, _ = _with_ids(test, request.id_column, start=len(frame), path=request.test)
        lacking = [c for c in frame.columns if c not in test.columns]
        if lacking:
            raise ConfigError(
                f"--test {request.test} lacks the column(s) {listed(lacking)} of --data; give both the same columns"
            )
        if set(test[id_column].astype(str)) & set(frame[id_column].astype(str)):
            raise ConfigError(f"--test {request.test} repeats ids of --data in {id_column!r}; ids must be unique")
        return frame, test[list(frame.columns)]
    stratify = request.target if problem != "regression" else None
    settings = SplitSettings(request.test_fraction, request.seed, request.group, request.time, stratify)
    kept, held = split_rows(frame, settings)
    return frame.iloc[kept], frame.iloc[held]


def _submission_columns(
    target: Any, problem: Problem, metric: str, id_column: str
) -> tuple[tuple[str, ...], str | None]:
    """(prediction columns, label column): one column of the target, or one probability column per class."""
    classes = sorted({str(v) for v in target})
    if metric_def(metric).output != "probability" or (problem == "binary" and set(classes) <= {"0", "1"}):
        return (str(target.name),), None
    if id_column in classes:
        raise ConfigError(f"a class of the target is called {id_column!r}, like the id column; pass another --id")
    return tuple(classes), str(target.name)


def _write(
    dest: Path,
    name: str,
    train: Any,
    test: Any,
    request: Request,
    id_column: str,
    columns: tuple[str, ...],
    label_column: str | None,
    problem: Problem,
    metric: str,
    dropped: int,
) -> None:
    public, private = dest / "prepared" / "public", dest / "prepared" / "private"
    public.mkdir(parents=True)
    private.mkdir(parents=True)
    target = request.target
    train.to_csv(public / "train.csv", index=False)
    test.drop(columns=[target]).to_csv(public / "test.csv", index=False)
    _sample(test[id_column], train[target], columns, label_column, metric).to_csv(
        public / "sample_submission.csv", index=False
    )
    _answers(test, id_column, target, columns, label_column).to_csv(private / "test.csv", index=False)
    (public / "description.md").write_text(describe(train, request, id_column, problem, metric, columns, dropped))
    shutil.copyfile(BASELINE, dest / "solution.py")
    sidecar = {
        "name": name,
        "description": f"Predict {target!r} of {request.data.name} ({problem}, {metric})",
        "metric": metric,
        "id": id_column,
        **({"target": label_column} if label_column else {}),
        "split": {
            "validation": 0.2,
            "selection": request.selection,
            "seed": request.seed,
            "group": request.group,
            "time": request.time,
        },
        "program": "solution.py",
        "idea_space": "tabular",
    }
    (dest / SIDECAR).write_text(
        "# Written by `verifyless task new`; see docs/design/task-format.md (competition folders).\n"
        + yaml.safe_dump(sidecar, sort_keys=False)
    )


def _sample(ids: Any, target: Any, columns: tuple[str, ...], label_column: str | None, metric: str) -> Any:
    import pandas as pd

    output = metric_def(metric).output
    if label_column:
        fill: dict[str, Any] = {c: round(1.0 / len(columns), 6) for c in columns}
    elif output == "probability":
        fill = {columns[0]: 0.5}
    elif output == "label":
        fill = {columns[0]: target.mode().iloc[0]}
    else:
        fill = {columns[0]: round(float(target.mean()), 6)}
    return pd.DataFrame({ids.name: ids.to_numpy(), **fill})


def _answers(test: Any, id_column: str, target: str, columns: tuple[str, ...], label_column: str | None) -> Any:
    """The hidden answers: the target column, or one 0/1 column per class (MLE-bench's per-class layout)."""
    if not label_column:
        return test[[id_column, target]]
    labels = test[target].astype(str)
    answers = test[[id_column]].copy()
    for c in columns:
        answers[c] = (labels == c).astype(int).to_numpy()
    return answers


def describe(
    train: Any, request: Request, id_column: str, problem: Problem, metric: str, columns: tuple[str, ...], dropped: int
) -> str:
    """The statement: the task in one paragraph, then a summary of the training rows' columns.

    The table lists the target and at most ``MAX_DESCRIBED_COLUMNS`` columns in all; the rest are counted by kind
    in one line (a 5,000-column file once made a 340 KB statement and 172k prompt tokens per critic call).
    """
    spec = metric_def(metric)
    lines = [
        f"# {request.target} from {request.data.name}",
        "",
        f"Predict the column `{request.target}` ({problem}) for every row of test.csv from the other columns. "
        f"train.csv has {len(train)} labelled rows; `{id_column}` identifies a row. Metric: {spec.description} "
        f"(`{spec.name}`, {spec.direction}d). The submission has the columns of sample_submission.csv: "
        f"`{id_column}` and {', '.join(f'`{c}`' for c in columns[:8])} (each a {spec.output}).",
        "",
    ]
    if dropped:
        lines += [f"{dropped} row(s) of the original file had no `{request.target}` value and were left out.", ""]
    lines += [
        "## Columns of train.csv",
        "",
        "| column | type | missing | distinct | summary |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    shown = [request.target] + [c for c in train.columns if c not in (id_column, request.target)]
    lines += [_column_line(train[c], c, c == request.target) for c in shown[:MAX_DESCRIBED_COLUMNS]]
    rest = shown[MAX_DESCRIBED_COLUMNS:]
    if rest:
        kinds: dict[str, int] = {}
        for c in rest:
            kind = _column_kind(train[c])
            kinds[kind] = kinds.get(kind, 0) + 1
        counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        lines += ["", f"... and {len(rest)} more columns ({counted}), not listed to keep the statement short."]
    return "\n".join(lines) + "\n"


def _column_line(values: Any, name: str, is_target: bool) -> str:
    import pandas as pd

    numeric = pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values)
    kind = ("target, " if is_target else "") + _column_kind(values)
    if numeric and values.notna().any():
        summary = f"min {values.min():.4g}, mean {values.mean():.4g}, max {values.max():.4g}"
    else:
        top = values.astype(str).value_counts().head(4)
        summary = ", ".join(f"{k} ({v})" for k, v in top.items()).replace("|", "/")
    return f"| {name} | {kind} | {int(values.isna().sum())} | {values.nunique()} | {summary} |"


def _column_kind(values: Any) -> str:
    import pandas as pd

    if pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        return "numeric"
    return "free text" if is_free_text(values) else "categorical"


__all__ = ["MIN_ROWS", "Prepared", "Request", "check_destination", "describe", "prepare_task"]
