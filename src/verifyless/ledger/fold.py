"""The event fold: ``RunState``, what a run knows, as a projection of its event log.

``RunState.apply(event)`` is the one place where an event changes a run's
state. The live path (``Ledger.emit``) appends an event to the store and then
applies it; resume applies the stored events (after the last snapshot) in log
order. Both therefore end in the same state, by construction. Event kinds it
does not know (``model_error``, ``pilot``, ``final`` ...) only move ``last_seq``.
Low-fidelity results (``pilot_run``, ``smoke``; ledger/pilots.py) are kept
apart in ``low_fidelity``: they never count as verifications.

The state holds no program text (programs live in the store's blobs and are
read on demand) and no hidden test score reaches a ``Node``.
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from verifyless.events import (
    BriefLogged,
    DataReported,
    EventRecord,
    LowFidelityRan,
    NodeRecorded,
    ProposalsLogged,
    RoundStarted,
    Screened,
    ScreenerFellBack,
    ScreenerLearned,
    StatusChanged,
    Told,
    Verified,
)
from verifyless.ledger.packed import Packed
from verifyless.node import Candidate, Idea, Node, Status, Verification
from verifyless.roles.base import TaskBrief
from verifyless.screen.base import FallbackCount
from verifyless.search.base import SearchView
from verifyless.store.records import Event

__all__ = ["RunState", "reuse_key"]


@dataclass
class RunState:
    """Everything the engine derives from the event log (picklable: snapshots store it).

    ``staged`` holds nodes recorded but not yet told to the strategy, in the
    order their ``node`` events were logged; a ``tell`` event moves them into
    ``view`` (whose insertion order is therefore the tell order). ``chosen``
    numbers the candidates a screening sent to verification, in log order,
    until they are told (resume verifies those that never finished).
    ``candidates`` and ``verifications`` are ``Packed`` mappings: restored
    from a snapshot, a record is unpickled when it is first read; ``ideas``,
    ``programs`` and ``summaries`` are read-only views of ``candidates``,
    ``verified_hashes`` of ``verified_by_hash``.
    """

    view: SearchView = field(default_factory=SearchView)
    summary_by_hash: dict[str, str] = field(default_factory=dict)  # program hash -> summary
    candidates: Packed[Candidate] = field(default_factory=Packed)  # without program text
    verifications: Packed[Verification] = field(default_factory=Packed)
    verified_by_hash: dict[str, str] = field(default_factory=dict)  # reuse key -> first node verified with it
    scopes: dict[str, str] = field(default_factory=dict)  # node id -> its ``task`` tag (policy runs; else absent)
    staged: dict[str, Node] = field(default_factory=dict)
    chosen: dict[str, int] = field(default_factory=dict)
    n_chosen: int = 0
    rounds_done: int = 0
    told_round: int = -1  # the last round whose ``tell`` batch is logged
    brief: TaskBrief | None = None
    data_report: str | None = None  # the ``data_report`` event's markdown (None: the run has none)
    learn_records: list[dict[str, Any]] = field(default_factory=list)  # ``screener_learn`` payloads, in order
    proposals: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # logged proposer replies, by key
    low_fidelity: dict[tuple[str, str, str], Verification] = field(default_factory=dict)  # (hash, kind, level)
    fallbacks: FallbackCount = field(default_factory=FallbackCount)  # screenings that fell back to random
    last_seq: int = 0  # the last event applied

    @property
    def ideas(self) -> Mapping[str, Idea]:
        """Node id -> the idea of its candidate (a read-only view of ``candidates``)."""
        return _Column(self.candidates, "idea")

    @property
    def programs(self) -> Mapping[str, str]:
        """Node id -> program hash, for the candidates that have one (a view of ``candidates``)."""
        return _Column(self.candidates, "program_hash")

    @property
    def summaries(self) -> Mapping[str, str]:
        """Node id -> summary, for the candidates that have one (a view of ``candidates``)."""
        return _Column(self.candidates, "summary")

    @property
    def verified_hashes(self) -> KeysView[str]:
        """The reuse keys of every paid verification (the program hashes, for nodes without a task tag)."""
        return self.verified_by_hash.keys()

    def known_result(self, digest: str, scope: str = "") -> tuple[str, Verification] | None:
        """Reuse by program hash: (node id, verification) of the first result for ``digest``, or None.

        ``scope``: the ``task`` tag of the nodes to reuse from (a policy run verifies several tasks,
        and a program's result holds for its task only); "" for runs whose nodes carry none.
        """
        node_id = self.verified_by_hash.get(reuse_key(digest, scope))
        return None if node_id is None else (node_id, self.verifications[node_id])

    def low_fidelity_result(self, digest: str, kind: str, level: str) -> Verification | None:
        """The stored ``pilot_run`` / ``smoke`` result of program ``digest`` at ``level``, or None (never a full outcome)."""
        return self.low_fidelity.get((digest, kind, level))

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling a snapshot: a field added after the snapshot was written gets its default (a snapshot older
        than ``low_fidelity``, ``data_report`` or ``fallbacks`` lacks it; counts then start from the snapshot on)."""
        for f in fields(self):
            if f.name not in state:
                state[f.name] = f.default_factory() if f.default_factory is not MISSING else f.default
        self.__dict__.update(state)

    def apply(self, event: Event[EventRecord]) -> list[Node]:
        """Fold one event into the state; returns the nodes a ``tell`` event told (else ``[]``)."""
        told: list[Node] = []
        node_id = event.node_id or ""
        match event.record:
            case BriefLogged() as r:
                self.brief = TaskBrief(r.understanding, tuple(r.criteria))
            case DataReported() as r:
                self.data_report = str(r.markdown)
            case RoundStarted() as r:
                self.rounds_done = max(self.rounds_done, int(r.round))
            case NodeRecorded() as r:
                self._node(r)
            case StatusChanged() as r:
                self.staged[node_id] = self.staged[node_id].replace(status=r.status, reason=r.reason)
            case ScreenerFellBack() as r:
                self.fallbacks.feed(r)
            case Screened() as r:
                self._screening(r)
            case Verified() as r:
                self._verification(node_id, r)
            case LowFidelityRan() as r:  # pilot_run and smoke
                v = r.verification
                digest = v.program_hash or self.candidates[node_id].program_hash
                self.low_fidelity[(digest, r.KIND, str(r.level))] = v
            case Told() as r:
                told = self._tell(r)
            case ScreenerLearned() as r:
                self.learn_records.append(r.learned | {"round": r.round})
            case ProposalsLogged() as r:
                self.proposals[str(r.key)] = [dict(i) for i in r.items]
        self.last_seq = max(self.last_seq, event.seq)
        return told

    # ------------------------------------------------------------------ handlers of the larger kinds

    def data_report_text(self) -> str:
        """The markdown prompts include ('' when the run has no report)."""
        return (self.data_report or "").strip()

    def _node(self, r: NodeRecorded) -> None:
        cand = r.candidate
        self.candidates[cand.id] = cand
        if r.task:
            self.scopes[cand.id] = str(r.task)
        if cand.summary:
            self.summary_by_hash.setdefault(cand.program_hash, cand.summary)
        self.staged[cand.id] = Node(
            id=cand.id,
            parent_id=cand.parent_id,
            operator=cand.operator,
            status=r.status if r.status is not None else Status.IMPLEMENTED,
            idea=cand.idea.text,
            program_hash=cand.program_hash,
            reference_ids=cand.reference_ids,
            round=cand.round,
            island=cand.island,
            tags=cand.idea.tags,
            reason=r.reason or "",
            code_length=cand.code_length or None,
        )  # the MAP-Elites length feature

    @property
    def screener_fallbacks(self) -> tuple[int, int]:
        """(screenings that fell back to a random pick, screenings) so far."""
        counts = self.fallbacks
        return counts.fallbacks, counts.screenings

    def _screening(self, r: Screened) -> None:
        self.fallbacks.feed(r)
        for cid in r.to_verify:
            if cid not in self.chosen:
                self.chosen[cid] = self.n_chosen
                self.n_chosen += 1

    def _verification(self, node_id: str, r: Verified) -> None:
        v = r.verification
        self.verifications[node_id] = v
        digest = v.program_hash or self.candidates[node_id].program_hash
        self.verified_by_hash.setdefault(reuse_key(digest, self.scopes.get(node_id, "")), node_id)
        self.staged[node_id] = self.staged[node_id].replace(
            status=v.status, fitness=r.fitness, score=v.score, metrics=dict(v.metrics), reason=v.reason
        )

    def _tell(self, r: Told) -> list[Node]:
        self.told_round = max(self.told_round, int(r.round))
        told = []
        for nid in r.node_ids:
            node = self.staged.pop(nid)
            self.chosen.pop(nid, None)
            self.view.add(node)
            told.append(node)
        return told


def reuse_key(digest: str, scope: str = "") -> str:
    """The key a paid result is reused by: the program hash, prefixed by its task tag when it has one."""
    return f"{scope}:{digest}" if scope else digest


class _Column(Mapping[str, Any]):
    """Read-only ``node id -> one field of its candidate``, for the candidates where the field is set.

    A lookup unpacks only the candidate asked for; iterating unpacks them all.
    """

    __slots__ = ("_candidates", "_name")

    def __init__(self, candidates: Packed[Candidate], name: str) -> None:
        self._candidates, self._name = candidates, name

    def __getitem__(self, key: str) -> Any:
        value = getattr(self._candidates[key], self._name)
        if not value:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._candidates and bool(getattr(self._candidates[key], self._name))  # type: ignore[index]

    def __iter__(self) -> Iterator[str]:
        return (k for k in self._candidates if getattr(self._candidates[k], self._name))

    def __len__(self) -> int:
        return sum(1 for _ in self)
