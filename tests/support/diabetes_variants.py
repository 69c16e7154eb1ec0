"""The diabetes task and three programs that predict differently (Ridge, a stronger Ridge, k-NN).

For the top-K ensemble submission (``engine/submission.py``): members whose outputs average to something no
single member scores.
"""

from __future__ import annotations

from verifyless.task import load_task
from verifyless.task.base import Task


def diabetes_variants() -> tuple[Task, list[tuple[str, str]]]:
    """The diabetes task (it declares an ensemble) and ``[(node id, program)]`` of three distinct members."""
    task = load_task("diabetes")
    base = task.baseline_program
    strong = base.replace("STRENGTH = 1.0", "STRENGTH = 30.0")
    knn = base.replace(
        "    return Ridge(alpha=STRENGTH)",
        "    from sklearn.neighbors import KNeighborsRegressor\n    return KNeighborsRegressor(n_neighbors=15)",
    )
    assert strong != base and knn != base
    return task, [("root", base), ("s", strong), ("k", knn)]
