"""Trusted scorer for the moons_torch task (runs outside the sandbox).

score(outdir, hidden, public) reads the candidate's class-1 probabilities and
the hidden labels; returns accuracy (threshold 0.5) and log-loss (probabilities
clipped to [1e-6, 1 - 1e-6]) for the validation rows (val_*) and the hidden
test rows (test_*). Missing files, wrong lengths, or values outside [0, 1]
raise, which the verifier records as a failed candidate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _probabilities(path: Path, expected: int) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"{path.name} was not written to the output folder")
    p = np.loadtxt(path, ndmin=1)
    if p.shape != (expected,):
        raise ValueError(f"{path.name} holds {p.size} values; expected {expected} (one per input row)")
    if not np.all(np.isfinite(p)) or p.min() < 0 or p.max() > 1:
        raise ValueError(f"{path.name} must hold probabilities in [0, 1]")
    return p


def score(outdir: Path, hidden: list[Path], public: Path) -> dict[str, float]:
    files = {Path(p).name: Path(p) for p in hidden}
    result: dict[str, float] = {}
    for prefix in ("val", "test"):
        labels = np.loadtxt(files[f"{prefix}_labels.csv"], skiprows=1, ndmin=1)
        p = _probabilities(Path(outdir) / f"{prefix}_probabilities.csv", labels.size)
        clipped = np.clip(p, 1e-6, 1 - 1e-6)
        result[f"{prefix}_accuracy"] = float(np.mean((p >= 0.5) == (labels == 1)))
        result[f"{prefix}_log_loss"] = float(-np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped)))
    return result
