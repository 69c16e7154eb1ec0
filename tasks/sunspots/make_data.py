"""Regenerate this task's data files from statsmodels' bundled yearly sunspot numbers.

Deterministic; run ``python tasks/sunspots/make_data.py``. Layout:

- ``public/history.csv``: years 1700-1958 (the search may use all of it;
  validation windows are cut from its last 60 years by the fixed program);
- ``public/test_context.csv``: years 1959-1998, the observed values that
  precede the later test origins (a test window may only use values before
  its own origin; the fixed program enforces this by passing each window
  only its own history);
- ``hidden/test_targets.csv``: years 1959-2008, the truth of the five test
  windows (origins 1959, 1969, ..., 1999; ten years each);
- ``hidden/val_targets.csv``: the truth of the validation windows, kept
  here so the trusted scorer never reads data the candidate could rewrite.
"""

from pathlib import Path

import numpy as np
import statsmodels.api as sm

HERE = Path(__file__).resolve().parent
HORIZON = 10
VAL_ORIGINS = list(range(1899, 1950, 5))   # 11 origins; the last window ends in 1958
TEST_ORIGINS = list(range(1959, 2000, 10))  # 5 origins covering 1959-2008


def main() -> None:
    frame = sm.datasets.sunspots.load_pandas().data
    years = frame["YEAR"].astype(int).to_numpy()
    values = frame["SUNACTIVITY"].to_numpy(dtype=float)
    assert years[0] == 1700 and years[-1] == 2008

    def rows(lo: int, hi: int) -> np.ndarray:
        keep = (years >= lo) & (years <= hi)
        return np.column_stack([years[keep], values[keep]])

    fmt = ["%d", "%.1f"]
    np.savetxt(HERE / "public/history.csv", rows(1700, 1958), delimiter=",", header="year,value", comments="", fmt=fmt)
    np.savetxt(HERE / "public/test_context.csv", rows(1959, 1998), delimiter=",", header="year,value", comments="", fmt=fmt)
    for name, origins in (("val_targets.csv", VAL_ORIGINS), ("test_targets.csv", TEST_ORIGINS)):
        out = []
        for origin in origins:
            for step in range(HORIZON):
                year = origin + step
                out.append((origin, year, values[years == year][0]))
        np.savetxt(HERE / "hidden" / name, np.array(out), delimiter=",", header="origin,year,value",
                   comments="", fmt=["%d", "%d", "%.1f"])


if __name__ == "__main__":
    main()
