"""Load task folders into frozen ``Task`` objects through the task kinds, reporting every problem at once.

``KINDS`` lists the kinds of folder, asked in order (``task.kind.TaskKind``: detect, load, prepare, judge):

- **native** (``task.native``): a ``task.yaml`` (schema in ``verifyless.task.schema``, reference in
  ``docs/design/task-format.md``) with a statement, a program with an editable band, public and hidden data, a
  run command and a trusted scorer;
- **openevolve** (``task.openevolve``): ``initial_program.py`` + ``evaluator.py`` (OpenEvolve's layout), the
  evaluator inspected with ``ast`` only, never imported here; an optional ``verifyless.yaml`` sidecar;
- **competition** (``task.tabular.kind``): MLE-bench's prepared layout (``prepared/public`` + ``prepared/private``).

A malformed folder raises ``InvalidTask`` (a ``TaskError``) whose message lists
each problem as ``<file>: <key path>: <what is wrong>; <fix>``. ``kind_of(task)`` is the kind that loaded a task:
``verify`` prepares and judges through it.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from verifyless import builtin
from verifyless.errors import TaskError
from verifyless.task.base import Task
from verifyless.task.folder import InvalidTask
from verifyless.task.kind import TaskKind
from verifyless.task.native import NATIVE
from verifyless.task.openevolve import OPENEVOLVE, OPENEVOLVE_EVALUATOR, OPENEVOLVE_PROGRAM
from verifyless.task.tabular.competition import missing_sample
from verifyless.task.tabular.kind import COMPETITION

KINDS: tuple[TaskKind, ...] = (NATIVE, OPENEVOLVE, COMPETITION)  # asked in this order


def kind_of(task: Task) -> TaskKind:
    """The kind that loaded ``task`` (by ``Task.kind``); ``TaskError`` naming the known kinds otherwise."""
    for kind in KINDS:
        if kind.name == task.kind:
            return kind
    raise TaskError(f"task {task.name!r} has kind {task.kind!r}, which no task kind handles; known: {_names()}")


def _names() -> list[str]:
    return [kind.name for kind in KINDS]


class MissingTask(TaskError, exit_code=2):
    """A task argument that names nothing: no such folder, and no built-in task of that name. Bad input to a
    command (exit 2, like a misspelt option), unlike a task folder that exists and is malformed (exit 3)."""


class UnknownTask(MissingTask):
    """A bare task name that is neither a folder here nor a built-in task; the message names close matches."""

    def __init__(self, name: str, known: list[str]):
        self.name, self.known = name, tuple(known)
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
        hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
        super().__init__(
            f"no task folder {name!r} here and no built-in task of that name; {hint}"
            f"built-in tasks: {', '.join(known) or 'none'} (or pass the path of a task folder)"
        )


def builtin_tasks_dir() -> Path:
    """The package's built-in tasks folder (``$VERIFYLESS_TASKS_DIR`` overrides it)."""
    return builtin.tasks_dir()


def load_task(path: str | Path) -> Task:
    """Load a task folder, or a built-in task by bare name (``load_task("diabetes")``), with the first kind that detects it."""
    root = _locate(path)
    for kind in KINDS:
        if kind.detect(root):
            try:
                return kind.load(root)
            except UnicodeDecodeError as exc:  # a file no kind reads through ``folder.read_text``, which names it
                bad = f"{exc.object[exc.start]:#04x}" if isinstance(exc.object, bytes) else "?"
                raise InvalidTask(
                    root, [f"a text file is not UTF-8 (byte {exc.start}: {bad}); save it as UTF-8"]
                ) from None
    raise TaskError(_not_a_task(root))


def _not_a_task(root: Path) -> str:
    """Why ``root`` is no task folder, pointing at the kind it comes closest to."""
    near = missing_sample(root)
    if near is not None:
        return near
    halves = [name for name in (OPENEVOLVE_PROGRAM, OPENEVOLVE_EVALUATOR) if (root / name).is_file()]
    if len(halves) == 1:
        lacking = OPENEVOLVE_EVALUATOR if halves[0] == OPENEVOLVE_PROGRAM else OPENEVOLVE_PROGRAM
        return (
            f"{root} has {halves[0]} but no {lacking}: an OpenEvolve folder needs both; add {lacking} "
            "(or write a task.yaml, see docs/design/task-format.md)"
        )
    return (
        f"{root} is not a task folder: it has neither task.yaml nor {OPENEVOLVE_PROGRAM} + "
        f"{OPENEVOLVE_EVALUATOR}, nor a competition's prepared/public + prepared/private; add a task.yaml "
        "(see docs/design/task-format.md)"
    )


def discover_tasks(directory: str | Path) -> list[Task | TaskError]:
    """Every task folder directly inside ``directory`` (sorted by name), loaded or its error.

    Sub-folders that look like no kind of task are skipped silently, and so is the ``prepared/`` folder
    of a competition folder: it is that competition, not a task of its own.
    """
    base = Path(directory)
    if not base.is_dir():
        raise TaskError(f"{base} is not a directory; pass the folder that holds your task folders")
    found: list[Task | TaskError] = []
    for child in sorted(p for p in base.iterdir() if p.is_dir()):
        if not is_task_folder(child) or (child.name == "prepared" and COMPETITION.detect(base)):
            continue
        try:
            found.append(load_task(child))
        except TaskError as exc:
            found.append(exc)
    return found


def is_task_folder(path: Path) -> bool:
    """Whether ``path`` looks like a task folder of any kind (native, OpenEvolve, MLE-bench), valid or not."""
    return any(kind.detect(path) for kind in KINDS)


def _locate(path: str | Path) -> Path:
    candidate = Path(path).expanduser()
    if candidate.exists():
        if not candidate.is_dir():
            raise TaskError(f"{candidate} is a file; pass the task folder that contains it")
        return candidate.resolve()
    text = str(path)
    if "/" not in text and "\\" not in text:
        builtin = builtin_tasks_dir() / text
        if builtin.is_dir():
            return builtin.resolve()
        known = (
            sorted(p.name for p in builtin_tasks_dir().iterdir() if p.is_dir()) if builtin_tasks_dir().is_dir() else []
        )
        raise UnknownTask(text, known)
    raise MissingTask(f"task folder {candidate} does not exist; check the path")


__all__ = [
    "KINDS",
    "InvalidTask",
    "MissingTask",
    "UnknownTask",
    "builtin_tasks_dir",
    "discover_tasks",
    "is_task_folder",
    "kind_of",
    "load_task",
]
