"""Trusted scorer for the affairs_gbm task (runs outside the sandbox).

score(outdir, hidden, public) reads the candidate's class-1 probabilities and
the hidden labels; returns ROC AUC and log-loss (probabilities clipped to
[1e-6, 1 - 1e-6]) for the validation rows (val_*) and the hidden test rows
(test_*). Missing files, wrong lengths, or values outside [0, 1] raise, which
the verifier records as a failed candidate.
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


def _auc(labels: np.ndarray, p: np.ndarray) -> float:
    """Mann-Whitney ROC AUC with average ranks for ties."""
    order = np.argsort(p, kind="mergesort")
    ranks = np.empty(len(p))
    sorted_p = p[order]
    i = 0
    while i < len(p):
        j = i
        while j + 1 < len(p) and sorted_p[j + 1] == sorted_p[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = labels == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def score(outdir: Path, hidden: list[Path], public: Path) -> dict[str, float]:
    files = {Path(p).name: Path(p) for p in hidden}
    result: dict[str, float] = {}
    for prefix in ("val", "test"):
        labels = np.loadtxt(files[f"{prefix}_labels.csv"], skiprows=1, ndmin=1).astype(int)
        p = _probabilities(Path(outdir) / f"{prefix}_probabilities.csv", labels.size)
        clipped = np.clip(p, 1e-6, 1 - 1e-6)
        result[f"{prefix}_auc"] = _auc(labels, p)
        result[f"{prefix}_log_loss"] = float(-np.mean(labels * np.log(clipped) + (1 - labels) * np.log(1 - clipped)))
    return result
