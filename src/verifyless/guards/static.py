"""Static guards: checks on a candidate program's source, no execution.

Each check takes the parsed module (and what it needs of the task) and returns
``Issue`` records; ``verifyless.guards.Guards`` turns them into findings with
the configured mode. The checks are heuristics over the AST with known limits:

* ``undefined_names`` is module-wide: a name counts as defined if *any* scope
  binds it, so it finds typos and missing imports, not use-before-assignment
  or a name used in the wrong scope; a ``from x import *`` switches it off.
* ``paths`` sees literal strings only (not paths built at run time).
* ``policy`` sees imports and direct calls (``os.system``), not ``getattr``
  tricks; the sandbox cuts the network anyway.
* ``metric_write`` sees a literal number stored under a metric's name
  (dict literal, subscript, keyword) and writes to ``metrics.json``.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from verifyless.task.base import Task


@dataclass(frozen=True)
class Issue:
    """One problem a guard found; ``advisory_only`` findings never block (a task's ``warn`` policy)."""

    guard: str
    reason: str
    line: int | None = None
    advisory_only: bool = False


MODULE_NAMES = frozenset(dir(builtins)) | {
    "__file__",
    "__name__",
    "__doc__",
    "__builtins__",
    "__spec__",
    "__loader__",
    "__package__",
    "__path__",
    "__annotations__",
    "__cached__",
    "__dict__",
    "__module__",
    "__qualname__",
    "__class__",
}
NETWORK_MODULES = frozenset(
    {
        "socket",
        "socketserver",
        "ssl",
        "http",
        "urllib",
        "urllib3",
        "requests",
        "httpx",
        "aiohttp",
        "ftplib",
        "smtplib",
        "poplib",
        "imaplib",
        "telnetlib",
        "xmlrpc",
        "websocket",
        "websockets",
        "paramiko",
        "grpc",
    }
)
SUBPROCESS_MODULES = frozenset({"subprocess", "pty", "pexpect", "sh", "plumbum"})
SUBPROCESS_CALLS = re.compile(
    r"^(os\.(system|popen|exec\w*|spawn\w*|posix_spawn\w*)|"
    r"asyncio\.create_subprocess_\w+)$"
)
ALLOWED_ABSOLUTE = (
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/shm",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/stdin",
    "/proc/self",
    "/proc/cpuinfo",
    "/proc/meminfo",
)
_PATHLIKE = re.compile(r"^(~|/)[A-Za-z0-9_.\-~]+(/[^\s\"'<>|]*)?$")
_ESCAPE = re.compile(r"(^|/)\.\.(/|$)")
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


# ------------------------------------------------------------------ syntax and names


def syntax(program: str, filename: str) -> tuple[ast.Module | None, list[Issue]]:
    """Parse ``program``; on failure one ``syntax`` issue with the line."""
    try:
        return ast.parse(program, filename=filename), []
    except SyntaxError as exc:
        where = f" (line {exc.lineno})" if exc.lineno else ""
        return None, [Issue("syntax", f"the program does not parse: {exc.msg}{where}", exc.lineno)]
    except ValueError as exc:  # e.g. null bytes
        return None, [Issue("syntax", f"the program does not parse: {exc}")]


def undefined_names(tree: ast.Module) -> list[Issue]:
    """Names read somewhere but bound nowhere in the module and not builtins."""
    bound: set[str] = set()
    loads: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            return []  # a star import can define anything
        bound.update(_bound_by(node))
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.setdefault(node.id, node.lineno)
    missing = sorted((line, name) for name, line in loads.items() if name not in bound and name not in MODULE_NAMES)
    return [
        Issue("undefined_names", f"name {name!r} is used but never defined or imported (line {line})", line)
        for line, name in missing
    ]


def _bound_by(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield node.id
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            yield alias.asname or alias.name.split(".")[0]
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from node.names
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest


# ------------------------------------------------------------------ imports


def imported_modules(tree: ast.Module) -> list[tuple[str, int]]:
    """``(top-level module, line)`` for absolute imports not guarded by ``try/except ImportError``."""
    guarded = _guarded_lines(tree)
    found: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or node.lineno in guarded:
            continue
        if isinstance(node, ast.Import):
            found += [(alias.name.split(".")[0], node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno))
    return found


def _guarded_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for stmt in node.body:
                lines.update(range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
    return lines


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(isinstance(t, ast.Name) and t.id in _IMPORT_ERRORS for t in types)


def imports(tree: ast.Module, available: Callable[[str], bool]) -> list[Issue]:
    """Imports the sandbox's environment cannot satisfy (``available(top_level_name)`` is False)."""
    issues, seen = [], set()
    for name, line in imported_modules(tree):
        if name not in seen and not available(name):
            seen.add(name)
            issues.append(
                Issue("imports", f"imports {name!r}, which the task's environment does not provide (line {line})", line)
            )
    return issues


# ------------------------------------------------------------------ paths


def paths(tree: ast.Module) -> list[Issue]:
    """Literal absolute paths (or ``..`` escapes) outside the workspace, docstrings excepted."""
    docstrings = _docstring_ids(tree)
    issues, seen = [], set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
            continue
        text = node.value.strip()
        outside = (_PATHLIKE.match(text) and not text.startswith(ALLOWED_ABSOLUTE)) or (
            "/" in text and _ESCAPE.search(text) and " " not in text
        )
        if outside and text not in seen:
            seen.add(text)
            issues.append(
                Issue(
                    "paths",
                    f"refers to {text!r}, a path outside the workspace (line {node.lineno}); "
                    "read only the data folder the program is given",
                    node.lineno,
                )
            )
    return issues


def _docstring_ids(tree: ast.Module) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


# ------------------------------------------------------------------ network and subprocess policy


def policy(tree: ast.Module, task: Task) -> list[Issue]:
    """Network / subprocess use, reported as the task's ``policy`` says (``allow``: nothing)."""
    issues = []
    for capability, hits in (("network", _network_uses(tree)), ("subprocess", _subprocess_uses(tree))):
        rule = task.policy.get(capability, "allow")
        if rule == "allow":
            continue
        for what, line in hits:
            verb = "forbids" if rule == "forbid" else "discourages"
            issues.append(
                Issue(
                    "policy",
                    f"uses {capability} ({what}, line {line}), which the task {verb}",
                    line,
                    advisory_only=rule != "forbid",
                )
            )
    return issues


def _network_uses(tree: ast.Module) -> list[tuple[str, int]]:
    return [(f"import {name}", line) for name, line in imported_modules(tree) if name in NETWORK_MODULES]


def _subprocess_uses(tree: ast.Module) -> list[tuple[str, int]]:
    hits = [(f"import {name}", line) for name, line in imported_modules(tree) if name in SUBPROCESS_MODULES]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            dotted = _dotted(node.func)
            if dotted and SUBPROCESS_CALLS.match(dotted):
                hits.append((f"{dotted}()", node.lineno))
    return hits


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


# ------------------------------------------------------------------ writing the metric


def metric_write(tree: ast.Module, metric_names: Iterable[str]) -> list[Issue]:
    """A literal number stored under a metric's name, or a write of ``metrics.json``."""
    names = set(metric_names)
    issues = []
    for node in ast.walk(tree):
        for key, value, line in _keyed_values(node):
            if key in names and _literal_number(value) is not None:
                issues.append(
                    Issue(
                        "metric_write",
                        f"sets the metric {key!r} to the literal "
                        f"{_literal_number(value):g} instead of computing it "
                        f"(line {line})",
                        line,
                    )
                )
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith("metrics.json"):
            issues.append(
                Issue(
                    "metric_write",
                    f"writes {node.value!r}, the evaluator's own output, itself (line {node.lineno})",
                    node.lineno,
                )
            )
    return issues


def _keyed_values(node: ast.AST) -> Iterator[tuple[str, ast.AST, int]]:
    if isinstance(node, ast.Dict):
        for key, value in zip(node.keys, node.values, strict=False):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                yield key.value, value, node.lineno
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            if (
                isinstance(target, ast.Subscript)
                and isinstance(target.slice, ast.Constant)
                and isinstance(target.slice.value, str)
            ):
                yield target.slice.value, node.value, node.lineno
    elif isinstance(node, ast.Call):
        for kw in node.keywords:
            if kw.arg:
                yield kw.arg, kw.value, node.lineno


def _literal_number(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _literal_number(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    return None


__all__ = ["Issue", "syntax", "undefined_names", "imports", "imported_modules", "paths", "policy", "metric_write"]
