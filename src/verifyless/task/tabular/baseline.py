"""Baseline for a tabular competition: a scikit-learn pipeline fitted on train.csv, predicting test.csv.

Run: python solution.py --data <public dir> --out <output dir>
Reads train.csv, test.csv, the sample submission and verifyless_task.json (which names the id column,
the prediction columns, the train column that holds the labels, the kind of value each prediction
must be: a probability, a label or a number, and the feature columns by kind: numeric, categorical
and free text). Writes submission.csv with exactly the sample submission's columns and one row per
test id. Only the region between the EVOLVE-BLOCK markers may change; it must define
make_pipeline_for(kind, numeric, categorical, text) returning an unfitted estimator.
"""

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd

# EVOLVE-BLOCK-START
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
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


def text_steps():
    """Features of one free-text column."""
    return TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), max_features=2000)


def make_model(kind):
    """The estimator; kind is "regression" or "classification"."""
    if kind == "regression":
        return Ridge(alpha=STRENGTH)
    return LogisticRegression(C=1.0 / STRENGTH, max_iter=2000)


def make_pipeline_for(kind, numeric, categorical, text):
    """The whole unfitted pipeline for the given numeric, categorical and free-text column names."""
    parts = [("num", numeric_steps(), numeric), ("cat", categorical_steps(), categorical)]
    parts += [(f"text{i}", text_steps(), column) for i, column in enumerate(text)]
    features = ColumnTransformer(parts, sparse_threshold=0.0)
    return make_pipeline(features, make_model(kind))
# EVOLVE-BLOCK-END


def feature_columns(spec):
    """Numeric, categorical and free-text feature names, as verifyless_task.json lists them."""
    features = spec["features"]
    return features["numeric"], features["categorical"], features["text"]


def inputs(frame, numeric, categorical, text):
    """The feature columns of a frame; missing text is empty text."""
    x = frame[numeric + categorical + text].copy()
    x[text] = x[text].fillna("").astype(str)
    return x


def positive_column(classes):
    """Index of the positive class of a 0/1 (or two-valued) target."""
    labels = [str(c) for c in classes]
    return labels.index("1") if "1" in labels else len(labels) - 1


def predict_column(train, test, target, spec, features):
    """One prediction column (or, for per-class submissions, a frame of class probabilities)."""
    kind = "regression" if spec["output"] == "value" else "classification"
    known = train[target].notna()
    model = make_pipeline_for(kind, *features)
    model.fit(inputs(train.loc[known], *features), train.loc[known, target])
    x = inputs(test, *features)
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
    features = feature_columns(spec)
    submission = pd.DataFrame({spec["id"]: test[spec["id"]]})
    if spec.get("label_column"):
        probs = predict_column(train, test, spec["label_column"], spec, features)
        submission = pd.concat([submission, probs], axis=1)
    else:
        for column in spec["columns"]:
            submission[column] = predict_column(train, test, column, spec, features)
    submission.to_csv(out / "submission.csv", index=False)


if __name__ == "__main__":
    main()
