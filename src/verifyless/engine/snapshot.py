"""Snapshots: the engine's derived state, pickled now and then, so resume replays only the log's tail.

A snapshot holds the ``RunState`` after event ``upto`` and the search
strategy in the state it had then (strategies are pure ask/tell objects), and,
when they pickle, the memory and an observing screener. It is written every
``engine.snapshot_every`` rounds at a round boundary into the store's
``snapshots`` table (one per run, the latest replaces the previous one).

A snapshot is a cache, never the record: the event log stays the truth. It
is used only when its header matches what this engine would build -- the
snapshot format version and the class names of the state, the strategy and
the optional parts -- and it unpickles cleanly; otherwise resume falls back
to replaying every event (logged at WARNING with the reason). Parts that did
not pickle (a memory with a neural embedder, a screener holding a model
client) are rebuilt by feeding the restored nodes again in tell order.

Format 4 loads only what a resumed run touches: the state's candidates and
verifications are ``ledger.packed.Packed`` (one pickle per record, unpickled
on first read), the memory unpacks its index at its first search
(``search/memory.py``), and the parts are stored end to end, each unpickled
from a view of the stored bytes (the header holds its offset and length).
"""

from __future__ import annotations

import contextlib
import copyreg
import dataclasses
import gc
import io
import logging
import pickle
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from verifyless import node
from verifyless.engine.learners import Learners
from verifyless.ledger import Ledger
from verifyless.ledger.fold import RunState
from verifyless.store.protocol import RunStoreProtocol

log = logging.getLogger(__name__)

__all__ = ["FORMAT", "Loaded", "Snapshots", "no_gc"]

FORMAT = 4  # bump when RunState or the snapshot layout changes incompatibly (4: records packed one by one)


@dataclass(frozen=True)
class Loaded:
    """A loaded snapshot: the state and strategy; the memory and observer where they pickled (else None).

    ``has_memory``/``has_observer``: the part is restored (or the run has none), so resume need not feed it again.
    """

    state: RunState
    has_memory: bool
    has_observer: bool
    strategy: Any = None
    memory: Any = None
    observer: Any = None


def _class_name(obj: Any) -> str | None:
    return None if obj is None else f"{type(obj).__module__}.{type(obj).__qualname__}"


def _maker(cls: type) -> Any:
    """A module-level constructor ``_make_<Class>(*values)`` that sets each slot directly.

    Generated once per record class (as ``dataclasses`` generates ``__init__``):
    one call per record with the slot stores unrolled, about twice as fast as
    a loop over the slots, which matters at 100k nodes (~100k view nodes). It is
    registered in this module's namespace so pickle refers to it by name;
    ``__getattr__`` below builds it on first use in a fresh process.
    """
    names = _FIELDS[cls]
    name = f"_make_{cls.__name__}"
    body = "".join(f"    set_{n}(obj, {n})\n" for n in names)
    source = f"def {name}({', '.join(names)}):\n    obj = new(cls)\n{body}    return obj\n"
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    scope.update({f"set_{n}": slot.__set__ for n, slot in zip(names, _SLOTS[cls], strict=True)})
    exec(source, scope)  # noqa: S102 - fixed template over dataclass field names
    make = scope[name]
    make.__module__, make.__qualname__ = __name__, name
    globals()[name] = make
    return make


def __getattr__(name: str) -> Any:
    """Resolve ``_make_<Class>`` for pickle before ``_record_table`` has run in this process."""
    if name.startswith("_make_"):
        _record_table()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _record_table() -> dict[type, Any]:
    """``copyreg``-style reducers for the frozen slots records of ``verifyless.node`` (most of a snapshot)."""

    table = dict(copyreg.dispatch_table)
    for cls in vars(node).values():
        if isinstance(cls, type) and dataclasses.is_dataclass(cls) and hasattr(cls, "__slots__"):
            _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
            _SLOTS[cls] = tuple(cls.__dict__[name] for name in _FIELDS[cls])
            table[cls] = _reducer(cls, _MAKERS.get(cls) or _MAKERS.setdefault(cls, _maker(cls)))
    return table


def _reducer(cls: type, make: Any) -> Any:
    names = _FIELDS[cls]

    def reduce(obj: Any) -> tuple[Any, ...]:
        return make, tuple(getattr(obj, n) for n in names)

    return reduce


_FIELDS: dict[type, tuple[str, ...]] = {}
_SLOTS: dict[type, tuple[Any, ...]] = {}
_MAKERS: dict[type, Any] = {}


@contextlib.contextmanager
def no_gc(freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector: (un)pickling ~450k records otherwise triggers repeated full
    collections over a growing heap, which made a 100k-node load about twice as slow.

    ``freeze``: afterwards move every object alive into the collector's permanent generation
    (``gc.freeze``), so the loaded state -- which lives as long as the run -- is not scanned again
    by each later full collection (the first one alone took ~0.25 s at 100k nodes). Frozen
    objects are still freed by reference counting; only cycles among them are kept.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was_on:
            gc.enable()


def _dumps(obj: Any) -> bytes:
    """Pickle with the fast record reducers."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _record_table()
    with no_gc():
        pickler.dump(obj)
    return buffer.getvalue()


_HEAVY = {"torch", "transformers", "sentence_transformers", "tokenizers", "peft"}


class _Heavy(Exception):
    pass


class _LightPickler(pickle.Pickler):
    """Refuses neural-network objects at the first one met (they are reloaded, not snapshotted)."""

    def reducer_override(self, obj: Any) -> Any:
        if (type(obj).__module__ or "").split(".")[0] in _HEAVY:
            raise _Heavy(type(obj).__module__)
        return NotImplemented


def _pickled(obj: Any) -> bytes | None:
    """``obj`` pickled, or None when it holds a model or anything else that does not pickle."""
    if obj is None:
        return None
    buffer = io.BytesIO()
    try:
        _LightPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except Exception as exc:  # noqa: BLE001 - anything unpicklable is simply rebuilt on resume
        log.info(
            "snapshot: %s is not snapshotted (%s: %s); it is rebuilt from the nodes on resume",
            _class_name(obj),
            type(exc).__name__,
            exc,
        )
        return None
    return buffer.getvalue()


def _unpickle(header: dict[str, Any], data: bytes) -> tuple[Any, Any, Any, Any]:
    """(state, strategy, memory or None, observer or None) from a stored snapshot.

    ``data`` is the parts' pickles end to end; the header holds each part's (offset, length), and
    each is unpickled from a view of ``data`` (no copy of the ~100 MB a 100k-node run holds).
    """
    view = memoryview(data)

    def part(name: str) -> Any:
        at = header["parts"].get(name)
        return None if at is None else pickle.loads(view[at[0] : at[0] + at[1]])

    state, strategy = part("core")  # one pickle: the strategy shares the state's nodes
    return state, strategy, part("memory"), part("observer")


def _joined(parts: dict[str, bytes | None]) -> tuple[bytes, dict[str, list[int]]]:
    """The parts end to end, and each present part's [offset, length] in the result."""
    spans, offset = {}, 0
    for name, blob in parts.items():
        if blob is not None:
            spans[name] = [offset, len(blob)]
            offset += len(blob)
    return b"".join(blob for blob in parts.values() if blob is not None), spans


class Snapshots:
    """Takes and loads snapshots of one run's derived state; ``every`` rounds between them (0: never).

    Built with the run's ``ledger`` (its id and state) and ``learners`` (the strategy, the memory and an
    observing screener, the parts a snapshot holds besides the state). ``load`` returns what it found;
    the caller adopts it (``Engine.adopt``).
    """

    def __init__(self, store: RunStoreProtocol, every: int, ledger: Ledger, learners: Learners) -> None:
        self.store = store
        self.every = every
        self.ledger, self.learners = ledger, learners
        self._last_round = 0

    def maybe_take(self, round: int) -> bool:
        """Take a snapshot when ``every`` rounds passed since the last one (called at a round boundary)."""
        if self.every <= 0 or round - self._last_round < self.every:
            return False
        self.take()
        self._last_round = round
        return True

    def take(self) -> None:
        state, learners = self.ledger.state, self.learners
        observer = learners.observer
        parts = {
            "core": _dumps((state, learners.strategy)),
            "memory": _pickled(learners.memory),
            "observer": _pickled(observer),
        }
        data, spans = _joined(parts)
        header = {
            "format": FORMAT,
            "upto": state.last_seq,
            "parts": spans,
            "nodes": len(state.view) + len(state.staged),
            "classes": {
                "state": _class_name(state),
                "strategy": _class_name(learners.strategy),
                "memory": _class_name(learners.memory) if parts["memory"] else None,
                "observer": _class_name(observer) if parts["observer"] else None,
            },
        }
        self.store.put_snapshot(self.ledger.rid, state.last_seq, header, data)
        log.debug("snapshot of run %s after event %d: %d bytes", self.ledger.run_id, state.last_seq, len(data))

    def load(self) -> Loaded | None:
        """The latest usable snapshot (state, strategy, and the memory and observer where they pickled); else None."""
        found = self.store.latest_snapshot(self.ledger.rid)
        if found is None:
            return None
        upto, header, data = found
        problem = self._mismatch(header)
        if problem is None:
            try:
                with no_gc(freeze=True):
                    state, strategy, memory, observer = _unpickle(header, data)
            except Exception as exc:  # noqa: BLE001 - a damaged or stale snapshot means: replay everything
                problem = f"it does not load ({type(exc).__name__}: {exc})"
        if problem is not None:
            log.warning(
                "run %s: not resuming from the snapshot after event %d: %s; replaying every event",
                self.ledger.run_id,
                upto,
                problem,
            )
            return None
        self._last_round = state.rounds_done
        learners = self.learners
        return Loaded(
            state,
            memory is not None or learners.memory is None,
            observer is not None or learners.observer is None,
            strategy,
            memory,
            observer,
        )

    def _mismatch(self, header: dict[str, Any]) -> str | None:
        if header.get("format") != FORMAT:
            return f"its format is {header.get('format')}, this verifyless writes {FORMAT}"
        classes, learners = header.get("classes", {}), self.learners
        want = {"state": _class_name(self.ledger.state), "strategy": _class_name(learners.strategy)}
        for part, name in want.items():
            if classes.get(part) != name:
                return f"its {part} is {classes.get(part)}, this run builds {name}"
        for part, obj in (("memory", learners.memory), ("observer", learners.observer)):
            if classes.get(part) is not None and classes[part] != _class_name(obj):
                return f"its {part} is {classes[part]}, this run builds {_class_name(obj)}"
        return None
