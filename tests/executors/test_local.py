"""Executors: the local worker pool and Ray (a local Ray instance), behind one interface."""

from __future__ import annotations

import asyncio

import pytest

from verifyless.executors.local import LocalExecutor
from verifyless.node import Status
from verifyless.task import load_task


def _broken(program: str) -> str:
    return program.replace("# EVOLVE-BLOCK-END", "raise SystemExit(3)\n# EVOLVE-BLOCK-END", 1)


async def _verify_both(executor, task):
    return await asyncio.gather(
        executor.verify(task, task.baseline_program), executor.verify(task, _broken(task.baseline_program))
    )


def test_local_executor_runs_verifications_concurrently_and_returns_failures_as_data():
    task = load_task("circle_packing")
    executor = LocalExecutor(capacity=2)
    ok, bad = asyncio.run(_verify_both(executor, task))
    assert ok.status is Status.OK and ok.score is not None
    assert bad.status is not Status.OK and bad.reason


def test_ray_executor_against_a_local_ray_instance():
    pytest.importorskip("ray", reason="the ray extra is not installed")
    from verifyless.executors.ray import RayExecutor

    task = load_task("circle_packing")
    executor = RayExecutor(capacity=2, num_cpus=1, init_kwargs={"num_cpus": 2})
    try:
        ok, bad = asyncio.run(_verify_both(executor, task))
    finally:
        executor.close()
    assert ok.status is Status.OK and ok.score == pytest.approx(LocalExecutor().sandbox and ok.score)
    assert bad.status is not Status.OK


def test_unknown_executor_is_a_config_error():
    from verifyless.errors import ConfigError
    from verifyless.executors.registry import build_executor

    with pytest.raises(ConfigError, match="local' or 'ray"):
        build_executor("slurm", {})
