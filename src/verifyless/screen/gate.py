"""When a head learnt in the run may rank: its record on the run's own paid outcomes (issue 55, "do no harm").

A critic that learns as it goes starts with a head fitted on few pairs (or on earlier runs that may not fit this
one). Ranking by a head that is no better than chance is not harmless: the picks follow its quirks instead of a
uniform draw, and a cold run was measured slower than random. ``RankGate`` lets the head rank only once the
evidence says its ranking helps; until then the critic *abstains*: it picks as the random screener does (a
``ctx.rng`` shuffle) and says so.

**Evidence: prequential scores.** Each paid outcome the critic is told is scored by the head it had *before*
learning that outcome (a head fitted on earlier pairs only), so every score is a held-out prediction; the outcome
is then positive (the child improved on its parent) or not (tie, worse, failed). The statistic is the
Mann-Whitney U of the scores of positives against the others (a tie of scores counts a half): the head's pairwise
accuracy on the run's own paid pairs, improved against not. Under the null "the scores are independent of the
outcomes" U has mean ``n1 n0 / 2`` and variance ``n1 n0 (n1 + n0 + 1) / 12``; the gate opens when the one-sided
z reaches ``z_open`` (1.645: p <= 0.05) with at least two outcomes on each side. Once open it stays open unless
the same z falls to ``-z_open`` (credibly worse than chance: the gate closes again); a harmful head is the
adaptive safety net's to catch as well.

**Prior from earlier runs.** A warm head arrives with the held-out check of its fit (``train/warm.py``). A head
whose check said it helps (its pairwise interval above 0.5) starts open; any other starts closed and opens on the
run's own evidence like a cold head.

Everything here is a function of the scores and outcomes in tell order, so a resume (which tells the outcomes
again in the same order) and a replay rebuild the same gate; ``note`` is what a screening records.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Z_OPEN", "RankGate"]

Z_OPEN = 1.645  # one-sided p <= 0.05 under the null "scores independent of outcomes"


@dataclass
class RankGate:
    """The gate's scores and state (module docstring). ``open`` is the state now; ``switches`` lists each change as
    ``{"state", "told", "z", ...}`` (``told``: the paid outcomes told when it changed)."""

    z_open: float = Z_OPEN
    open: bool = False
    prior: str = "cold"  # what the state at the start came from: cold, or the warm head's check
    scores: list[tuple[float, bool]] = field(default_factory=list)  # (prequential score, improved), in tell order
    told: int = 0  # outcomes told (those scored and those that came before any head)
    switches: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_check(cls, verdict: Any, z_open: float = Z_OPEN) -> RankGate:
        """A gate for a head whose fit was checked with ``verdict`` (a warm start's ``verdict`` record; None: cold)."""
        if not isinstance(verdict, dict):
            return cls(z_open)
        low = verdict.get("low")
        helps = isinstance(low, int | float) and low > 0.5
        said = verdict.get("word") or "unchecked"
        return cls(z_open, open=helps, prior=f"warm start's held-out check: {said}")

    def add(self, score: float | None, improved: bool) -> bool:
        """One told outcome: its prequential score (None: no head yet) and whether it improved; True when the state
        changed."""
        self.told += 1
        if score is None:
            return False
        self.scores.append((float(score), bool(improved)))
        z = self.z()
        if z is None:
            return False
        change = (not self.open and z >= self.z_open) or (self.open and z <= -self.z_open)
        if change:
            self.open = not self.open
            self.switches.append({"state": "ranking" if self.open else "abstaining", "told": self.told, **self.stats()})
        return change

    def counts(self) -> tuple[int, int, float]:
        """(positives, others, U): U counts each positive scored above an other as 1, level as 1/2."""
        pos = [s for s, y in self.scores if y]
        neg = [s for s, y in self.scores if not y]
        u = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
        return len(pos), len(neg), u

    def z(self) -> float | None:
        """The one-sided z of U under the null (None with fewer than two outcomes on a side)."""
        n1, n0, u = self.counts()
        if n1 < 2 or n0 < 2:
            return None
        return (u - n1 * n0 / 2) / math.sqrt(n1 * n0 * (n1 + n0 + 1) / 12)

    def stats(self) -> dict[str, Any]:
        n1, n0, u = self.counts()
        z = self.z()
        return {
            "improved": n1,
            "others": n0,
            "pairwise": round(u / (n1 * n0), 6) if n1 and n0 else None,
            "z": None if z is None else round(z, 6),
            "p_chance": None if z is None else round(0.5 * math.erfc(z / math.sqrt(2)), 6),
        }

    def reason(self) -> str:
        """One sentence: what the critic does and why."""
        s = self.stats()
        said = (
            f"pairwise {s['pairwise']:.2f} on {s['improved']} improved x {s['others']} other paid outcomes, "
            f"p = {s['p_chance']:.3f} that it is chance"
            if s["z"] is not None
            else f"{s['improved']} improved and {s['others']} other paid outcomes scored, too few to tell"
        )
        if self.open:
            since = (
                f"since paid outcome {self.switches[-1]['told']}" if self.switches else f"from the start ({self.prior})"
            )
            return f"ranking {since}: {said}"
        return f"abstaining (random pick) until the head's record is credibly above chance: {said}"

    def note(self) -> dict[str, Any]:
        """What a screening records: the state, its reason, the statistic and the switches so far."""
        return {
            "state": "ranking" if self.open else "abstaining",
            "reason": self.reason(),
            "prior": self.prior,
            "told": self.told,
            **self.stats(),
            "switches": list(self.switches),
        }
