"""Reading a task folder, shared by the kinds that collect every problem before they give up.

Each helper appends a problem to ``problems`` (one line: ``<file>: <key path>: <what is wrong>; <fix>``) rather
than raising, so a loader can report every problem of a folder at once with ``InvalidTask``. Used by
``task.native``, ``task.openevolve`` and ``task.tabular.kind`` (idea spaces of competitions).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import yaml

from verifyless.errors import TaskError
from verifyless.program import BandError, split, syntax_error
from verifyless.task.base import Anchors, Band, IdeaOption, IdeaSpace
from verifyless.task.schema import AnchorsSpec, IdeaSpaceSpec
from verifyless.task.space import SpaceError, render, slots_in
from verifyless.yamlfile import yaml_problem


class InvalidTask(TaskError):
    """A task folder with one or more problems; ``problems`` holds one line each."""

    def __init__(self, root: Path, problems: list[str]):
        self.root = root
        self.problems = tuple(problems)
        head = f"task folder {root} is invalid ({len(problems)} problem{'s' if len(problems) != 1 else ''}):"
        super().__init__("\n".join([head, *(f"  - {p}" for p in problems)]))


def read_text(path: Path, problems: list[str]) -> str | None:
    """The text of ``path``; None, and a problem naming the file, where it is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        problems.append(not_utf8(path, exc))
        return None


def not_utf8(path: Path, exc: UnicodeDecodeError) -> str:
    """The problem line of a file that is not UTF-8 text: where the first bad byte is, and the fix."""
    return f"{path.name}: not UTF-8 text (byte {exc.start}: {exc.object[exc.start]:#04x}); save it as UTF-8"


def read_yaml(path: Path, problems: list[str]) -> Any:
    text = read_text(path, problems)
    if text is None:
        return None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problems.append(f"{path.name}: YAML syntax error at {yaml_problem(exc)}; fix the YAML syntax")
        return None
    if not isinstance(data, dict):
        problems.append(
            f"{path.name}: (top level): expected a mapping of keys (name, program, metric, ...); got {type(data).__name__}"
        )
        return None
    return data


def inside(root: Path, rel: str, key: str, fname: str, problems: list[str]) -> Path | None:
    """``root / rel`` if it exists inside ``root``; else record a problem and return None."""
    target = (root / rel).resolve()
    if Path(rel).is_absolute() or not target.is_relative_to(root):
        problems.append(f"{fname}: {key}: '{rel}' points outside the task folder; use a path inside {root}")
        return None
    if not target.exists():
        problems.append(f"{fname}: {key}: file '{rel}' not found in {root}; create it or fix the path")
        return None
    return target


def read_program(path: Path, band: Band, fname: str, problems: list[str]) -> str | None:
    text = read_text(path, problems)
    if text is None:
        return None
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


def top_level_functions(tree: ast.Module) -> set[str]:
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def read_anchors(spec: AnchorsSpec) -> Anchors:
    return Anchors(floor=spec.floor, reference=spec.reference, bound=spec.bound, sota=spec.sota)


# ------------------------------------------------------------------ idea space


def read_idea_space(spec: IdeaSpaceSpec, fname: str, key: str, problems: list[str]) -> IdeaSpace | None:
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


def check_space(
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


__all__ = [
    "InvalidTask",
    "check_space",
    "inside",
    "read_anchors",
    "read_idea_space",
    "read_program",
    "not_utf8",
    "read_text",
    "read_yaml",
    "top_level_functions",
]
