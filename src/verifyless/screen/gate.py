"""When a head learnt in the run may rank: its record on the run's own paid outcomes (issue 55, "do no harm").

A critic that learns as it goes starts with a head fitted on few pairs (or on earlier runs that may not fit this
one). Ranking by a head that is no better than chance is not harmless: the picks follow its quirks instead of a
uniform draw, and a cold run was measured slower than random. ``RankGate`` lets the head rank only once the
evidence says its ranking helps; until then the critic *abstains*: it picks as the random screener does (a
``ctx.rng`` shuffle) and says so.

**Evidence: prequential scores of siblings.** Each paid outcome the critic is told is scored by the head it had
*before* learning that outcome (a head fitted on earlier pairs only), so every score is a held-out prediction. What
a screener does is rank siblings, so the evidence is the head's pairwise accuracy on the run's own paid sibling
pairs: two told children of the same parent whose fitness differs (a failed child is below every score), right when
the head scored the better one higher (a tie of scores is half). The test is Kendall's S within each parent
(concordant minus discordant pairs, summed over parents): under the null "the scores are independent of the
outcomes" each parent's S has mean 0 and variance ``(v(n) - sum of v(t) over fitness ties) / 18`` with
``v(m) = m (m - 1) (2 m + 5)``, independent across parents. The gate opens when the one-sided z = S / sqrt(var)
reaches ``z_open`` (1.645: p <= 0.05). Once open it stays open unless the same z falls to ``-z_close`` (2.326:
p <= 0.01 that it is at least as good as chance) over at least ``MIN_CLOSE`` (15) pairs: closing throws away what
an open head (a warm one) learnt elsewhere, and an early look at a handful of siblings is noisy (measured: a warm
head on star98_math closed after 4 paid outcomes in 2 of 12 seeds at the opening threshold); a harmful head is
the adaptive safety net's to catch as well.

**Prior from earlier runs.** A warm head arrives with the held-out check of its fit (``train/warm.py``). It starts
open (it ranks from the first screening, as it did before the gate) unless that check found it worse than random
(its pairwise interval wholly below 0.5); the run's own evidence then keeps it or closes it as above. A cold head
starts closed and opens on the run's own evidence.

Everything here is a function of the scores and outcomes in tell order, so a resume (which tells the outcomes
again in the same order) and a replay rebuild the same gate; ``note`` is what a screening records.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MIN_CLOSE", "MIN_PAIRS", "Z_CLOSE", "Z_OPEN", "RankGate"]

Z_OPEN = 1.645  # one-sided p <= 0.05 under the null "scores independent of outcomes"
MIN_PAIRS = 6  # sibling pairs before the test is read at all
Z_CLOSE = 2.326  # one-sided p <= 0.01 that an open head is at least as good as chance
MIN_CLOSE = 15  # sibling pairs before an open gate may close


def _v(m: int) -> float:
    return m * (m - 1) * (2 * m + 5)


@dataclass
class RankGate:
    """The gate's scores and state (module docstring). ``open`` is the state now; ``switches`` lists each change as
    ``{"state", "told", "z", ...}`` (``told``: the paid outcomes told when it changed)."""

    z_open: float = Z_OPEN
    open: bool = False
    prior: str = "cold"  # what the state at the start came from: cold, or the warm head's check
    scores: list[tuple[float, str, float | None]] = field(default_factory=list)  # (score, parent, fitness), told order
    told: int = 0  # outcomes told (those scored and those that came before any head)
    switches: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_check(cls, verdict: Any, z_open: float = Z_OPEN) -> RankGate:
        """A gate for a head whose fit was checked with ``verdict`` (a warm start's ``verdict`` record; None: cold)."""
        if not isinstance(verdict, dict):
            return cls(z_open)
        high = verdict.get("high")
        worse = isinstance(high, int | float) and high < 0.5
        said = "worse than random" if worse else verdict.get("word") or "unchecked"
        return cls(z_open, open=not worse, prior=f"warm start's held-out check: {said}")

    def add(self, score: float | None, parent: str, fitness: float | None) -> bool:
        """One told outcome: its prequential score (None: no head yet), its parent and its fitness (None: failed);
        True when the state changed."""
        self.told += 1
        if score is None:
            return False
        self.scores.append((float(score), parent, fitness))
        z = self.z()
        if z is None:
            return False
        closes = z <= -Z_CLOSE and self.counts()[1] >= MIN_CLOSE
        change = (not self.open and z >= self.z_open) or (self.open and closes)
        if change:
            self.open = not self.open
            self.switches.append({"state": "ranking" if self.open else "abstaining", "told": self.told, **self.stats()})
        return change

    def groups(self) -> list[list[tuple[float, float]]]:
        """The scored children by parent, as (score, fitness) with a failed child at -inf."""
        by: dict[str, list[tuple[float, float]]] = {}
        for score, parent, fitness in self.scores:
            by.setdefault(parent, []).append((score, -math.inf if fitness is None else fitness))
        return list(by.values())

    def counts(self) -> tuple[float, int, float]:
        """(right, sibling pairs whose fitness differs, the null variance of S): right counts a tie of scores as 1/2."""
        right, pairs, var = 0.0, 0, 0.0
        for kids in self.groups():
            for i, (si, fi) in enumerate(kids):
                for sj, fj in kids[i + 1 :]:
                    if fi == fj:
                        continue
                    pairs += 1
                    agree = (si - sj) * (fi - fj)
                    right += 1.0 if agree > 0 else 0.5 if si == sj else 0.0
            ties = Counter(f for _, f in kids).values()
            var += (_v(len(kids)) - sum(_v(t) for t in ties)) / 18
        return right, pairs, var

    def z(self) -> float | None:
        """The one-sided z of S = right - wrong under the null (None with fewer than ``MIN_PAIRS`` sibling pairs)."""
        right, pairs, var = self.counts()
        if pairs < MIN_PAIRS or var <= 0:
            return None
        return (2 * right - pairs) / math.sqrt(var)

    def stats(self) -> dict[str, Any]:
        right, pairs, _ = self.counts()
        z = self.z()
        return {
            "pairs": pairs,
            "pairwise": round(right / pairs, 6) if pairs else None,
            "z": None if z is None else round(z, 6),
            "p_chance": None if z is None else round(0.5 * math.erfc(z / math.sqrt(2)), 6),
        }

    def reason(self) -> str:
        """One sentence: what the critic does and why."""
        s = self.stats()
        said = (
            f"pairwise {s['pairwise']:.2f} on {s['pairs']} paid sibling pairs, p = {s['p_chance']:.3f} that it is chance"
            if s["z"] is not None
            else f"{s['pairs']} paid sibling pairs scored, too few to tell"
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
