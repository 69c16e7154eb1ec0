"""Circle packing: place N_CIRCLES disjoint circles in the unit square, maximising the sum of radii.

OpenEvolve layout: evaluator.py imports this file and calls run_packing().
Only the region between the EVOLVE-BLOCK markers may change; it must define
construct_packing() returning (centers, radii) as arrays of shape (N, 2) and (N,).
"""

import numpy as np

N_CIRCLES = 12

# EVOLVE-BLOCK-START
from scipy.optimize import linprog, minimize

RESTARTS = 1
JITTER = 0.0


def pair_distances(centers):
    """Euclidean distances between all pairs of centres (diagonal set to infinity)."""
    gaps = np.linalg.norm(centers[:, None, :] - centers[None, :, :], axis=-1)
    np.fill_diagonal(gaps, np.inf)
    return gaps


def wall_distances(centers):
    """Distance from each centre to the nearest side of the unit square."""
    return np.minimum(centers, 1 - centers).min(axis=1)


def initial_centers(rng):
    """Starting centres, shape (N_CIRCLES, 2), inside the unit square."""
    xs, ys = np.meshgrid((np.arange(4) + 0.5) / 4, (np.arange(3) + 0.5) / 3)
    return np.column_stack([xs.ravel(), ys.ravel()])


def assign_radii(centers):
    """Non-negative radii for fixed centres that neither overlap nor leave the square."""
    gaps = pair_distances(centers)
    return np.full(len(centers), min(gaps.min() / 2, wall_distances(centers).min()))


def improve(centers, radii):
    """Locally improve a packing; returns (centers, radii)."""
    return centers, radii


def make_valid(centers, radii):
    """Shrink radii just enough to remove numerical overlaps and wall crossings."""
    centers = np.clip(centers, 0.0, 1.0)
    radii = np.clip(np.minimum(radii, wall_distances(centers)), 0.0, None)
    gaps = pair_distances(centers)
    for i in range(len(radii)):
        for j in range(i + 1, len(radii)):
            total = radii[i] + radii[j]
            if total > gaps[i, j]:
                radii[i] *= gaps[i, j] / total
                radii[j] *= gaps[i, j] / total
    return centers, radii * (1 - 1e-9)


def construct_packing():
    """Return (centers, radii) for N_CIRCLES circles inside the unit square."""
    rng = np.random.default_rng(0)
    best = None
    for _ in range(RESTARTS):
        centers = initial_centers(rng) + rng.normal(0.0, JITTER, size=(N_CIRCLES, 2))
        centers = np.clip(centers, 0.02, 0.98)
        centers, radii = make_valid(*improve(centers, assign_radii(centers)))
        if best is None or radii.sum() > best[1].sum():
            best = (centers, radii)
    return best
# EVOLVE-BLOCK-END


def run_packing():
    """Build the packing; returns (centers, radii, sum of radii)."""
    centers, radii = construct_packing()
    centers = np.asarray(centers, dtype=float)
    radii = np.asarray(radii, dtype=float)
    return centers, radii, float(radii.sum())


if __name__ == "__main__":
    print(f"sum of radii: {run_packing()[2]:.6f}")
