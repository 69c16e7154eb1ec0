"""Diabetes progression: fit on the public training rows, predict validation and test rows.

Run: python solution.py --data <public dir> --out <output dir>
Writes val_predictions.csv and test_predictions.csv (one prediction per line,
in input order). Only the region between the EVOLVE-BLOCK markers may change;
it must define fit(x, y) returning a predict(x) function.
"""

import argparse
from pathlib import Path

import numpy as np

# EVOLVE-BLOCK-START
from sklearn.compose import TransformedTargetRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MinMaxScaler,
    PolynomialFeatures,
    QuantileTransformer,
    RobustScaler,
    StandardScaler,
)
from sklearn.linear_model import Ridge

STRENGTH = 1.0


def make_features():
    """The feature step, applied to the raw (n, 10) inputs."""
    return FunctionTransformer()


def make_scaler():
    """The rescaling step, applied after the feature step."""
    return FunctionTransformer()


def make_model():
    """The regressor, fitted on the rescaled features."""
    return Ridge(alpha=STRENGTH)


def wrap_target(pipeline):
    """Optionally fit the pipeline on a transformed target."""
    return pipeline


def fit(x, y):
    """Train on (x, y); return a function mapping inputs to predictions."""
    pipeline = make_pipeline(make_features(), make_scaler(), make_model())
    model = wrap_target(pipeline)
    model.fit(x, y)
    return model.predict
# EVOLVE-BLOCK-END


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with train.csv, val_inputs.csv, test_inputs.csv")
    parser.add_argument("--out", required=True, help="folder to write predictions to")
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    train = np.loadtxt(data / "train.csv", delimiter=",", skiprows=1)
    x_train, y_train = train[:, :-1], train[:, -1]
    x_val = np.loadtxt(data / "val_inputs.csv", delimiter=",", skiprows=1)
    x_test = np.loadtxt(data / "test_inputs.csv", delimiter=",", skiprows=1)

    predict = fit(x_train, y_train)
    for name, x in (("val", x_val), ("test", x_test)):
        predictions = np.asarray(predict(x), dtype=float).reshape(-1)
        np.savetxt(out / f"{name}_predictions.csv", predictions, fmt="%.6f")


if __name__ == "__main__":
    main()
