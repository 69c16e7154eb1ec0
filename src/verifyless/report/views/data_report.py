"""The run's data report as the report and the dashboard show it: a pure read of its ``data_report`` event.

The event (``verifyless.datareport.event_record``) holds the markdown every prompt of the run was given,
so the report shows exactly those bytes; ``status`` is the one line ``show`` prints. A run stored before
the report existed, or run with ``engine.data_report`` off, has no event: the view then says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from verifyless import datareport
from verifyless.events import DataReported
from verifyless.store.protocol import RunStoreProtocol

__all__ = ["DataReportView", "data_report_view"]


@dataclass(frozen=True)
class DataReportView:
    """``status``: one line (computed / what was missing); ``markdown``: what the prompts were given ('' if none)."""

    status: str
    markdown: str = ""
    content_hash: str = ""
    blob: str = ""

    @property
    def stored(self) -> bool:
        return bool(self.markdown)


def data_report_view(store: RunStoreProtocol, run_id: str) -> DataReportView:
    """The last ``data_report`` event of ``run_id`` (a run stores one), or a view saying there is none."""
    stored = [ev.record for ev in store.events(run_id, DataReported)]
    if not stored:
        return DataReportView(datareport.status_line(None))
    last = stored[-1]
    return DataReportView(
        datareport.status_line(last), str(last.markdown or ""), str(last.content_hash or ""), str(last.blob or "")
    )
