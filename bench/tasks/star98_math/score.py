"""Trusted scorer of star98_math (outside the sandbox): RMSE and MAE in percentage points of the share.

A prediction file that is missing, of the wrong length or not finite raises: the verifier records a failed
candidate with the message as its reason.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def read_predictions(folder: Path, split: str, rows: int) -> np.ndarray:
    path = folder / f"{split}_predictions.csv"
    if not path.is_file():
        raise FileNotFoundError(f"the program wrote no {path.name}")
    values = np.loadtxt(path, ndmin=1)
    if values.shape != (rows,) or not np.isfinite(values).all():
        raise ValueError(f"{path.name} must hold {rows} finite numbers, one per input row")
    return values


def score(outdir: Path, hidden: list[Path], public: Path) -> dict[str, float]:
    truth = {Path(p).name.split("_")[0]: np.loadtxt(p, skiprows=1, ndmin=1) for p in hidden}
    metrics: dict[str, float] = {}
    for split in ("val", "test"):
        gap = 100.0 * (read_predictions(Path(outdir), split, truth[split].size) - truth[split])
        metrics[f"{split}_rmse"] = float(np.sqrt(np.mean(gap * gap)))
        metrics[f"{split}_mae"] = float(np.mean(np.abs(gap)))
    return metrics
