"""The run store: append-only events, materialised node view, blobs and budget ledger on SQLite.

See ``docs/design/store-schema.md`` for tables, event kinds and durability guarantees.
"""

from verifyless.store.protocol import RunStoreProtocol
from verifyless.store.records import Budget, Charge, Event, Item, RebuildReport, RunInfo
from verifyless.store.schema import SCHEMA_VERSION
from verifyless.store.sqlite import RunStore

__all__ = [
    "Budget",
    "Charge",
    "Event",
    "Item",
    "RebuildReport",
    "RunInfo",
    "RunStore",
    "RunStoreProtocol",
    "SCHEMA_VERSION",
]
