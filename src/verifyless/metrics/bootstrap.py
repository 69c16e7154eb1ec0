"""The one percentile bootstrap and the ``Estimate`` it returns (screener audits, arm comparisons, benches).

``bootstrap(values, stat)`` resamples ``values`` with replacement ``n_boot`` times from
``numpy.random.default_rng(seed)`` (one ``integers(0, n, (n_boot, n))`` draw, so row ``i`` is the ``i``-th
resample a loop of ``integers(0, n, n)`` calls would make) and takes the ``(1 - level) / 2`` and
``1 - (1 - level) / 2`` quantiles (numpy's linear interpolation) of the resampled statistic. The mean is
computed for all rows at once; any other ``stat`` is called once per row. Limits: a plain percentile interval
(no bias correction), i.i.d. resampling only; stratified or paired designs resample their own units
(``offline.compare``) and read the interval with ``percentile_interval``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

N_BOOT = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Estimate:
    """A point estimate over ``n`` units with a percentile bootstrap interval.

    ``low``/``high`` are None when the value cannot vary (fewer than two units); ``value`` is None only for
    an estimate over no units at all (``bootstrap([])``).
    """

    value: float | None
    low: float | None
    high: float | None
    n: int

    def __str__(self) -> str:
        if self.value is None:
            return "-"
        if self.low is None or self.high is None:
            return f"{self.value:.3f}"
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def row(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high, "n": self.n}

    def text(self, scale: float = 1.0, digits: int = 2) -> str:
        """``0.61 [0.52, 0.70] n=40``, or ``- n=0``."""
        if self.value is None:
            return f"- n={self.n}"
        value = f"{scale * self.value:.{digits}f}"
        if self.low is None or self.high is None:
            return f"{value} n={self.n}"
        return f"{value} [{scale * self.low:.{digits}f}, {scale * self.high:.{digits}f}] n={self.n}"


def percentile_interval(samples: Any, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` interval of bootstrap ``samples`` (numpy quantiles, linear interpolation)."""
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(samples, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap(
    values: Sequence[float] | np.ndarray,
    stat: Callable[[np.ndarray], Any] | None = None,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> Estimate:
    """``stat`` (default: the mean) of i.i.d. ``values`` with a percentile bootstrap interval (module docstring)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return Estimate(None, None, None, 0)
    fn: Callable[[np.ndarray], Any] = np.mean if stat is None else stat
    point = float(fn(x))
    if x.size == 1:
        return Estimate(point, None, None, 1)
    idx = np.random.default_rng(seed).integers(0, x.size, size=(n_boot, x.size))
    boots = x[idx].mean(axis=1) if fn is np.mean else np.array([fn(x[row]) for row in idx], dtype=float)
    lo, hi = percentile_interval(boots, level)
    return Estimate(point, lo, hi, int(x.size))


__all__ = ["LEVEL", "N_BOOT", "Estimate", "bootstrap", "percentile_interval"]
