"""What the engine, the report and the UI use of a run store, as a Protocol (``RunStoreProtocol``).

``verifyless.store.RunStore`` (SQLite, ``store/sqlite.py``) is the one implementation; code that only
reads or appends events takes this protocol, so a test double or another backend can stand in. The
contract of each method is ``RunStore``'s (see docs/design/store-schema.md): events are append-only
and committed before ``append`` returns; views (``runs``, ``nodes``, ``node_rows``, ``budget``,
``llm_usage``) are derived from the events; snapshots are the one thing that is overwritten.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar, overload, runtime_checkable

from verifyless.events import EventRecord
from verifyless.node import Node
from verifyless.store.lease import Holder
from verifyless.store.records import Budget, Charge, Event, RunInfo

R = TypeVar("R", bound=EventRecord)


@runtime_checkable
class RunStoreProtocol(Protocol):
    """The run store's faces used above the store layer (see the module docstring)."""

    def create_run(
        self,
        task: str,
        config: Mapping[str, Any],
        *,
        run_id: str | None = None,
        seed: int = 0,
        fingerprint: Mapping[str, Any] | None = None,
        task_root: str | None = None,
        task_metric: Mapping[str, Any] | None = None,
    ) -> str: ...

    def set_status(self, run_id: str, status: str, *, reason: str | None = None) -> int: ...

    def holding(self, run_id: str, *, take_over: bool = False) -> AbstractContextManager[Holder]: ...

    def append(
        self,
        run_id: str,
        record: EventRecord | str,
        payload: Mapping[str, Any] | None = None,
        *,
        node_id: str | None = None,
        charge: Charge | bool | None = None,
    ) -> int: ...

    @overload
    def events(
        self, run_id: str, *, kinds: Iterable[str] | None = None, after: int = 0, node_id: str | None = None
    ) -> Iterator[Event[EventRecord]]: ...

    @overload
    def events(
        self, run_id: str, first: type[R], /, *types: type[R], after: int = 0, node_id: str | None = None
    ) -> Iterator[Event[R]]: ...

    def runs(self) -> list[RunInfo]: ...

    def run(self, run_id: str) -> RunInfo: ...

    def resolve_run(self, prefix: str) -> str: ...

    def nodes(self, run_id: str) -> list[Node]: ...

    def node_rows(self, run_id: str) -> list[dict[str, Any]]: ...

    def budget(self, run_id: str) -> Budget: ...

    def llm_usage(self, run_id: str) -> list[dict[str, Any]]: ...

    def put_blob(self, data: str | bytes) -> str: ...

    def get_blob(self, digest: str) -> bytes: ...

    def get_text(self, digest: str) -> str: ...

    def put_snapshot(self, run_id: str, upto_seq: int, header: Mapping[str, Any], data: bytes) -> None: ...

    def latest_snapshot(self, run_id: str) -> tuple[int, dict[str, Any], bytes] | None: ...


__all__ = ["RunStoreProtocol"]
