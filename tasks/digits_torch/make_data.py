"""Regenerate this task's data files from scikit-learn's bundled 8x8 digits (offline, fixed seed).

Run ``python tasks/digits_torch/make_data.py``. 1797 images of handwritten
digits, 64 pixel intensities (0-16) each, are shuffled once and split into 500
training, 500 validation and 797 test images. The training set is kept small
on purpose, so that regularisation and augmentation matter.
"""

from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits

HERE = Path(__file__).resolve().parent


def main() -> None:
    data = load_digits()
    x, y = data.data.astype(int), data.target.astype(int)
    order = np.random.default_rng(8808).permutation(len(y))
    train, val, test = order[:500], order[500:1000], order[1000:]
    header = ",".join(f"p{i}" for i in range(64))
    np.savetxt(HERE / "public/train.csv", np.column_stack([x[train], y[train]]), delimiter=",",
               header=header + ",label", comments="", fmt="%d")
    np.savetxt(HERE / "public/val_inputs.csv", x[val], delimiter=",", header=header, comments="", fmt="%d")
    np.savetxt(HERE / "public/test_inputs.csv", x[test], delimiter=",", header=header, comments="", fmt="%d")
    np.savetxt(HERE / "hidden/val_labels.csv", y[val], header="label", comments="", fmt="%d")
    np.savetxt(HERE / "hidden/test_labels.csv", y[test], header="label", comments="", fmt="%d")


if __name__ == "__main__":
    main()
