"""The editable band: split, replace, fixed-region checks (markers and line ranges)."""

from __future__ import annotations

import pytest

from verifyless.program import BandError, band_diff, extract, fixed_region_violation, replace, split, syntax_error
from verifyless.task.base import Band

MARKED = """import numpy as np

# EVOLVE-BLOCK-START
def f(x):
    return x + 1
# EVOLVE-BLOCK-END

print(f(1))
"""
MARKERS = Band()
LINES = Band(start_marker=None, end_marker=None, lines=(4, 5))


def test_split_with_markers_keeps_markers_in_fixed_region() -> None:
    parts = split(MARKED, MARKERS)
    assert parts.head.endswith("# EVOLVE-BLOCK-START\n")
    assert parts.band == "def f(x):\n    return x + 1\n"
    assert parts.tail.startswith("# EVOLVE-BLOCK-END\n")
    assert parts.join() == MARKED


def test_split_with_line_range() -> None:
    parts = split(MARKED, LINES)
    assert parts.band == "def f(x):\n    return x + 1\n"
    assert parts.head.count("\n") == 3 and parts.join() == MARKED


def test_replace_changes_only_the_band_and_adds_missing_newline() -> None:
    child = replace(MARKED, MARKERS, "def f(x):\n    return x * 3")
    assert extract(child, MARKERS) == "def f(x):\n    return x * 3\n"
    assert child.startswith("import numpy as np\n") and child.endswith("print(f(1))\n")
    assert fixed_region_violation(MARKED, child, MARKERS) is None
    assert "+    return x * 3" in band_diff(MARKED, child, MARKERS)


def test_replace_with_line_range_allows_growth() -> None:
    child = replace(MARKED, LINES, "def f(x):\n    y = x * 3\n    return y\n")
    assert fixed_region_violation(MARKED, child, LINES) is None
    assert child.count("\n") == MARKED.count("\n") + 1


@pytest.mark.parametrize(
    "program, message",
    [
        ("x = 1\n", "not found"),
        ("# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\n", "exactly once"),
        ("# EVOLVE-BLOCK-END\n# EVOLVE-BLOCK-START\n", "before the start marker"),
    ],
)
def test_marker_problems_raise_band_error(program: str, message: str) -> None:
    with pytest.raises(BandError, match=message):
        split(program, MARKERS)


def test_line_range_outside_program_raises() -> None:
    with pytest.raises(BandError, match="outside the program"):
        split("a = 1\n", Band(start_marker=None, end_marker=None, lines=(2, 3)))
    with pytest.raises(BandError, match="either both markers or a line range"):
        split("a = 1\n", Band(start_marker="# S", end_marker=None))


def test_fixed_region_violations_with_markers() -> None:
    head_changed = MARKED.replace("import numpy as np", "import os")
    assert "before the editable band" in fixed_region_violation(MARKED, head_changed, MARKERS)
    assert "import numpy as np" in fixed_region_violation(MARKED, head_changed, MARKERS)
    tail_changed = MARKED.replace("print(f(1))", "print(f(2))")
    assert "after the editable band" in fixed_region_violation(MARKED, tail_changed, MARKERS)
    no_markers = MARKED.replace("# EVOLVE-BLOCK-END\n", "")
    assert "broke the band markers" in fixed_region_violation(MARKED, no_markers, MARKERS)
    assert "parent program has no usable band" in fixed_region_violation("x = 1\n", MARKED, MARKERS)


def test_fixed_region_violations_with_line_range() -> None:
    assert "before the editable band" in fixed_region_violation(MARKED, "import os\n" + MARKED[19:], LINES)
    tail_changed = MARKED.replace("print(f(1))", "print(f(2))")
    assert "after the editable band" in fixed_region_violation(MARKED, tail_changed, LINES)
    assert fixed_region_violation(MARKED, MARKED, LINES) is None


def test_syntax_error_reports_line() -> None:
    assert syntax_error(MARKED) is None
    assert syntax_error("x = 1\ndef f(:\n").startswith("line 2:")
