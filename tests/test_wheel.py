"""A built, non-editable wheel carries the built-in tasks and pool worlds and runs them.

The wheel is installed, with its core dependencies from the package index, into a fresh virtual
environment (about 15 s here): the only ``verifyless`` it can import is the wheel's, and the sandbox
sees only that environment, as it would on a user's machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = tmp.glob("verifyless-*.whl")
    env = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=120)
    install = subprocess.run(
        [str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr
    return env


def _clean_env() -> dict[str, str]:
    """The environment without what points at the checkout (a PYTHONPATH to ``src`` would import it instead)."""
    return {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VERIFYLESS_TASKS_DIR"}}


def run_installed(env: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(env / "bin" / "verifyless"), *args], capture_output=True, text=True, cwd=cwd, env=_clean_env(), timeout=300
    )


def test_the_installed_wheel_is_not_the_checkout(wheel_env, tmp_path):
    where = subprocess.run(
        [str(wheel_env / "bin" / "python"), "-c", "import verifyless; print(verifyless.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
    )
    assert where.returncode == 0, where.stderr
    assert str(ROOT) not in where.stdout and "site-packages" in where.stdout


def test_the_wheel_lists_and_verifies_the_built_in_tasks(wheel_env, tmp_path):
    listed = run_installed(wheel_env, "tasks", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for name in ("affairs_gbm", "circle_packing", "diabetes", "digits_torch", "moons_torch", "sunspots"):
        assert name in listed.stdout
    verified = run_installed(wheel_env, "verify", "diabetes", cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr + verified.stdout
    assert "ok" in verified.stdout
