"""The tests mirror the package (issue 48, item 5): ``tests/<package path>/test_<module>[_<aspect>].py`` for
``src/verifyless/<package path>/<module>.py`` (or the package ``<module>/``), whole-product checks in
``tests/e2e/``, checks of the source tree itself in ``tests/meta/``, shared helpers in ``tests/support/``
(and ``verifyless.testing``), and no test module importing another (tests/README.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import verifyless

TESTS = Path(__file__).resolve().parents[1]
PKG = Path(verifyless.__file__).resolve().parent
FREE = {"e2e", "meta"}  # cross-cutting checks: named after what they check, not after a module


def mirrors(test: Path, pkg: Path = PKG) -> bool:
    """Whether ``test`` (relative to tests/) names a module or package of ``pkg`` in the same folder.

    ``screen/test_critic_ties.py`` mirrors ``screen/critic.py``: the name is the module's, or the module's
    followed by ``_`` and an aspect.
    """
    if test.parts[0] in FREE:
        return len(test.parts) == 2
    folder = pkg.joinpath(*test.parts[:-1])
    words = test.stem.removeprefix("test_").split("_")
    for n in range(len(words), 0, -1):
        name = "_".join(words[:n])
        if name and ((folder / f"{name}.py").is_file() or (folder / name / "__init__.py").is_file()):
            return True
    return False


def collected() -> list[Path]:
    return sorted(p.relative_to(TESTS) for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def test_every_test_file_mirrors_a_module_or_is_a_cross_cutting_check() -> None:
    outside = [str(p) for p in collected() if p.parts[0] == "support" or not mirrors(p)]
    assert not outside, (
        "name each test file after the module it tests (tests/<package>/test_<module>[_<aspect>].py), or move a "
        "whole-product check to tests/e2e/ and a source-tree check to tests/meta/:\n" + "\n".join(outside)
    )


def test_the_mirror_rule_accepts_modules_packages_and_aspects_and_rejects_the_rest(tmp_path: Path) -> None:
    for module in ("screen/critic.py", "prompts/__init__.py", "config.py", "_cli/app.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    good = ["screen/test_critic.py", "screen/test_critic_ties.py", "test_prompts_judges.py", "test_config.py"]
    good += ["_cli/test_app_run_stops.py", "e2e/test_readme.py", "meta/test_layers.py"]
    bad = ["screen/test_ties.py", "test_critic.py", "test_engine_rooms.py", "screen/test_config.py"]
    bad += ["e2e/deep/test_x.py", "test_.py"]
    assert [p for p in good if not mirrors(Path(p), tmp_path)] == []
    assert [p for p in bad if mirrors(Path(p), tmp_path)] == []


def imported_test_modules(path: Path) -> list[str]:
    """The ``test_*`` modules ``path`` imports (a test module reaches shared code through tests/support)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
    return [m for m in found if m.split(".")[-1].startswith("test_")]


def test_no_test_module_imports_another_and_support_holds_no_tests() -> None:
    crossing = [f"{p}: {m}" for p in collected() for m in imported_test_modules(TESTS / p)]
    crossing += [f"{p}: {m}" for p in (TESTS / "support").glob("*.py") for m in imported_test_modules(p)]
    assert not crossing, "move what these share to tests/support/ or verifyless.testing:\n" + "\n".join(crossing)
