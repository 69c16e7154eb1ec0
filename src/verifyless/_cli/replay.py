"""Replay: re-execute a run's decisions with no endpoint and no new verification.

The replayed engine gets the stored configuration, LLM replies from the
response cache (a miss is an error, never a call), and verification outcomes
looked up by program hash from the original run. If every decision is the
same, it proposes the same programs in the same order and reaches the same
final node. The replay writes into a temporary store; the original is only read.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifyless.config import validate
from verifyless.errors import VerifylessError
from verifyless.node import Verification
from verifyless.task.base import Task


class ReplayDiverged(VerifylessError):
    """The replay asked for a verification the original run never made."""

    exit_code = 1


class StoredVerifications:
    """An executor that answers from the original run's verification events."""

    name = "stored"

    def __init__(self, by_hash: dict[str, Verification], capacity: int = 1) -> None:
        self.by_hash = by_hash
        self.capacity = capacity

    async def verify(self, task: Task, program: str) -> Verification:
        from verifyless.node import content_hash

        h = content_hash(program)
        if h not in self.by_hash:
            raise ReplayDiverged(
                f"the replay produced program {h[:12]} which the original run never verified: "
                "a decision differs (changed code, prompts or task files since the run?)"
            )
        return self.by_hash[h]

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class ReplayReport:
    run_id: str
    equal: bool
    original_final: str | None
    replay_final: str | None
    compared: int
    differences: list[str] = field(default_factory=list)

    def describe(self) -> str:
        head = "identical" if self.equal else "DIFFERENT"
        lines = [
            f"replay of {self.run_id}: {head} ({self.compared} node events compared; "
            f"final node {self.original_final} vs {self.replay_final})"
        ]
        lines += [f"  {d}" for d in self.differences[:10]]
        return "\n".join(lines)


def _trace(store: Any, run_id: str) -> tuple[list[tuple], str | None]:
    """Node and verification facts keyed by node id.

    Sorted, not in log order: with pipelining, LLM work of round r+1 and the
    verification of round r interleave in the log by timing, while the
    decisions (positional node ids, programs, outcomes) do not depend on it.
    """
    trace, final = [], None
    for ev in store.events(run_id, kinds=["node", "verification", "final"]):
        if ev.kind == "node":
            trace.append(("node", ev.node_id, ev.payload.get("program_hash"), ev.payload.get("status")))
        elif ev.kind == "verification":
            trace.append(("verification", ev.node_id, ev.payload.get("status"), ev.payload.get("score")))
        else:
            final = ev.payload.get("node_id")
    return sorted(trace, key=lambda t: (t[1] or "", t[0])), final


async def replay_run(store: Any, run_id: str) -> ReplayReport:
    from verifyless.config import stored_config
    from verifyless.store import RunStore
    from verifyless.wiring import build_engine

    starts = sum(1 for ev in store.events(run_id, kinds=["run_status"]) if ev.payload.get("status") == "running")
    if starts > 1:
        raise ReplayDiverged(
            f"run {run_id} was resumed {starts - 1} time(s); replay reproduces runs that ran without interruption "
            "(a resumed run's decisions depend on where it stopped). Its stored events remain the record of the run."
        )
    data = stored_config(store, run_id)
    data["store"] = str(store.path)  # the response cache lives in the original store's file
    data["budget"] = {**data.get("budget", {}), "wall_seconds": None}
    cfg = validate(data)
    by_hash: dict[str, Verification] = {}
    for ev in store.events(run_id, kinds=["verification"]):
        v = Verification.from_dict(ev.payload)
        by_hash.setdefault(v.program_hash, v)
    with tempfile.TemporaryDirectory(prefix="verifyless-replay-") as tmp:
        replay_store = RunStore(Path(tmp) / "replay.db")
        try:
            engine = build_engine(
                cfg,
                replay_store,
                replay=True,
                replay_executor=StoredVerifications(by_hash, cfg.engine.verify_concurrency),
            )
            result = await engine.run()
            original, original_final = _trace(store, run_id)
            replayed, _ = _trace(replay_store, result.run_id)
        finally:
            replay_store.close()
    diffs = [f"event {i}: {a} != {b}" for i, (a, b) in enumerate(zip(original, replayed, strict=False)) if a != b]
    if len(original) != len(replayed):
        diffs.append(f"original has {len(original)} node events, replay {len(replayed)}")
    equal = not diffs and original_final == result.best_id
    return ReplayReport(run_id, equal, original_final, result.best_id, min(len(original), len(replayed)), diffs)
