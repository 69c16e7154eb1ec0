"""Regenerate this task's data files from scikit-learn's bundled diabetes data.

Deterministic (fixed permutation seed); run from anywhere:
``python tasks/diabetes/make_data.py``. The committed CSV files are its output.
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes

HERE = Path(__file__).resolve().parent
COLUMNS = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]


def main() -> None:
    data = load_diabetes(scaled=False)
    x, y = data.data, data.target
    order = np.random.default_rng(20240601).permutation(len(y))
    train, val, test = order[:282], order[282:362], order[362:]
    header = ",".join(COLUMNS)
    fmt = ["%.4g"] * len(COLUMNS)
    np.savetxt(HERE / "public/train.csv", np.column_stack([x[train], y[train]]), delimiter=",",
               header=header + ",target", comments="", fmt=fmt + ["%.0f"])
    np.savetxt(HERE / "public/val_inputs.csv", x[val], delimiter=",", header=header, comments="", fmt=fmt)
    np.savetxt(HERE / "public/test_inputs.csv", x[test], delimiter=",", header=header, comments="", fmt=fmt)
    np.savetxt(HERE / "hidden/val_targets.csv", y[val], header="target", comments="", fmt="%.0f")
    np.savetxt(HERE / "hidden/test_targets.csv", y[test], header="target", comments="", fmt="%.0f")


if __name__ == "__main__":
    main()
