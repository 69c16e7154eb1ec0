"""Baseline for a tabular competition: a scikit-learn pipeline fitted on train.csv, predicting test.csv.

Run: python solution.py --data <public dir> --out <output dir>
Reads train.csv, test.csv, the sample submission and verifyless_task.json (which names the id column,
the prediction columns, the train column that holds the labels and the kind of value each prediction
must be: a probability, a label or a number). Writes submission.csv with exactly the sample
submission's columns and one row per test id. Only the region between the EVOLVE-BLOCK markers may
change; it must define make_pipeline_for(kind, numeric, categorical) returning an unfitted estimator.
"""

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

# EVOLVE-BLOCK-START
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, QuantileTransformer, StandardScaler

STRENGTH = 1.0


def numeric_steps():
    """Missing values and scale of the numeric columns."""
    return make_pipeline(SimpleImputer(strategy="median"), StandardScaler())


def categorical_steps():
    """Encoding of the text (categorical) columns."""
    return make_pipeline(
        SimpleImputer(strategy="most_frequent"),
        OneHotEncoder(handle_unknown="infrequent_if_exist", max_categories=20),
    )


def make_model(kind):
    """The estimator; kind is "regression" or "classification"."""
    if kind == "regression":
        return Ridge(alpha=STRENGTH)
    return LogisticRegression(C=1.0 / STRENGTH, max_iter=2000)


def make_pipeline_for(kind, numeric, categorical):
    """The whole unfitted pipeline for the given numeric and categorical column names."""
    features = ColumnTransformer(
        [("num", numeric_steps(), numeric), ("cat", categorical_steps(), categorical)],
        sparse_threshold=0.0,
    )
    return make_pipeline(features, make_model(kind))
# EVOLVE-BLOCK-END


def feature_columns(train, test, spec):
    """Numeric and categorical feature names: columns of both files except the id, free text left out."""
    shared = [c for c in test.columns if c in train.columns and c != spec["id"]]
    numeric = [c for c in shared if pd.api.types.is_numeric_dtype(train[c])]
    categorical = [c for c in shared if c not in numeric and train[c].nunique() <= max(50, len(train) // 20)]
    return numeric, categorical


def positive_column(classes):
    """Index of the positive class of a 0/1 (or two-valued) target."""
    labels = [str(c) for c in classes]
    return labels.index("1") if "1" in labels else len(labels) - 1


def predict_column(train, test, target, spec, numeric, categorical):
    """One prediction column (or, for per-class submissions, a frame of class probabilities)."""
    kind = "regression" if spec["output"] == "value" else "classification"
    known = train[target].notna()
    model = make_pipeline_for(kind, numeric, categorical)
    model.fit(train.loc[known, numeric + categorical], train.loc[known, target])
    x = test[numeric + categorical]
    if spec["output"] == "value":
        predictions = model.predict(x)
        return np.maximum(predictions, 0) if train.loc[known, target].min() >= 0 else predictions
    if spec["output"] == "label":
        return model.predict(x)
    proba = model.predict_proba(x)
    if spec.get("label_column"):
        found = {str(c): proba[:, i] for i, c in enumerate(model.classes_)}
        zeros = np.zeros(len(test))
        return pd.DataFrame({c: found.get(c, zeros) for c in spec["columns"]})
    return proba[:, positive_column(model.classes_)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with train.csv, test.csv and the sample submission")
    parser.add_argument("--out", required=True, help="folder to write submission.csv to")
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = json.loads((data / "verifyless_task.json").read_text())
    ids = {spec["id"]: str}
    train = pd.read_csv(data / "train.csv", dtype=ids)
    test = pd.read_csv(data / "test.csv", dtype=ids)
    numeric, categorical = feature_columns(train, test, spec)
    submission = pd.DataFrame({spec["id"]: test[spec["id"]]})
    if spec.get("label_column"):
        probs = predict_column(train, test, spec["label_column"], spec, numeric, categorical)
        submission = pd.concat([submission, probs], axis=1)
    else:
        for column in spec["columns"]:
            submission[column] = predict_column(train, test, column, spec, numeric, categorical)
    submission.to_csv(out / "submission.csv", index=False)


if __name__ == "__main__":
    main()
