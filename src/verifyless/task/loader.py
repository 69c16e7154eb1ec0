"""Load task folders into frozen ``Task`` objects, reporting every problem at once.

Two folder kinds are recognised:

- **native**: a ``task.yaml`` (schema in ``verifyless.task.schema``, reference
  in ``docs/design/task-format.md``) with a statement, a program with an
  editable band, public and hidden data, a run command and a trusted scorer;
- **openevolve**: ``initial_program.py`` + ``evaluator.py`` (OpenEvolve's
  layout). The evaluator is inspected with ``ast`` only, never imported here.
  An optional ``verifyless.yaml`` sidecar adds a description, anchors, limits
  and an idea space; OpenEvolve's own ``config.yaml`` is read only for its
  system message, used as the statement when nothing better exists;
- **competition**: MLE-bench's prepared layout (``prepared/public`` + ``prepared/private``), loaded by
  ``verifyless.task.tabular.competition``.

A malformed folder raises ``InvalidTask`` (a ``TaskError``) whose message lists
each problem as ``<file>: <key path>: <what is wrong>; <fix>``.
"""

from __future__ import annotations

import ast
import difflib
import shlex
import string
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from verifyless import builtin
from verifyless.errors import TaskError
from verifyless.program import BandError, split, syntax_error
from verifyless.task.base import (
    HIDDEN_PREFIXES,
    Anchors,
    Band,
    Ensemble,
    Fidelity,
    FidelityLevel,
    IdeaOption,
    IdeaSpace,
    Metric,
    Target,
    Task,
)
from verifyless.task.schema import (
    DEFAULT_RUN,
    RUN_PLACEHOLDERS,
    SCORE_PLACEHOLDERS,
    AnchorsSpec,
    FidelitySpec,
    IdeaSpaceSpec,
    SidecarSpec,
    TaskSpec,
    explain,
)
from verifyless.task.space import SpaceError, render, slots_in
from verifyless.task.tabular.competition import is_competition, load_competition
from verifyless.yamlfile import yaml_problem

OPENEVOLVE_PROGRAM = "initial_program.py"
OPENEVOLVE_EVALUATOR = "evaluator.py"
SIDECAR = "verifyless.yaml"
CASCADE_STAGES = ("evaluate_stage1", "evaluate_stage2", "evaluate_stage3")


class InvalidTask(TaskError):
    """A task folder with one or more problems; ``problems`` holds one line each."""

    def __init__(self, root: Path, problems: list[str]):
        self.root = root
        self.problems = tuple(problems)
        head = f"task folder {root} is invalid ({len(problems)} problem{'s' if len(problems) != 1 else ''}):"
        super().__init__("\n".join([head, *(f"  - {p}" for p in problems)]))


class UnknownTask(TaskError):
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
    """Load a task folder, or a built-in task by bare name (``load_task("diabetes")``)."""
    root = _locate(path)
    if (root / "task.yaml").is_file():
        return _load_native(root)
    if (root / OPENEVOLVE_PROGRAM).is_file() and (root / OPENEVOLVE_EVALUATOR).is_file():
        return _load_openevolve(root)
    if is_competition(root):  # MLE-bench's prepared layout (verifyless.task.tabular.competition)
        return load_competition(root, _competition_space)
    raise TaskError(
        f"{root} is not a task folder: it has neither task.yaml nor {OPENEVOLVE_PROGRAM} + "
        f"{OPENEVOLVE_EVALUATOR}; add a task.yaml (see docs/design/task-format.md)"
    )


def discover_tasks(directory: str | Path) -> list[Task | TaskError]:
    """Every task folder directly inside ``directory`` (sorted by name), loaded or its error.

    Sub-folders that look like neither kind of task are skipped silently, and so is the ``prepared/`` folder
    of a competition folder: it is that competition, not a task of its own.
    """
    base = Path(directory)
    if not base.is_dir():
        raise TaskError(f"{base} is not a directory; pass the folder that holds your task folders")
    found: list[Task | TaskError] = []
    for child in sorted(p for p in base.iterdir() if p.is_dir()):
        if not is_task_folder(child) or (child.name == "prepared" and is_competition(base)):
            continue
        try:
            found.append(load_task(child))
        except TaskError as exc:
            found.append(exc)
    return found


def is_task_folder(path: Path) -> bool:
    """Whether ``path`` looks like a task folder of any kind (native, OpenEvolve, MLE-bench), valid or not."""
    native = (path / "task.yaml").is_file()
    openevolve = (path / OPENEVOLVE_PROGRAM).is_file() and (path / OPENEVOLVE_EVALUATOR).is_file()
    return native or openevolve or is_competition(path)


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
    raise TaskError(f"task folder {candidate} does not exist; check the path")


# ------------------------------------------------------------------ native


def _load_native(root: Path) -> Task:
    fname = "task.yaml"
    problems: list[str] = []
    data = _read_yaml(root / fname, problems)
    if data is None:
        raise InvalidTask(root, problems)
    try:
        spec = TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise InvalidTask(root, explain(exc, fname, TaskSpec)) from None

    statement_path = _inside(root, spec.statement, "statement", fname, problems)
    program_path = _inside(root, spec.program, "program", fname, problems)
    band = _band(spec)
    program_text = _read_program(program_path, band, fname, problems) if program_path else None

    public = [_inside(root, p, f"data.public[{i}]", fname, problems) for i, p in enumerate(spec.data.public)]
    hidden = [_inside(root, p, f"data.hidden[{i}]", fname, problems) for i, p in enumerate(spec.data.hidden)]
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
        space = _idea_space(spec.idea_space, fname, "idea_space", problems)
        if space is not None and program_text is not None:
            _check_space(space, program_text, band, spec.program, fname, "idea_space", problems)

    if problems:
        raise InvalidTask(root, problems)
    assert statement_path is not None and program_path is not None and program_text is not None
    return Task(
        name=spec.name,
        root=root,
        kind="native",
        statement=statement_path.read_text(encoding="utf-8"),
        program_file=Path(spec.program).name,
        baseline_program=program_text,
        band=band,
        metric=Metric(spec.metric.name, spec.metric.direction, spec.metric.lower, spec.metric.upper),
        anchors=_anchors(spec.anchors),
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
        ensemble=Ensemble(tuple(spec.ensemble.files), spec.ensemble.combine) if spec.ensemble else None,
        target=target,
        fidelity=fidelity,
    )


def _read_yaml(path: Path, problems: list[str]) -> Any:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        problems.append(f"{path.name}: YAML syntax error at {yaml_problem(exc)}; fix the YAML syntax")
        return None
    if not isinstance(data, dict):
        problems.append(
            f"{path.name}: (top level): expected a mapping of keys (name, program, metric, ...); got {type(data).__name__}"
        )
        return None
    return data


def _inside(root: Path, rel: str, key: str, fname: str, problems: list[str]) -> Path | None:
    """``root / rel`` if it exists inside ``root``; else record a problem and return None."""
    target = (root / rel).resolve()
    if Path(rel).is_absolute() or not target.is_relative_to(root):
        problems.append(f"{fname}: {key}: '{rel}' points outside the task folder; use a path inside {root}")
        return None
    if not target.exists():
        problems.append(f"{fname}: {key}: file '{rel}' not found in {root}; create it or fix the path")
        return None
    return target


def _band(spec: TaskSpec) -> Band:
    if spec.band.lines is not None:
        return Band(start_marker=None, end_marker=None, lines=(spec.band.lines[0], spec.band.lines[1]))
    default = Band()
    return Band(
        start_marker=spec.band.start_marker or default.start_marker,
        end_marker=spec.band.end_marker or default.end_marker,
    )


def _read_program(path: Path, band: Band, fname: str, problems: list[str]) -> str | None:
    text = path.read_text(encoding="utf-8")
    error = syntax_error(text, path.name)
    if error:
        problems.append(f"{path.name}: {error}; the baseline program must be valid Python")
        return None
    try:
        split(text, band)
    except BandError as exc:
        problems.append(
            f"{path.name}: band: {exc}; mark the editable region with the band markers or set band.lines in {fname}"
        )
        return None
    return text


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
        path = _inside(root, file, "score", fname, problems)
        if path is None:
            return
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=path.name)
        except SyntaxError as exc:
            problems.append(f"{file}: line {exc.lineno}: {exc.msg}; the scorer must be valid Python")
            return
        if func not in _top_level_functions(tree):
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
        path = _inside(root, rel, f"data.target.files[{i}]", fname, problems)
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


def _cascade_levels(cascade: tuple[str, ...]) -> Fidelity:
    """OpenEvolve: running only the first k of n cascade stages is level ``stage<k>`` (k < n)."""
    n = len(cascade)
    levels = tuple(
        FidelityLevel(f"stage{k}", f"the first {k} of the evaluator's {n} cascade stages", stages=k)
        for k in range(1, n)
    )
    return Fidelity(levels=levels)


def _top_level_functions(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _anchors(spec: AnchorsSpec) -> Anchors:
    return Anchors(floor=spec.floor, reference=spec.reference, bound=spec.bound, sota=spec.sota)


# ------------------------------------------------------------------ idea space


def _idea_space(spec: IdeaSpaceSpec, fname: str, key: str, problems: list[str]) -> IdeaSpace | None:
    before = len(problems)
    dims = spec.dimensions
    for dim in dims:
        if "." in dim or not dim.isidentifier():
            problems.append(f"{fname}: {key}.dimensions.{dim}: use a Python identifier as dimension name")
    for dim in sorted(set(dims) - set(spec.baseline)):
        problems.append(f"{fname}: {key}.baseline: no option given for dimension '{dim}'; add '{dim}: <option>'")
    for dim, opt in spec.baseline.items():
        if dim not in dims:
            problems.append(f"{fname}: {key}.baseline.{dim}: no such dimension; known: {sorted(dims)}")
        elif opt not in dims[dim].options:
            problems.append(
                f"{fname}: {key}.baseline.{dim}: '{opt}' is not an option of '{dim}'; "
                f"use one of {sorted(dims[dim].options)}"
            )
    fragments: dict[str, dict[str, str]] = {}
    for dim, dspec in dims.items():
        for name, ospec in dspec.options.items():
            code = ospec.code if isinstance(ospec.code, dict) else {"": ospec.code}
            for part, text in code.items():
                slot = f"{dim}.{part}" if part else dim
                fragments.setdefault(slot, {})[name] = text
    for slot in slots_in(spec.template):
        if slot.split(".", 1)[0] not in dims:
            problems.append(
                f"{fname}: {key}.template: placeholder {{{{{slot}}}}} names no dimension; known: {sorted(dims)}"
            )
    if len(problems) > before:
        return None
    return IdeaSpace(
        dimensions={
            dim: tuple(IdeaOption(name, o.description.strip(), dict(o.params)) for name, o in d.options.items())
            for dim, d in dims.items()
        },
        template=spec.template,
        baseline=dict(spec.baseline),
        fragments=fragments,
        descriptions={dim: d.description.strip() for dim, d in dims.items()},
    )


def _check_space(
    space: IdeaSpace, program: str, band: Band, program_name: str, fname: str, key: str, problems: list[str]
) -> None:
    """The baseline renders the program's own band, and every option renders valid Python."""
    parts = split(program, band)
    try:
        base_band = render(space, space.baseline)
    except SpaceError as exc:
        problems.append(f"{fname}: {key}.template: {exc}; fix the template or the option code")
        return
    if base_band != parts.band:
        problems.append(
            f"{fname}: {key}.baseline: rendering the baseline assignment does not give the band of "
            f"{program_name}{_first_difference(parts.band, base_band)}; make the template and the program agree"
        )
    for dim, options in space.dimensions.items():
        for opt in options:
            assignment = {**space.baseline, dim: opt.name}
            try:
                text = parts.join(render(space, assignment))
            except SpaceError as exc:
                problems.append(f"{fname}: {key}.dimensions.{dim}.options.{opt.name}: {exc}")
                continue
            error = syntax_error(text, program_name)
            if error:
                problems.append(
                    f"{fname}: {key}.dimensions.{dim}.options.{opt.name}: the rendered program does not parse "
                    f"({error}); fix this option's code"
                )


def _first_difference(expected: str, got: str) -> str:
    a, b = expected.splitlines(), got.splitlines()
    for i, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return f" (band line {i}: program has {x.strip()[:50]!r}, template gives {y.strip()[:50]!r})"
    return f" (program band has {len(a)} lines, template gives {len(b)})"


def _competition_space(spec: IdeaSpaceSpec, program: str, program_name: str, problems: list[str]) -> IdeaSpace | None:
    """A competition's idea space, checked against its program like a sidecar's (problems appended)."""
    space = _idea_space(spec, SIDECAR, "idea_space", problems)
    if space is not None:
        _check_space(space, program, Band(), program_name, SIDECAR, "idea_space", problems)
    return space


# ------------------------------------------------------------------ openevolve


def _load_openevolve(root: Path) -> Task:
    problems: list[str] = []
    program_path = root / OPENEVOLVE_PROGRAM
    evaluator_path = root / OPENEVOLVE_EVALUATOR
    band = Band()
    program_text = _read_program(program_path, band, SIDECAR, problems)

    cascade: tuple[str, ...] = ()
    try:
        tree = ast.parse(evaluator_path.read_text(encoding="utf-8"), filename=OPENEVOLVE_EVALUATOR)
    except SyntaxError as exc:
        problems.append(f"{OPENEVOLVE_EVALUATOR}: line {exc.lineno}: {exc.msg}; the evaluator must be valid Python")
    else:
        defined = _top_level_functions(tree)
        cascade = tuple(s for s in CASCADE_STAGES if s in defined)
        if "evaluate" not in defined and not cascade:
            problems.append(
                f"{OPENEVOLVE_EVALUATOR}: defines neither evaluate(program_path) nor evaluate_stage1(program_path); "
                "add one that returns a dict with 'combined_score'"
            )

    sidecar = SidecarSpec()
    if (root / SIDECAR).is_file():
        data = _read_yaml(root / SIDECAR, problems)
        if data is not None:
            try:
                sidecar = SidecarSpec.model_validate(data)
            except ValidationError as exc:
                problems.extend(explain(exc, SIDECAR, SidecarSpec))

    statement = _openevolve_statement(root, sidecar, problems)
    space = None
    if sidecar.idea_space is not None:
        space = _idea_space(sidecar.idea_space, SIDECAR, "idea_space", problems)
        if space is not None and program_text is not None:
            _check_space(space, program_text, band, OPENEVOLVE_PROGRAM, SIDECAR, "idea_space", problems)

    if problems:
        raise InvalidTask(root, problems)
    assert program_text is not None
    description = sidecar.description or next(
        (ln.strip("# ").strip() for ln in statement.splitlines() if ln.strip()), ""
    )
    return Task(
        name=root.name,
        root=root,
        kind="openevolve",
        statement=statement,
        program_file=OPENEVOLVE_PROGRAM,
        baseline_program=program_text,
        band=band,
        metric=Metric("combined_score", "maximize"),
        anchors=_anchors(sidecar.anchors),
        validation_metrics=("combined_score",),
        limits=sidecar.limits.to_limits(),
        stochastic=sidecar.stochastic,
        idea_space=space,
        evaluator=evaluator_path,
        cascade=cascade,
        description=description[:200],
        policy=sidecar.policy.model_dump(),
        fidelity=_cascade_levels(cascade),
    )


def _openevolve_statement(root: Path, sidecar: SidecarSpec, problems: list[str]) -> str:
    """Sidecar statement file, else config.yaml's system message, else README.md, else a generic line."""
    if sidecar.statement:
        path = _inside(root, sidecar.statement, "statement", SIDECAR, problems)
        return path.read_text(encoding="utf-8") if path else ""
    config = root / "config.yaml"
    if config.is_file():
        try:
            data = yaml.safe_load(config.read_text(encoding="utf-8"))
        except yaml.YAMLError:
            data = None  # OpenEvolve's own config is not ours to validate
        prompt = data.get("prompt") if isinstance(data, dict) else None
        message = prompt.get("system_message") if isinstance(prompt, dict) else None
        if isinstance(message, str) and message.strip():
            return message.strip()
    readme = root / "README.md"
    if readme.is_file():
        return readme.read_text(encoding="utf-8")
    return f"Improve {OPENEVOLVE_PROGRAM} so that {OPENEVOLVE_EVALUATOR} reports a higher combined_score."


__all__ = ["InvalidTask", "UnknownTask", "builtin_tasks_dir", "discover_tasks", "load_task"]
