"""A built, non-editable wheel carries the built-in tasks and pool worlds and runs them.

The fast check builds the wheel (a few seconds, no network) and compares its file list with the tree's
built-in tasks and worlds. The slow checks (``--runslow``: they install the wheel's core dependencies from
the package index into a fresh virtual environment, minutes on a shared machine) run it: the only
``verifyless`` it can import is the wheel's, and the sandbox sees only that environment, as it would on a
user's machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy: a stale build/ or egg-info in the checkout would hide a packaging mistake
    for name in ("pyproject.toml", "README.md"):
        source.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, source / name)
    for name in ("src", "tasks"):  # src/verifyless/builtin/tasks is a relative link to tasks/
        shutil.copytree(
            ROOT / name, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
        )
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(tmp), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr
    (built,) = tmp.glob("verifyless-*.whl")
    return built


def test_the_wheel_carries_every_built_in_task_and_pool_world_file(wheel):
    """Every file of ``builtin/tasks`` (a link to the repository's ``tasks/``) and ``builtin/worlds`` is in the wheel."""
    builtin = ROOT / "src" / "verifyless" / "builtin"
    expected = set()
    for folder in ("tasks", "worlds"):
        for dirpath, dirnames, filenames in os.walk(builtin / folder, followlinks=True):
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and not d.startswith(".")]
            for name in filenames:
                if not name.startswith(".") and not name.endswith(".pyc"):
                    expected.add(f"verifyless/builtin/{Path(dirpath, name).relative_to(builtin).as_posix()}")
    assert len({n for n in expected if n.startswith("verifyless/builtin/tasks/")}) >= 30, "the tasks were not found"
    names = set(zipfile.ZipFile(wheel).namelist())
    assert expected <= names, f"missing from the wheel: {sorted(expected - names)[:10]}"


@pytest.fixture(scope="module")
def wheel_env(wheel, tmp_path_factory) -> Path:
    env = tmp_path_factory.mktemp("wheel-env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=120, env=_clean_env())
    install = subprocess.run(  # without PYTHONPATH: pip would take a checkout's egg-info for an installed verifyless
        [str(env / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_clean_env(),
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


@pytest.mark.slow  # installs from the package index; the wheel's contents are checked above
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


@pytest.mark.slow  # installs from the package index; the checkout's `tasks` and `verify` are in _cli/test_app.py, e2e/test_readme.py
def test_the_wheel_lists_and_verifies_the_built_in_tasks(wheel_env, tmp_path):
    listed = run_installed(wheel_env, "tasks", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for name in ("affairs_gbm", "circle_packing", "diabetes", "digits_torch", "moons_torch", "sunspots"):
        assert name in listed.stdout
    for name in ("breast_cancer", "diabetes_rmsle"):  # competitions: their baseline and idea space are package data
        assert f"{name} " in listed.stdout and "competition" in listed.stdout
    verified = run_installed(wheel_env, "verify", "diabetes", cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr + verified.stdout
    assert "ok" in verified.stdout
