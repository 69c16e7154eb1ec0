"""Smoke test of bench/overhead.py: the verifyless arm alone (--quick), through the real loopback server and sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "overhead.py"


def _rows(table: str) -> dict[str, list[str]]:
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells and cells[0] not in ("framework", "---"):
            rows[cells[0]] = cells
    return rows


@pytest.mark.slow  # a bench script end to end; the engine loop it times is tested in engine/test_core.py
def test_quick_run_prints_a_verifyless_row_with_positive_throughput(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--json", str(tmp_path / "raw.json")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = _rows(proc.stdout)
    assert set(rows) == {"verifyless"}, proc.stdout  # --quick never touches OpenEvolve or ShinkaEvolve
    row = rows["verifyless"]
    assert "not run" not in " ".join(row), proc.stdout
    nodes, wall, per_second = int(row[1]), float(row[2]), float(row[3])
    assert nodes == 6  # the --quick budget: the baseline plus five children, all verified
    assert wall > 0 and per_second > 0
    assert abs(per_second - nodes / wall) < 0.01 * per_second + 0.01
    startup = float(row[4])
    assert 0 < startup < 5  # a real sandbox was started per verification
    assert "Bare `python -c pass` subprocess" in proc.stdout
