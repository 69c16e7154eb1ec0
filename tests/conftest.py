"""Shared test setup: one thread everywhere, offline, and an opt-in flag for slow end-to-end checks."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# every command-line run of an mcgs search would load MiniLM for its memory (about 5 s of CPU each); the tests that
# are about MiniLM ask for it by name (engine.memory_embedder / Memory(embedder="minilm"))
os.environ.setdefault("VERIFYLESS_MEMORY_EMBEDDER", "hashing")
# the default screener (adaptive around critic-rm) encodes summaries with MiniLM (about 7 s to import and load per
# process); the tests about MiniLM ask for it by name (screener.options.options.encoder=minilm)
os.environ.setdefault("VERIFYLESS_CRITIC_ENCODER", "hashing")
# competition tasks keep their validation split in a cache folder: the tests' own, never the user's
os.environ.setdefault("VERIFYLESS_CACHE_DIR", tempfile.mkdtemp(prefix="verifyless-test-cache-"))
sys.path.insert(0, str(Path(__file__).parent / "support"))  # helpers the test modules share (tests/README.md)
# shared fixtures: report_fixtures.fx (the built report runs, read-only), for every module that does not define its own
pytest_plugins = ("report_fixtures",)

import json  # noqa: E402

import hypothesis  # noqa: E402  (imported up front: a lazy import at session end can trip a CPython 3.11 AST bug)
import pytest  # noqa: E402
from filelock import FileLock  # noqa: E402

# No per-example deadline: hypothesis' default (200 ms) fails examples on a loaded machine, not on a defect.
hypothesis.settings.register_profile("verifyless", deadline=None)
hypothesis.settings.load_profile("verifyless")


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run slow end-to-end checks")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow end-to-end check: run with --runslow (make test-all)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


class FinishedRun(NamedTuple):
    """A finished run made once per session by the real CLI: ``store`` (WAL mode), ``run_id``, the run's output."""

    store: Path
    run_id: str
    stdout: str
    stderr: str


@pytest.fixture(scope="session")
def finished_run(tmp_path_factory) -> FinishedRun:
    """``verifyless -vv run circle_packing --budget 3 engine.candidates=2 engine.snapshot_every=1``, once.

    mcgs + surrogate (the defaults); a resume snapshot after every round; ``stderr`` holds the debug log.
    Tests only read it; a test that writes (resume, replay) takes ``finished_copy``.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # workers share one run: the first builds it, the others read it
        root = root.parent
    folder, made = root / "finished-run", root / "finished-run" / "run.json"
    with FileLock(str(root / "finished-run.lock")):
        if not made.is_file():
            folder.mkdir(exist_ok=True)
            out = subprocess.run(
                [sys.executable, "-m", "verifyless", "-vv", "run", "circle_packing", "--budget", "3"]
                + ["--store", str(folder / "s.db"), "--quiet", "engine.candidates=2", "engine.snapshot_every=1"],
                capture_output=True,
                text=True,
                timeout=240,
            )
            assert out.returncode == 0, out.stderr
            run_id = out.stdout.split("verifyless show ")[1].split()[0]
            made.write_text(json.dumps({"run_id": run_id, "stdout": out.stdout, "stderr": out.stderr}))
    run = json.loads(made.read_text())
    return FinishedRun(folder / "s.db", run["run_id"], run["stdout"], run["stderr"])


@pytest.fixture
def finished_copy(finished_run, tmp_path) -> FinishedRun:
    """A private copy of the session's finished run store, for a test that writes to it."""
    store = tmp_path / "finished.db"
    shutil.copy(finished_run.store, store)
    return finished_run._replace(store=store)
