"""The report's figures as PNG files (matplotlib, Agg; the ``plot`` extra), drawn from the same records as the HTML.

``write_figures(views, folder)`` takes ``render.run_views``'s dict and writes
``curve.png`` (best-so-far validation score with the baseline and ceiling),
``graph.png`` (the search tree in the same layout and colours as the SVG),
``budget.png`` (tokens by role and charges by kind) and, when critic verdicts
have outcomes, ``calibration.png`` (reliability bins). Returns the paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verifyless.plotting import pyplot, save_png
from verifyless.report.svg import PALETTE, STATUS_COLOURS
from verifyless.report.views.critic import CriticView
from verifyless.report.views.curves import CurveView
from verifyless.report.views.nodes import GraphView
from verifyless.report.views.runs import BudgetView


def curve_png(curve: CurveView, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    xs = [p.x for p in curve.points if p.best_score is not None]
    ys = [p.best_score for p in curve.points if p.best_score is not None]
    ax.step(xs, ys, where="post", color=PALETTE[0], label="best so far")
    ok = [(p.x, p.score) for p in curve.points if p.status == "ok" and p.score is not None]
    if ok:
        ax.scatter(*zip(*ok, strict=False), s=10, alpha=0.45, color=PALETTE[0], label="verified score")
    bad = [p.x for p in curve.points if p.status and p.status != "ok"]
    if bad and ys:
        ax.scatter(bad, [min(ys)] * len(bad), marker="x", color="#d62728", label="failed verification")
    if curve.baseline is not None:
        ax.axhline(curve.baseline, linestyle="--", color="grey", label="baseline")
    if curve.ceiling is not None and _near(curve.ceiling, ys + [curve.baseline or ys[0]] if ys else []):
        ax.axhline(curve.ceiling, linestyle=":", color="black", label=curve.ceiling_label)
    elif curve.ceiling is not None:
        ax.text(
            0.99,
            0.01,
            f"{curve.ceiling_label}: {curve.ceiling:.4g} (off the chart)",
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=7,
        )
    ax.set_xlabel("verifications")
    ax.set_ylabel(f"best {curve.metric} so far ({curve.direction})")
    ax.set_title(curve.label, fontsize=9)
    ax.legend(fontsize="small", loc="best")
    ax.grid(alpha=0.3)
    return save_png(fig, path, dpi=110)


def _near(value: float, data: list) -> bool:
    """Whether ``value`` lies within one data span of the data (else drawing it would flatten the curve)."""
    if not data:
        return False
    lo, hi = min(data), max(data)
    span = (hi - lo) or abs(hi) or 1.0
    return lo - span <= value <= hi + span


def graph_png(graph: GraphView, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(min(2 + 0.18 * graph.width, 30), 1.5 + 0.8 * (graph.depth + 1)))
    pos = {n.id: (n.x, -n.depth) for n in graph.nodes}
    for e in graph.edges:
        (x1, y1), (x2, y2) = pos[e.source], pos[e.target]
        style = "-" if e.kind == "primary" else "--"
        ax.plot([x1, x2], [y1, y2], style, color="#888" if e.kind == "primary" else "#7b61ff", linewidth=0.8, zorder=1)
    lo_hi = graph.fitness_range
    for n in graph.nodes:
        if n.status == "ok" and n.fitness is not None and lo_hi is not None:
            t = 0.5 if lo_hi[1] <= lo_hi[0] else (n.fitness - lo_hi[0]) / (lo_hi[1] - lo_hi[0])
            colour: Any = plt.cm.Greens(0.3 + 0.65 * t)
        else:
            colour = STATUS_COLOURS.get(n.status, "#9ecae1")
        size = 18 if n.status == "screened-out" else 60
        ax.scatter([pos[n.id][0]], [pos[n.id][1]], s=size, color=colour, edgecolors="#333", linewidths=0.6, zorder=2)
        if n.final:
            ax.scatter([pos[n.id][0]], [pos[n.id][1]], s=220, facecolors="none", edgecolors="#b26b00", linewidths=1.8)
    ax.set_axis_off()
    ax.set_title(
        "search graph (solid: primary edge, dashed: reference; green darker = better; ring: returned node)", fontsize=8
    )
    return save_png(fig, path, dpi=110)


def budget_png(budget: BudgetView, path: Path) -> Path:
    plt = pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8.0, 3.4))
    roles = [u.role for u in budget.by_role]
    a1.barh(roles, [u.prompt_tokens for u in budget.by_role], color=PALETTE[0], label="prompt")
    a1.barh(
        roles,
        [u.completion_tokens for u in budget.by_role],
        left=[u.prompt_tokens for u in budget.by_role],
        color=PALETTE[1],
        label="completion",
    )
    a1.set_xlabel("tokens")
    a1.set_title("LLM tokens by role", fontsize=9)
    if roles:
        a1.legend(fontsize="small")
    timed = [r for r in budget.by_kind if r.evaluator_seconds or r.pilot_seconds]
    a2.barh([r.kind for r in timed], [r.evaluator_seconds + r.pilot_seconds for r in timed], color=PALETTE[2])
    a2.set_xlabel("seconds")
    a2.set_title(f"evaluator + pilot seconds by kind ({budget.total['verifications']} verifications)", fontsize=9)
    return save_png(fig, path, dpi=110)


def calibration_png(cv: CriticView, path: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    ax.plot([0, 1], [0, 1], "--", color="grey", linewidth=1, label="perfect calibration")
    used = [b for b in cv.bins if b[2]]
    ax.bar(
        [(b[0] + b[1]) / 2 for b in used],
        [b[4] or 0.0 for b in used],
        width=[b[1] - b[0] for b in used],
        alpha=0.35,
        edgecolor="black",
        label="observed improve rate",
    )
    ax.plot([b[3] for b in used], [b[4] for b in used], marker="o", label="bin means")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("P(improve) = improve vote share")
    ax.set_ylabel("fraction truly improving")
    ax.set_title(f"critic calibration (n={cv.n})", fontsize=9)
    ax.legend(fontsize="small", loc="upper left")
    return save_png(fig, path, dpi=110)


def write_figures(views: dict[str, Any], folder: Path) -> list[Path]:
    paths = [
        curve_png(views["curve"], folder / "curve.png"),
        graph_png(views["g"], folder / "graph.png"),
        budget_png(views["b"], folder / "budget.png"),
    ]
    if views.get("cv") is not None:
        paths.append(calibration_png(views["cv"], folder / "calibration.png"))
    return paths
