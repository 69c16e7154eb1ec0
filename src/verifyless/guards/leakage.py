"""Data-leakage guard for native tasks: the fit step must not touch the evaluation inputs.

The built-in native tasks hand the program a public folder holding training
data (``train.csv``, ``history.csv``) and the inputs it must predict for
(``val_inputs.csv``, ``test_inputs.csv``, ``test_context.csv``); the harness
loads the latter into variables such as ``x_val`` / ``x_test`` and only ever
passes them to the returned predictor. Fitting anything (a model, a scaler,
a feature selector) on those rows is training on validation or test inputs.

The heuristic, on the AST:

1. *evaluation files* are the task's public data files whose name contains a
   ``val``/``valid``/``validation``/``test``/``holdout``/``eval`` word;
   *evaluation names* are the names assigned from an expression that mentions
   an evaluation file or evaluation name, to a fixed point, per scope (a
   function's locals shadow module names). A name alone is no evidence: an
   ``X_test`` cut from the training rows by ``train_test_split`` and passed
   as ``eval_set`` is fine;
2. a *fit call* is a call to ``fit``, ``fit_transform``, ``fit_predict``,
   ``partial_fit``, ``train``, ``train_model`` or ``fit_model`` (function or
   method); a finding is a fit call with an evaluation name or file among its
   arguments, or a fit *function* (``def fit`` / ``def train`` ...) whose body
   reads an evaluation file or a module-level evaluation name.

Limits: data flow through containers, attributes or other modules is not
followed; a file name assembled at run time (``f"{name}_inputs.csv"``) is not
recognised; a predictor that refits on the inputs it is given (transductive
refitting inside ``predict``) is not caught. With ``only_new`` (the default)
anything the parent program already does is not reported, so a harness that
legitimately hands evaluation context to a forecaster does not block.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from verifyless.guards.static import Issue

EVAL_WORD = re.compile(r"(^|[_\W\d])(val|valid|validation|test|holdout|eval)([_\W\d]|$)", re.IGNORECASE)
FIT_NAMES = frozenset({"fit", "fit_transform", "fit_predict", "partial_fit", "train", "train_model", "fit_model"})


def evaluation_files(public_data: Iterable[Path]) -> set[str]:
    """Names of public files that hold evaluation inputs (``val_inputs.csv``...)."""
    return {Path(p).name for p in public_data if EVAL_WORD.search(Path(p).stem)}


def leakage(tree: ast.Module, eval_files: set[str]) -> list[Issue]:
    """Fit calls or fit functions that touch evaluation inputs (see the module docstring)."""
    module_taint = _taint(tree, set(), eval_files)
    issues = _fit_calls(tree, module_taint, eval_files)
    for scope in (n for n in ast.walk(tree) if isinstance(n, _FUNCTIONS)):
        inherited = module_taint - _locals(scope)
        issues += _fit_calls(scope, _taint(scope, inherited, eval_files), eval_files)
        touched = _touches(_in_scope(scope), inherited, eval_files) if scope.name in FIT_NAMES else ""
        if touched:
            issues.append(
                Issue(
                    "leakage",
                    f"the fit step {scope.name}() reads evaluation inputs ({touched}, "
                    f"line {scope.lineno}): fit only on the training data",
                    scope.lineno,
                )
            )
    return issues


def _fit_calls(scope: ast.AST, tainted: set[str], eval_files: set[str]) -> list[Issue]:
    issues = []
    for node in _in_scope(scope):
        if isinstance(node, ast.Call) and _call_name(node) in FIT_NAMES:
            touched = _touches(node.args + [kw.value for kw in node.keywords], tainted, eval_files)
            if touched:
                issues.append(
                    Issue(
                        "leakage",
                        f"{_call_name(node)}() is given evaluation inputs ({touched}, "
                        f"line {node.lineno}): fit only on the training data",
                        node.lineno,
                    )
                )
    return issues


_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _in_scope(scope: ast.AST) -> list[ast.AST]:
    """Nodes of ``scope`` (a module or function body), not descending into nested functions."""
    found: list[ast.AST] = []
    stack = list(ast.iter_child_nodes(scope))
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, _FUNCTIONS):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _locals(scope: ast.AST) -> set[str]:
    args = scope.args if isinstance(scope, _FUNCTIONS) else None
    params = {a.arg for a in args.args + args.kwonlyargs + args.posonlyargs} if args else set()
    if args and args.vararg:
        params.add(args.vararg.arg)
    if args and args.kwarg:
        params.add(args.kwarg.arg)
    stored = {n.id for n in _in_scope(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return params | stored


def _taint(scope: ast.AST, inherited: set[str], eval_files: set[str]) -> set[str]:
    nodes = _in_scope(scope)
    names = set(inherited)
    flows = list(_assignments(nodes))
    changed = True
    while changed:
        changed = False
        for targets, value in flows:
            if not targets <= names and _touches([value], names, eval_files):
                names |= targets
                changed = True
    return names


def _assignments(nodes: Iterable[ast.AST]) -> Iterable[tuple[set[str], ast.AST]]:
    for node in nodes:
        if isinstance(node, ast.Assign):
            yield {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}, node.value
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            yield {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}, node.value
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            yield {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}, node.iter
        elif isinstance(node, ast.NamedExpr):
            yield {node.target.id}, node.value


def _touches(nodes: Iterable[ast.AST], names: set[str], eval_files: set[str]) -> str:
    """The first evaluation name or file mentioned under ``nodes`` ('' if none)."""
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and node.id in names:
                return node.id
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                hit = next((f for f in eval_files if f in node.value), None)
                if hit:
                    return repr(hit)
    return ""


def _call_name(node: ast.Call) -> str:
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


__all__ = ["leakage", "evaluation_files", "EVAL_WORD", "FIT_NAMES"]
