"""No class in src/ is longer than 300 lines (the design rule that keeps each room about one idea)."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "verifyless"
LIMIT = 300
# Known offenders being split by their owners this session; remove an entry once it fits (the test says when).
PENDING: set[str] = set()  # classes allowed over the limit for now (none)


def class_sizes() -> dict[str, int]:
    sizes = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef):
                sizes[f"{path.relative_to(SRC)}:{node.name}"] = (node.end_lineno or node.lineno) - node.lineno + 1
    return sizes


def test_no_class_is_longer_than_300_lines():
    sizes = class_sizes()
    long = {name: n for name, n in sizes.items() if n > LIMIT and name not in PENDING}
    assert not long, f"classes over {LIMIT} lines: {long}"
    fixed = {name for name in PENDING if sizes.get(name, 0) <= LIMIT}
    assert not fixed, f"{fixed} now fit in {LIMIT} lines: remove them from PENDING"
