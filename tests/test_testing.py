"""The package's test doubles (``verifyless.testing``) keep their contract: the fake task's scores by default,
another one-constant problem when asked, and the executor's busy spans (issue 48, item 5: benches share them)."""

from __future__ import annotations

import asyncio

from verifyless.config import load_config
from verifyless.node import Status
from verifyless.program import replace
from verifyless.screen.baselines import RandomScreener
from verifyless.search.memory import Memory
from verifyless.store import RunStore
from verifyless.testing import PROGRAM, FakeExecutor, fake_engine, fake_task, value


def program(a: int) -> str:
    text = replace(PROGRAM, fake_task().band, f"a = {a}\n")
    assert value(text) == a
    return text


def verify_all(executor: FakeExecutor, values: list[int]):
    async def go():
        return await asyncio.gather(*(executor.verify(fake_task(), program(a)) for a in values))

    return asyncio.run(go())


def test_the_fake_executor_scores_the_fake_task_by_default_and_fails_a_3():
    ok, failed = verify_all(FakeExecutor(), [10, 3])
    assert (ok.status, ok.score, ok.test_score) == (Status.OK, 9.0, 9.5)
    assert failed.status is Status.FAILED and "a must not be 3" in failed.stderr_tail


def test_the_fake_executor_scores_another_problem_when_given_its_loss_and_failing_value():
    executor = FakeExecutor(loss=lambda a: float(abs(a - 40)), fails_at=None)
    scored = verify_all(executor, [3, 45])
    assert [(v.status, v.score) for v in scored] == [(Status.OK, 37.0), (Status.OK, 5.0)]
    assert [v.status for v in verify_all(FakeExecutor(fails_at=7), [3, 7])] == [Status.OK, Status.FAILED]


def test_the_fake_executor_records_one_busy_span_per_verification_each_at_least_its_delay():
    executor = FakeExecutor(capacity=2, delay=0.05)
    verify_all(executor, [1, 2])
    assert len(executor.spans) == len(executor.calls) == 2
    assert all(end - start >= 0.05 * 0.99 for start, end in executor.spans)
    (s1, e1), (s2, e2) = sorted(executor.spans)
    assert s2 < e1, "two verifications at capacity 2 run at once"


def test_fake_engine_takes_a_memory_and_has_none_otherwise(tmp_path):
    cfg = load_config(overrides=["budget.verifications=2"])
    memory = Memory(embedder="hashing")
    with RunStore(tmp_path / "s.db") as store:
        assert fake_engine(store, cfg, RandomScreener(), memory=memory).memory is memory
        assert fake_engine(store, cfg, RandomScreener()).memory is None
