"""The critic benchmark's report: markdown tables and, with matplotlib, PNG plots.

``data.benchmark.run_critic_bench`` computes a ``CriticBenchReport``; this
module renders it (``markdown``) and writes ``critic_bench.md`` plus
``auroc_k.png`` and ``routing.png`` (``write_report``). Rendering only: every
number comes from the report.
"""

from __future__ import annotations

from pathlib import Path

from verifyless.data.benchmark import CriticBenchReport
from verifyless.offline import report


def markdown(rep: CriticBenchReport) -> str:
    """The benchmark as one markdown page: headline table, confusion, routing and AUROC vs k."""
    lines = [
        f"# Critic benchmark: {rep.screener} on the {rep.split} split\n",
        f"{rep.rows} examples, {len(rep.records)} with a verdict, {rep.no_verdict} without; {rep.seconds:.1f} s.\n",
        report.critic_table(rep.groups),
    ]
    if rep.records:
        lines += [
            "\n## Three-way confusion (rows = truth)\n",
            report.confusion_table(rep.groups["all"].confusion3),
            "\n## Routing by vote uncertainty\n",
            report.routing_table(list(rep.routing)),
            "\n## AUROC vs k\n",
            report.auroc_table(list(rep.auroc)),
        ]
    return "\n".join(lines) + "\n"


def write_report(rep: CriticBenchReport, out: Path) -> list[Path]:
    """``critic_bench.md`` and, with matplotlib, ``auroc_k.png`` and ``routing.png`` in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "critic_bench.md"]
    written[0].write_text(markdown(rep), encoding="utf-8")
    if not rep.records:
        return written
    try:
        from verifyless.offline import plots  # needs the `plot` extra (matplotlib)

        written.append(plots.plot_auroc_vs_k({rep.screener: list(rep.auroc)}, out / "auroc_k.png"))
        written.append(plots.plot_routing(list(rep.routing), out / "routing.png"))
    except ImportError:  # the markdown report stands alone
        pass
    return written


__all__ = ["markdown", "write_report"]
