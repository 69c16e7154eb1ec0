"""What a competition task hands over after a run (``run --out``): a submission in the competition's own shape, and
the data to refit the returned program on first.

During a run the program sees the split's files (``competition.split_competition``): a ``train.csv`` less the
held-out validation (and selection) rows, and a ``test.csv`` and sample submission that mix those rows in with the
competition's test rows. Its ``submission.csv`` therefore answers more rows than the competition asks for.

* ``competition_submission(task, produced, dest)`` writes ``dest/submission.csv`` with exactly the competition's
  sample submission's ids and columns, in its order, from the program's output in ``produced``
  (``InvalidSubmission`` when rows, columns or values are missing or malformed), and grades it against the
  private answers (the hidden test score of exactly what was written; reporting only, as every test score).
* ``full_data_task(task)`` is ``task`` with the competition's own public files in place of the split's: every
  labelled row of ``train.csv`` (validation and selection rows included), the competition's ``test.csv`` and
  sample submission. A program run on it (``verify.produce``) is refitted on all public rows; no scorer can grade
  that run on validation (its rows are trained on), so only its hidden test score is known.

Both apply to tasks of kind ``competition`` (``is_competition_task``: MLE-bench folders and ``task new`` folders);
other tasks' outputs are used as the program wrote them.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.errors import InvalidSubmission, TaskError
from verifyless.task.base import Task
from verifyless.task.tabular.competition import SUBMISSION, Layout, find_layout
from verifyless.task.tabular.grading import check_submission, grade
from verifyless.task.tabular.score import grading_info, read_submission

__all__ = ["Delivered", "competition_submission", "full_data_task", "is_competition_task"]

COMPETITION = "competition"  # the task kind (task.tabular.kind.CompetitionKind.name)


@dataclass(frozen=True)
class Delivered:
    """The submission ``competition_submission`` wrote: its rows (the sample submission's) and its hidden test
    score."""

    rows: int
    test_score: float


def is_competition_task(task: Task) -> bool:
    """Whether ``task`` is a competition (a sample submission to answer, public rows to refit on)."""
    return task.kind == COMPETITION


def _layout(task: Task) -> Layout:
    layout = find_layout(task.root)
    if layout is None:
        raise TaskError(f"the competition folder {task.root} of task {task.name!r} is gone; put it back")
    return layout


def full_data_task(task: Task) -> Task:
    """``task`` whose public data is the competition's own ``train.csv``, ``test.csv`` and sample submission (module
    docstring); every other public file (the submission's shape, the description) as it was."""
    layout = _layout(task)
    own = {"train.csv": layout.public / "train.csv", "test.csv": layout.public / "test.csv"}
    own[layout.sample.name] = layout.sample
    return dataclasses.replace(task, public_data=tuple(own.get(p.name, p) for p in task.public_data))


def competition_submission(task: Task, produced: Path, dest: Path) -> Delivered:
    """``dest/submission.csv``: the rows of ``produced/submission.csv`` that answer the competition's sample
    submission, with its columns, in its order; then every other file ``produced`` holds, as it is. Returns its row
    count and hidden test score; ``InvalidSubmission`` naming what is missing or malformed (nothing written)."""
    import pandas as pd

    layout = _layout(task)
    grading = grading_info(Path(task.hidden_data[0]))
    ids = {grading.id_column: str}
    sample = pd.read_csv(layout.sample, dtype=ids)  # the loader read both files: they are readable
    answers = pd.read_csv(task.hidden_data[1], dtype=ids)
    shaped = _in_sample_shape(read_submission(Path(produced) / SUBMISSION, ids), sample, grading.id_column)
    check_submission(shaped, sample[grading.id_column].astype(str).tolist(), grading, grading.definition)
    test_score = grade(shaped, answers, grading)
    dest.mkdir(parents=True, exist_ok=True)
    for entry in Path(produced).iterdir():
        if entry.name != SUBMISSION:
            (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, dest / entry.name)
    shaped.to_csv(dest / SUBMISSION, index=False)
    return Delivered(len(shaped), test_score)


def _in_sample_shape(submitted: Any, sample: Any, id_column: str) -> Any:
    """``submitted``'s rows for ``sample``'s ids, in its order, with its columns; ``InvalidSubmission`` when some
    are missing."""
    lacking = [c for c in sample.columns if c not in submitted.columns]
    if lacking:
        raise InvalidSubmission(f"{SUBMISSION} lacks the sample submission's column(s) {lacking[:6]}")
    rows = submitted.assign(_id=submitted[id_column].astype(str)).drop_duplicates("_id").set_index("_id")
    wanted = sample[id_column].astype(str)
    missing = [i for i in wanted if i not in rows.index]
    if missing:
        raise InvalidSubmission(
            f"{SUBMISSION} answers {len(wanted) - len(missing)} of the sample submission's {len(wanted)} ids "
            f"(e.g. not {missing[0]!r})"
        )
    return rows.loc[wanted, list(sample.columns)].reset_index(drop=True)
