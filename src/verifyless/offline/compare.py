"""Comparing arms (screener/search settings) across tasks and seeds.

Data layout: an arm's results are ``{task: [value per run]}``; values are
normalised final scores (``verifyless.offline.scores``) so tasks are on one scale.

* ``arm_score``: mean over tasks of the per-task mean, with a percentile
  bootstrap CI that resamples runs within each task (task-stratified).
* ``probability_of_improvement``: P(A > B) = mean over the tasks both arms
  ran of P(a random run of A beats a random run of B) (ties count half),
  with the same task-stratified bootstrap over both arms' runs.
* Best-so-far curves from a run's ``verification`` events: x = verifications
  paid (the baseline's included), cumulative evaluator seconds, and the best
  validation fitness so far (NaN before the first working verification).
  ``reach`` gives the verifications and seconds arm A needed to first match
  a target (e.g. arm B's final best); None if it never did.
* ``curve_band``: mean curve across runs on a common grid with a bootstrap
  CI per grid point; a run that stopped early keeps its last value.

All randomness comes from ``numpy.random.default_rng(seed)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from verifyless.events import Verified
from verifyless.metrics.bootstrap import LEVEL, N_BOOT, Estimate, bootstrap, percentile_interval
from verifyless.metrics.curve import best_so_far

ArmScores = Mapping[str, Sequence[float]]  # task -> one value per run


def bootstrap_ci(
    values: Sequence[float],
    stat: Callable[[np.ndarray], float] = np.mean,
    *,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> Estimate:
    """Percentile bootstrap CI of ``stat`` over i.i.d. ``values`` (``metrics.bootstrap.bootstrap``); ValueError when empty."""
    if len(values) == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    return bootstrap(values, stat, n_boot=n_boot, level=level, seed=seed)


def _tasks(scores: ArmScores) -> list[str]:
    return sorted(t for t, v in scores.items() if len(v) > 0)


def arm_score(scores: ArmScores, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> Estimate:
    """Mean over tasks of the mean final score, with a task-stratified bootstrap CI."""
    tasks = _tasks(scores)
    if not tasks:
        raise ValueError("arm_score needs at least one task with one run")
    arrays = [np.asarray(scores[t], dtype=float) for t in tasks]
    point = float(np.mean([a.mean() for a in arrays]))
    n = sum(a.size for a in arrays)
    if all(a.size == 1 for a in arrays):
        return Estimate(point, None, None, n)
    rng = np.random.default_rng(seed)
    boots = np.zeros(n_boot)
    for a in arrays:
        boots += a[rng.integers(0, a.size, size=(n_boot, a.size))].mean(axis=1)
    lo, hi = percentile_interval(boots / len(arrays), level)
    return Estimate(point, lo, hi, n)


def _p_greater(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P(a > b) + 0.5 P(a == b) over all pairs; works on stacked bootstrap rows (..., n) x (..., m)."""
    diff = a[..., :, None] - b[..., None, :]
    return (diff > 0).mean(axis=(-2, -1)) + 0.5 * (diff == 0).mean(axis=(-2, -1))


def probability_of_improvement(
    a: ArmScores, b: ArmScores, *, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0
) -> Estimate:
    """P(a random run of A beats a random run of B on a random shared task), ties half, stratified bootstrap CI."""
    tasks = [t for t in _tasks(a) if t in b and len(b[t]) > 0]
    if not tasks:
        raise ValueError("the two arms share no task with runs; nothing to compare")
    rng = np.random.default_rng(seed)
    point, boots = 0.0, np.zeros(n_boot)
    for t in tasks:
        x, y = np.asarray(a[t], dtype=float), np.asarray(b[t], dtype=float)
        point += float(_p_greater(x, y))
        xs = x[rng.integers(0, x.size, size=(n_boot, x.size))]
        ys = y[rng.integers(0, y.size, size=(n_boot, y.size))]
        boots += _p_greater(xs, ys)
    n = sum(len(a[t]) + len(b[t]) for t in tasks)
    if all(len(a[t]) == 1 and len(b[t]) == 1 for t in tasks):
        return Estimate(point / len(tasks), None, None, n)
    lo, hi = percentile_interval(boots / len(tasks), level)
    return Estimate(point / len(tasks), lo, hi, n)


# ---------------------------------------------------------------------- curves


@dataclass(frozen=True)
class Curve:
    """Best-so-far validation fitness after each paid verification of one run.

    ``verifications[i] = i + 1``; ``seconds[i]`` cumulative evaluator seconds;
    ``best[i]`` best fitness so far (NaN until a verification worked);
    ``best_test[i]`` the hidden test score of that best node (reporting only).
    """

    run_id: str
    task: str
    verifications: np.ndarray
    seconds: np.ndarray
    best: np.ndarray
    best_test: np.ndarray

    @property
    def final(self) -> float:
        return float(self.best[-1]) if len(self.best) else math.nan


def curve_from_events(run_id: str, task: str, events: Sequence[Any]) -> Curve:
    """A curve from ``verification`` events (store ``Event`` objects, or dicts with ``payload`` and ``charge``),
    folded by ``verifyless.metrics.curve.best_so_far``."""
    steps = best_so_far(_verification(ev) for ev in events)
    xs: list[int] = []
    secs: list[float] = []
    bests: list[float] = []
    tests: list[float] = []
    for step in steps:
        best_test = step.best.verification.test_score if step.best is not None else None
        xs.append(step.x)
        secs.append(step.seconds)
        bests.append(step.best_fitness)
        tests.append(math.nan if best_test is None else float(best_test))
    return Curve(run_id, task, np.array(xs, dtype=int), np.array(secs), np.array(bests), np.array(tests))


def _verification(ev: Any) -> tuple[str | None, Verified, float | None]:
    """(node id, record, charged evaluator seconds or None) of a store ``Event`` or a ``{payload, charge}`` dict."""
    if isinstance(ev, Mapping):
        charge = ev.get("charge")
        charged = None if charge is None else float(charge.get("evaluator_seconds", 0.0))
        return ev.get("node_id"), Verified.parse(ev["payload"]), charged
    charged = None if ev.charge is None else float(ev.charge.evaluator_seconds)
    return ev.node_id, ev.record, charged


def curve_from_store(store: Any, run_id: str) -> Curve:
    """The best-so-far curve of one stored run (every ``verification`` event, in commit order)."""
    return curve_from_events(run_id, store.run(run_id).task, list(store.events(run_id, Verified)))


@dataclass(frozen=True)
class Reach:
    """Verifications and evaluator seconds a run needed to first reach ``target`` (None: never)."""

    target: float
    verifications: int | None
    seconds: float | None


def reach(curve: Curve, target: float) -> Reach:
    """First point where the best-so-far fitness is >= ``target``."""
    hit = np.nonzero(np.nan_to_num(curve.best, nan=-np.inf) >= target)[0]
    if hit.size == 0:
        return Reach(float(target), None, None)
    i = int(hit[0])
    return Reach(float(target), int(curve.verifications[i]), float(curve.seconds[i]))


def reach_final(a: Curve, b: Curve) -> Reach:
    """How long run A took to reach run B's final best (RPM paper: time to match the unguided agent)."""
    return reach(a, b.final)


@dataclass(frozen=True)
class CurveBand:
    """Mean best-so-far across runs on ``x`` with a bootstrap CI per point; ``n`` runs with a value there."""

    label: str
    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n: np.ndarray


def curve_band(
    curves: Sequence[Curve],
    label: str = "",
    *,
    x: Sequence[float] | np.ndarray | None = None,
    by: str = "verifications",
    transform: Callable[[float], float] | None = None,
    n_boot: int = N_BOOT,
    level: float = LEVEL,
    seed: int = 0,
) -> CurveBand:
    """Mean curve with a CI band; ``by`` is ``verifications`` or ``seconds``; ``transform`` maps fitness (e.g. to a normalised score)."""
    if not curves:
        raise ValueError("curve_band needs at least one curve")
    if x is None:
        top = max(float(getattr(c, by)[-1]) for c in curves if len(c.best))
        x = np.arange(1, int(top) + 1) if by == "verifications" else np.linspace(0.0, top, 50)
    grid = np.asarray(x, dtype=float)
    values = np.full((len(curves), grid.size), np.nan)
    for i, c in enumerate(curves):
        if not len(c.best):
            continue
        axis = np.asarray(getattr(c, by), dtype=float)
        idx = np.searchsorted(axis, grid, side="right") - 1  # last point at or before each grid value
        ok = idx >= 0
        best = (
            c.best if transform is None else np.array([transform(v) if math.isfinite(v) else math.nan for v in c.best])
        )
        values[i, ok] = best[idx[ok]]
    rng = np.random.default_rng(seed)
    mean, low, high, n = (np.full(grid.size, np.nan) for _ in range(4))
    alpha = (1.0 - level) / 2.0
    for j in range(grid.size):
        col = values[:, j][np.isfinite(values[:, j])]
        n[j] = col.size
        if col.size == 0:
            continue
        mean[j] = col.mean()
        if col.size > 1:
            boots = col[rng.integers(0, col.size, size=(n_boot, col.size))].mean(axis=1)
            low[j], high[j] = np.quantile(boots, [alpha, 1.0 - alpha])
        else:
            low[j] = high[j] = col[0]
    return CurveBand(label, grid, mean, low, high, n)


__all__ = [
    "LEVEL",
    "N_BOOT",
    "ArmScores",
    "Curve",
    "CurveBand",
    "Estimate",
    "Reach",
    "arm_score",
    "bootstrap_ci",
    "curve_band",
    "curve_from_events",
    "curve_from_store",
    "probability_of_improvement",
    "reach",
    "reach_final",
]
