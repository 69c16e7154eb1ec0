"""The trusted scorer of competition tasks: ``verify`` loads this file like a task folder's ``score.py``.

It runs outside the sandbox after the candidate exits: ``score_workspace`` grades the workspace's
submission.csv on the held-out validation answers, on the selection split's when the task holds one out
(``sel_<metric>``, hidden from search like the test score), and on the private answers; ``floor_score`` is a trivial
predictor's validation score (the normalisation anchor ``task new`` writes). The loader
(``competition.load_competition``) checked every hidden file, so one that is gone here vanished after loading.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verifyless.errors import InvalidSubmission, TaskError
from verifyless.task.base import Task
from verifyless.task.tabular.competition import SEL_ANSWERS, SUBMISSION, VAL_ANSWERS
from verifyless.task.tabular.grading import Grading, MetricDef, check_submission, grade


def score(outdir: Path, hidden: list[Path], public: Path) -> dict[str, float]:
    """``val_<metric>``, ``test_<metric>`` (and ``sel_<metric>``) of the workspace's submission.csv (``public`` is
    not read)."""
    return score_workspace(outdir, hidden)


def score_workspace(outdir: Path, hidden: list[Path]) -> dict[str, float]:
    """``val_<metric>``, ``test_<metric>`` and, where the split holds a selection share, ``sel_<metric>`` of
    ``outdir/submission.csv``; ``InvalidSubmission`` when malformed.

    ``hidden`` is the task's hidden data: the split's hidden folder (held-out labels, grading.json), then the
    private answers.
    """
    grading, parts = _read_hidden(hidden)
    submission = read_submission(Path(outdir) / SUBMISSION, {grading.id_column: str})
    ids = {prefix: list(part[grading.id_column].astype(str)) for prefix, part in parts.items()}
    check_submission(submission, [i for part in ids.values() for i in part], grading, grading.definition)
    submitted = submission[grading.id_column].astype(str)
    return {
        f"{prefix}_{grading.metric}": grade(submission[submitted.isin(set(ids[prefix]))], part, grading)
        for prefix, part in parts.items()
    }


def _read_hidden(hidden: list[Path]) -> tuple[Grading, dict[str, Any]]:
    """The grading and the answers by metric prefix (``val``, ``sel`` when present, ``test``: the private
    answers); ``TaskError`` naming a hidden file that is gone.

    The loader checked them, so a file missing here vanished after loading: the task's problem, never the
    candidate's.
    """
    import pandas as pd

    folder, answers_path = Path(hidden[0]), Path(hidden[1])
    try:
        grading = grading_info(folder)
        ids = {grading.id_column: str}
        parts = {"val": pd.read_csv(folder / VAL_ANSWERS, dtype=ids)}
        if (folder / SEL_ANSWERS).is_file():
            parts["sel"] = pd.read_csv(folder / SEL_ANSWERS, dtype=ids)
        return grading, {**parts, "test": pd.read_csv(answers_path, dtype=ids)}
    except OSError as exc:
        raise TaskError(
            f"the task's hidden file {getattr(exc, 'filename', None) or exc} cannot be read ({type(exc).__name__}); "
            "it was there when the task loaded: restore it, then load the task again"
        ) from None


def grading_info(folder: Path) -> Grading:
    """The ``Grading`` the split's hidden folder records (``grading.json``)."""
    info = json.loads((folder / "grading.json").read_text(encoding="utf-8"))
    grader = info.get("grader")
    own = None
    if grader:
        best = info["upper"] if info["direction"] == "maximize" else info["lower"]
        own = MetricDef(info["metric"], info["direction"], info["output"], best, info["lower"], info["upper"], grader)
    return Grading(info["metric"], info["id"], tuple(info["columns"]), info["label_column"], grader, own)


def read_submission(path: Path, ids: dict[str, Any]) -> Any:
    """``path`` (a program's submission) as a frame with ``ids``' dtypes; ``InvalidSubmission`` when missing or
    unreadable."""
    import pandas as pd

    if not path.is_file():
        raise InvalidSubmission(
            f"no {SUBMISSION} in the output folder; write one row per id of test.csv with the sample submission's columns"
        )
    try:
        return pd.read_csv(path, dtype=ids)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InvalidSubmission(f"{SUBMISSION} is not a readable CSV ({str(exc).splitlines()[0]})") from None


def floor_score(task: Task) -> float:
    """The validation score of a trivial predictor (class shares, the majority label or the mean of train.csv)."""
    import pandas as pd

    folder = Path(task.hidden_data[0])
    grading = grading_info(folder)
    ids = {grading.id_column: str}
    train = pd.read_csv(task.public_data[0], dtype=ids)
    held = pd.read_csv(folder / VAL_ANSWERS, dtype=ids)
    trivial = pd.DataFrame({grading.id_column: held[grading.id_column]})
    for column, value in _trivial_values(train, grading).items():
        trivial[column] = value
    return grade(trivial, held, grading)


def _trivial_values(train: Any, grading: Grading) -> dict[str, Any]:
    output = grading.definition.output
    if grading.label_column:
        shares = train[grading.label_column].astype(str).value_counts(normalize=True)
        return {c: float(shares.get(c, 0.0)) for c in grading.columns}
    if output == "label":
        return {c: train[c].mode().iloc[0] for c in grading.columns}
    return {c: float(train[c].mean()) for c in grading.columns}


__all__ = ["floor_score", "grading_info", "read_submission", "score", "score_workspace"]
