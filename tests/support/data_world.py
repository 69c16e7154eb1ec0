"""``tests/data_task``'s whole idea space as a pool world with known scores (the engine-path tests of critic-rm)."""

from __future__ import annotations

from pathlib import Path

from verifyless.task import load_task

DATA_TASK = Path(__file__).resolve().parents[1] / "data_task"


def data_task_world(flat: bool = False):
    """The whole idea space of ``data_task`` as a pool world, with its known scores (score = 2A + B - C; a negative
    C fails); ``flat``: every working point scores the same, so no screener can beat random."""
    from itertools import product

    from verifyless.offline.worlds import World, WorldPoint

    task = load_task(str(DATA_TASK))
    space = task.idea_space
    assert space is not None
    dims = {d: tuple(o.name for o in options) for d, options in space.dimensions.items()}
    value = {"a0": 0, "a1": 1, "a2": 2, "a3": 3, "b0": 0, "b1": 1, "b2": 2, "c0": 0, "c1": 1}
    points = []
    for combo in product(*dims.values()):
        a = dict(zip(dims, combo, strict=True))
        score = 1.0 if flat else float(2 * value[a["a"]] + value[a["b"]] - value.get(a["c"], 0))
        failed = a["c"] == "cneg"
        points.append(
            WorldPoint(a, "failed" if failed else "ok", None if failed else score, None if failed else score, 1.0)
        )
    baseline = dict(space.baseline)
    points.sort(key=lambda p: p.assignment != baseline)  # the baseline first
    world = World("data_task", "maximize", dims, baseline, tuple(points), metric="combined_score")
    return world, task
