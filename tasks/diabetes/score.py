"""Trusted scorer for the diabetes task (runs outside the sandbox).

score(outdir, hidden, public) reads the candidate's prediction files and the
hidden targets, and returns validation metrics (val_*) and hidden-test metrics
(test_*). A missing or malformed prediction file raises, which the verifier
records as a failed candidate with the exception text as the reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _predictions(path: Path, expected: int) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"{path.name} was not written to the output folder")
    values = np.loadtxt(path, ndmin=1)
    if values.shape != (expected,):
        raise ValueError(f"{path.name} holds {values.size} values; expected {expected} (one per input row)")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{path.name} contains NaN or infinite predictions")
    return values


def _metrics(prefix: str, truth: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    err = pred - truth
    ss_tot = float(np.sum((truth - truth.mean()) ** 2))
    return {
        f"{prefix}_rmse": float(np.sqrt(np.mean(err ** 2))),
        f"{prefix}_mae": float(np.mean(np.abs(err))),
        f"{prefix}_r2": float(1.0 - np.sum(err ** 2) / ss_tot),
    }


def score(outdir: Path, hidden: list[Path], public: Path) -> dict[str, float]:
    files = {Path(p).name: Path(p) for p in hidden}
    result: dict[str, float] = {}
    for prefix in ("val", "test"):
        truth = np.loadtxt(files[f"{prefix}_targets.csv"], skiprows=1, ndmin=1)
        pred = _predictions(Path(outdir) / f"{prefix}_predictions.csv", truth.size)
        result.update(_metrics(prefix, truth, pred))
    return result
