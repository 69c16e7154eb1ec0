"""Regenerate this task's data files from statsmodels' bundled ``fair`` survey data (offline, fixed seed).

Run ``python tasks/affairs_gbm/make_data.py``. 6366 survey answers (Fair,
1978); the label is 1 when the respondent reported any time spent in
extramarital affairs (about 32% of rows). Rows are shuffled once and split
into 2000 training, 1500 validation and 2866 test rows.
"""

from pathlib import Path

import numpy as np
import statsmodels.api as sm

HERE = Path(__file__).resolve().parent
COLUMNS = ["rate_marriage", "age", "yrs_married", "children", "religious", "educ", "occupation", "occupation_husb"]


def main() -> None:
    frame = sm.datasets.fair.load_pandas().data
    x = frame[COLUMNS].to_numpy(dtype=float)
    y = (frame["affairs"].to_numpy() > 0).astype(int)
    order = np.random.default_rng(1978).permutation(len(y))
    train, val, test = order[:2000], order[2000:3500], order[3500:]
    header = ",".join(COLUMNS)
    fmt = ["%g"] * len(COLUMNS)
    np.savetxt(HERE / "public/train.csv", np.column_stack([x[train], y[train]]), delimiter=",",
               header=header + ",label", comments="", fmt=fmt + ["%d"])
    np.savetxt(HERE / "public/val_inputs.csv", x[val], delimiter=",", header=header, comments="", fmt=fmt)
    np.savetxt(HERE / "public/test_inputs.csv", x[test], delimiter=",", header=header, comments="", fmt=fmt)
    np.savetxt(HERE / "hidden/val_labels.csv", y[val], header="label", comments="", fmt="%d")
    np.savetxt(HERE / "hidden/test_labels.csv", y[test], header="label", comments="", fmt="%d")


if __name__ == "__main__":
    main()
