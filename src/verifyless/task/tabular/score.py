"""The trusted scorer of competition tasks: ``verify`` loads this file like a task folder's ``score.py``.

It runs outside the sandbox after the candidate exits; see ``competition.score_workspace``.
"""

from __future__ import annotations

from pathlib import Path

from verifyless.task.tabular.competition import score_workspace


def score(outdir: Path, hidden: list[Path], public: Path) -> dict[str, float]:
    """``val_<metric>`` and ``test_<metric>`` of the workspace's submission.csv (``public`` is not read)."""
    return score_workspace(outdir, hidden)
