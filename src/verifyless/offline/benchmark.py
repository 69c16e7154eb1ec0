"""The critic benchmark: any screener over a dataset's ``bench`` split, offline.

Each row is screened on its own (one candidate, its parent as context; the
same ``ScreenContext`` and ``Candidate`` that ``critic_messages`` renders
from, so a critic sees the training prompt), with a generator seeded by
``(seed, example_id)``. The screener's ``Evidence`` becomes a
``verifyless.metrics.critic.CriticRecord`` with the row's execution labels;
screeners that give no verdicts (e.g. ``random``) produce no records and are
reported as such. Metrics: Improve accuracy, Dir-3, F1, 5-Ladder overall,
per stratum and per task; AUROC vs k; the routing curve (votes and u counted
as the router counts them). ``write_report`` writes the markdown report and,
with matplotlib, the PNG plots (``offline/plots.py``).

Datasets carry summaries, not programs: screeners that need program text
(feature surrogates, agentic pilots) see an empty program.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.critic_data.prompt import row_candidate, screen_context
from verifyless.metrics import critic as m
from verifyless.offline import (
    plots,  # needs the `plot` extra (matplotlib)
    tables,
)
from verifyless.screen.base import Screener


@dataclass(frozen=True)
class CriticBenchReport:
    """One screener on one split: per-group metrics (``all``, ``stratum=...``, ``task=...``), routing and AUROC."""

    screener: str
    split: str
    rows: int
    no_verdict: int
    records: tuple[m.CriticRecord, ...]
    groups: Mapping[str, m.CriticMetrics]
    routing: tuple[m.RoutePoint, ...]
    auroc: tuple[m.AurocPoint, ...]
    seconds: float


async def screen_rows(
    rows: Sequence[Mapping[str, Any]],
    screener: Screener,
    *,
    seed: int = 0,
    concurrency: int = 4,
    progress: Callable[[], None] | None = None,
) -> tuple[list[m.CriticRecord], int]:
    """Records for the rows the screener gave a verdict on, and how many got none."""
    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(row: Mapping[str, Any]) -> m.CriticRecord | None:
        ctx = screen_context(row, random.Random(f"{seed}:{row['example_id']}"))
        cand = row_candidate(row)
        async with slots:
            screening = await screener.screen(ctx, [cand])
        if progress is not None:
            progress()
        ev = screening.evidence.get(cand.id)
        if ev is None:
            return None
        return m.record_from_evidence(
            ev.to_dict(),
            str(row["label3"]),
            row.get("label5"),
            task=str(row["task"]),
            stratum=str(row.get("stratum") or "unsynthesized"),
            parent_id=str(row["parent_id"]),
            delta=float(row["delta"]),
        )

    results = await asyncio.gather(*(one(r) for r in rows))
    records = [r for r in results if r is not None]
    return records, len(results) - len(records)


def run_critic_bench(
    rows: Sequence[Mapping[str, Any]],
    screener: Screener,
    *,
    split: str = "bench",
    seed: int = 0,
    repeats: int = 5,
    concurrency: int = 4,
    progress: Callable[[], None] | None = None,
) -> CriticBenchReport:
    """Screen every row and compute the critic metrics (see module docstring)."""
    started = time.monotonic()
    records, none = asyncio.run(screen_rows(rows, screener, seed=seed, concurrency=concurrency, progress=progress))
    groups: dict[str, m.CriticMetrics] = {"all": m.critic_metrics(records)}
    groups.update({f"stratum={k}": v for k, v in m.breakdown(records, "stratum").items()})
    groups.update({f"task={k}": v for k, v in m.breakdown(records, "task").items()})
    return CriticBenchReport(
        screener.name,
        split,
        len(rows),
        none,
        tuple(records),
        groups,
        tuple(m.routing_curve(records)),
        tuple(m.auroc_vs_k(records, repeats=repeats, seed=seed)),
        time.monotonic() - started,
    )


# ---------------------------------------------------------------------- the report (rendering only)


def markdown(rep: CriticBenchReport) -> str:
    """The benchmark as one markdown page: headline table, confusion, routing and AUROC vs k."""
    lines = [
        f"# Critic benchmark: {rep.screener} on the {rep.split} split\n",
        f"{rep.rows} examples, {len(rep.records)} with a verdict, {rep.no_verdict} without; {rep.seconds:.1f} s.\n",
        tables.critic_table(rep.groups),
    ]
    if rep.records:
        lines += [
            "\n## Three-way confusion (rows = truth)\n",
            tables.confusion_table(rep.groups["all"].confusion3),
            "\n## Routing by vote uncertainty\n",
            tables.routing_table(list(rep.routing)),
            "\n## AUROC vs k\n",
            tables.auroc_table(list(rep.auroc)),
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
        written.append(plots.plot_auroc_vs_k({rep.screener: list(rep.auroc)}, out / "auroc_k.png"))
        written.append(plots.plot_routing(list(rep.routing), out / "routing.png"))
    except ImportError:  # the markdown report stands alone
        pass
    return written


__all__ = ["CriticBenchReport", "markdown", "run_critic_bench", "screen_rows", "write_report"]
