"""Trusted scorer for the digits_torch task (runs outside the sandbox).

score(outdir, hidden, public) reads the candidate's class probabilities (one
row of 10 comma-separated values per input row) and the hidden labels; returns
accuracy of the arg-max class and log-loss (probabilities clipped to
[1e-6, 1]) for the validation rows (val_*) and the hidden test rows (test_*).
Missing files, wrong shapes, or values that are not probabilities raise, which
the verifier records as a failed candidate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _probabilities(path: Path, expected: int) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"{path.name} was not written to the output folder")
    p = np.loadtxt(path, delimiter=",", ndmin=2)
    if p.shape != (expected, 10):
        raise ValueError(f"{path.name} has shape {p.shape}; expected ({expected}, 10): one row of 10 per input")
    if not np.all(np.isfinite(p)) or p.min() < -1e-6 or np.abs(p.sum(axis=1) - 1).max() > 1e-3:
        raise ValueError(f"{path.name} must hold probabilities in [0, 1] whose rows sum to 1")
    return p


def score(outdir: Path, hidden: list[Path], public: Path) -> dict[str, float]:
    files = {Path(p).name: Path(p) for p in hidden}
    result: dict[str, float] = {}
    for prefix in ("val", "test"):
        labels = np.loadtxt(files[f"{prefix}_labels.csv"], skiprows=1, ndmin=1).astype(int)
        p = _probabilities(Path(outdir) / f"{prefix}_probabilities.csv", labels.size)
        picked = np.clip(p[np.arange(labels.size), labels], 1e-6, 1.0)
        result[f"{prefix}_accuracy"] = float(np.mean(p.argmax(axis=1) == labels))
        result[f"{prefix}_log_loss"] = float(-np.mean(np.log(picked)))
    return result
