"""Affairs from a marriage survey: a gradient-boosting pipeline (CPU, one thread).

Run: python pipeline.py --data <public dir> --out <output dir>
Writes val_probabilities.csv and test_probabilities.csv: the predicted
probability of class 1 for every input row, in order. Only the region between
the EVOLVE-BLOCK markers may change; it must define fit(x, y) returning a
function that maps an input array to class-1 probabilities.
"""

import argparse
from pathlib import Path

import numpy as np

# EVOLVE-BLOCK-START
import numpy as np
from sklearn.ensemble import GradientBoostingClassifier, HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

LEARNING_RATE = 0.1
ITERATIONS = 200
LEAVES = 63
MIN_LEAF = 5
L2 = 0.0
EARLY_STOP = False
OCCUPATION = [6, 7]  # columns of the wife's and the husband's occupation codes


def add_features(x):
    """Columns built from the raw answers; new columns are appended after the eight raw ones."""
    return x


def category_rates(codes, labels, weight=20.0):
    """Smoothed share of positive labels per code; key None holds the overall share."""
    prior = float(labels.mean())
    rates = {None: prior}
    for v in np.unique(codes):
        hit = codes == v
        rates[v] = (labels[hit].sum() + weight * prior) / (hit.sum() + weight)
    return rates


def make_encoder(x_train, y_train):
    """Returns (transform(m, training), categorical mask or None) for the occupation columns."""
    return (lambda m, training: m), None


def make_model(categorical):
    """The classifier; `categorical` marks columns to split on as categories (or is None)."""
    return HistGradientBoostingClassifier(
        learning_rate=LEARNING_RATE, max_iter=ITERATIONS, max_leaf_nodes=LEAVES, min_samples_leaf=MIN_LEAF,
        l2_regularization=L2, early_stopping=EARLY_STOP, validation_fraction=0.15, n_iter_no_change=20,
        categorical_features=categorical, random_state=0)


def fit(x, y):
    """Train on (x, y); return a function mapping inputs to class-1 probabilities."""
    wide = add_features(x)
    transform, categorical = make_encoder(wide, y)
    model = make_model(categorical)
    model.fit(transform(wide, True), y)
    return lambda x_new: model.predict_proba(transform(add_features(x_new), False))[:, 1]
# EVOLVE-BLOCK-END


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with train.csv, val_inputs.csv, test_inputs.csv")
    parser.add_argument("--out", required=True, help="folder to write probabilities to")
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.random.seed(0)

    train = np.loadtxt(data / "train.csv", delimiter=",", skiprows=1)
    x_train, y_train = train[:, :-1], train[:, -1].astype(int)
    predict_proba = fit(x_train, y_train)
    for name in ("val", "test"):
        x = np.loadtxt(data / f"{name}_inputs.csv", delimiter=",", skiprows=1, ndmin=2)
        probabilities = np.clip(np.asarray(predict_proba(x), dtype=float).reshape(-1), 0.0, 1.0)
        np.savetxt(out / f"{name}_probabilities.csv", probabilities, fmt="%.6f")


if __name__ == "__main__":
    main()
