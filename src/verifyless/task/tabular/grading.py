"""The metric registry and submission grading of tabular tasks (trusted side; scikit-learn's metrics).

``metric_def(name)`` resolves a registry name (``auc``, ``logloss``, ``accuracy``, ``f1``, ``qwk``,
``rmse``, ``rmsle``, ``mae``, ``r2``) or an MLE-bench grader name (``auc-roc``,
``multi-class-log-loss``, ``mean-column-wise-rmsle``, ``quadratic-weighted-kappa``, ...) to a
``MetricDef``: direction, bounds, the kind of value a submission holds (probability, label or
number) and the best possible value. ``grade(submission, answers, grading)`` checks a submission
against the expected ids and columns, raising ``InvalidSubmission`` with one line that says what is
wrong, then aligns it with the answers by id and computes the metric. Several prediction columns
are scored column by column and averaged (MLE-bench's column-wise AUC and RMSLE), except log loss,
which scores the columns as one class-probability matrix. Answers may hold the prediction columns
themselves or, for per-class submissions, one label column (``Grading.label_column``) whose values
name the columns.

Limits: F1 is the positive class's for 0/1 labels and macro-averaged otherwise; quadratic weighted
kappa needs integer labels; log-loss rows are renormalised to sum to one (scikit-learn's rule).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from verifyless.errors import InvalidSubmission

if TYPE_CHECKING:  # pandas is imported where it is used: the loader stays light
    import pandas as pd

Output = Literal["probability", "label", "value"]


@dataclass(frozen=True)
class MetricDef:
    """One registry metric: how it is oriented and bounded, and what a submission must hold."""

    name: str
    direction: Literal["minimize", "maximize"]
    output: Output
    best: float
    lower: float | None
    upper: float | None
    description: str


METRICS: dict[str, MetricDef] = {
    m.name: m
    for m in (
        MetricDef("auc", "maximize", "probability", 1.0, 0.0, 1.0, "area under the ROC curve"),
        MetricDef("logloss", "minimize", "probability", 0.0, 0.0, None, "log loss of the predicted probabilities"),
        MetricDef("accuracy", "maximize", "label", 1.0, 0.0, 1.0, "share of correctly predicted labels"),
        MetricDef("f1", "maximize", "label", 1.0, 0.0, 1.0, "F1 score (positive class; macro for several)"),
        MetricDef("qwk", "maximize", "label", 1.0, -1.0, 1.0, "quadratic weighted kappa of integer labels"),
        MetricDef("rmse", "minimize", "value", 0.0, 0.0, None, "root mean squared error"),
        MetricDef("rmsle", "minimize", "value", 0.0, 0.0, None, "root mean squared logarithmic error"),
        MetricDef("mae", "minimize", "value", 0.0, 0.0, None, "mean absolute error"),
        MetricDef("r2", "maximize", "value", 1.0, None, 1.0, "coefficient of determination"),
    )
}

ALIASES = {
    "roc-auc": "auc",
    "auc-roc": "auc",
    "column-wise-roc-auc": "auc",
    "mean-column-wise-roc-auc": "auc",
    "log-loss": "logloss",
    "multi-class-log-loss": "logloss",
    "binary-log-loss": "logloss",
    "cross-entropy": "logloss",
    "multi-class-classification-accuracy": "accuracy",
    "classification-accuracy": "accuracy",
    "f1-score": "f1",
    "macro-f1": "f1",
    "quadratic-weighted-kappa": "qwk",
    "cohen-kappa-quadratic": "qwk",
    "root-mean-squared-error": "rmse",
    "mean-column-wise-rmse": "rmse",
    "root-mean-squared-log-error": "rmsle",
    "root-mean-squared-logarithmic-error": "rmsle",
    "mean-column-wise-rmsle": "rmsle",
    "mean-absolute-error": "mae",
    "mean-column-wise-mae": "mae",
    "r-squared": "r2",
}


def metric_def(name: str) -> MetricDef:
    """The registry metric called ``name`` (an alias or MLE-bench grader name too); KeyError otherwise."""
    key = "-".join(name.strip().lower().replace("_", " ").split())
    return METRICS[ALIASES.get(key, key)]


def known_metrics() -> list[str]:
    """Registry names, for messages."""
    return sorted(METRICS)


@dataclass(frozen=True)
class Grading:
    """How a submission is read: the id column, its prediction columns and, for per-class
    submissions, the answers' label column whose values are the prediction columns' names."""

    metric: str
    id_column: str
    columns: tuple[str, ...]
    label_column: str | None = None


def grade(submission: pd.DataFrame, answers: pd.DataFrame, grading: Grading) -> float:
    """The metric of ``submission`` on ``answers`` (ids aligned); ``InvalidSubmission`` when it is malformed."""
    spec = metric_def(grading.metric)
    ids = answers[grading.id_column].astype(str)
    check_submission(submission, list(ids), grading, spec)
    aligned = submission.assign(**{grading.id_column: submission[grading.id_column].astype(str)})
    aligned = aligned.set_index(grading.id_column).loc[list(ids)]
    truth = _truth(answers, grading)
    pred = aligned[list(grading.columns)].to_numpy()
    return _compute(spec.name, truth, pred)


def check_submission(submission: pd.DataFrame, ids: list[str], grading: Grading, spec: MetricDef) -> None:
    """Raise ``InvalidSubmission`` (one line) unless the submission has exactly the expected columns and ids
    and values of the kind the metric reads."""
    _check_columns(list(submission.columns), grading)
    got = submission[grading.id_column].astype(str)
    if len(submission) != len(ids):
        raise InvalidSubmission(
            f"submission.csv has {len(submission)} rows; the sample submission has {len(ids)} (one per test id)"
        )
    repeated = got[got.duplicated()]
    if len(repeated):
        raise InvalidSubmission(f"submission.csv repeats {len(repeated)} id(s), e.g. {repeated.iloc[0]!r}")
    missing, extra = sorted(set(ids) - set(got)), sorted(set(got) - set(ids))
    if missing or extra:
        raise InvalidSubmission(
            f"submission.csv's ids differ from the sample submission's: {len(missing)} missing"
            + (f" (e.g. {missing[0]!r})" if missing else "")
            + f", {len(extra)} unexpected"
            + (f" (e.g. {extra[0]!r})" if extra else "")
        )
    if spec.output != "label":
        for column in grading.columns:
            _check_numbers(submission[column], column, spec)


def _check_columns(columns: list[str], grading: Grading) -> None:
    expected = [grading.id_column, *grading.columns]
    lacking = [c for c in expected if c not in columns]
    if lacking:
        raise InvalidSubmission(
            f"submission.csv lacks the sample submission's column(s) {lacking} (it has {columns[:8]}); "
            f"write exactly {expected[:8]}"
        )
    surplus = [c for c in columns if c not in expected]
    if surplus:
        raise InvalidSubmission(
            f"submission.csv has column(s) {surplus[:8]} that the sample submission has not; write exactly {expected[:8]}"
        )


def _check_numbers(values: pd.Series, column: str, spec: MetricDef) -> None:
    import pandas as pd

    numbers = pd.to_numeric(values, errors="coerce")
    bad = values[numbers.isna() | ~numbers.map(lambda v: math.isfinite(v) if v == v else False)]
    if len(bad):
        raise InvalidSubmission(
            f"submission.csv column {column!r} must hold finite numbers; {len(bad)} row(s) do not (e.g. {bad.iloc[0]!r})"
        )
    if spec.output == "probability" and (numbers.min() < 0 or numbers.max() > 1):
        raise InvalidSubmission(
            f"submission.csv column {column!r} holds probabilities, so values must lie in [0, 1] "
            f"(found {numbers.min():g} .. {numbers.max():g})"
        )
    if spec.name == "rmsle" and numbers.min() < 0:
        raise InvalidSubmission(
            f"rmsle needs predictions >= 0, but column {column!r} has {numbers.min():g}; clip predictions at 0"
        )


def _truth(answers: pd.DataFrame, grading: Grading) -> Any:
    """The answers as a matrix with one column per prediction column (one-hot from a label column)."""
    import numpy as np

    if all(c in answers.columns for c in grading.columns):
        return answers[list(grading.columns)].to_numpy()
    if grading.label_column and grading.label_column in answers.columns:
        labels = answers[grading.label_column].astype(str).to_numpy()
        return (labels[:, None] == np.array(grading.columns)[None, :]).astype(int)
    raise KeyError(f"the answers hold neither the columns {list(grading.columns)} nor a label column")


def _compute(name: str, truth: Any, pred: Any) -> float:
    import numpy as np
    from sklearn import metrics

    if name == "logloss":
        if truth.shape[1] == 1:
            return float(metrics.log_loss(truth[:, 0].astype(float), pred[:, 0].astype(float), labels=[0.0, 1.0]))
        probs = np.clip(pred.astype(float), 1e-15, 1.0)
        return float(
            metrics.log_loss(
                truth.argmax(axis=1), probs / probs.sum(axis=1, keepdims=True), labels=list(range(truth.shape[1]))
            )
        )
    scores = [_column(name, truth[:, j], pred[:, j], metrics) for j in range(truth.shape[1])]
    return float(np.mean(scores))


def _column(name: str, y: Any, p: Any, metrics: Any) -> float:
    if name == "auc":
        return float(metrics.roc_auc_score(y.astype(float), p.astype(float)))
    if name in ("accuracy", "f1", "qwk"):
        return _label_metric(name, y, p, metrics)
    y, p = y.astype(float), p.astype(float)
    if name == "rmse":
        return float(metrics.root_mean_squared_error(y, p))
    if name == "rmsle":
        return float(metrics.root_mean_squared_log_error(y, p))
    if name == "mae":
        return float(metrics.mean_absolute_error(y, p))
    return float(metrics.r2_score(y, p))


def _label_metric(name: str, y: Any, p: Any, metrics: Any) -> float:
    y, p = _same_labels(y), _same_labels(p)
    if name == "accuracy":
        return float(metrics.accuracy_score(y, p))
    if name == "qwk":
        try:
            return float(
                metrics.cohen_kappa_score([int(v) for v in y], [int(float(v)) for v in p], weights="quadratic")
            )
        except ValueError:
            raise InvalidSubmission("qwk needs integer labels; the submission's labels are not integers") from None
    binary = set(y) <= {"0", "1"}
    return float(metrics.f1_score(y, p, average="binary" if binary else "macro", pos_label="1", zero_division=0))


def _same_labels(values: Any) -> list[str]:
    """Labels as text, numbers written canonically (1, 1.0 and "1" are one label)."""
    out = []
    for v in values:
        try:
            number = float(v)
        except (TypeError, ValueError):
            out.append(str(v))
            continue
        out.append(str(int(number)) if math.isfinite(number) and number == int(number) else str(v))
    return out


__all__ = ["ALIASES", "METRICS", "Grading", "MetricDef", "check_submission", "grade", "known_metrics", "metric_def"]
