"""`verifyless report`, `verifyless ui` and the links printed by `verifyless show`, through the real command line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from report_fixtures import cached_build

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-m", "verifyless", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=240
    )


def test_report_writes_html_and_pngs_and_show_points_to_them(tmp_path_factory, tmp_path):
    built = cached_build(tmp_path_factory)
    before = built["store"].stat().st_mtime_ns
    prefix = built["plain"][:-3]
    done = cli("report", prefix, "--store", str(built["store"]), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "reports" / built["plain"]
    assert (out / "report.html").is_file() and (out / "figures" / "curve.png").is_file()
    html = (out / "report.html").read_text()
    assert "Step line: best validation" in html and 'id="rounds"' in html  # the shared sections and the caption
    assert "needs no network" in done.stdout
    assert built["store"].stat().st_mtime_ns == before  # read-only
    shown = cli("show", built["plain"], "--store", str(built["store"]), cwd=tmp_path)
    assert f"verifyless report {built['plain']}" in shown.stdout and "verifyless ui --store" in shown.stdout


def test_report_and_ui_refuse_bad_input_in_one_line(tmp_path):
    missing = cli("report", "x", "--store", str(tmp_path / "none.db"), cwd=tmp_path)
    assert missing.returncode == 5 and "no run store" in missing.stderr and "Traceback" not in missing.stderr
    port = cli("ui", "--port", "70000", "--store", str(tmp_path / "none.db"), cwd=tmp_path)
    assert port.returncode == 2 and "--port" in port.stderr and "Traceback" not in port.stderr


def test_ui_on_a_taken_port_says_so_in_one_line(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        out = cli("ui", "--port", port, "--store", str(tmp_path / "none.db"), cwd=tmp_path)
    assert out.returncode == 2, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "already in use" in out.stderr and "--port" in out.stderr
    assert "http://" not in out.stdout, "no dashboard URL for a dashboard that never started"
