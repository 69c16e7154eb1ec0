"""Small frozen records returned by the run store."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from typing import Any, Generic, NamedTuple, TypeVar, cast

from verifyless.events import EventRecord, kind_of, parse_event

R = TypeVar("R", bound=EventRecord)


@dataclass(frozen=True, slots=True)
class Charge:
    """Budget consumed by one event; written to the ledger in the event's transaction.

    ``verifications`` counts paid verifications; ``evaluator_seconds`` their
    wall time; tokens and ``cost`` are LLM usage; ``pilot_seconds`` is sandbox
    time spent on agentic-RPM pilot experiments.
    """

    verifications: int = 0
    evaluator_seconds: float = 0.0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    pilot_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Charge:
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})

    @property
    def empty(self) -> bool:
        return not any(asdict(self).values())


@dataclass(frozen=True, slots=True)
class Budget(Charge):
    """Totals of a run's ledger (everything charged so far): a ``Charge``'s fields, summed over the log."""


@dataclass(frozen=True)
class Event(Generic[R]):
    """One committed entry of the append-only log: its envelope and its typed ``record``.

    ``record`` is the event's ``verifyless.events`` record (parsed on first use, so a reader that only counts
    events pays nothing; ``parser`` is the record class asked for, else the kind's registered one).
    ``payload`` is the stored JSON object, for the store itself and for tests; code above the store reads
    ``record`` (tests/test_events.py checks that). ``charge`` is what the event charged to the ledger, or None.
    """

    seq: int
    run_id: str
    ts: float
    kind: str
    node_id: str | None
    payload: Mapping[str, Any]
    charge: Charge | None = None
    parser: type[EventRecord] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def record(self) -> R:
        """The typed record of this event (``Unrecognised`` for a kind no record claims)."""
        if self.parser is not None:
            return cast(R, self.parser.parse(self.payload))
        return cast(R, parse_event(self.kind, self.payload))

    @classmethod
    def of(
        cls, seq: int, run_id: str, record: R, *, node_id: str | None = None, charge: Charge | None = None
    ) -> Event[R]:
        """The envelope of ``record`` just appended as ``seq`` (its record already known: nothing is parsed)."""
        event: Event[R] = cls(seq, run_id, time.time(), kind_of(record), node_id, record.payload(), charge)
        event.__dict__["record"] = record
        return event


class Item(NamedTuple):
    """One event for ``RunStore.append_many`` (a record, or a raw kind and payload); a plain tuple also works."""

    kind: EventRecord | str
    payload: Mapping[str, Any] | None = None
    node_id: str | None = None
    charge: Charge | bool | None = None


@dataclass(frozen=True, slots=True)
class RunInfo:
    """Metadata of one run (``config`` is the resolved config recorded at creation)."""

    run_id: str
    task: str
    created: float
    status: str
    seed: int
    config: Mapping[str, Any] = field(default_factory=dict)
    updated: float = 0.0
    n_nodes: int = 0


@dataclass(frozen=True, slots=True)
class RebuildReport:
    """What ``RunStore.rebuild_views`` found: rows of the stored views that differed from a replay of the events."""

    events: int
    nodes: int
    nodes_changed: int
    ledger_changed: int

    @property
    def consistent(self) -> bool:
        return self.nodes_changed == 0 and self.ledger_changed == 0
