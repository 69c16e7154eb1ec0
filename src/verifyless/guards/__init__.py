"""Guards before execution (MLEvolve's code review): findings on a program before it is verified.

``Guards(config).check(task, parent_program, program)`` runs the static checks
(``verifyless.guards.static``), the data-leakage check for native tasks
(``verifyless.guards.leakage``) and, when configured, the LLM reviewer
(``verifyless.guards.reviewer``), and returns a ``GuardReport``. Each finding
is blocking or advisory as ``GuardsConfig`` says for its guard (a task's
``policy: warn`` and an unreadable reviewer reply are always advisory).

The child-making unit (``verifyless.child.ChildMaker``) turns a report with
blocking findings into node status ``guard-failed`` whose reason is
``report.reason()`` (one line per blocking finding); that reason is what
``implementer.repair`` sees when the child is repaired, keeping its idea.
Advisory findings become notes on the child.

With ``only_new`` (default) a finding the parent program also has is dropped
(compared without line numbers), so the task's own harness never blocks.
Non-Python program files get only the reviewer. The static checks read the
source only; nothing is imported or run. Calling a ``Guards`` object directly
(``await guards(task, parent, program)``) returns the report too: it is the
``GuardCheck`` the child-making unit takes.
"""

from __future__ import annotations

import ast
import importlib.machinery
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from verifyless.errors import ConfigError
from verifyless.guards import leakage as _leakage
from verifyless.guards import static
from verifyless.guards.config import GuardsConfig, Mode
from verifyless.guards.reviewer import Reviewer
from verifyless.guards.static import Issue
from verifyless.roles.render import code_lang
from verifyless.sandbox.view import visible_sys_path
from verifyless.task.base import Task

__all__ = ["Finding", "GuardReport", "Guards", "GuardsConfig", "Mode", "ModuleAvailability"]

_LINE = re.compile(r"\(?\bline \d+\)?,?\s*")


@dataclass(frozen=True)
class Finding:
    """One guard's finding on a program; ``blocking`` ones stop it from being verified."""

    guard: str
    blocking: bool
    reason: str
    line: int | None = None


@dataclass(frozen=True)
class GuardReport:
    """Everything the guards found on one program (blocking and advisory)."""

    findings: tuple[Finding, ...]

    @property
    def blocking(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.blocking)

    @property
    def advisory(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.blocking)

    def reason(self) -> str:
        """One readable line per blocking finding ('' when nothing blocks)."""
        return "\n".join(f"{f.guard}: {f.reason}" for f in self.blocking)

    def notes(self) -> tuple[str, ...]:
        """One line per advisory finding, for the child's notes."""
        return tuple(f"guard {f.guard} (advisory): {f.reason}" for f in self.advisory)


class ModuleAvailability:
    """Can the sandbox's interpreter import a top-level module? (``find_spec`` on its path)

    ``search_path`` defaults to this interpreter's ``sys.path`` entries that the
    sandbox shows (``verifyless.sandbox.view.visible_sys_path``): the standard
    library and site-packages, not an editable checkout. Built-in and frozen
    modules always count; ``local`` names the modules the workspace will hold.
    """

    def __init__(self, search_path: Sequence[str] | None = None) -> None:
        if search_path is None:
            search_path = visible_sys_path()
        self.search_path = list(search_path)
        self._known: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if name not in self._known:
            self._known[name] = (
                name in sys.builtin_module_names
                or importlib.machinery.FrozenImporter.find_spec(name) is not None
                or importlib.machinery.PathFinder.find_spec(name, self.search_path) is not None
            )
        return self._known[name]


class Guards:
    """Runs the configured guards; see the module docstring for the contract."""

    def __init__(
        self,
        config: GuardsConfig | None = None,
        *,
        reviewer_model: object | None = None,
        modules: ModuleAvailability | None = None,
    ) -> None:
        self.config = config or GuardsConfig()
        if self.config.reviewer != "off" and reviewer_model is None:
            raise ConfigError(
                "guards.reviewer is on but no reviewer model was given: set "
                f"roles.models.{self.config.reviewer_model} (or roles.models.default), "
                "or guards.reviewer=off"
            )
        self.reviewer = Reviewer(reviewer_model) if reviewer_model is not None else None
        self.modules = modules or ModuleAvailability()

    async def __call__(self, task: Task, parent_program: str, program: str) -> GuardReport:
        return await self.check(task, parent_program, program)

    async def check(self, task: Task, parent_program: str, program: str) -> GuardReport:
        """All findings on ``program`` (a child of ``parent_program``) for ``task``."""
        issues = self.static_issues(task, program)
        if issues and self.config.only_new:
            known = {_key(i) for i in self.static_issues(task, parent_program)}
            issues = [i for i in issues if _key(i) not in known]
        if self.reviewer is not None and self.config.reviewer != "off" and not _blocks(issues, self.config):
            issues += await self.reviewer.review(task, parent_program, program)
        return GuardReport(tuple(self._finding(i) for i in issues))

    def static_issues(self, task: Task, program: str) -> list[Issue]:
        """Issues from the static and leakage guards that are not ``off`` (no LLM)."""
        if code_lang(task) not in ("python", ""):
            return []
        tree, issues = static.syntax(program, task.program_file)
        if tree is None:
            return issues if self.config.syntax != "off" else []
        return [i for i in self._checks(task, tree) if self._mode(i.guard) != "off"]

    # ------------------------------------------------------------------ steps

    def _checks(self, task: Task, tree: ast.Module) -> list[Issue]:
        cfg = self.config
        local = _local_modules(task)
        issues: list[Issue] = []
        if cfg.undefined_names != "off":
            issues += static.undefined_names(tree)
        if cfg.imports != "off":
            issues += static.imports(tree, lambda name: name in local or self.modules(name))
        if cfg.paths != "off":
            issues += static.paths(tree)
        if cfg.policy != "off":
            issues += static.policy(tree, task)
        if cfg.metric_write != "off":
            issues += static.metric_write(tree, _metric_names(task))
        if cfg.leakage != "off" and not task.evaluator_in_sandbox:
            issues += _leakage.leakage(tree, _leakage.evaluation_files(task.public_data))
        return issues

    def _mode(self, guard: str) -> Mode:
        return getattr(self.config, guard)

    def _finding(self, issue: Issue) -> Finding:
        blocking = self._mode(issue.guard) == "blocking" and not issue.advisory_only
        return Finding(issue.guard, blocking, issue.reason, issue.line)


def _blocks(issues: list[Issue], config: GuardsConfig) -> bool:
    """A blocking static finding already decides; the reviewer is not asked (saves a call)."""
    return any(getattr(config, i.guard) == "blocking" and not i.advisory_only for i in issues)


def _key(issue: Issue) -> tuple[str, str]:
    return issue.guard, _LINE.sub("", issue.reason)


def _metric_names(task: Task) -> set[str]:
    return {task.metric.name, *task.validation_metrics, *task.test_metrics}


@lru_cache(maxsize=64)
def _local_modules_of(root: str, folder_copied: bool, program_file: str) -> frozenset[str]:
    from pathlib import Path

    names = {Path(program_file).stem}
    if folder_copied:  # OpenEvolve: the folder's files are copied into the workspace (sys.path[0])
        for entry in Path(root).iterdir():
            if entry.name.startswith((".", "__")):
                continue
            if entry.suffix == ".py" or (entry.is_dir() and (entry / "__init__.py").is_file()):
                names.add(entry.stem)
    return frozenset(names)


def _local_modules(task: Task) -> frozenset[str]:
    return _local_modules_of(str(task.root), task.evaluator_in_sandbox, task.program_file)
