"""Regenerate this task's data files with scikit-learn's ``make_moons`` (fixed seed).

Run ``python tasks/moons_torch/make_data.py``. Two interleaved half-moons
with Gaussian noise, plus two pure-noise coordinates the model must learn to
ignore; 600 training points, 300 validation and 300 test points.
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import make_moons

HERE = Path(__file__).resolve().parent


def main() -> None:
    x, y = make_moons(n_samples=1200, noise=0.3, random_state=11)
    rng = np.random.default_rng(11)
    x = np.column_stack([x * [3.0, 0.5] + [10.0, -2.0], rng.normal(0.0, 2.0, size=(len(y), 2))])
    train, val, test = slice(0, 600), slice(600, 900), slice(900, 1200)
    header = "x1,x2,n1,n2"
    fmt = ["%.5f"] * 4
    np.savetxt(HERE / "public/train.csv", np.column_stack([x[train], y[train]]), delimiter=",",
               header=header + ",label", comments="", fmt=fmt + ["%d"])
    np.savetxt(HERE / "public/val_inputs.csv", x[val], delimiter=",", header=header, comments="", fmt=fmt)
    np.savetxt(HERE / "public/test_inputs.csv", x[test], delimiter=",", header=header, comments="", fmt=fmt)
    np.savetxt(HERE / "hidden/val_labels.csv", y[val], header="label", comments="", fmt="%d")
    np.savetxt(HERE / "hidden/test_labels.csv", y[test], header="label", comments="", fmt="%d")


if __name__ == "__main__":
    main()
