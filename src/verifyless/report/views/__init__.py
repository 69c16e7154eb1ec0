"""The run views every report and dashboard page is drawn from: pure functions of a (read-only) run store.

One module per job: ``runs`` (the runs list, a run's summary and budget, events no view draws), ``curves``
(best-so-far curves), ``card`` (the run card), ``progress`` (live progress and ETA), ``final`` (the returned node and submission),
``critic`` (critic calibration and the screener audit), ``learned`` (a critic learnt in the run), ``nodes`` (graph, rounds, node pages), ``calls`` (LLM
calls), ``series`` (per-round series), ``pilots`` (low-fidelity pilots) and ``data_report`` (the task's data
report as the run stored it). Each returns frozen records of plain values; nothing here renders, writes or imports
a web framework, so the HTML report (``verifyless.report.render``) and the dashboard (``verifyless.ui``) show the
same numbers.
"""

from verifyless.report.views import runs  # noqa: I001  (first: its siblings import from it)
from verifyless.report.views import (
    calls,
    card,
    critic,
    curves,
    data_report,
    final,
    learned,
    nodes,
    pilots,
    progress,
    series,
)

__all__ = [
    "calls",
    "card",
    "critic",
    "curves",
    "data_report",
    "final",
    "learned",
    "nodes",
    "pilots",
    "progress",
    "runs",
    "series",
]
