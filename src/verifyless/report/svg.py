"""Inline SVG figures computed in Python: best-so-far curves and the search graph.

Every string that reaches the SVG goes through ``html.escape`` (text and
attributes), so an idea or node id holding markup is drawn as text. The
functions return ``markupsafe.Markup`` so Jinja inserts them unescaped.
Limits: no interactivity beyond links and ``<title>`` tooltips; very large
trees (thousands of nodes) give wide figures that scroll horizontally.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

from markupsafe import Markup

from verifyless.report.text import number
from verifyless.report.views.curves import CurveView, y_extent
from verifyless.report.views.nodes import GraphView

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
STATUS_COLOURS = {
    "failed": "#d62728",
    "timeout": "#b22222",
    "oom": "#8b0000",
    "contract-violation": "#c71585",
    "invalid-metric": "#e9967a",
    "screened-out": "#d9d9d9",
    "duplicate": "#c7c7c7",
    "guard-failed": "#f5b041",
    "parse-error": "#f5b041",
    "model-error": "#f5b041",
    "implemented": "#ffffff",
    "proposed": "#ffffff",
}


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [float(lo)]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 2.5, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    start = math.ceil(lo / step) * step
    return [float(start + i * step) for i in range(int((hi - start) / step + 1e-9) + 1)]  # floats: labels use number()


def curves_svg(curves: Sequence[CurveView], *, width: int = 640, height: int = 320, title: str = "") -> Markup:
    """Best-so-far validation score (step lines) and every verified score (dots) against verifications;
    baselines dashed, the ceiling dotted. The y range is the curves' shared ``y_range`` when they carry one,
    else their ``y_extent``; the axis label says which way is better."""
    shared = [c.y_range for c in curves if c.y_range is not None]
    extent = (min(r[0] for r in shared), max(r[1] for r in shared)) if shared else y_extent(curves)
    xmax = max((len(c.points) for c in curves), default=1) or 1
    left, right, top, bottom = 64, 16, 28 if title else 12, 40
    legend_h = 16 * len(curves)
    plot_w, plot_h = width - left - right, height - top - bottom
    out = [
        f'<svg class="figure curve" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height + legend_h}" viewBox="0 0 {width} {height + legend_h}" role="img">'
    ]
    if title:
        out.append(f'<text x="{width / 2}" y="16" text-anchor="middle" class="title">{_e(title)}</text>')
    if extent is None:
        out.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle">no verification yet</text></svg>')
        return Markup("".join(out))
    lo, hi = extent
    pad = (hi - lo) * 0.08 or abs(hi) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad

    def sx(x: float) -> float:
        return left + plot_w * (x - 0.5) / max(xmax, 1)

    def sy(y: float) -> float:
        return top + plot_h * (1 - (y - lo) / (hi - lo))

    out.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" class="frame"/>')
    for t in _ticks(lo, hi):
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>'
            f'<text x="{left - 4}" y="{sy(t) + 4:.1f}" text-anchor="end" class="tick">{number(t, 4)}</text>'
        )
    for t in _ticks(1, xmax, 8):
        if float(t).is_integer():
            out.append(
                f'<text x="{sx(t):.1f}" y="{top + plot_h + 14}" text-anchor="middle" class="tick">{int(t)}</text>'
            )
    out.append(f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">verifications</text>')
    metric = curves[0].metric if curves else "score"
    better = f" ({curves[0].better})" if curves else ""
    out.append(
        f'<text x="12" y="{top + plot_h / 2}" transform="rotate(-90 12 {top + plot_h / 2})" '
        f'text-anchor="middle">best {_e(metric)} so far{_e(better)}</text>'
    )
    for i, c in enumerate(curves):
        colour = PALETTE[i % len(PALETTE)]
        out += _series(c, colour, sx, sy)
        y = height + 16 * i + 4
        out.append(
            f'<line x1="{left}" x2="{left + 20}" y1="{y}" y2="{y}" stroke="{colour}" stroke-width="2"/>'
            f'<text x="{left + 26}" y="{y + 4}" class="legend">{_e(c.label)}: final {number(c.final, 4)}, '
            f"baseline {number(c.baseline, 4)}</text>"
        )
    for c in curves:
        for x, label in c.markers:  # the safety net's state changes, after that many verifications
            out.append(
                f'<line x1="{sx(x + 0.5):.1f}" x2="{sx(x + 0.5):.1f}" y1="{top}" y2="{top + plot_h}" class="marker"/>'
                f'<text x="{sx(x + 0.5) + 3:.1f}" y="{top + 12}" class="tick">{_e(label)}</text>'
            )
    ceilings = {c.ceiling for c in curves if c.ceiling is not None}
    for ceil in ceilings:
        label = next(c.ceiling_label for c in curves if c.ceiling == ceil)
        if not lo <= ceil <= hi:
            y = top + 12 if ceil > hi else top + plot_h - 6
            out.append(
                f'<text x="{left + plot_w - 4}" y="{y}" text-anchor="end" class="tick">{_e(label)} {number(ceil, 4)} '
                f"({'above' if ceil > hi else 'below'} the chart)</text>"
            )
            continue
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{sy(ceil):.1f}" y2="{sy(ceil):.1f}" class="ceiling"/>'
            f'<text x="{left + plot_w - 4}" y="{sy(ceil) - 4:.1f}" text-anchor="end" class="tick">'
            f"{_e(label)} {number(ceil, 4)}</text>"
        )
    out.append("</svg>")
    return Markup("".join(out))


def _series(c: CurveView, colour: str, sx: Callable[[float], float], sy: Callable[[float], float]) -> list[str]:
    out = []
    if c.baseline is not None:
        out.append(
            f'<line x1="{sx(0.5):.1f}" x2="{sx(max(len(c.points), 1) + 0.5):.1f}" y1="{sy(c.baseline):.1f}" '
            f'y2="{sy(c.baseline):.1f}" stroke="{colour}" class="baseline"/>'
        )
    pts = [(p.x, p.best_score) for p in c.points if p.best_score is not None]
    if pts:
        path = [f"M{sx(pts[0][0]):.1f} {sy(pts[0][1]):.1f}"]
        path += [f"H{sx(x):.1f} V{sy(y):.1f}" for x, y in pts[1:]]
        path.append(f"H{sx(pts[-1][0] + 0.5):.1f}")
        out.append(f'<path d="{" ".join(path)}" fill="none" stroke="{colour}" stroke-width="2"/>')
    for p in c.points:
        if p.score is not None and p.status == "ok":
            out.append(
                f'<circle cx="{sx(p.x):.1f}" cy="{sy(p.score):.1f}" r="2.5" fill="{colour}" opacity="0.45">'
                f"<title>{_e(p.node_id)}: {number(p.score, 4)}</title></circle>"
            )
        elif p.status and p.status != "ok":
            out.append(
                f'<text x="{sx(p.x):.1f}" y="{sy(p.best_score) if p.best_score is not None else 20:.1f}" '
                f'class="fail" text-anchor="middle">×<title>{_e(p.node_id)}: {_e(p.status)}</title></text>'
            )
    return out


def _fill(node_status: str, fitness: float | None, rng: tuple[float, float] | None) -> str:
    if node_status == "ok" and fitness is not None and rng is not None:
        lo, hi = rng
        t = 0.5 if hi <= lo else (fitness - lo) / (hi - lo)
        return f"hsl(130, {35 + 40 * t:.0f}%, {85 - 50 * t:.0f}%)"
    return STATUS_COLOURS.get(node_status, "#9ecae1")


def graph_svg(graph: GraphView, href: Callable[[str], str], *, col: int = 22, row: int = 56) -> Markup:
    """The search tree: primary edges solid, reference edges dashed; fill by status (ok: darker = better)."""
    width = max(graph.width, 1) * col + 40
    height = (graph.depth + 1) * row + 30
    pos = {n.id: (20 + col * n.x + col / 2, 20 + row * n.depth) for n in graph.nodes}
    out = [
        f'<svg class="figure tree" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">'
    ]
    for e in graph.edges:
        (x1, y1), (x2, y2) = pos[e.source], pos[e.target]
        if e.kind == "primary":
            out.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" class="edge primary"/>')
        else:
            out.append(
                f'<path d="M{x1:.1f} {y1:.1f} Q{(x1 + x2) / 2:.1f} {min(y1, y2) - row / 2:.1f} {x2:.1f} '
                f'{y2:.1f}" class="edge reference"/>'
            )
    many_islands = len(graph.islands) > 1
    for n in graph.nodes:
        x, y = pos[n.id]
        r = 7 if n.status != "screened-out" else 4
        stroke = PALETTE[n.island % len(PALETTE)] if many_islands else "#333"
        tip = (
            f"{n.id} [{n.operator}, {n.status}] round {n.round}"
            + (f", island {n.island}" if many_islands else "")
            + (f", score {number(n.score, 4)}" if n.score is not None else "")
            + f"\n{n.idea}"
        )
        ring = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r + 4}" class="final-ring"/>' if n.final else ""
        out.append(
            f'<a href="{_e(href(n.id))}" class="node">{ring}<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" '
            f'fill="{_fill(n.status, n.fitness, graph.fitness_range)}" stroke="{stroke}" stroke-width="1.5">'
            f"<title>{_e(tip)}</title></circle></a>"
        )
    out.append("</svg>")
    return Markup("".join(out))
