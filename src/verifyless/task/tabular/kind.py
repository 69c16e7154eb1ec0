"""MLE-bench competitions as a task kind: ``COMPETITION`` (``task.kind == "competition"``).

Loading is ``competition.load_competition`` (the prepared layout, the sidecar, the seeded validation split in the
cache); the untrusted step is a native task's (``{python} {program} --data {public} --out {outdir}`` with the
competition folder and the hidden split masked); judging calls the competition scorer, ``score.score``, on the
trusted side exactly as a native task's ``score.py:score`` would be called.
"""

from __future__ import annotations

from pathlib import Path

from verifyless.task.base import Band, FidelityLevel, IdeaSpace, Task
from verifyless.task.folder import check_space, read_idea_space
from verifyless.task.kind import Judgement, Step
from verifyless.task.native import call_scorer, check_hidden, run_step, wrote_nothing
from verifyless.task.schema import IdeaSpaceSpec
from verifyless.task.tabular.competition import SIDECAR, is_competition, load_competition
from verifyless.task.tabular.score import score


class CompetitionKind:
    """MLE-bench prepared folders (``ID/prepared/public`` + ``ID/prepared/private``, or ``prepared/`` itself)."""

    name = "competition"

    def detect(self, root: Path) -> bool:
        return is_competition(root)

    def load(self, root: Path) -> Task:
        return load_competition(root, _competition_space)

    def prepare(self, task: Task, ws: Path, level: FidelityLevel | None) -> Step:
        return run_step(task, ws, level)

    def judge(self, task: Task, ws: Path, level: FidelityLevel | None) -> Judgement:
        check_hidden(task)
        raw, failure = call_scorer(score, task, ws)
        return Judgement(raw, failure, silent=wrote_nothing(ws))


COMPETITION = CompetitionKind()


def _competition_space(spec: IdeaSpaceSpec, program: str, program_name: str, problems: list[str]) -> IdeaSpace | None:
    """A competition's idea space, checked against its program like a sidecar's (problems appended)."""
    space = read_idea_space(spec, SIDECAR, "idea_space", problems)
    if space is not None:
        check_space(space, program, Band(), program_name, SIDECAR, "idea_space", problems)
    return space


__all__ = ["COMPETITION", "CompetitionKind"]
