"""Testing by betting on a stream of evidence units x in [-1, 1] (the adaptive screener's test).

``Bets`` holds two wealth processes over the same units: ``help`` bets against "mean x <= 0" (factor
1 + l x), ``harm`` against "mean x >= margin" (factor 1 + l (margin - x)). Each bet size l is predictable
(the stream's plug-in mean over second moment from the units before it and ``PRIOR_UNITS`` pseudo-units at
chance, at most ``MAX_BET``), so each wealth is a nonnegative supermartingale under its null and, by
Ville's inequality, reaches 1 / alpha with probability at most alpha however often it is looked at.
``p_values`` are the anytime-valid 1 / peak wealth. Frozen: ``add`` returns the next state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["MAX_BET", "PRIOR_UNITS", "Bets", "Wealth"]

PRIOR_UNITS = 2.0  # pseudo-units at chance (x = 0, x^2 = 1) that each bet size is shrunk with
MAX_BET = 0.75  # the largest bet size: a unit never takes more than 3/4 of either wealth


@dataclass(frozen=True)
class Wealth:
    """One bet's log wealth and the highest it has been (its peak gives the anytime-valid p value)."""

    log: float = 0.0
    peak: float = 0.0

    def grow(self, step: float) -> Wealth:
        """The wealth after one more unit that multiplied it by ``exp(step)``."""
        log = self.log + step
        return Wealth(log, max(self.peak, log))


@dataclass(frozen=True)
class Bets:
    """The two bets' state after ``n`` units (module docstring): sums of x and x^2, and each bet's wealth."""

    margin: float = 0.3
    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    help: Wealth = Wealth()
    harm: Wealth = Wealth()

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n else None

    def sizes(self) -> tuple[float, float]:
        """The next bet sizes (help, harm): mean / second moment of each bet's stream, shrunk, within [0, 0.75]."""
        m, d = self.margin, self.n + PRIOR_UNITS
        mu_help, second_help = self.total / d, (self.squares + PRIOR_UNITS) / d
        # the pseudo-units sit at chance (x = 0, second moment 1): the harm bet starts skeptical (margin - 0)
        mu_harm = ((self.n + PRIOR_UNITS) * m - self.total) / d
        second_harm = ((self.n + PRIOR_UNITS) * m * m - 2 * m * self.total + self.squares + PRIOR_UNITS) / d
        return _clip(mu_help / second_help), _clip(mu_harm / second_harm)

    def add(self, x: float) -> Bets:
        """One more unit x in [-1, 1]."""
        x = min(1.0, max(-1.0, float(x)))
        l_help, l_harm = self.sizes()
        help_ = self.help.grow(math.log1p(l_help * x))
        harm = self.harm.grow(math.log1p(l_harm * (self.margin - x)))
        return Bets(self.margin, self.n + 1, self.total + x, self.squares + x * x, help_, harm)

    def p_values(self) -> tuple[float, float]:
        """Anytime-valid p values (no better than random; helps by the margin): 1 / the peak wealth, at most 1."""
        return math.exp(-self.help.peak), math.exp(-self.harm.peak)

    def rate(self) -> float:
        """Expected log-wealth growth per unit of the leading bet, at the units' mean (<= 0: no decision in sight)."""
        mean = self.mean
        if mean is None:
            return 0.0
        l_help, l_harm = self.sizes()
        second = self.squares / self.n
        help_rate = l_help * mean - l_help**2 * second / 2
        harm_second = self.margin**2 - 2 * self.margin * mean + second
        harm_rate = l_harm * (self.margin - mean) - l_harm**2 * harm_second / 2
        return max(help_rate, harm_rate)


def _clip(size: float) -> float:
    return min(MAX_BET, max(0.0, size))
