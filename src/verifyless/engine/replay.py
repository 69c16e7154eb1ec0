"""Replay: re-execute a run's decisions with no endpoint and no new verification.

The replayed engine gets the stored configuration, LLM replies from the
response cache (a miss is an error, never a call), and verification outcomes
looked up by program hash from the original run. If every decision is the
same, it proposes the same programs in the same order and reaches the same
final node. The replay writes into a temporary store; the original is only read.
A resumed run is replayed part by part, each part from the original log as its
resume saw it (``replay_run``). Exit code 9 (``ReplayDiverged``) when a decision
differs.

The engine is built by the caller's ``build`` (the composition root's ``verifyless.wiring.build_engine``, which
sits above this layer): ``replay_run(store, run_id, build=build_engine)``. The stored events are read as typed
records (``verifyless.events``); ``copy_prefix`` copies them as records, so the copy holds what a reader of the
original sees.
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from verifyless.config import RunConfig, apply_changes, with_absent_options
from verifyless.engine.core import Engine
from verifyless.errors import StoreError, VerifylessError
from verifyless.events import (
    ConfigResolved,
    ConfigUpdated,
    Finalised,
    NodeRecorded,
    RunCreated,
    RunStatusChanged,
    Verified,
)
from verifyless.executors.base import Executor
from verifyless.node import Verification, content_hash
from verifyless.store import RunStore
from verifyless.store.protocol import RunStoreProtocol
from verifyless.store.records import Item
from verifyless.task.base import Task
from verifyless.task.fingerprint import refuse_changed, stored_fingerprint
from verifyless.task.home import load_run_task


class EngineBuilder(Protocol):
    """What builds the replayed engine: ``verifyless.wiring.build_engine``'s signature, the part replay uses."""

    def __call__(
        self,
        cfg: RunConfig,
        store: RunStoreProtocol,
        *,
        task: Task | None = None,
        replay_executor: Executor | None = None,
        replay: bool = False,
    ) -> Engine: ...


class ReplayDiverged(VerifylessError, exit_code=9):
    """The replay asked for a verification the original run never made, or reached a different end."""


class SegmentEnd(Exception):
    """The replay of a resumed run's earlier part reached where that part was interrupted."""


class StoredVerifications:
    """An executor that answers from the original run's verification events.

    ``stop_outside``: the program hashes one part (segment) of a resumed run verified; a request for a
    program the run verified only later is where that part was interrupted: ``SegmentEnd`` is raised and
    ``ended`` is set (an error the replay then hits, such as an LLM reply the original never asked for, is
    the same stop).
    """

    name = "stored"
    sandbox = None  # nothing runs: outcomes come from the original run
    hide: tuple[str, ...] = ()

    def __init__(
        self, by_hash: dict[str, Verification], capacity: int = 1, stop_outside: set[str] | None = None
    ) -> None:
        self.by_hash = by_hash
        self.capacity = capacity
        self.stop_outside = stop_outside
        self.ended = False

    async def verify(self, task: Task, program: str) -> Verification:
        h = content_hash(program)
        if self.stop_outside is not None and h not in self.stop_outside:
            self.ended = True
            raise SegmentEnd(h)
        if h not in self.by_hash:
            raise ReplayDiverged(
                f"the replay produced program {h[:12]} which the original run never verified: "
                "a decision differs (changed code, prompts or task files since the run?)"
            )
        return self.by_hash[h]

    def close(self) -> None:
        """Nothing to release."""


@dataclass
class ReplayReport:
    run_id: str
    equal: bool
    original_final: str | None
    replay_final: str | None
    compared: int
    differences: list[str] = field(default_factory=list)

    def describe(self) -> str:
        head = "identical" if self.equal else "DIFFERENT"
        lines = [
            f"replay of {self.run_id}: {head} ({self.compared} node events compared; "
            f"final node {self.original_final} vs {self.replay_final})"
        ]
        lines += [f"  {d}" for d in self.differences[:10]]
        return "\n".join(lines)


@dataclass(frozen=True)
class Segment:
    """One part of a run: from a ``running`` status to the next one (or the end of the log).

    ``start`` is the seq of its ``running`` event (0 for the first part: it replays from nothing);
    ``end`` the seq of the next part's (None: the log's end). ``complete`` when it holds a ``final``.
    """

    start: int
    end: int | None
    complete: bool

    def holds(self, seq: int) -> bool:
        return seq >= self.start and (self.end is None or seq < self.end)


def segments(store: RunStore, run_id: str) -> list[Segment]:
    """The run's parts: one for a run that never resumed, one more per resume."""
    starts = [ev.seq for ev in store.events(run_id, RunStatusChanged) if ev.record.status == "running"]
    bounds = [0, *starts[1:]]
    finals = [ev.seq for ev in store.events(run_id, Finalised)]
    out = []
    for i, lo in enumerate(bounds):
        hi = bounds[i + 1] if i + 1 < len(bounds) else None
        seg = Segment(lo, hi, False)
        out.append(Segment(lo, hi, any(seg.holds(f) for f in finals)))
    return out


async def replay_run(
    store: RunStore, run_id: str, *, build: EngineBuilder, allow_changed_task: bool = False
) -> ReplayReport:
    """Replay every part of ``run_id`` and compare its decisions with the stored ones.

    A run that was resumed is replayed part by part: each resumed part starts from the original log
    up to its resume (copied into the temporary store, as the resume itself saw it) and re-executes
    what came after. A part that ended in an interruption stops where the original stopped (at its
    first request for a program it did not verify) and is compared on what both reached: every
    verification it stored, and every node both made. The part that finished is compared whole,
    final node included. Exact for ``engine.verify_concurrency=1``; with more, an interruption may
    fall between verifications that finish out of order, which reads as a difference.

    A task whose files changed since the run was made is refused first (``TaskError`` naming the changed
    parts; ``allow_changed_task`` replays anyway, and the replay will most likely differ). ``build`` makes each
    part's engine (``verifyless.wiring.build_engine``).
    """
    task = load_run_task(store, run_id)
    refuse_changed(stored_fingerprint(store, run_id), task, run_id=run_id, action="replay", allow=allow_changed_task)
    by_hash: dict[str, Verification] = {}
    for ev in store.events(run_id, Verified):
        v = ev.record.verification
        by_hash.setdefault(v.program_hash, v)
    original_final = next((ev.record.node_id for ev in reversed(list(store.events(run_id, Finalised)))), None)
    compared, replay_final, diffs = 0, None, []
    parts = segments(store, run_id)
    for k, seg in enumerate(parts):
        n, final, found = await _replay_segment(store, run_id, seg, by_hash, task, build)
        label = f"part {k + 1} of {len(parts)}: " if len(parts) > 1 else ""
        compared += n
        diffs += [label + d for d in found]
        if seg.complete:
            replay_final = final
    equal = not diffs and original_final == replay_final
    return ReplayReport(run_id, equal, original_final, replay_final, compared, diffs)


async def _replay_segment(
    store: RunStore, run_id: str, seg: Segment, by_hash: dict[str, Verification], task: Task, build: EngineBuilder
) -> tuple[int, str | None, list[str]]:
    """(facts compared, the replay's final node, differences) for one part of the run."""

    mine = _facts(store, run_id, seg.holds)
    own = {t[2] for t in mine if t[0] == "verification-hash"}
    executor = None
    with tempfile.TemporaryDirectory(prefix="verifyless-replay-") as tmp:
        replay_store = RunStore(Path(tmp) / "replay.db")
        try:
            first, changes = _config_before(store, run_id, seg.start)
            # the response cache lives in the original store's file; no wall clock in a replay
            cfg = apply_changes(first, {**changes, "store": str(store.path), "budget.wall_seconds": None})
            resumed = seg.start > 0
            if resumed:
                copy_prefix(store, replay_store, run_id, seg.start)
            after = max((ev.seq for ev in replay_store.events(run_id)), default=0) if resumed else 0
            executor = StoredVerifications(
                by_hash, cfg.engine.verify_concurrency, stop_outside=None if seg.complete else own
            )
            engine = build(cfg, replay_store, task=task, replay=True, replay_executor=executor)
            try:
                result = await engine.run(run_id if resumed else None)
                final = result.best_id
            except Exception:
                if seg.complete or not executor.ended:
                    raise
                final = None
            theirs = _facts(replay_store, engine.run_id or "", lambda seq: seq > after)
        finally:
            replay_store.close()
    return _compare(mine, theirs, whole=seg.complete), final, _differences(mine, theirs, whole=seg.complete)


def _config_before(store: RunStore, run_id: str, seq: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's first configuration with what was resolved at its start (``config_resolved``), and the changes
    (``config_update``) stored before ``seq``."""
    first: dict[str, Any] = {}
    changes: dict[str, Any] = {}
    for ev in store.events(run_id, RunCreated, ConfigResolved, ConfigUpdated):
        match ev.record:
            case RunCreated() as created:
                first = copy.deepcopy(dict(created.config))
            case ConfigResolved() as resolved:
                resolved.apply_to(first)
            case ConfigUpdated() as update if ev.seq < seq:
                changes.update(update.changes or {})
    return with_absent_options(first), changes  # options newer than the run: as it ran


def copy_prefix(source: RunStore, target: RunStore, run_id: str, before: int) -> None:
    """Copy ``run_id``'s events with seq < ``before`` (programs and charges included) into ``target``.

    Each event is copied as its record (``record.payload()``: the stored keys, defaults for keys an older store
    lacked, unknown keys kept), so the copy folds exactly as the original does."""
    events = list(source.events(run_id))
    head = events[0].record  # the config event, written by create_run
    if not isinstance(head, RunCreated):
        raise StoreError(f"run {run_id!r} does not start with its config event (found {events[0].kind!r})")
    target.create_run(
        head.task,
        dict(head.config),
        run_id=run_id,
        seed=int(head.seed),
        fingerprint=None if head.task_fingerprint is None else dict(head.task_fingerprint),
        task_root=head.task_root,
        task_metric=None if head.task_metric is None else dict(head.task_metric),
    )
    items = []
    for ev in events[1:]:
        if ev.seq >= before:
            break
        record = ev.record
        if isinstance(record, NodeRecorded):
            program = source.get_text(record.candidate.program_hash)
            record = dataclasses.replace(record, candidate=dataclasses.replace(record.candidate, program=program))
        items.append(Item(record, None, ev.node_id, ev.charge or None))
    target.append_many(run_id, items)


def _facts(store: RunStore, run_id: str, keep: Callable[[int], bool]) -> list[tuple]:
    """Node and verification facts of the events ``keep(seq)`` selects, with verified hashes, keyed by node id.

    Sorted, not in log order: with pipelining, LLM work of round r+1 and the
    verification of round r interleave in the log by timing, while the
    decisions (positional node ids, programs, outcomes) do not depend on it.
    """
    out: list[tuple[Any, ...]] = []
    for ev in store.events(run_id, NodeRecorded, Verified):
        if not keep(ev.seq):
            continue
        match ev.record:
            case NodeRecorded() as node:
                status = None if node.status is None else node.status.value
                out.append(("node", ev.node_id, node.candidate.program_hash or None, status))
            case Verified(verification=v):
                out.append(("verification", ev.node_id, v.status.value, v.score))
                out.append(("verification-hash", ev.node_id, v.program_hash))
    return sorted(out, key=lambda t: (t[1] or "", t[0]))


def _compare(mine: list[tuple], theirs: list[tuple], *, whole: bool) -> int:
    return len(mine) if whole else len(set(mine) & set(theirs))


def _differences(mine: list[tuple], theirs: list[tuple], *, whole: bool) -> list[str]:
    """Whole part: the facts must be equal. Interrupted part: every stored verification must be reproduced,
    and a node both made must be the same node (what the interruption cut off on either side is not compared)."""
    if whole:
        diffs = [f"event {i}: {a} != {b}" for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b]
        if len(mine) != len(theirs):
            diffs.append(f"original has {len(mine)} node events, replay {len(theirs)}")
        return diffs
    replayed = set(theirs)
    nodes = {t[1]: t for t in theirs if t[0] == "node"}
    diffs = [f"not reproduced: {t}" for t in mine if t[0] != "node" and t not in replayed]
    diffs += [f"{t} != {nodes[t[1]]}" for t in mine if t[0] == "node" and t[1] in nodes and nodes[t[1]] != t]
    return diffs
