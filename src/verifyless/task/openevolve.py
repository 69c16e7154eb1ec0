"""OpenEvolve folders: ``initial_program.py`` + ``evaluator.py`` (OpenEvolve's layout), loaded unchanged.

The evaluator is inspected with ``ast`` only, never imported on the trusted side. An optional
``verifyless.yaml`` sidecar adds a description, anchors, limits and an idea space; OpenEvolve's own
``config.yaml`` is read only for its system message, used as the statement when nothing better exists.

The evaluator runs *inside* the sandbox together with the program (there is no hidden-data separation): the
workspace gets a runner script (``_oe_runner.py``) that loads the evaluator from the task folder, which the
sandbox shows read-only at its own path with the hidden data and every dotfile masked, and writes
``out/metrics.json``; judging reads that file. A cascade (``evaluate_stage1`` ..) runs its first k stages at
fidelity level ``stage<k>``. ``OPENEVOLVE`` is this kind (``task.kind``).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from verifyless.errors import TaskError
from verifyless.task import folder
from verifyless.task.base import Band, Fidelity, FidelityLevel, Metric, Task
from verifyless.task.kind import Judgement, Step
from verifyless.task.schema import SidecarSpec, explain

OPENEVOLVE_PROGRAM = "initial_program.py"
OPENEVOLVE_EVALUATOR = "evaluator.py"
SIDECAR = "verifyless.yaml"
CASCADE_STAGES = ("evaluate_stage1", "evaluate_stage2", "evaluate_stage3")
RUNNER = Path(__file__).parent / "_oe_runner.py"
RUNNER_NAME = "_verifyless_oe_runner.py"  # its name in the workspace
OE_METRICS = "metrics.json"


class OpenEvolveKind:
    """Folders with ``initial_program.py`` and ``evaluator.py``."""

    name = "openevolve"

    def detect(self, root: Path) -> bool:
        return (root / OPENEVOLVE_PROGRAM).is_file() and (root / OPENEVOLVE_EVALUATOR).is_file()

    def load(self, root: Path) -> Task:
        return _load_openevolve(root)

    def prepare(self, task: Task, ws: Path, level: FidelityLevel | None) -> Step:
        """The runner, told which cascade stages to run; the task folder shown read-only, its secrets masked."""
        if task.evaluator is None:
            raise TaskError(f"task {task.name!r} is an OpenEvolve task without an evaluator path")
        shutil.copy2(RUNNER, ws / RUNNER_NAME)
        stages = task.cascade[: level.stages] if level is not None and level.stages else task.cascade
        argv = (sys.executable, str(ws / RUNNER_NAME), str(task.evaluator), str(ws / task.program_file))
        return Step(
            (*argv, str(ws / "out" / OE_METRICS), *stages),
            hide=tuple(_hidden_in_folder(task)),
            expose=(task.root,),
            env={"PYTHONDONTWRITEBYTECODE": "1"},
        )

    def judge(self, task: Task, ws: Path, level: FidelityLevel | None) -> Judgement:
        """The runner's metrics file; its ``out/`` is never "silent" (the runner, not the program, writes it)."""
        raw, failure = _read_metrics(ws / "out" / OE_METRICS)
        return Judgement(raw, failure)


OPENEVOLVE = OpenEvolveKind()


def _hidden_in_folder(task: Task) -> list[Path]:
    """What of the task folder the run must not see (hidden data, dotfiles at any depth)."""
    hidden = [Path(p) for p in task.hidden_data]
    for dirpath, dirnames, filenames in os.walk(task.root):
        for name in [*dirnames, *filenames]:
            if name.startswith("."):
                hidden.append(Path(dirpath, name))
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
    return hidden


def _read_metrics(path: Path) -> tuple[Any, str | None]:
    if not path.is_file():
        return None, "the evaluator runner wrote no metrics file"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"the evaluator's metrics file is unreadable: {exc}"
    if not isinstance(data, dict) or not isinstance(data.get("metrics"), dict):
        return None, "the evaluator's metrics file has no 'metrics' object"
    return data["metrics"], None


# ------------------------------------------------------------------ loading


def _cascade_levels(cascade: tuple[str, ...]) -> Fidelity:
    """OpenEvolve: running only the first k of n cascade stages is level ``stage<k>`` (k < n)."""
    n = len(cascade)
    levels = tuple(
        FidelityLevel(f"stage{k}", f"the first {k} of the evaluator's {n} cascade stages", stages=k)
        for k in range(1, n)
    )
    return Fidelity(levels=levels)


def _cascade(evaluator: str, problems: list[str]) -> tuple[str, ...]:
    """The cascade stages the evaluator's source defines (a problem where it defines no entry point or no Python)."""
    try:
        tree = ast.parse(evaluator, filename=OPENEVOLVE_EVALUATOR)
    except SyntaxError as exc:
        problems.append(f"{OPENEVOLVE_EVALUATOR}: line {exc.lineno}: {exc.msg}; the evaluator must be valid Python")
        return ()
    defined = folder.top_level_functions(tree)
    cascade = tuple(s for s in CASCADE_STAGES if s in defined)
    if "evaluate" not in defined and not cascade:
        problems.append(
            f"{OPENEVOLVE_EVALUATOR}: defines neither evaluate(program_path) nor evaluate_stage1(program_path); "
            "add one that returns a dict with 'combined_score'"
        )
    return cascade


def _load_openevolve(root: Path) -> Task:
    problems: list[str] = []
    program_path = root / OPENEVOLVE_PROGRAM
    evaluator_path = root / OPENEVOLVE_EVALUATOR
    band = Band()
    program_text = folder.read_program(program_path, band, SIDECAR, problems)

    evaluator = folder.read_text(evaluator_path, problems)
    cascade = _cascade(evaluator, problems) if evaluator is not None else ()

    sidecar = SidecarSpec()
    if (root / SIDECAR).is_file():
        data = folder.read_yaml(root / SIDECAR, problems)
        if data is not None:
            try:
                sidecar = SidecarSpec.model_validate(data)
            except ValidationError as exc:
                problems.extend(explain(exc, SIDECAR, SidecarSpec))

    statement = _openevolve_statement(root, sidecar, problems)
    space = None
    if sidecar.idea_space is not None:
        space = folder.read_idea_space(sidecar.idea_space, SIDECAR, "idea_space", problems)
        if space is not None and program_text is not None:
            folder.check_space(space, program_text, band, OPENEVOLVE_PROGRAM, SIDECAR, "idea_space", problems)

    if problems:
        raise folder.InvalidTask(root, problems)
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
        anchors=folder.read_anchors(sidecar.anchors),
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
        path = folder.inside(root, sidecar.statement, "statement", SIDECAR, problems)
        return (folder.read_text(path, problems) if path else None) or ""
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
        return folder.read_text(readme, problems) or ""
    return f"Improve {OPENEVOLVE_PROGRAM} so that {OPENEVOLVE_EVALUATOR} reports a higher combined_score."


__all__ = ["OPENEVOLVE", "OPENEVOLVE_EVALUATOR", "OPENEVOLVE_PROGRAM", "OpenEvolveKind"]
