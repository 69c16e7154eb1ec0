"""Reference screeners that use no judgement (RPM paper baselines, SPEC 3.2).

``RandomScreener`` is the unguided agent: a uniform random order drawn from
``ctx.rng``, the first ``n_verify`` are verified. ``OracleScreener`` chooses
every candidate, so the engine verifies (and charges) all of them and keeps
the best validation score: best-of-N at N times the cost.

``PeekOracle`` is the RPM paper's oracle: it executes every candidate off the
books (``ScreenContext.peek``) and picks the best validation score; the engine
then verifies and charges only the pick, so a run spends one verification per
expansion and the other N - 1 executions are compute no budget counts. It is a
ceiling for screeners under the same charged budget (the report draws it as
one), never a screener to compare at equal cost. A test oracle (the best
*hidden test* score) exists only offline, on verified pools
(``bench replay-pools --screener test-oracle``): screeners never see hidden
scores.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence

from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.node import Candidate, Evidence, Screening, Status, Verification
from verifyless.screen.base import ScreenContext, choose_top
from verifyless.screen.options import BaseOptions, StrictOptions


class RandomOptions(BaseOptions):
    pass


class RandomScreener:
    """Uniform random ranking; ``chosen`` = first ``n_verify`` (this object's, else ``ctx.n_verify``)."""

    def __init__(self, options: RandomOptions | None = None) -> None:
        self.options = options or RandomOptions()
        self.name = self.options.name or "random"
        self.n_verify = self.options.n_verify

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        ranking = [c.id for c in candidates]
        ctx.rng.shuffle(ranking)
        n = len(ranking)
        evidence = {
            cid: Evidence(cid, rank_value=float(n - i), uncertainty=1.0, detail={"position": i})
            for i, cid in enumerate(ranking)
        }
        return choose_top(self.name, ranking, evidence, self.n_verify, ctx, started)


class OracleOptions(StrictOptions):
    name: str | None = Field(None, description="the name recorded in screening events")


class OracleScreener:
    """Choose all candidates (validation oracle); ranking keeps the input order."""

    def __init__(self, options: OracleOptions | None = None) -> None:
        self.options = options or OracleOptions()
        self.name = self.options.name or "oracle"

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        ids = tuple(c.id for c in candidates)
        evidence = {cid: Evidence(cid, rank_value=0.0, uncertainty=0.0, detail={"oracle": True}) for cid in ids}
        return Screening(self.name, ids, ids, evidence, 0.0)


class PeekOracle:
    """Best-of-N by validation score from uncharged executions (module docstring); the pick is then charged."""

    def __init__(self, options: OracleOptions | None = None) -> None:
        self.options = options or OracleOptions()
        self.name = self.options.name or "peek"

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        if ctx.peek is None:
            raise ConfigError("screener peek needs the engine's uncharged runs (ScreenContext.peek); none here")
        started = time.monotonic()
        results = await asyncio.gather(*(ctx.peek(c) for c in candidates))
        fits = {c.id: _validation_fitness(ctx, v) for c, v in zip(candidates, results, strict=True)}
        ranking = sorted(fits, key=lambda cid: -fits[cid])  # stable: ties keep the pool order
        evidence = {
            c.id: Evidence(
                c.id,
                rank_value=fits[c.id] if math.isfinite(fits[c.id]) else -1e300,
                uncertainty=0.0,
                detail={"peeked": True, "status": v.status.value, "unaccounted_seconds": round(v.seconds, 3)},
            )
            for c, v in zip(candidates, results, strict=True)
        }
        return choose_top(self.name, ranking, evidence, None, ctx, started)


def _validation_fitness(ctx: ScreenContext, v: Verification) -> float:
    """The oriented validation score of an uncharged run (-inf without one); hidden test scores are not read."""
    ok = v.status is Status.OK and v.score is not None and math.isfinite(v.score)
    return ctx.task.metric.orient(v.score) if ok else -math.inf  # type: ignore[arg-type]


__all__ = ["OracleOptions", "OracleScreener", "PeekOracle", "RandomOptions", "RandomScreener"]
