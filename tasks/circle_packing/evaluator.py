"""OpenEvolve-style evaluator for the 12-circle packing task.

evaluate(program_path) imports the candidate, calls its run_packing(), and
checks the packing: 12 circles, finite values, non-negative radii, every circle
inside the unit square and no two circles overlapping (tolerance 1e-7).
combined_score is the sum of radii for a valid packing and 0.0 otherwise;
extra numeric metrics describe the packing. Reasons for invalid packings are
returned under "error" (a string, which numeric-only consumers drop).
"""

from __future__ import annotations

import importlib.util
import traceback

import numpy as np

N_CIRCLES = 12
TOLERANCE = 1e-7


def _load(program_path: str):
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {program_path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_packing(centers: np.ndarray, radii: np.ndarray) -> str | None:
    """None for a valid packing, else the first reason it is not."""
    if centers.shape != (N_CIRCLES, 2) or radii.shape != (N_CIRCLES,):
        return f"expected centers of shape ({N_CIRCLES}, 2) and radii of shape ({N_CIRCLES},); got {centers.shape} and {radii.shape}"
    if not (np.all(np.isfinite(centers)) and np.all(np.isfinite(radii))):
        return "centers or radii contain NaN or infinity"
    if radii.min() < 0:
        return f"negative radius {radii.min():.3g}"
    outside = np.minimum(centers - radii[:, None], 1 - centers - radii[:, None]).min()
    if outside < -TOLERANCE:
        return f"a circle crosses the square's boundary by {-outside:.3g}"
    for i in range(N_CIRCLES):
        for j in range(i + 1, N_CIRCLES):
            gap = np.linalg.norm(centers[i] - centers[j]) - radii[i] - radii[j]
            if gap < -TOLERANCE:
                return f"circles {i} and {j} overlap by {-gap:.3g}"
    return None


def evaluate(program_path: str) -> dict:
    try:
        centers, radii, _ = _load(program_path).run_packing()
        centers, radii = np.asarray(centers, dtype=float), np.asarray(radii, dtype=float)
    except Exception as exc:  # a broken candidate is a result, not a crash of the evaluator
        return {"combined_score": 0.0, "validity": 0.0, "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=3)}
    problem = check_packing(centers, radii)
    if problem:
        return {"combined_score": 0.0, "validity": 0.0, "error": problem}
    return {
        "combined_score": float(radii.sum()),
        "sum_radii": float(radii.sum()),
        "validity": 1.0,
        "min_radius": float(radii.min()),
        "max_radius": float(radii.max()),
        "radius_spread": float(radii.std()),
    }
