"""The baseline check: a run whose baseline fails stops before it spends a budget on a broken task.

Every run verifies the task's baseline first (node ``root``). When that fails,
``failure_source`` says where, from the stored ``Verification`` alone:

* ``"program"`` -- the baseline program failed as a program: a timeout, running
  out of memory, a broken output contract, no output at all
  (``verify.NO_OUTPUT``), output the trusted scorer raised on
  (``verify.INVALID_OUTPUT``: the verification contract makes a scorer
  exception on candidate output a candidate failure), or a traceback with a
  frame anywhere in the program file. Most real bugs raise inside pandas,
  scikit-learn or torch, so the *last* frame says nothing about blame. A
  native or competition task whose run step starts the program itself
  (the default ``{python} {program} ...``) has no other code in that
  step, so its failures are the program's even when the stderr tail (the last
  4 KB) has lost the program's frames. The run stops unless
  ``engine.allow_failed_baseline`` is set; then it is logged at WARNING and
  the search goes on from the failing baseline.
* ``"evaluator"`` -- the failure is the task's: an invalid metric (the
  evaluator returned something that is not a mapping of finite numbers, or
  missed the main metric, from output the program did write), a scorer
  command that failed on written output, an OpenEvolve evaluator runner
  without a metrics file and no program frame in its traceback, or a
  traceback that never passes through the program, from a run step the task
  wraps around it (an evaluator that raises at import, or returns a float
  where a dict belongs). Every candidate would fail the same way, so the run
  always stops. The trusted scorer failing to read its own hidden files is
  not judged here: a task loader checks them (a native ``data.hidden`` file,
  a competition's private answers) and ``verify`` raises ``TaskError`` when
  they vanish later.

Limits: the classification reads the reason and the stderr tail. An
evaluator that runs the program in its own subprocess and raises when it
fails hides the program's traceback, so that program failure reads as the
evaluator's; both stop the run with the same exit code (3) and the message
says how to look (``verifyless verify TASK``).
"""

from __future__ import annotations

import logging
import re

from verifyless.errors import TaskError
from verifyless.node import Status, Verification
from verifyless.task import builtin_tasks_dir
from verifyless.task.base import Task
from verifyless.verify import INVALID_OUTPUT, NO_OUTPUT

log = logging.getLogger(__name__)

__all__ = ["BaselineFailed", "check_baseline", "failure_source"]

RUNNER_FILE = "_verifyless_oe_runner.py"
_SCORER_REASONS = ("scorer raised", "scorer command", "the scorer")  # the trusted side, after the program ran
_EVALUATOR_REASONS = ("the evaluator",)  # an OpenEvolve runner, which may have run the program
_FRAME = re.compile(r'File "([^"]+)", line \d+')


class BaselineFailed(TaskError):
    """The task's baseline failed, so the run cannot compare anything against it (exit code 3)."""


def failure_source(task: Task, verification: Verification) -> str | None:
    """``"evaluator"`` or ``"program"`` for a failed verification (see the module docstring); None when OK."""
    if verification.status is Status.OK:
        return None
    if verification.status is Status.INVALID_METRIC:
        return "evaluator"
    if verification.status is not Status.FAILED or verification.reason.startswith((NO_OUTPUT, INVALID_OUTPUT)):
        return "program"
    if verification.reason.startswith(_SCORER_REASONS):
        return "evaluator"
    frames = _FRAME.findall(verification.stderr_tail)
    if any(_in_program(task, frame) for frame in frames):
        return "program"
    if verification.reason.startswith(_EVALUATOR_REASONS):
        return "evaluator"
    if frames and not _program_starts_the_run(task):
        return "evaluator"
    return "program"


def _in_program(task: Task, frame: str) -> bool:
    return frame == task.program_file or frame.endswith("/" + task.program_file)


def _program_starts_the_run(task: Task) -> bool:
    """Whether the untrusted step is the program itself: a native or competition run command (default
    ``{python} {program} ...``) whose first word after ``{python}`` is ``{program}``, not a task's own wrapper."""
    words = [part for part in task.run_command if part != "{python}"] or ["{program}"]
    return not task.evaluator_in_sandbox and words[0] == "{program}"


def check_baseline(task: Task, verification: Verification, *, allow_failed: bool, needs: str | None = None) -> None:
    """Raise ``BaselineFailed`` for a failed baseline, unless it failed as a program and ``allow_failed``.

    ``needs`` names a loop that cannot go on from a failed baseline (``"data collection"``, ``"policy
    training"``): its message says so instead of offering ``engine.allow_failed_baseline``, which only a
    search run reads.
    """
    source = failure_source(task, verification)
    if source is None:
        return
    if source == "program" and allow_failed:
        log.warning("%s; searching on because engine.allow_failed_baseline is set", _what(task, verification))
        return
    raise BaselineFailed(message(task, verification, source, needs=needs))


def message(task: Task, verification: Verification, source: str, *, needs: str | None = None) -> str:
    """What failed, the evaluator's own last lines, and how to check it (``needs``: see ``check_baseline``)."""
    tail = "\n".join(verification.stderr_tail.strip().splitlines()[-6:])
    check = f"Check it with `verifyless verify {task_ref(task)}` (it verifies the baseline and prints the error)"
    if source == "evaluator":
        head = (
            f"{_what(task, verification)}, in the task's evaluator rather than in the program: every candidate "
            "would fail the same way, so the run stopped after one verification. Fix the evaluator (it must "
            "return a dict of metrics holding the main metric). "
        )
    elif needs is not None:
        head = (
            f"{_what(task, verification)}: the program itself failed, and {needs} needs a working starting "
            "solution. Fix the baseline. "
        )
    else:
        head = (
            f"{_what(task, verification)}: the program itself failed, so the search has nothing to improve on. "
            "Fix the baseline, or set engine.allow_failed_baseline=true to search from it anyway. "
        )
    return head + check + (f"\nlast lines of its stderr:\n{tail}" if tail else "")


def task_ref(task: Task) -> str:
    """How to name the task on the command line: a built-in by name, any other by its folder."""
    return task.name if task.root.parent == builtin_tasks_dir() else str(task.root)


def _what(task: Task, verification: Verification) -> str:
    return f"the baseline of task {task.name!r} failed ({verification.status.value}: {verification.reason})"
