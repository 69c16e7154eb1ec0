"""The metric registry and submission grading of tabular tasks (trusted side; scikit-learn's metrics).

``metric_def(name)`` resolves a registry name (``auc``, ``logloss``, ``accuracy``, ``f1``, ``qwk``,
``rmse``, ``rmsle``, ``mae``, ``r2``) or an MLE-bench grader name (``auc-roc``,
``multi-class-log-loss``, ``mean-column-wise-rmsle``, ``quadratic-weighted-kappa``, ...) to a
``MetricDef``: direction, bounds, the kind of value a submission holds (probability, label or
number) and the best possible value. Besides those nine the registry holds the other metrics
MLE-bench's graders use most (``gini``, ``ap``, ``mcc``, ``balanced_accuracy``, ``micro_f1``,
``mse``, ``medae``, ``mape``, ``smape``, ``pearson``, ``spearman``). ``grade(submission, answers, grading)`` checks a submission
against the expected ids and columns, raising ``InvalidSubmission`` with one line that says what is
wrong, then aligns it with the answers by id and computes the metric. Several prediction columns
are scored column by column and averaged (MLE-bench's column-wise AUC and RMSLE), except log loss,
which scores the columns as one class-probability matrix. Answers may hold the prediction columns
themselves or, for per-class submissions, one label column (``Grading.label_column``) whose values
name the columns. A competition's own grader (``Grading.grader``, MLE-bench's ``grade(submission,
answers) -> float``) replaces the registry metric after the same submission checks (``own_grade``).

Limits: F1 is the positive class's for 0/1 labels and macro-averaged otherwise; quadratic weighted
kappa needs integer labels; several class-probability columns scored by log loss must sum to one
in every row within 1e-6 (MLE-bench's graders reject them otherwise); a correlation of constant
predictions is 0 (no information) rather than undefined; SMAPE counts a row whose truth and
prediction are both 0 as no error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from verifyless.errors import InvalidSubmission, TaskError
from verifyless.task.pyfile import load_function

if TYPE_CHECKING:  # pandas is imported where it is used: the loader stays light
    import pandas as pd

Output = Literal["probability", "label", "value"]


@dataclass(frozen=True)
class MetricDef:
    """One registry metric: how it is oriented and bounded, and what a submission must hold."""

    name: str
    direction: Literal["minimize", "maximize"]
    output: Output
    best: float | None  # None: unknown (an own grader's)
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
        MetricDef("gini", "maximize", "probability", 1.0, -1.0, 1.0, "normalised Gini coefficient (2 AUC - 1)"),
        MetricDef("ap", "maximize", "probability", 1.0, 0.0, 1.0, "average precision (area under precision-recall)"),
        MetricDef("mcc", "maximize", "label", 1.0, -1.0, 1.0, "Matthews correlation coefficient"),
        MetricDef("balanced_accuracy", "maximize", "label", 1.0, 0.0, 1.0, "mean recall over the classes"),
        MetricDef("micro_f1", "maximize", "label", 1.0, 0.0, 1.0, "micro-averaged F1 score"),
        MetricDef("mse", "minimize", "value", 0.0, 0.0, None, "mean squared error"),
        MetricDef("medae", "minimize", "value", 0.0, 0.0, None, "median absolute error"),
        MetricDef("mape", "minimize", "value", 0.0, 0.0, None, "mean absolute percentage error (a fraction)"),
        MetricDef("smape", "minimize", "value", 0.0, 0.0, 200.0, "symmetric mean absolute percentage error (%)"),
        MetricDef("pearson", "maximize", "value", 1.0, -1.0, 1.0, "Pearson correlation of predictions and truth"),
        MetricDef("spearman", "maximize", "value", 1.0, -1.0, 1.0, "Spearman rank correlation"),
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
    "normalized-gini": "gini",
    "normalised-gini": "gini",
    "gini-coefficient": "gini",
    "normalized-gini-coefficient": "gini",
    "average-precision": "ap",
    "average-precision-score": "ap",
    "matthews-correlation": "mcc",
    "matthews-correlation-coefficient": "mcc",
    "balanced-accuracy": "balanced_accuracy",
    "micro-f1": "micro_f1",
    "f1-micro": "micro_f1",
    "mean-squared-error": "mse",
    "median-absolute-error": "medae",
    "mean-absolute-percentage-error": "mape",
    "symmetric-mean-absolute-percentage-error": "smape",
    "pearson-correlation": "pearson",
    "pearson-correlation-coefficient": "pearson",
    "mean-column-wise-pearson": "pearson",
    "spearman-correlation": "spearman",
    "spearman-rank-correlation": "spearman",
    "mean-column-wise-spearman": "spearman",
}
PROBABILITY_SUM_TOLERANCE = 1e-6  # MLE-bench's graders: np.isclose(row sums, 1, atol=1e-6)


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
    submissions, the answers' label column whose values are the prediction columns' names.

    ``grader`` (``"/path/grade.py:grade"``) is a competition's own grader, ``own`` its metric; the
    metric is then not looked up in the registry.
    """

    metric: str
    id_column: str
    columns: tuple[str, ...]
    label_column: str | None = None
    grader: str | None = None
    own: MetricDef | None = None

    @property
    def definition(self) -> MetricDef:
        return self.own or metric_def(self.metric)


def grade(submission: pd.DataFrame, answers: pd.DataFrame, grading: Grading) -> float:
    """The metric of ``submission`` on ``answers`` (ids aligned); ``InvalidSubmission`` when it is malformed."""
    spec = grading.definition
    ids = answers[grading.id_column].astype(str)
    check_submission(submission, list(ids), grading, spec)
    if grading.grader is not None:
        return own_grade(grading.grader, submission, answers)
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
    if spec.name == "logloss" and len(grading.columns) > 1:
        _check_rows_sum_to_one(submission, grading.columns)


def _check_rows_sum_to_one(submission: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """Class probabilities of one row add up to 1 (within ``PROBABILITY_SUM_TOLERANCE``), as MLE-bench checks."""
    import numpy as np

    totals = submission[list(columns)].astype(float).sum(axis=1).to_numpy()
    off = np.flatnonzero(~np.isclose(totals, 1.0, atol=PROBABILITY_SUM_TOLERANCE))
    if len(off):
        raise InvalidSubmission(
            f"submission.csv has {len(off)} row(s) whose class probabilities do not sum to 1 (e.g. row {off[0] + 1} "
            f"sums to {totals[off[0]]:g}); divide each row by its sum"
        )


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


def own_grade(grader: str, submission: pd.DataFrame, answers: pd.DataFrame) -> float:
    """A competition's own ``grade(submission, answers) -> float`` (``grader`` is ``"FILE:FUNCTION"``).

    An exception named ``InvalidSubmissionError`` (MLE-bench's) or ``InvalidSubmission`` is the candidate's
    broken submission; a result that is not a number is the grader's fault (``TaskError``). Any other exception
    propagates (the verifier makes it the candidate's invalid output).
    """
    from pathlib import Path

    path, _, function = grader.rpartition(":")
    fn = load_function(Path(path), function)
    try:
        value = fn(submission.reset_index(drop=True).copy(), answers.reset_index(drop=True).copy())
    except Exception as exc:
        if type(exc).__name__ in ("InvalidSubmissionError", "InvalidSubmission"):
            raise InvalidSubmission(str(exc)) from None
        raise
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise TaskError(f"{Path(path).name}: {function}() returned {value!r}, not a number; fix the grader")
    return float(value)


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
    if metric_def(name).output == "label":
        return _label_metric(name, y, p, metrics)
    y, p = y.astype(float), p.astype(float)
    if name in ("auc", "gini"):
        auc = float(metrics.roc_auc_score(y, p))
        return auc if name == "auc" else 2 * auc - 1
    if name in ("pearson", "spearman", "smape"):
        return _statistic(name, y, p)
    functions = {
        "ap": metrics.average_precision_score,
        "rmse": metrics.root_mean_squared_error,
        "rmsle": metrics.root_mean_squared_log_error,
        "mae": metrics.mean_absolute_error,
        "r2": metrics.r2_score,
        "mse": metrics.mean_squared_error,
        "medae": metrics.median_absolute_error,
        "mape": metrics.mean_absolute_percentage_error,
    }
    return float(functions[name](y, p))


def _statistic(name: str, y: Any, p: Any) -> float:
    """Correlations (0 for constant predictions or truth: no information) and SMAPE in percent."""
    import numpy as np
    from scipy import stats

    if name == "smape":
        scale = np.abs(y) + np.abs(p)
        return float(100 * np.mean(np.where(scale == 0, 0.0, 2 * np.abs(p - y) / np.where(scale == 0, 1.0, scale))))
    if np.ptp(y) == 0 or np.ptp(p) == 0:
        return 0.0
    found = stats.pearsonr(y, p) if name == "pearson" else stats.spearmanr(y, p)
    return float(found.statistic)


def _label_metric(name: str, y: Any, p: Any, metrics: Any) -> float:
    y, p = _same_labels(y), _same_labels(p)
    if name == "accuracy":
        return float(metrics.accuracy_score(y, p))
    if name == "balanced_accuracy":
        return float(metrics.balanced_accuracy_score(y, p))
    if name == "mcc":
        return float(metrics.matthews_corrcoef(y, p))
    if name == "micro_f1":
        return float(metrics.f1_score(y, p, average="micro"))
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


__all__ = [
    "ALIASES",
    "METRICS",
    "Grading",
    "MetricDef",
    "check_submission",
    "grade",
    "known_metrics",
    "metric_def",
    "own_grade",
]
