"""Frozen records that flow through a run, linked by id.

Records never change: a new fact about a candidate is a new event in the
store, and the store's materialised view builds the latest ``Node`` from the
events. Every record converts to and from plain JSON-able dicts with
``to_dict`` / ``from_dict`` (the ``_Record`` mixin below).

Orientation: ``Verification.score`` is the raw value of the task's main
validation metric. Search strategies never look at raw scores; they use
``Node.fitness`` which is oriented so that higher is always better.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast


class Status(str, enum.Enum):
    """Lifecycle and outcome of a candidate.

    The first eight (proposed ... not-novel) never reached a verification;
    the last six are outcomes of a paid verification (``verified``), of which
    ``OK`` is the only one with a usable score (the others are ``buggy``).
    """

    PROPOSED = "proposed"
    IMPLEMENTED = "implemented"
    GUARD_FAILED = "guard-failed"  # contract check or static guard rejected it
    PARSE_ERROR = "parse-error"  # the LLM reply never parsed
    MODEL_ERROR = "model-error"  # the endpoint failed for this candidate (retries exhausted)
    SCREENED_OUT = "screened-out"  # the screener did not pick it
    DUPLICATE = "duplicate"  # identical program already verified
    NOT_NOVEL = "not-novel"  # the novelty gate found a near copy of a program already tried (never verified)
    OK = "ok"
    FAILED = "failed"  # non-zero exit, exception, missing output
    TIMEOUT = "timeout"
    OOM = "oom"
    CONTRACT_VIOLATION = "contract-violation"  # fixed region changed, output contract broken, output cap hit
    INVALID_METRIC = "invalid-metric"

    @property
    def verified(self) -> bool:
        return self in _VERIFIED

    @property
    def buggy(self) -> bool:
        """A paid verification that produced no usable score."""
        return self in _VERIFIED and self is not Status.OK

    def __str__(self) -> str:  # pragma: no cover - cosmetic
        return self.value


_VERIFIED = frozenset(
    {Status.OK, Status.FAILED, Status.TIMEOUT, Status.OOM, Status.CONTRACT_VIOLATION, Status.INVALID_METRIC}
)


BASELINE_IDEA = "the task's baseline program"  # the idea text of every run's root node


class Operator(str, enum.Enum):
    """How a child was made from its parent."""

    DRAFT = "draft"  # a fresh solution (parent is the baseline, or none)
    IMPROVE = "improve"
    DEBUG = "debug"  # fix a buggy parent
    EVOLVE = "evolve"  # MCGS intra-branch evolution (context: ancestors)
    REFERENCE = "reference"  # MCGS cross-branch reference (context: other branches' best)
    AGGREGATE = "aggregate"  # MCGS multi-branch aggregation (new branch root)
    BASELINE = "baseline"  # the task's own program, root of every run

    def __str__(self) -> str:  # pragma: no cover
        return self.value


def content_hash(text: str | bytes) -> str:
    """SHA-256 hex digest of a program or blob; the key for dedup and blob storage."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


class _Record:
    """Mixin: JSON round-trip for frozen dataclasses (enums as values, tuples as lists)."""

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        return _build(cls, data)

    def replace(self, **changes: Any):
        return dataclasses.replace(cast(Any, self), **changes)


@dataclass(frozen=True, slots=True)
class Idea(_Record):
    """One proposed change, in words (no code).

    ``params`` is set by offline idea-space proposers: the structured edit
    (e.g. ``{"model": "ridge", "alpha": 1.0}``) that the template implementer
    renders. LLM proposers leave it empty.
    """

    text: str
    params: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Verification(_Record):
    """The outcome of one paid verification.

    ``metrics`` are validation metrics (search may see them). ``test_metrics``
    are hidden metrics, never shown to search: the hidden test's (reported only) and the task's selection
    metric when it has one (``Task.selection_metric``: used only to choose the final node).
    ``score`` / ``test_score`` are the main metric's raw values (None unless OK).
    ``fidelity`` names the task's fidelity level it ran at (``"full"`` unless a cheaper level was
    asked for; payloads stored before the field existed load as ``"full"``).
    """

    status: Status
    reason: str = ""
    metrics: Mapping[str, float] = field(default_factory=dict)
    test_metrics: Mapping[str, float] = field(default_factory=dict)
    score: float | None = None
    test_score: float | None = None
    run_seconds: float = 0.0  # untrusted step wall time
    score_seconds: float = 0.0  # trusted scoring wall time
    overhead_seconds: float = 0.0  # workspace setup and teardown
    peak_memory_mb: float = 0.0
    peak_gpu_memory_mb: float | None = None  # None: a CPU task, or no way to read GPU memory here
    gpus: int = 0  # GPUs the verification held (its task's limits.gpus): GPU seconds = seconds x gpus
    stdout_tail: str = ""
    stderr_tail: str = ""
    program_hash: str = ""
    fidelity: str = "full"

    @property
    def seconds(self) -> float:
        return self.run_seconds + self.score_seconds + self.overhead_seconds


@dataclass(frozen=True, slots=True)
class Evidence(_Record):
    """What a screener saw and concluded about one candidate.

    ``rank_value``: higher is more promising (e.g. negated average label rank).
    ``labels``: parsed five-way labels of the valid samples (``"BigWin"`` ...).
    ``votes``: three-way vote distribution ``{"improve": p, "tie": p, "lose": p}``.
    ``uncertainty``: ``1 - max(votes)``; 1.0 when nothing valid was produced.
    ``detail``: screener-specific extras (the critic's raw critiques and per-sample labels, the
    tournament's matches, the agentic judge's pilot records and findings, the surrogate's features).
    ``extra``: keys a stored evidence entry holds that this version does not know (written by a newer one),
    kept and written back beside the known ones, so reading and copying a run loses nothing.
    """

    candidate_id: str
    rank_value: float
    labels: tuple[str, ...] = ()
    votes: Mapping[str, float] = field(default_factory=dict)
    uncertainty: float = 1.0
    n_valid: int = 0
    n_invalid: int = 0
    detail: Mapping[str, Any] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Screening(_Record):
    """A screener's decision over one pool of candidates.

    ``ranking``: candidate ids, most promising first (every candidate appears once).
    ``chosen``: ids to verify, in order; a subset of ``ranking``.
    """

    screener: str
    ranking: tuple[str, ...]
    chosen: tuple[str, ...]
    evidence: Mapping[str, Evidence] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Candidate(_Record):
    """A child program before screening: idea + implemented program + summary.

    ``code_length`` is the program's length in characters: computed from
    ``program`` whenever the program text is present, kept as given when it is
    not (a candidate rebuilt from the store without its program text).
    """

    id: str
    parent_id: str | None
    operator: Operator
    idea: Idea
    program: str
    program_hash: str
    summary: str = ""
    reference_ids: tuple[str, ...] = ()
    round: int = 0
    island: int = 0
    code_length: int = 0

    def __post_init__(self) -> None:
        if self.program:
            object.__setattr__(self, "code_length", len(self.program))


@dataclass(frozen=True, slots=True)
class Node(_Record):
    """The materialised view of one candidate, as search strategies see it.

    ``parent_id`` is the credit-carrying (primary) edge; ``reference_ids`` are
    information-only edges. ``fitness`` is the validation score oriented so
    higher is better; None unless ``status`` is OK. Hidden test scores are not
    part of a Node. ``code_length`` is the program's length in characters
    (None when unknown, e.g. a failed implementation with no program); the
    islands strategy's MAP-Elites ``length`` feature reads it.
    """

    id: str
    parent_id: str | None
    operator: Operator
    status: Status
    fitness: float | None = None
    score: float | None = None
    idea: str = ""
    program_hash: str = ""
    reference_ids: tuple[str, ...] = ()
    round: int = 0
    island: int = 0
    tags: tuple[str, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)
    reason: str = ""
    code_length: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OK and self.fitness is not None


# ---------------------------------------------------------------- serialisation


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.name != _EXTRA}
        out.update(_plain(getattr(value, _EXTRA, {})))  # unknown keys a record kept, back where they were
        return out
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _build(cls: type, data: Mapping[str, Any]) -> Any:
    converters = _CONVERTERS.get(cls)
    if converters is None:  # computed once per record class: resume builds hundreds of thousands of records
        converters = _CONVERTERS[cls] = {f.name: _converter(str(f.type)) for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for name, raw in data.items():
        convert = converters.get(name, _SKIP)
        if convert is _SKIP or name == _EXTRA:
            unknown[name] = raw  # forward compatible: kept by a record with ``extra``, else ignored
            continue
        kwargs[name] = raw if convert is None or raw is None else convert(raw)
    if unknown and _EXTRA in converters:
        kwargs[_EXTRA] = unknown
    return cls(**kwargs)


_EXTRA = "extra"  # the field of a record (``Evidence``) that keeps the keys it does not know
_SKIP = object()
_CONVERTERS: dict[type, dict[str, Any]] = {}
_RECORDS: dict[str, type] = {}


def _converter(annotation: str) -> Any:
    """How to turn a JSON value back into the annotated field type (None: keep it as it is)."""
    if annotation in _RECORDS:
        typ = _RECORDS[annotation]
        return lambda raw: _build(typ, raw)
    if annotation.startswith("Mapping[str, Evidence]"):
        return lambda raw: {k: _build(Evidence, v) for k, v in raw.items()}
    if annotation == "Status":
        return Status
    if annotation == "Operator":
        return Operator
    if annotation.startswith("tuple["):
        return tuple
    return None


_RECORDS.update({"Idea": Idea, "Verification": Verification, "Evidence": Evidence})

__all__ = [
    "BASELINE_IDEA",
    "Candidate",
    "Evidence",
    "Idea",
    "Node",
    "Operator",
    "Screening",
    "Status",
    "Verification",
    "content_hash",
]
