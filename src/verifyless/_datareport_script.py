"""The data report's sandbox side: summarise a task's public CSV files, write one JSON report.

Usage: ``python _verifyless_datareport.py SPEC_JSON OUT_JSON``

Trusted code, copied into a verification workspace by ``verifyless.datareport`` and run in the
task's sandbox with the candidate's restrictions (only the workspace, hidden data masked). SPEC_JSON
holds ``{"public": folder, "files": [names], "target": {"column", "kind", "files": [names]} | null,
"must_not_see": [paths]}``. The report (see ``verifyless.datareport.DataReport``) lists per file the
rows, columns, column types and missing counts, the duplicate rows; for a declared target its
distribution or class balance, the features' association with it (top 10) and the shift of every
other file's numeric columns from the training file; ``unavailable`` says what could not be computed.
``visible`` lists the ``must_not_see`` paths that could be seen from inside (empty when blind).
Standard library and numpy only; floats rounded to 6 significant digits, keys sorted, so the same
files always give the same bytes.
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from typing import Any

import numpy as np

MISSING = frozenset({"", "na", "nan", "null", "none", "?"})
TOP = 10
MAX_CATEGORIES = 20


def _round(x: float) -> float | None:
    return float(f"{x:.6g}") if math.isfinite(x) else None


def _is_missing(value: str) -> bool:
    return value.strip().lower() in MISSING


def _number(value: str) -> float | None:
    try:
        return float(value)
    except ValueError:
        return None


def read_csv(path: str) -> tuple[list[str], list[list[str]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [row for row in csv.reader(fh) if row]
    if not rows:
        raise ValueError("the file is empty")
    width = len(rows[0])
    return rows[0], [(row + [""] * width)[:width] for row in rows[1:]]


def numeric_column(values: list[str]) -> np.ndarray | None:
    """The column as floats (NaN where missing), or None when a present value is not a number."""
    out = np.full(len(values), np.nan)
    for i, value in enumerate(values):
        if _is_missing(value):
            continue
        number = _number(value)
        if number is None:
            return None
        out[i] = number
    return out


def column_summary(name: str, values: list[str]) -> dict:
    present = [v for v in values if not _is_missing(v)]
    summary: dict = {"name": name, "missing": len(values) - len(present), "distinct": len(set(present))}
    numbers = numeric_column(values)
    if numbers is not None and present:
        finite = numbers[~np.isnan(numbers)]
        summary.update(
            type="numeric",
            mean=_round(float(finite.mean())),
            std=_round(float(finite.std())),
            min=_round(float(finite.min())),
            max=_round(float(finite.max())),
        )
    else:
        categorical = len(set(present)) <= max(MAX_CATEGORIES, len(present) // 20)
        summary.update(type="categorical" if categorical else "text", mean=None, std=None, min=None, max=None)
    return summary


def file_summary(name: str, header: list[str], rows: list[list[str]]) -> dict:
    columns = [column_summary(col, [row[j] for row in rows]) for j, col in enumerate(header)]
    duplicates = len(rows) - len({tuple(row) for row in rows})
    return {"name": name, "rows": len(rows), "columns": columns, "duplicate_rows": duplicates}


def target_summary(name: str, column: str, kind: str, values: list[str]) -> dict:
    present = [v for v in values if not _is_missing(v)]
    summary: dict = {"file": name, "column": column, "kind": kind, "missing": len(values) - len(present)}
    if kind == "classification":
        labels = sorted(set(present), key=_label_order)
        summary["classes"] = [[label, present.count(label)] for label in labels]
        summary["distribution"] = {}
        return summary
    numbers = numeric_column(present)
    if numbers is None or not present:
        raise ValueError(f"the regression target {column!r} is not numeric")
    q = np.percentile(numbers, [0, 25, 50, 75, 100])
    std = float(numbers.std())
    skew = float(np.mean(((numbers - numbers.mean()) / std) ** 3)) if std > 0 else 0.0
    keys = ("min", "p25", "median", "p75", "max")
    summary["distribution"] = {
        **{k: _round(float(v)) for k, v in zip(keys, q, strict=True)},
        "mean": _round(float(numbers.mean())),
        "std": _round(std),
        "skew": _round(skew),
    }
    summary["classes"] = []
    return summary


def _label_order(label: str) -> tuple[int, float, str]:
    number = _number(label)
    return (0, number, label) if number is not None and math.isfinite(number) else (1, 0.0, label)


def associations(features: dict[str, np.ndarray], target: list[str], kind: str) -> list[dict]:
    """|Pearson r| (regression) or the one-way ANOVA F statistic (classification) per numeric feature."""
    scores: list[dict[str, Any]] = []
    for name, x in features.items():
        score = _anova_f(x, target) if kind == "classification" else _abs_pearson(x, target)
        if score is not None:
            measure = "anova_f" if kind == "classification" else "abs_pearson_r"
            scores.append({"feature": name, "measure": measure, "score": _round(score)})
    scores.sort(key=lambda a: (-(a["score"] or 0.0), a["feature"]))
    return scores[:TOP]


def _abs_pearson(x: np.ndarray, target: list[str]) -> float | None:
    y = numeric_column(target)
    if y is None:
        return None
    keep = ~(np.isnan(x) | np.isnan(y))
    a, b = x[keep], y[keep]
    if len(a) < 3 or a.std() == 0 or b.std() == 0:
        return None
    return abs(float(np.corrcoef(a, b)[0, 1]))


def _anova_f(x: np.ndarray, target: list[str]) -> float | None:
    groups: dict[str, list[float]] = {}
    for value, label in zip(x, target, strict=True):
        if not (math.isnan(value) or _is_missing(label)):
            groups.setdefault(label, []).append(float(value))
    arrays = [np.asarray(groups[k]) for k in sorted(groups)]
    n, k = sum(len(a) for a in arrays), len(arrays)
    if k < 2 or n <= k:
        return None
    grand = np.concatenate(arrays).mean()
    between = sum(len(a) * (a.mean() - grand) ** 2 for a in arrays) / (k - 1)
    within = sum(((a - a.mean()) ** 2).sum() for a in arrays) / (n - k)
    if within == 0:
        return None
    return float(between / within)


def shifts(train_name: str, train: dict[str, np.ndarray], others: dict[str, dict[str, np.ndarray]]) -> list[dict]:
    """Standardised mean difference of each shared numeric column, other file minus the training file."""
    out: list[dict[str, Any]] = []
    for name in sorted(others):
        for column in sorted(set(train) & set(others[name])):
            a, b = train[column], others[name][column]
            a, b = a[~np.isnan(a)], b[~np.isnan(b)]
            if len(a) < 2 or len(b) < 2:
                continue
            pooled = math.sqrt((a.var() + b.var()) / 2)
            smd = 0.0 if pooled == 0 else float((b.mean() - a.mean()) / pooled)
            out.append({"file": name, "reference": train_name, "column": column, "smd": _round(smd)})
    out.sort(key=lambda s: (s["file"], -abs(s["smd"] or 0.0), s["column"]))
    return out


def report(spec: dict) -> dict:
    unavailable: list[str] = []
    tables: dict[str, tuple[list[str], list[list[str]]]] = {}
    for name in spec["files"]:
        path = os.path.join(spec["public"], name)
        if not name.lower().endswith(".csv") or not os.path.isfile(path):
            unavailable.append(f"{name}: not a CSV file; no shape, types or missing values")
            continue
        try:
            tables[name] = read_csv(path)
        except (OSError, UnicodeDecodeError, ValueError, csv.Error) as exc:
            unavailable.append(f"{name}: unreadable as CSV ({type(exc).__name__}: {exc})")
    files = [file_summary(name, *tables[name]) for name in sorted(tables)]
    target, assoc, shift = _target_parts(spec.get("target"), tables, unavailable)
    visible = [p for p in spec.get("must_not_see", []) if os.path.exists(p)]
    return {
        "files": files,
        "target": target,
        "associations": assoc,
        "shifts": shift,
        "unavailable": unavailable,
        "visible": visible,
    }


def _target_parts(declared: dict | None, tables: dict, unavailable: list[str]) -> tuple[dict | None, list, list]:
    if declared is None:
        unavailable.append(
            "target: the task declares no data.target, so the target's distribution, class balance, "
            "feature associations and train-vs-validation shift were not computed"
        )
        return None, [], []
    column, kind = declared["column"], declared["kind"]
    name = next((f for f in declared["files"] if f in tables), None)
    if name is None or column not in tables[name][0]:
        unavailable.append(f"target: column {column!r} not found in the declared target files {declared['files']}")
        return None, [], []
    header, rows = tables[name]
    j = header.index(column)
    values = [row[j] for row in rows]
    try:
        target = target_summary(name, column, kind, values)
    except ValueError as exc:
        unavailable.append(f"target: {exc}")
        return None, [], []
    train = _numeric_features(header, rows, skip=column)
    others = {n: _numeric_features(tables[n][0], tables[n][1], skip=column) for n in tables if n != name}
    if not others:
        unavailable.append("shift: no other public CSV file shares columns with the training file")
    return target, associations(train, values, kind), shifts(name, train, others)


def _numeric_features(header: list[str], rows: list[list[str]], skip: str) -> dict[str, np.ndarray]:
    out = {}
    for j, col in enumerate(header):
        if col != skip:
            numbers = numeric_column([row[j] for row in rows])
            if numbers is not None and not np.all(np.isnan(numbers)):
                out[col] = numbers
    return out


def main(argv: list[str]) -> int:
    spec_path, out_path = argv[1:3]
    with open(spec_path, encoding="utf-8") as fh:
        spec = json.load(fh)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(report(spec), fh, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
