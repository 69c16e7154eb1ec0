"""Task folders written by tests: a toy task whose validation gain does or does not transfer, and a minimal copy of diabetes."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the checkout
PROGRAM = """import argparse
from pathlib import Path

# EVOLVE-BLOCK-START
A = 5
# EVOLVE-BLOCK-END

p = argparse.ArgumentParser()
p.add_argument("--out")
Path(p.parse_args().out, "value.txt").write_text(str(A))
"""


# validation rewards a value near 1; the hidden test one near TEST_TARGET
SCORER = """from pathlib import Path


def score(outdir, hidden, public):
    value = float(Path(outdir, "value.txt").read_text())
    return {"val_err": abs(value - 1), "test_err": abs(value - TEST_TARGET)}
"""


TASK = """
name: toy_transfer
statement: statement.md
program: prog.py
metric: {name: val_err, direction: minimize, lower: 0}
metrics: {validation: [val_err], test: [test_err]}
data: {public: [public/readme.txt]}
run: "{python} {program} --out {outdir}"
score: "score.py:score"
limits: {wall_seconds: 30, threads: 1}
idea_space:
  baseline: {a: a5}
  dimensions:
    a:
      description: the value written
      options: {a1: {description: one, code: 1}, a2: {description: two, code: 2}, a5: {description: five, code: 5}}
  template: |
    A = {{a}}
"""


def toy_task(root: Path, test_target: int) -> Path:
    """A task whose every child (a value of 1 or 2 instead of 5) improves validation; the hidden test improves too
    when ``test_target`` is 1, and gets worse when it is 9."""
    folder = root / "toy_transfer"
    (folder / "public").mkdir(parents=True)
    (folder / "public" / "readme.txt").write_text("nothing here")
    (folder / "prog.py").write_text(PROGRAM)
    (folder / "score.py").write_text(SCORER.replace("TEST_TARGET", str(test_target)))
    (folder / "statement.md").write_text("Write a number.")
    (folder / "task.yaml").write_text(textwrap.dedent(TASK))
    return folder


MINIMAL = """name: tiny_diabetes
statement: statement.md
program: solution.py
metric: {name: val_rmse, direction: minimize}
data:
  public: [public/train.csv, public/val_inputs.csv, public/test_inputs.csv]
  hidden: [hidden/val_targets.csv, hidden/test_targets.csv]
score: score.py:score
"""


def minimal_task(tmp_path: Path) -> Path:
    """A copy of diabetes whose task.yaml holds only the required keys (no ``metrics:`` block)."""
    root = tmp_path / "tiny"
    root.mkdir()
    for name in ("public", "hidden"):
        shutil.copytree(ROOT / "tasks" / "diabetes" / name, root / name)
    for name in ("statement.md", "solution.py", "score.py"):
        shutil.copy(ROOT / "tasks" / "diabetes" / name, root / name)
    (root / "task.yaml").write_text(MINIMAL)
    return root
