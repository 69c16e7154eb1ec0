"""Task folders written by tests: a toy task whose validation gain does or does not transfer, one whose scorer hangs,
a slow toy task, and a minimal copy of diabetes."""

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


# What both toy tasks share: a program writing a number, a scorer comparing it, no data to speak of.
TOY_HEADER = """
statement: statement.md
program: prog.py
metric: {name: val_err, direction: minimize, lower: 0}
metrics: {validation: [val_err], test: [test_err]}
data: {public: [public/readme.txt]}
run: "{python} {program} --out {outdir}"
score: "score.py:score"
limits: {wall_seconds: 30, threads: 1}
"""

TASK = (
    """
name: toy_transfer"""
    + TOY_HEADER
    + """idea_space:
  baseline: {a: a5}
  dimensions:
    a:
      description: the value written
      options: {a1: {description: one, code: 1}, a2: {description: two, code: 2}, a5: {description: five, code: 5}}
  template: |
    A = {{a}}
"""
)


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


HANGING_SCORER = """import time
from pathlib import Path


def score(outdir, hidden, public):
    value = float(Path(outdir, "value.txt").read_text())
    if value != SPARED:
        time.sleep(10**6)  # a trusted scorer that hangs
    return {"val_err": abs(value - 1), "test_err": abs(value - 1)}
"""


def hanging_scorer_task(root: Path, *, spared: int | None = None, command: bool = False) -> Path:
    """``toy_task`` whose scorer sleeps for ever, except on the value ``spared`` (the baseline writes 5), under
    ``limits.score_seconds: 1``; ``command``: a scorer command that sleeps for ever instead of a function."""
    folder = toy_task(root, 1)
    (folder / "score.py").write_text(HANGING_SCORER.replace("SPARED", repr(spared)))
    task = (folder / "task.yaml").read_text().replace("threads: 1}", "threads: 1, score_seconds: 1}")
    if command:
        (folder / "hang.py").write_text("import time\ntime.sleep(10**6)\n")
        task = task.replace('score: "score.py:score"', 'score: "{python} hang.py {outdir}"')
    (folder / "task.yaml").write_text(task)
    return folder


SLOW_PROGRAM = """import argparse
import time
from pathlib import Path

# EVOLVE-BLOCK-START
A, B = 5, 5
# EVOLVE-BLOCK-END

p = argparse.ArgumentParser()
p.add_argument("--out")
time.sleep(SECONDS)
Path(p.parse_args().out, "value.txt").write_text(str(A + B / 10))
"""

SLOW_TASK = (
    """
name: slow_pick"""
    + TOY_HEADER
    + """idea_space:
  baseline: {a: a5, b: b5}
  dimensions:
    a: {description: the whole part, options: {OPTIONS_A}}
    b: {description: the tenths, options: {OPTIONS_B}}
  template: |
    A, B = {{a}}, {{b}}
"""
)


def slow_task(root: Path, seconds: float) -> Path:
    """A task of 100 programs (two dimensions of ten values) whose every verification sleeps ``seconds``: long
    enough for a test to act while a run verifies, with nothing else to wait for (no data, no libraries)."""
    folder = root / "slow_pick"
    (folder / "public").mkdir(parents=True)
    (folder / "public" / "readme.txt").write_text("nothing here")
    (folder / "prog.py").write_text(SLOW_PROGRAM.replace("SECONDS", repr(seconds)))
    (folder / "score.py").write_text(SCORER.replace("TEST_TARGET", "3"))
    (folder / "statement.md").write_text("Write a number.")
    options = {d: ", ".join(f"{d}{i}: {{description: {d} is {i}, code: {i}}}" for i in range(10)) for d in "ab"}
    yaml = SLOW_TASK.replace("OPTIONS_A", options["a"]).replace("OPTIONS_B", options["b"])
    (folder / "task.yaml").write_text(textwrap.dedent(yaml))
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
