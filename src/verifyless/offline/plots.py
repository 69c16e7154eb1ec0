"""PNG plots for the measurement library (matplotlib, Agg backend, imported only when a plot is drawn).

Every function writes one PNG to ``path`` (parent folders are created) and
returns the path. Inputs are the records of ``verifyless.offline.compare`` and
``verifyless.metrics.critic``; nothing here computes statistics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from verifyless.metrics.critic import AurocPoint, Calibration, RoutePoint
from verifyless.offline.compare import CurveBand
from verifyless.plotting import pyplot, save_png


def plot_curves(
    bands: Sequence[CurveBand],
    path: str | Path,
    *,
    title: str = "",
    xlabel: str = "verifications",
    ylabel: str = "best validation score so far",
) -> Path:
    """Mean best-so-far curves, one line per arm, with a shaded CI band."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for band in bands:
        (line,) = ax.plot(band.x, band.mean, label=f"{band.label} (n={int(max(band.n, default=0))})")
        ax.fill_between(band.x, band.low, band.high, color=line.get_color(), alpha=0.2, linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if bands:
        ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def plot_reliability(cal: Calibration, path: str | Path, *, title: str = "critic calibration") -> Path:
    """Reliability diagram: observed improve rate against mean P(improve) per bin, bar width = bin, size = count."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
    used = [b for b in cal.bins if b.count]
    ax.bar(
        [(b.low + b.high) / 2 for b in used],
        [b.fraction_improve for b in used],
        width=[b.high - b.low for b in used],
        alpha=0.35,
        edgecolor="black",
        label="observed improve rate",
    )
    ax.plot([b.mean_predicted for b in used], [b.fraction_improve for b in used], marker="o", label="bin means")
    for b in used:
        ax.annotate(
            str(b.count), ((b.low + b.high) / 2, b.fraction_improve or 0.0), ha="center", va="bottom", fontsize=7
        )
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("P(improve) = improve vote share")
    ax.set_ylabel("fraction truly improving")
    ece = "n/a" if cal.ece is None else f"{cal.ece:.3f}"
    ax.set_title(f"{title} (ECE {ece}, n={cal.n})")
    ax.legend(loc="upper left", fontsize="small")
    return save_png(fig, path)


def plot_auroc_vs_k(
    series: Mapping[str, Sequence[AurocPoint]], path: str | Path, *, title: str = "AUROC of the vote share vs k"
) -> Path:
    """AUROC against the number of sampled critiques k (log2 axis), one line per critic, error bars = std over subsamples."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    for name, points in series.items():
        pts = [p for p in points if p.auroc is not None]
        ax.errorbar(
            [p.k for p in pts],
            [p.auroc for p in pts],
            yerr=[p.std or 0.0 for p in pts],
            marker="o",
            capsize=3,
            label=name,
        )
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=1)
    if any(p.auroc is not None for pts in series.values() for p in pts):
        ax.set_xscale("log", base=2)  # only with data: a log axis over nothing raises in matplotlib
    ax.set_xlabel("k (critiques per candidate)")
    ax.set_ylabel("AUROC (improve vs not)")
    ax.set_title(title)
    if series:
        ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return save_png(fig, path)


def plot_routing(points: Sequence[RoutePoint], path: str | Path, *, title: str = "routing by uncertainty") -> Path:
    """Error recall and fraction routed against the threshold T."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    ts = [p.threshold for p in points]
    ax.plot(
        ts, [math.nan if p.error_recall is None else p.error_recall for p in points], marker="o", label="error recall"
    )
    ax.plot(ts, [p.routed_fraction for p in points], marker="s", label="fraction routed")
    ax.set_xlabel("threshold T on u = 1 - max vote share")
    ax.set_ylim(0, 1.05)
    ax.set_title(title)
    ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return save_png(fig, path)


__all__ = ["plot_auroc_vs_k", "plot_curves", "plot_reliability", "plot_routing"]
