"""Write this task's CSV files from statsmodels' bundled ``star98`` data (California school districts, 1998).

The target is the share of a district's tested pupils who scored above the national median in maths
(NABOVE / (NABOVE + NBELOW)); the inputs are the dataset's twenty district columns plus the number of pupils
tested. A fixed permutation splits the 303 districts 183 / 60 / 60 (train / validation / test).
Run ``python bench/tasks/star98_math/make_data.py``; the committed files are its output.
"""

from pathlib import Path

import numpy as np
import statsmodels.api as sm

FOLDER = Path(__file__).resolve().parent


def write(name: str, table: np.ndarray, columns: list[str], digits: str = "%.6g") -> None:
    np.savetxt(FOLDER / name, table, delimiter=",", header=",".join(columns), comments="", fmt=digits)


def main() -> None:
    star = sm.datasets.star98.load_pandas()
    above, below = star.endog["NABOVE"].to_numpy(), star.endog["NBELOW"].to_numpy()
    tested = above + below
    inputs = np.column_stack([star.exog.to_numpy(dtype=float), tested])
    names = [*star.exog.columns, "TESTED"]
    share = above / tested
    rows = np.random.default_rng(98).permutation(len(share))
    fit_rows, val_rows, test_rows = rows[:183], rows[183:243], rows[243:]
    write("public/train.csv", np.column_stack([inputs[fit_rows], share[fit_rows]]), [*names, "share"])
    write("public/val_inputs.csv", inputs[val_rows], names)
    write("public/test_inputs.csv", inputs[test_rows], names)
    write("hidden/val_share.csv", share[val_rows, None], ["share"])
    write("hidden/test_share.csv", share[test_rows, None], ["share"])


if __name__ == "__main__":
    main()
