"""Verifier utilisation: the pipelined engine against the sequential loop.

Setting: every expansion costs ``--llm`` seconds of model-side work (half in
the proposer, half in the screener) and every verification ``--verify``
seconds; both are simulated with ``asyncio.sleep`` so the measurement is
about the engine's scheduling, not about CPU contention. The executor has
capacity 1 (one verifier). Utilisation = seconds the verifier was busy /
wall seconds of the whole run (brief, baseline and final drain included).

The task, the briefer, implementer and summarizer and the executor are the
package's fakes (``verifyless.testing``), the executor scoring |a - 40| from
the program text (nothing fails) after its sleep and recording when it was
busy; the proposer (distinct steps around the parent's a) and the screener
(random) are this script's, because they sleep.

With ``engine.pipeline=false`` a round's model work waits for the previous
round's verification, so the verifier idles ``llm / (llm + verify)`` of the
time (2/3 busy with the defaults). With ``engine.pipeline=true`` round r's
model work overlaps round r-1's verification, so only the first expansion
leaves it idle.

Usage::

    python bench/pipeline.py            # llm 1 s, verify 2 s, budget 16 (about 80 s)
    python bench/pipeline.py --quick    # 20x faster clocks, budget 6 (about 2 s)

Prints a markdown table; ``main`` returns the rows for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from verifyless.config import load_config
from verifyless.node import Idea
from verifyless.screen.baselines import RandomScreener
from verifyless.store import RunStore
from verifyless.testing import FakeExecutor, fake_engine, fake_roles, value

TARGET = 40  # hidden optimum of the bench's problem; score = |a - TARGET| (minimise), no program fails


def distance(a: int) -> float:
    """The bench's loss on the fake task: how far a is from ``TARGET``."""
    return float(abs(a - TARGET))


class _SlowProposer:
    """Proposes distinct steps around the parent's a after ``delay`` seconds of simulated model time."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def propose(self, ctx, n):
        await asyncio.sleep(self.delay)
        rng = random.Random(ctx.seed)
        base = value(ctx.parent.program)
        return [
            Idea(f"move a from {base} to {base + d}", {"a": base + d})
            for d in rng.sample([d for d in range(-9, 10) if d], n)
        ]


class _SlowScreener:
    """A random screener that spends ``delay`` seconds first (stands in for an LLM judge)."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.inner = RandomScreener()
        self.name = "slow-random"

    async def screen(self, ctx, candidates):
        await asyncio.sleep(self.delay)
        return await self.inner.screen(ctx, candidates)


def busy(spans: Sequence[tuple[float, float]]) -> float:
    """Union length of the verifier's busy spans (they cannot overlap at capacity 1, but be safe)."""
    total, end = 0.0, -1.0
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


@dataclass(frozen=True)
class Row:
    mode: str
    wall_s: float
    busy_s: float
    utilisation: float
    verifications: int
    rounds: int
    best_score: float | None


async def run_mode(pipeline: bool, *, llm: float, verify: float, budget: int, candidates: int, store: RunStore) -> Row:
    cfg = load_config(
        overrides=[
            "strategy.name=greedy",
            f"budget.verifications={budget}",
            f"engine.candidates={candidates}",
            f"engine.pipeline={str(pipeline).lower()}",
            "engine.verify_concurrency=1",
            "engine.memory=false",
        ]
    )
    executor = FakeExecutor(capacity=1, delay=verify, loss=distance, fails_at=None)
    roles = replace(fake_roles(fix=False), proposer=_SlowProposer(llm / 2))
    engine = fake_engine(store, cfg, _SlowScreener(llm / 2), roles=roles, executor=executor)
    start = time.monotonic()
    result = await engine.run()
    wall = time.monotonic() - start
    busy_s = busy(executor.spans)
    return Row(
        "pipelined" if pipeline else "sequential",
        wall,
        busy_s,
        busy_s / wall,
        result.verifications,
        result.rounds,
        result.best_score,
    )


def table(rows: Sequence[Row], llm: float, verify: float) -> str:
    lines = [
        f"LLM/screening work {llm:g} s per expansion, verification {verify:g} s, one verifier.",
        "",
        "| mode | wall s | verifier busy s | utilisation | verifications | rounds | best score |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        best = "—" if r.best_score is None else f"{r.best_score:g}"
        lines.append(
            f"| {r.mode} | {r.wall_s:.1f} | {r.busy_s:.1f} | {100 * r.utilisation:.1f}% | "
            f"{r.verifications} | {r.rounds} | {best} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> list[Row]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm", type=float, default=1.0, help="seconds of model/screening work per expansion")
    ap.add_argument("--verify", type=float, default=2.0, help="seconds per verification")
    ap.add_argument("--budget", type=int, default=16, help="verifications per run (baseline included)")
    ap.add_argument("--candidates", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="smoke version: clocks 20x faster, budget 6")
    args = ap.parse_args(argv)
    if args.quick:
        args.llm, args.verify, args.budget = args.llm / 20, args.verify / 20, 6
    rows = []
    with tempfile.TemporaryDirectory() as tmp, RunStore(Path(tmp) / "pipeline.db") as store:
        for pipeline in (False, True):
            rows.append(
                asyncio.run(
                    run_mode(
                        pipeline,
                        llm=args.llm,
                        verify=args.verify,
                        budget=args.budget,
                        candidates=args.candidates,
                        store=store,
                    )
                )
            )
    print(table(rows, args.llm, args.verify))
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
