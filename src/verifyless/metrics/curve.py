"""The best-so-far fold of a run's paid verifications: the one rule behind the report's curves
(``verifyless.report.views.curves``) and the offline comparison's (``verifyless.offline.compare``).

Rule: verifications count in commit order; a verification sets the best when its status is ``ok`` and its fitness
(the oriented score: higher is better) is finite and strictly above the best so far (a tie keeps the earlier node;
NaN and infinities never set it). A verification's seconds are its charge's evaluator seconds when it was charged,
else its own run + score + overhead seconds (events stored without a charge).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from verifyless.events import Verified
from verifyless.node import Status

__all__ = ["BestSoFar", "best_so_far", "verification_seconds"]


@dataclass(frozen=True)
class BestSoFar:
    """The state after the ``x``-th paid verification (``node_id``'s ``verification``).

    ``seconds``: the verifications' seconds so far (``verification_seconds``, summed); ``best`` / ``best_node``:
    the best verification so far and its node (None until one set it).
    """

    x: int
    node_id: str | None
    verification: Verified
    seconds: float
    best: Verified | None
    best_node: str | None

    @property
    def best_fitness(self) -> float:
        """The best fitness so far; NaN until a verification set it."""
        return math.nan if self.best is None or self.best.fitness is None else float(self.best.fitness)


def verification_seconds(record: Verified, charged: float | None) -> float:
    """One verification's seconds: ``charged`` (its charge's evaluator seconds) when it was charged, else its
    run + score + overhead seconds."""
    if charged is not None:
        return float(charged)
    v = record.verification
    return sum(float(s or 0.0) for s in (v.run_seconds, v.score_seconds, v.overhead_seconds))


def _sets_best(record: Verified, best: float) -> bool:
    fit = record.fitness
    return (
        record.verification.status is Status.OK
        and isinstance(fit, (int, float))
        and math.isfinite(fit)
        and float(fit) > best
    )


def best_so_far(verifications: Iterable[tuple[str | None, Verified, float | None]]) -> Iterator[BestSoFar]:
    """One ``BestSoFar`` per ``(node id, record, charged evaluator seconds or None)``, in the order given (the
    store's commit order); see the module docstring for the rule."""
    best_fit, best, best_node, total = -math.inf, None, None, 0.0
    for x, (node_id, record, charged) in enumerate(verifications, start=1):
        total += verification_seconds(record, charged)
        if _sets_best(record, best_fit):
            best_fit, best, best_node = float(record.fitness or 0.0), record, node_id
        yield BestSoFar(x, node_id, record, total, best, best_node)
