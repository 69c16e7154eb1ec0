"""Shared test setup: one thread everywhere, offline, and an opt-in flag for slow end-to-end checks."""

import os
import sys
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).parent))  # tests/engine_fakes.py and friends

import hypothesis  # noqa: E402  (imported up front: a lazy import at session end can trip a CPython 3.11 AST bug)
import pytest  # noqa: E402

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
