"""Native task folders: a ``task.yaml`` (schema ``task.schema``, reference ``docs/design/task-format.md``).

The folder holds a statement, a program with an editable band, public and hidden data, a run command (the
untrusted step, run in the sandbox with the task folder and the hidden data masked) and a trusted scorer: a
``file.py:function`` called in this process as ``function(outdir, hidden, public[, level])``, or a command
template whose last stdout line is a JSON object of metrics. Either kind has ``limits.scorer_seconds`` to finish
(``ScorerTimedOut``, a ``TaskError``, after it). ``NATIVE`` is this kind (``task.kind``).
"""

from __future__ import annotations

import ast
import inspect
import json
import shlex
import string
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from verifyless.errors import InvalidSubmission, TaskError
from verifyless.task.base import (
    HIDDEN_PREFIXES,
    Band,
    Ensemble,
    Fidelity,
    FidelityLevel,
    Metric,
    Target,
    Task,
)
from verifyless.task.folder import (
    InvalidTask,
    check_space,
    inside,
    read_anchors,
    read_idea_space,
    read_program,
    read_text,
    read_yaml,
    top_level_functions,
)
from verifyless.task.kind import Judgement, Step
from verifyless.task.pyfile import load_function
from verifyless.task.schema import (
    DEFAULT_RUN,
    RUN_PLACEHOLDERS,
    SCORE_PLACEHOLDERS,
    EnsembleSpec,
    FidelitySpec,
    TaskSpec,
    explain,
)

TASK_FILE = "task.yaml"
DEFAULT_ARGV = ("{python}", "{program}", "--data", "{public}", "--out", "{outdir}")


class NativeKind:
    """Folders with a ``task.yaml``; also the way competitions run and score (``task.tabular.kind``)."""

    name = "native"

    def detect(self, root: Path) -> bool:
        return (root / TASK_FILE).is_file()

    def load(self, root: Path) -> Task:
        return _load_native(root)

    def prepare(self, task: Task, ws: Path, level: FidelityLevel | None) -> Step:
        return run_step(task, ws, level)

    def judge(self, task: Task, ws: Path, level: FidelityLevel | None) -> Judgement:
        raw, failure = run_scorer(task, ws, level)
        return Judgement(raw, failure, silent=wrote_nothing(ws))


NATIVE = NativeKind()


# ------------------------------------------------------------------ the untrusted step and the trusted scorer


def run_step(task: Task, ws: Path, level: FidelityLevel | None) -> Step:
    """The task's run command filled for ``ws``, with the task folder and the hidden data masked.

    A knob level fills ``{fidelity}`` and sets the task's fidelity variable; at full fidelity ``{fidelity}`` is
    the task's ``fidelity.full`` and the variable is not set.
    """
    knob = level.knob if level is not None and level.knob is not None else None
    values = {
        "python": sys.executable,
        "program": str(ws / task.program_file),
        "public": str(ws / "public"),
        "workdir": str(ws),
        "outdir": str(ws / "out"),
        "fidelity": (knob if knob is not None else task.fidelity.full) or "",
    }
    argv = tuple(part.format_map(values) for part in (task.run_command or DEFAULT_ARGV))
    env = {task.fidelity.env: knob} if knob is not None else {}
    return Step(argv, hide=(task.root, *task.hidden_data), env=env)


def wrote_nothing(ws: Path) -> bool:
    """Whether the program left ``ws/out`` empty."""
    return not any((ws / "out").iterdir())


def run_scorer(task: Task, ws: Path, level: FidelityLevel | None = None) -> tuple[Any, str | None]:
    """Trusted scoring with ``task.scorer``: ``(raw metrics, None)`` or ``(None, failure reason)``.

    A scorer function with a ``level`` parameter is told the cheaper level's name (the only trusted channel:
    the knob reaches the sandboxed program, whose workspace the candidate can write); at full fidelity it is
    called exactly as before, without ``level``.
    """
    if not task.scorer:
        raise TaskError(f"task {task.name!r} has no scorer; set 'score: score.py:score' in its task.yaml")
    check_hidden(task)
    file, sep, func = task.scorer.partition(":")
    if sep and file.endswith(".py") and func.isidentifier():
        fn = load_function(task.root / file, func)
        extra = {"level": level.name} if level is not None and _takes_level(fn) else {}
        return call_scorer(fn, task, ws, **extra)
    return _run_scorer_command(task, ws / "out", ws / "public")


def check_hidden(task: Task) -> None:
    """``TaskError`` when a hidden file is gone: the trusted side's own files, never the candidate's failure."""
    gone = [p for p in task.hidden_data if not Path(p).exists()]
    if gone:
        raise TaskError(
            f"task {task.name!r}: its hidden data {gone[0]} is gone (it was there when the task loaded); restore it"
        )


class ScorerTimedOut(TaskError):
    """The task's trusted scorer ran past its time limit (``limits.score_seconds``): the evaluator's failure, never
    the candidate's (exit 3). Nothing of the verification is stored, so nothing is paid for it."""


def call_scorer(fn: Any, task: Task, ws: Path, **extra: Any) -> tuple[Any, str | None]:
    """``fn(outdir, hidden, public, **extra)`` on the trusted side, within ``limits.scorer_seconds``; an exception on
    candidate output is a failure.

    ``InvalidSubmission`` (a broken submission) and ``TaskError`` (the scorer's own files are gone) pass through; a
    scorer still running at its limit raises ``ScorerTimedOut``. A function cannot be stopped from outside: it runs
    in a daemon thread, which is left behind at the limit (the run stops; the process ends without waiting for it).
    """
    outcome: list[tuple[Any, BaseException | None]] = []

    def call() -> None:
        try:
            outcome.append((fn(ws / "out", list(task.hidden_data), ws / "public", **extra), None))
        except BaseException as exc:  # handed to the caller's thread below
            outcome.append((None, exc))

    limit = task.limits.scorer_seconds
    worker = threading.Thread(target=call, name=f"scorer of {task.name}", daemon=True)
    worker.start()
    worker.join(limit)
    if not outcome:
        raise ScorerTimedOut(_overran(task, limit))
    value, raised = outcome[0]
    if raised is None:
        return value, None
    if isinstance(raised, InvalidSubmission | TaskError) or not isinstance(raised, Exception):
        raise raised
    return None, f"scorer raised {type(raised).__name__}: {raised}"  # it choked on candidate output: the candidate's


def _overran(task: Task, limit: float) -> str:
    """The one line a scorer past its limit gets: which scorer, which limit, what to do."""
    return (
        f"task {task.name!r}: its trusted scorer {task.scorer or '(none)'} did not finish within {limit:g}s "
        "(limits.score_seconds): the evaluator failed, not the program. Fix the scorer so that it finishes on any "
        "output, or raise limits.score_seconds in its task.yaml (verifyless.yaml for a competition); a run stopped "
        "by this keeps every verification it paid for: resume it then"
    )


def _takes_level(fn: Any) -> bool:
    try:
        return "level" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _run_scorer_command(task: Task, outdir: Path, public: Path) -> tuple[Any, str | None]:
    hidden = [str(p) for p in task.hidden_data]
    values = {"outdir": str(outdir), "public": str(public), "hidden": " ".join(hidden), "python": sys.executable}
    argv: list[str] = []
    for part in shlex.split(task.scorer or ""):
        argv.extend(hidden if part == "{hidden}" else [part.format_map(values)])
    timeout = task.limits.scorer_seconds
    try:
        done = subprocess.run(argv, cwd=task.root, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as exc:
        raise TaskError(
            f"task {task.name!r}: scorer command {argv[0]!r} not found; fix 'score' in its task.yaml"
        ) from exc
    except subprocess.TimeoutExpired:  # subprocess.run killed it
        raise ScorerTimedOut(_overran(task, timeout)) from None
    if done.returncode != 0:
        last = next((ln for ln in reversed(done.stderr.splitlines()) if ln.strip()), "")
        return None, f"scorer command exited with code {done.returncode}: {last}".rstrip(": ")
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    try:
        return json.loads(lines[-1]), None
    except (IndexError, json.JSONDecodeError):
        return None, "scorer command did not print a JSON object of metrics on its last stdout line"


# ------------------------------------------------------------------ loading


def _load_native(root: Path) -> Task:
    fname = TASK_FILE
    problems: list[str] = []
    data = read_yaml(root / fname, problems)
    if data is None:
        raise InvalidTask(root, problems)
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidTask(root, explain(exc, fname, TaskSpec)) from None

    statement_path = inside(root, spec.statement, "statement", fname, problems)
    statement = read_text(statement_path, problems) if statement_path else None
    program_path = inside(root, spec.program, "program", fname, problems)
    band = _band(spec)
    program_text = read_program(program_path, band, fname, problems) if program_path else None

    public = [inside(root, p, f"data.public[{i}]", fname, problems) for i, p in enumerate(spec.data.public)]
    hidden = [inside(root, p, f"data.hidden[{i}]", fname, problems) for i, p in enumerate(spec.data.hidden)]
    public_ok = [p for p in public if p is not None]
    hidden_ok = [p for p in hidden if p is not None]
    _check_data(public_ok, hidden_ok, root, fname, problems)

    validation = tuple(spec.metrics.validation) or (spec.metric.name,)
    if spec.metric.name not in validation:
        problems.append(
            f"{fname}: metrics.validation: the main metric '{spec.metric.name}' is not listed; "
            f"add it to metrics.validation {list(validation)}"
        )
    hidden_named = [m for m in validation if m.startswith(HIDDEN_PREFIXES)]
    if hidden_named:
        problems.append(
            f"{fname}: metrics.validation: {hidden_named} are named like hidden test metrics "
            f"({', '.join(p + '*' for p in HIDDEN_PREFIXES)} are never shown to search); list them in "
            "metrics.test, or rename the validation metric (e.g. 'val_...')"
        )
    selection = spec.metrics.selection
    if selection is not None and (selection in validation or selection in spec.metrics.test):
        problems.append(
            f"{fname}: metrics.selection: {selection!r} is also a validation or test metric; the selection score "
            "must be its own scorer key (e.g. 'sel_score'), measured on rows neither search nor the test uses"
        )
    both = sorted(set(validation) & set(spec.metrics.test))
    if both:
        problems.append(
            f"{fname}: metrics.test: {both} also appear in metrics.validation; the scorer returns one "
            "mapping, so give hidden-test metrics distinct names (e.g. prefix them with 'test_')"
        )

    run = _run_argv(spec.run, fname, problems)
    _check_scorer(root, spec.score, fname, problems)
    target = _target(spec, root, public_ok, fname, problems)
    fidelity = _fidelity(spec.fidelity, target, run, fname, problems)

    space = None
    if spec.idea_space is not None:
        space = read_idea_space(spec.idea_space, fname, "idea_space", problems)
        if space is not None and program_text is not None:
            check_space(space, program_text, band, spec.program, fname, "idea_space", problems)

    if problems:
        raise InvalidTask(root, problems)
    assert statement is not None and program_path is not None and program_text is not None
    return Task(
        name=spec.name,
        root=root,
        kind="native",
        statement=statement,
        program_file=Path(spec.program).name,
        baseline_program=program_text,
        band=band,
        metric=Metric(spec.metric.name, spec.metric.direction, spec.metric.lower, spec.metric.upper),
        anchors=read_anchors(spec.anchors),
        public_data=tuple(public_ok),
        hidden_data=tuple(hidden_ok),
        run_command=run,
        scorer=spec.score,
        validation_metrics=validation,
        test_metrics=tuple(spec.metrics.test),
        selection_metric=spec.metrics.selection,
        limits=spec.limits.to_limits(),
        stochastic=spec.stochastic,
        idea_space=space,
        description=spec.description,
        policy=spec.policy.model_dump(),
        ensemble=_ensemble(spec.ensemble) if spec.ensemble else None,
        target=target,
        fidelity=fidelity,
    )


def _ensemble(spec: EnsembleSpec) -> Ensemble:
    return Ensemble(tuple(spec.files), spec.combine, tuple(spec.key), spec.opt_in)


def _band(spec: TaskSpec) -> Band:
    if spec.band.lines is not None:
        return Band(start_marker=None, end_marker=None, lines=(spec.band.lines[0], spec.band.lines[1]))
    default = Band()
    return Band(
        start_marker=spec.band.start_marker or default.start_marker,
        end_marker=spec.band.end_marker or default.end_marker,
    )


def _check_data(public: list[Path], hidden: list[Path], root: Path, fname: str, problems: list[str]) -> None:
    for h in hidden:
        for p in public:
            if h == p or h.is_relative_to(p) or p.is_relative_to(h):
                problems.append(
                    f"{fname}: data: public '{p.relative_to(root)}' and hidden '{h.relative_to(root)}' overlap; "
                    "hidden files must never be copied into the workspace, so keep them in separate folders"
                )
    names: dict[str, Path] = {}
    for p in public:
        if p.name in names:
            problems.append(
                f"{fname}: data.public: '{p.relative_to(root)}' and '{names[p.name].relative_to(root)}' share the "
                f"name '{p.name}' (each is copied to public/<name>); rename one"
            )
        names[p.name] = p


def _run_argv(run: Any, fname: str, problems: list[str]) -> tuple[str, ...]:
    argv = shlex.split(run) if isinstance(run, str) else list(run)
    fields = {f for part in argv for _, f, _, _ in string.Formatter().parse(part) if f is not None}
    unknown = sorted(fields - set(RUN_PLACEHOLDERS))
    if unknown:
        problems.append(
            f"{fname}: run: unknown placeholder(s) {unknown}; use only "
            + ", ".join("{" + p + "}" for p in RUN_PLACEHOLDERS)
        )
    if "program" not in fields:
        problems.append(f"{fname}: run: the command never mentions {{program}}; e.g. use '{DEFAULT_RUN}'")
    return tuple(argv)


def _check_scorer(root: Path, score: str, fname: str, problems: list[str]) -> None:
    file, sep, func = score.partition(":")
    if sep and file.endswith(".py") and func.isidentifier():
        path = inside(root, file, "score", fname, problems)
        if path is None:
            return
        text = read_text(path, problems)
        if text is None:
            return
        try:
            tree = ast.parse(text, filename=path.name)
        except SyntaxError as exc:
            problems.append(f"{file}: line {exc.lineno}: {exc.msg}; the scorer must be valid Python")
            return
        if func not in top_level_functions(tree):
            problems.append(
                f"{fname}: score: {file} defines no top-level function '{func}'; "
                f"define {func}(outdir, hidden, public) -> dict there"
            )
        return
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(score) if f is not None}
    except ValueError as exc:
        problems.append(f"{fname}: score: bad command template ({exc}); use 'score.py:score' or a command")
        return
    unknown = sorted(fields - set(SCORE_PLACEHOLDERS))
    if unknown:
        problems.append(
            f"{fname}: score: unknown placeholder(s) {unknown}; a scoring command may use "
            + ", ".join("{" + p + "}" for p in SCORE_PLACEHOLDERS)
            + " (or write 'file.py:function')"
        )


def _target(spec: TaskSpec, root: Path, public: list[Path], fname: str, problems: list[str]) -> Target | None:
    """``data.target`` as a record; each of its files must be one of the public files."""
    declared = spec.data.target
    if declared is None:
        return None
    files = []
    for i, rel in enumerate(declared.files):
        path = inside(root, rel, f"data.target.files[{i}]", fname, problems)
        if path is not None and path not in public:
            problems.append(
                f"{fname}: data.target.files[{i}]: '{rel}' is not listed in data.public; "
                "the target is read from public training files, so list it there"
            )
        elif path is not None:
            files.append(path)
    return Target(declared.column, declared.kind, tuple(files))


def _fidelity(
    spec: FidelitySpec | None, target: Target | None, run: tuple[str, ...], fname: str, problems: list[str]
) -> Fidelity:
    """``fidelity:`` as a record; a data-fraction level needs ``data.target``, ``{fidelity}`` needs ``full``."""
    uses_placeholder = any("{fidelity}" in part for part in run)
    if spec is None:
        if uses_placeholder:
            problems.append(f"{fname}: run: uses {{fidelity}} but the task declares no 'fidelity:' levels; add them")
        return Fidelity()
    if uses_placeholder and spec.full is None:
        problems.append(
            f"{fname}: fidelity.full: the run command uses {{fidelity}}, so give the knob's value at full "
            "fidelity (e.g. 'full: 1')"
        )
    levels = []
    for name, level in spec.levels.items():
        if level.data_fraction is not None and target is None:
            problems.append(
                f"{fname}: fidelity.levels.{name}: data_fraction needs data.target (the files to subsample and "
                "the column to stratify by); add 'data.target: {column: ..., kind: ..., files: [...]}'"
            )
        knob = None if level.knob is None else str(level.knob)
        levels.append(FidelityLevel(name, level.description.strip(), level.data_fraction, level.seed, knob))
    full = None if spec.full is None else str(spec.full)
    return Fidelity(levels=tuple(levels), env=spec.env, full=full)


__all__ = [
    "DEFAULT_ARGV",
    "NATIVE",
    "NativeKind",
    "ScorerTimedOut",
    "call_scorer",
    "check_hidden",
    "run_scorer",
    "run_step",
    "wrote_nothing",
]
