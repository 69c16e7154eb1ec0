"""The package's import structure: no knot between its parts, no cycle between its modules.

A *part* is a subpackage or a root module of ``verifyless`` (``screen``, ``train``, ``config``, ...).
Every import counts, also one made inside a function (it hides structure, it does not remove it);
only imports under ``if TYPE_CHECKING:`` are left out. A knot is a group of parts that reach each
other through imports; a module cycle is two or more modules that do. The graph is built here with
``ast`` (the same rules as ``../shared/tools/layers.py``), so the check holds in any checkout.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import verifyless

PKG = Path(verifyless.__file__).resolve().parent
ROOT = PKG.name


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(path: Path) -> Iterator[str]:
    """Every ``verifyless...`` name ``path`` imports (functions included, ``TYPE_CHECKING`` blocks left out)."""
    me = module_name(path).split(".")
    base = me if path.name == "__init__.py" else me[:-1]

    def walk(node: ast.AST) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for stmt in child.orelse:
                    yield from walk(stmt)
                continue
            if isinstance(child, ast.Import):
                yield from (a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                up = base[: len(base) - child.level + 1] if child.level else []
                mod = ".".join(up + [child.module] if child.module else up) if child.level else child.module or ""
                yield from (f"{mod}.{a.name}" for a in child.names)
            yield from walk(child)

    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return (m for m in walk(tree) if m == ROOT or m.startswith(ROOT + "."))


def existing_module(name: str) -> str:
    """The longest prefix of ``name`` that is a module or package of the tree (``a.b.func`` -> ``a.b``)."""
    while name:
        file = PKG.parent / name.replace(".", "/")
        if file.with_suffix(".py").is_file() or (file / "__init__.py").is_file():
            return name
        name = name.rpartition(".")[0]
    return ROOT


def part_of(module: str) -> str:
    bits = module.split(".")
    return bits[1] if len(bits) > 1 else "__init__"


def graphs() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    """(part -> parts it imports, module -> modules it imports, (part, part) -> the imports tying them)."""
    parts: dict[str, set[str]] = defaultdict(set)
    modules: dict[str, set[str]] = defaultdict(set)
    why: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(PKG.rglob("*.py")):
        src = module_name(path)
        for name in imported(path):
            target = existing_module(name)
            if target != src and not src.startswith(target + ".") and not target.startswith(src + "."):
                modules[src].add(target)  # a package and its own modules aside
            a, b = part_of(src), part_of(target)
            if a != b and b != "__init__":
                parts[a].add(b)
                why[(a, b)].append(f"{path.relative_to(PKG.parent)} -> {name}")
    return parts, modules, why


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of two or more nodes that all reach each other (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    nodes = sorted(set(edges) | {n for targets in edges.values() for n in targets})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(edges.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_the_cycle_finder_finds_a_knot_and_ignores_a_chain() -> None:
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": {"c"}}) == []


def test_the_import_reader_sees_imports_in_functions_and_skips_type_checking_blocks() -> None:
    edges = list(imported(PKG / "ledger" / "paid.py"))
    assert "verifyless.child.Made" not in edges  # imported for type checking only
    assert "verifyless.ledger.budget.BudgetGate" in edges
    assert all(m.startswith("verifyless") for m in imported(PKG / "_cli" / "app.py"))


def test_no_two_parts_of_the_package_import_each_other() -> None:
    parts, _, why = graphs()
    knots = strongly_connected(parts)
    detail = [
        f"knot {knot}: " + "; ".join(w for a in knot for b in knot for w in why.get((a, b), [])[:2]) for knot in knots
    ]
    assert not knots, "\n".join(detail)


def test_no_two_modules_import_each_other() -> None:
    _, modules, _ = graphs()
    assert not strongly_connected(modules)


def imports_inside_functions(path: Path, base: Path = PKG.parent) -> list[str]:
    """``path:line module`` for every ``verifyless`` import made inside a function of ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(ROOT):
                    found.append(f"{path.relative_to(base)}:{node.lineno} {node.module}")
                elif isinstance(node, ast.Import) and any(a.name.startswith(ROOT) for a in node.names):
                    found.append(f"{path.relative_to(base)}:{node.lineno} {node.names[0].name}")
    return found


def test_the_package_imports_itself_at_module_level_only() -> None:
    """An import inside a function is for a heavy optional dependency only (torch, ray, ...), never the package."""
    hidden = [hit for path in sorted(PKG.rglob("*.py")) for hit in imports_inside_functions(path)]
    assert not hidden, "move these imports to the top of their modules:\n" + "\n".join(hidden)


def test_the_hidden_import_finder_sees_one_and_skips_third_party(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import torch\n\ndef f():\n    import ray\n    from verifyless.node import Idea\n    return Idea\n"
    )
    assert imports_inside_functions(probe, tmp_path) == ["probe.py:5 verifyless.node"]


def test_the_public_faces_resolve_and_import_verifyless_imports_nothing_else() -> None:
    import subprocess
    import sys

    for name in verifyless.__all__:
        assert getattr(verifyless, name) is not None, name
    code = "import sys, verifyless; print(sorted(m for m in sys.modules if m.startswith('verifyless')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['verifyless']"
