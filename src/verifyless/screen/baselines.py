"""Reference screeners that use no judgement (RPM paper baselines, SPEC 3.2).

``RandomScreener`` is the unguided agent: a uniform random order drawn from
``ctx.rng``, the first ``n_verify`` are verified. ``OracleScreener`` chooses
every candidate, so the engine verifies (and charges) all of them and keeps
the best validation score: the best-of-N validation oracle. A test oracle
(keep the best *hidden test* score) is only for measurement and is an engine
flag, because screeners never see hidden scores.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from verifyless.node import Candidate, Evidence, Screening
from verifyless.screen.base import ScreenContext, choose_top


class RandomScreener:
    """Uniform random ranking; ``chosen`` = first ``n_verify`` (this object's, else ``ctx.n_verify``)."""

    def __init__(self, *, n_verify: int | None = None, name: str = "random") -> None:
        self.n_verify = n_verify
        self.name = name

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


class OracleScreener:
    """Choose all candidates (validation oracle); ranking keeps the input order."""

    def __init__(self, *, name: str = "oracle") -> None:
        self.name = name

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        ids = tuple(c.id for c in candidates)
        evidence = {cid: Evidence(cid, rank_value=0.0, uncertainty=0.0, detail={"oracle": True}) for cid in ids}
        return Screening(self.name, ids, ids, evidence, 0.0)


__all__ = ["OracleScreener", "RandomScreener"]
