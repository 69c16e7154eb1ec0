"""The seam between a kind of task folder and the rest of verifyless: four verbs, one module per kind.

A *task kind* knows one folder layout from end to end: how to recognise it (``detect``), how to turn it into a
``Task`` (``load``), what its untrusted step is once the workspace is filled (``prepare``) and how the trusted
side reads a finished workspace into metrics (``judge``). ``load_task`` walks ``task.loader.KINDS`` in order and
``verify`` reaches a task's kind through ``task.loader.kind_of(task)``; nothing else branches on a kind's name.
The kinds: ``task.native`` (``task.yaml``), ``task.openevolve`` (``initial_program.py`` + ``evaluator.py``) and
``task.tabular.kind`` (MLE-bench prepared competitions). A new kind is one module with one object that
satisfies ``TaskKind``, listed in ``KINDS``.

What stays with ``verify`` because every kind shares it: the workspace itself (program file, ``public/`` with
the public data, possibly subsampled for a data-fraction fidelity level, an empty ``out/``), the sandbox call,
the mapping of sandbox results to statuses, the check for unsafe workspace entries and metric validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from verifyless.task.base import FidelityLevel, Task


@dataclass(frozen=True)
class Step:
    """The untrusted step of one verification, as a kind prepares it for the sandbox.

    ``argv`` is the command; ``hide`` the host paths the sandbox masks (the caller's own are added after these),
    ``expose`` the host paths it shows read-only, ``env`` variables set for the run (the caller adds
    ``CUDA_VISIBLE_DEVICES`` for a GPU task).
    """

    argv: tuple[str, ...]
    hide: tuple[Path, ...] = ()
    expose: tuple[Path, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Judgement:
    """What the trusted side read from a finished workspace: raw metrics, or why there are none.

    Exactly one of ``raw`` (whatever the scorer returned; ``verify`` checks that it is a mapping of metrics) and
    ``failure`` (a one-line reason: the candidate's output could not be scored) is set. ``silent`` says the
    program wrote nothing to ``out/`` at all, which turns any failure into the program's own.
    """

    raw: Any = None
    failure: str | None = None
    silent: bool = False


class TaskKind(Protocol):
    """One kind of task folder. Implementations are stateless objects; every verb is deterministic."""

    name: str  # the ``Task.kind`` of the tasks it loads (stored with runs, so never renamed)

    def detect(self, root: Path) -> bool:
        """Whether the folder ``root`` has this kind's layout, valid or not. Reads only names, never runs code.

        ``load_task`` asks the kinds in ``KINDS`` order and loads with the first that says yes.
        """
        ...

    def load(self, root: Path) -> Task:
        """The validated ``Task`` of a folder ``detect`` accepted, with ``Task.kind == self.name``.

        Raises ``TaskError`` (``InvalidTask`` listing every problem where the kind can collect them) for a
        malformed folder; never runs the task's own code (evaluators are read with ``ast`` only).
        """
        ...

    def prepare(self, task: Task, ws: Path, level: FidelityLevel | None) -> Step:
        """The untrusted step for the workspace ``ws``, which already holds the program, ``public/`` and ``out/``.

        May add files of its own to ``ws`` (a runner script); must not touch ``task.root``. ``level`` is the
        fidelity level (None at full fidelity). Raises ``TaskError`` when the task cannot be run at all.
        """
        ...

    def judge(self, task: Task, ws: Path, level: FidelityLevel | None) -> Judgement:
        """Read the finished workspace ``ws`` on the trusted side (called only after the run ended ``ok``).

        A problem with the candidate's output is a ``Judgement`` with ``failure``, or ``InvalidSubmission``
        when the output breaks the submission contract (a contract violation); a problem with the task itself
        (its scorer will not load, its hidden data is gone) raises ``TaskError``.
        """
        ...


__all__ = ["Judgement", "Step", "TaskKind"]
