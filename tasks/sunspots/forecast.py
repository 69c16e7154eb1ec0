"""Sunspot forecasting: ten-year forecasts from several rolling origins.

Run: python forecast.py --data <public dir> --out <output dir>
Writes val_forecasts.csv and test_forecasts.csv with columns origin,year,value.
The fixed part below calls forecast(history, horizon) once per origin and
passes only the values observed before that origin. Only the region between
the EVOLVE-BLOCK markers may change; it must define forecast(history, horizon).
"""

import argparse
import os
from pathlib import Path

import numpy as np

HORIZON = 10
VAL_ORIGINS = range(1899, 1950, 5)
TEST_ORIGINS = range(1959, 2000, 10)

# EVOLVE-BLOCK-START
from sklearn.linear_model import LinearRegression

LAGS = 3


def to_model_scale(values):
    """Map raw sunspot numbers to the scale the model is fitted on."""
    return values


def from_model_scale(values):
    """Map model-scale forecasts back to sunspot numbers."""
    return values


def lag_matrix(series, lags, ahead):
    """Inputs: windows of `lags` consecutive values; targets: the value `ahead` years after each window."""
    rows = len(series) - lags - ahead + 1
    x = np.stack([series[i : i + lags] for i in range(rows)])
    y = series[lags + ahead - 1 : lags + ahead - 1 + rows]
    return x, y


def make_regressor():
    """A fresh, unfitted regressor with fit(x, y) and predict(x)."""
    return LinearRegression()


def forecast(history, horizon):
    """Forecast the `horizon` yearly values that follow `history` (oldest first)."""
    series = to_model_scale(np.asarray(history, dtype=float)[:])
    x, y = lag_matrix(series, LAGS, 1)
    model = make_regressor().fit(x, y)
    window = list(series[-LAGS:])
    path = []
    for _ in range(horizon):
        step = float(model.predict(np.asarray(window[-LAGS:])[None, :])[0])
        path.append(step)
        window.append(step)
    return from_model_scale(np.asarray(path))
# EVOLVE-BLOCK-END


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", required=True, help="folder with history.csv and test_context.csv")
    parser.add_argument("--out", required=True, help="folder to write forecasts to")
    args = parser.parse_args()
    data, out = Path(args.data), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    observed = np.concatenate([
        np.loadtxt(data / "history.csv", delimiter=",", skiprows=1, ndmin=2),
        np.loadtxt(data / "test_context.csv", delimiter=",", skiprows=1, ndmin=2),
    ])
    years, values = observed[:, 0].astype(int), observed[:, 1]
    # A cheaper fidelity level (task.yaml `fidelity:`) forecasts only the first k origins; unset: every origin.
    first = os.environ.get("VERIFYLESS_ORIGINS")
    for name, origins in (("val", VAL_ORIGINS), ("test", TEST_ORIGINS)):
        if first:
            origins = origins[: int(first)]
        rows = []
        for origin in origins:
            path = np.asarray(forecast(values[years < origin].copy(), HORIZON), dtype=float).reshape(-1)
            if path.shape != (HORIZON,):
                raise ValueError(f"forecast returned {path.size} values for origin {origin}; expected {HORIZON}")
            rows.extend((origin, origin + step, path[step]) for step in range(HORIZON))
        np.savetxt(out / f"{name}_forecasts.csv", np.array(rows), delimiter=",",
                   header="origin,year,value", comments="", fmt=["%d", "%d", "%.6f"])


if __name__ == "__main__":
    main()
