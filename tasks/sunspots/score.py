"""Trusted scorer for the sunspots task (runs outside the sandbox).

score(outdir, hidden, public) compares the candidate's forecasts with the true
values of every (origin, year) pair in the hidden target files: mean absolute
error and root-mean-squared error over all windows, for the validation
origins (val_*) and the hidden test origins (test_*). Missing pairs or
non-finite forecasts raise, which the verifier records as a failed candidate.

At a cheaper fidelity level (``level`` = ``first_<k>_origins``, passed by the
verifier only, never at full fidelity) the targets are those of the first k
origins of each split, and the forecasts must cover exactly those: the
full-fidelity result is unchanged, and no full run can skip an origin.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _errors(forecasts: Path, targets: Path, first: int | None = None) -> np.ndarray:
    if not forecasts.is_file():
        raise FileNotFoundError(f"{forecasts.name} was not written to the output folder")
    truth = np.loadtxt(targets, delimiter=",", skiprows=1, ndmin=2)
    if first is not None:
        truth = truth[np.isin(truth[:, 0], np.unique(truth[:, 0])[:first])]
    got = np.loadtxt(forecasts, delimiter=",", skiprows=1, ndmin=2)
    if got.ndim != 2 or got.shape[1] != 3:
        raise ValueError(f"{forecasts.name} must have three columns: origin,year,value")
    table = {(int(o), int(y)): v for o, y, v in got}
    missing = [(int(o), int(y)) for o, y, _ in truth if (int(o), int(y)) not in table]
    if missing:
        raise ValueError(f"{forecasts.name} lacks {len(missing)} (origin, year) pairs, e.g. {missing[0]}")
    pred = np.array([table[(int(o), int(y))] for o, y, _ in truth])
    if not np.all(np.isfinite(pred)):
        raise ValueError(f"{forecasts.name} contains NaN or infinite forecasts")
    return pred - truth[:, 2]


def _first_origins(level: str | None) -> int | None:
    """k of a ``first_<k>_origins`` level; None at full fidelity."""
    if level is None:
        return None
    parts = level.split("_")
    if len(parts) != 3 or parts[0] != "first" or parts[2] != "origins" or not parts[1].isdigit():
        raise ValueError(f"unknown sunspots fidelity level {level!r}; expected first_<k>_origins")
    return int(parts[1])


def score(outdir: Path, hidden: list[Path], public: Path, level: str | None = None) -> dict[str, float]:
    files = {Path(p).name: Path(p) for p in hidden}
    first = _first_origins(level)
    result: dict[str, float] = {}
    for prefix in ("val", "test"):
        err = _errors(Path(outdir) / f"{prefix}_forecasts.csv", files[f"{prefix}_targets.csv"], first)
        result[f"{prefix}_mae"] = float(np.mean(np.abs(err)))
        result[f"{prefix}_rmse"] = float(np.sqrt(np.mean(err ** 2)))
    return result
