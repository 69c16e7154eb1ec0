"""A toy task whose program has a band with a small function in it (the LLM roles' and judges' tests)."""

from __future__ import annotations

from pathlib import Path

from verifyless.task.base import Band, Metric, Task

PROGRAM = '''import numpy as np


def load(path):
    return np.load(path)

# EVOLVE-BLOCK-START
def model(xs):
    """Baseline: the mean."""
    total = 0.0
    for v in xs:
        total += v
    return total / len(xs)
# EVOLVE-BLOCK-END

if __name__ == "__main__":
    print(f"{model([1.0, 2.0, 3.0])}")
'''


def make_task(**changes) -> Task:
    base = dict(
        name="toy",
        root=Path("/tmp"),
        kind="native",
        statement="Predict the centre of a noisy sample. Keep {braces} literal.",
        program_file="solution.py",
        baseline_program=PROGRAM,
        band=Band(),
        metric=Metric("mae", "minimize"),
    )
    base.update(changes)
    return Task(**base)
