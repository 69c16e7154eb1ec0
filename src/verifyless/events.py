"""The run log's vocabulary: one frozen record per event kind.

The store keeps every event as ``(kind, payload JSON)``. This module is the one place that knows the kind
strings and the payload keys: a writer builds a record and hands it to ``Ledger.emit`` (or the store's
``append``); a reader asks the store for ``events(run_id, Verified, Told, ...)`` and reads attributes.

Contract of every record class (``EventRecord`` subclasses):

- ``KIND`` is its kind string in the store; ``payload()`` is the JSON object stored for it, with the same
  keys older code wrote (the on-disk format does not change with this module);
- ``parse(payload)`` reads a stored payload back. Keys that older stores lack take their default *here*
  (a field's default, or the parse override's), so no reader probes for them; keys this module does not
  know are kept in ``extra`` and written back by ``payload()``, so nothing stored is lost;
- ``parse(r.payload()) == r`` for every record ``r`` (tests/test_events.py checks it for every class).

A record does not hold the event's envelope (sequence number, time, node id, charge): those belong to the
store's ``Event``, whose ``record`` attribute is the parsed record. Kinds that live with their owners (the
policy-training kinds, ``train/policy/events.py``) subclass ``EventRecord`` there and register the same way.
Events of a kind no record claims parse as ``Unrecognised`` (logged only; the store accepts any kind).

Field metadata (``_spec``): ``key`` (the payload key, when it differs from the field name), ``omit``
(left out of the payload while it equals its default: the key was optional when written), ``convert``
(applied to a stored value that is not None), ``flat`` (a ``node.py`` record whose ``to_dict()`` is spread
into the payload, e.g. ``Verified.verification``).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from verifyless.errors import StoreError
from verifyless.node import Candidate, Operator, Screening, Status, Verification

R = TypeVar("R", bound="EventRecord")

__all__ = [
    "KINDS",
    "BriefLogged",
    "ConfigResolved",
    "ConfigUpdated",
    "DataReported",
    "EventRecord",
    "FinalSelected",
    "Finalised",
    "LlmCalled",
    "LowFidelityRan",
    "ModelChosen",
    "ModelFailed",
    "NodeRecorded",
    "NoveltyJudged",
    "PilotRan",
    "ProposalsLogged",
    "ReplyParsed",
    "RoundStarted",
    "RunCreated",
    "RunStatusChanged",
    "Screened",
    "ScreenerFellBack",
    "ScreenerLearned",
    "SelectionSplitChosen",
    "SmokeRan",
    "StatusChanged",
    "Submitted",
    "Told",
    "Unrecognised",
    "Verified",
    "VerificationStarted",
    "WarmStarted",
    "kind_of",
    "parse_event",
    "status_of",
    "store_program",
]


def _spec(
    default: Any = MISSING,
    *,
    factory: Callable[[], Any] | None = None,
    key: str | None = None,
    omit: bool = False,
    convert: Callable[[Any], Any] | None = None,
    flat: type | None = None,
) -> Any:
    """A record field with its payload metadata (see the module docstring)."""
    meta = {"key": key, "omit": omit, "convert": convert, "flat": flat}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def _tuple(raw: Any) -> tuple[Any, ...]:
    return tuple(raw)


def status_of(raw: Any) -> Status:
    """A stored status string as a ``Status`` (``ValueError`` naming the known ones for anything else)."""
    try:
        return Status(raw)
    except ValueError:
        raise ValueError(f"unknown status {raw!r}; use one of {[s.value for s in Status]}") from None


def _dict(raw: Any) -> dict[str, Any]:
    return dict(raw)


def _plain(value: Any) -> Any:
    """A JSON-able copy (records as their ``to_dict``, enums as values, tuples as lists), as the store decodes it."""
    return json.loads(json.dumps(value, default=lambda obj: obj.to_dict()))


KINDS: dict[str, type[EventRecord]] = {}  # kind string -> its record class (policy kinds once imported)


@dataclass(frozen=True)
class EventRecord:
    """Base of every event record; see the module docstring for the contract.

    ``NODE_ID`` says what the event's node id is (``candidate id``, ``optional`` or ``–``) and ``EFFECT`` what
    folding it does; with the class docstring they make the store-schema table (``verifyless.events_doc``).
    """

    KIND: ClassVar[str] = ""
    NODE_ID: ClassVar[str] = "–"
    EFFECT: ClassVar[str] = "logged"

    extra: Mapping[str, Any] = field(default_factory=dict, kw_only=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("KIND"):
            if cls.KIND in KINDS:
                raise TypeError(f"event kind {cls.KIND!r} has two records: {KINDS[cls.KIND].__name__}, {cls.__name__}")
            KINDS[cls.KIND] = cls

    def payload(self) -> dict[str, Any]:
        """The JSON object stored for this record (the keys older code wrote, plus ``extra``)."""
        out: dict[str, Any] = {}
        for f in _specs(type(self)):
            value = getattr(self, f.name)
            if f.flat is not None:
                out.update(value.to_dict())
            elif not (f.omit and value == f.default):
                out[f.key] = _plain(value)
        out.update(self.extra)
        return out

    @classmethod
    def parse(cls: type[R], payload: Mapping[str, Any]) -> R:
        """The record of a stored ``payload``; absent keys take their defaults, unknown keys go to ``extra``."""
        kwargs: dict[str, Any] = {}
        used: set[str] = set()
        for f in _specs(cls):
            if f.flat is not None:
                kwargs[f.name] = f.flat.from_dict(payload)
                used.update(g.name for g in fields(f.flat))
                continue
            if f.key in payload:
                raw = payload[f.key]
                kwargs[f.name] = f.convert(raw) if f.convert is not None and raw is not None else raw
                used.add(f.key)
            elif f.required:
                raise ValueError(f"a {cls.KIND!r} event's payload lacks {f.key!r} (keys: {sorted(payload)})")
        kwargs["extra"] = {k: v for k, v in payload.items() if k not in used}
        return cls(**kwargs)


@dataclass(frozen=True)
class _Spec:
    """One payload field of a record class, read from its dataclass field and metadata once per class."""

    name: str
    key: str
    omit: bool
    convert: Callable[[Any], Any] | None
    flat: Any
    required: bool
    default: Any


_SPECS: dict[type, tuple[_Spec, ...]] = {}


def _specs(cls: type) -> tuple[_Spec, ...]:
    found = _SPECS.get(cls)
    if found is None:
        found = _SPECS[cls] = tuple(_spec_of(f) for f in fields(cls) if f.name != "extra")
    return found


def _spec_of(f: dataclasses.Field[Any]) -> _Spec:
    meta = f.metadata
    required = f.default is MISSING and f.default_factory is MISSING
    default = f.default_factory() if f.default_factory is not MISSING else f.default
    key = meta.get("key") or f.name
    return _Spec(f.name, key, bool(meta.get("omit")), meta.get("convert"), meta.get("flat"), required, default)


# ---------------------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class RunCreated(EventRecord):
    """``{task, seed, config, task_fingerprint, task_root, task_metric}``: the run's first event, written by
    ``create_run``. ``task_fingerprint`` (``{digest, parts}``: ``verifyless.task.fingerprint``, a sha256 of the task's
    program, run command, scorer, metric, statement, idea space and every data file's bytes, and one hash per part)
    is absent in stores made before 2026-12-04 and in runs not made by the engine (None). ``task_root`` (the task
    folder's absolute path, where resume, replay and reports find the task from any folder) and ``task_metric``
    (``{name, direction}``, what reports label scores with) are absent before 2026-12-07 (None: the ``task`` of the
    configuration, as typed, is loaded instead)."""

    KIND: ClassVar[str] = "config"
    EFFECT: ClassVar[str] = (
        "`stored_fingerprint(store, run_id)` reads the fingerprint; `run --resume` and `replay` refuse a task whose "
        "fingerprint differs, naming the changed parts (exit 3; `--allow-changed-task` goes on); `task.home` reads "
        "`task_root` and `task_metric`: resume, replay, report and export load the task from `task_root` while it "
        "exists (else from `config.task` as typed), and reports label scores with `task_metric`"
    )

    task: str
    seed: int = _spec(0)
    config: Mapping[str, Any] = _spec(factory=dict, convert=_dict)
    task_fingerprint: Mapping[str, Any] | None = _spec(None, omit=True, convert=_dict)
    task_root: str | None = _spec(None, omit=True)
    task_metric: Mapping[str, Any] | None = _spec(None, omit=True, convert=_dict)


@dataclass(frozen=True)
class ConfigUpdated(EventRecord):
    """``{changes}``: budgets raised on resume."""

    KIND: ClassVar[str] = "config_update"
    EFFECT: ClassVar[str] = "logged; `stored_config` and `RunInfo.config` apply it"

    changes: Mapping[str, Any] = _spec(factory=dict, convert=_dict)

    def apply_to(self, config: dict[str, Any]) -> None:
        """Set each changed option (dotted key) on ``config``, a stored configuration (nested dicts), in place."""
        _set_options(config, self.changes)


@dataclass(frozen=True)
class ConfigResolved(EventRecord):
    """``{pins}``: once, first after ``config``, what the composition root settled when a new run started
    (``wiring.resolve``): dotted option keys to the values the run used where its configuration left the choice to
    the start (``roles.models.<role>``: an endpoint read from the environment, pinned to a model name and base URL,
    never a key; ``engine.memory_embedder`` for ``auto``; a learnt ``critic-rm``'s ``warm``, ``encoder`` or
    ``weights`` under ``screener.options``); ``{}`` when the configuration named every choice. The ``config``
    event keeps the configuration as given. Runs stored before 2026-12-05 have no such event: their ``config``
    holds the same values written in."""

    KIND: ClassVar[str] = "config_resolved"
    EFFECT: ClassVar[str] = (
        "`stored_config` and `RunInfo.config` apply it (before any `config_update`), so resume and replay reach the "
        "same endpoints, embedder and critic; `show` and the run card list it"
    )

    pins: Mapping[str, Any] = _spec(factory=dict, convert=_dict)

    def apply_to(self, config: dict[str, Any]) -> None:
        """Set each pinned option (dotted key) on ``config``, a stored configuration (nested dicts), in place."""
        _set_options(config, self.pins)


def _set_options(config: dict[str, Any], options: Mapping[str, Any]) -> None:
    """``config["a"]["b"] = value`` for each ``"a.b": value`` of ``options`` (missing sections made)."""
    for key, value in options.items():
        *path, last = key.split(".")
        node = config
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value


@dataclass(frozen=True)
class RunStatusChanged(EventRecord):
    """``{status, pid, host, reason?, machine?}`` (``machine`` on ``running`` only, since 2026-12-04: platform,
    python, cpus, memory_gb, verifyless; the run card lists it). Older stores hold ``{status}`` only."""

    KIND: ClassVar[str] = "run_status"
    EFFECT: ClassVar[str] = (
        "written by `set_status`, which also updates `runs.status`; `pid`/`host` are the writer's (a reader shows a "
        "`running` run whose writer is gone from this host as `interrupted`), `reason` says why a `failed` run stopped"
    )

    status: str
    pid: int | None = _spec(None, omit=True)
    host: str | None = _spec(None, omit=True)
    reason: str | None = _spec(None, omit=True)
    machine: Mapping[str, Any] | None = _spec(None, omit=True, convert=_dict)


@dataclass(frozen=True)
class WarmStarted(EventRecord):
    """``{tag, blob, runs, pairs: [{run_id, parent, child, label, delta}], held_out, verdict, line, seconds}``:
    once, first after ``config``, when a new run's critic-rm warm-started from the store's earlier runs of its
    task (``train/warm.py``); the blob holds the pairs' texts and the head's weights."""

    KIND: ClassVar[str] = "warm_start"
    EFFECT: ClassVar[str] = (
        "the run's configuration pins it (`warm`), so resume and replay reload it; the fold ignores it "
        '(screening.md, "The default screener")'
    )

    tag: str = ""
    blob: str = ""
    runs: tuple[Any, ...] = _spec((), convert=_tuple)
    pairs: tuple[Any, ...] = _spec((), convert=_tuple)
    held_out: Any = None
    verdict: Any = None
    line: str | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class DataReported(EventRecord):
    """``{blob, content_hash, files, target, unavailable, hidden_visible, seconds, markdown}``: once, before
    ``brief``, at a new run's start (``engine.data_report``); the blob holds the report's JSON."""

    KIND: ClassVar[str] = "data_report"
    EFFECT: ClassVar[str] = "the state keeps its markdown for the prompts (screening.md)"

    blob: str = ""
    content_hash: str = ""
    files: tuple[str, ...] = _spec((), convert=_tuple)
    target: str | None = None
    unavailable: tuple[str, ...] = _spec((), convert=_tuple)
    hidden_visible: tuple[str, ...] = _spec((), convert=_tuple)
    seconds: float = 0.0
    markdown: str = ""


@dataclass(frozen=True)
class BriefLogged(EventRecord):
    """``{understanding, criteria}``, and ``task`` in a policy run (one brief per task)."""

    KIND: ClassVar[str] = "brief"
    EFFECT: ClassVar[str] = "logged; the engine's state keeps it"

    understanding: str
    criteria: tuple[str, ...] = _spec((), convert=_tuple)
    task: str = _spec("", omit=True)


@dataclass(frozen=True)
class RoundStarted(EventRecord):
    """``{round, expansions}``, and ``schedule`` (c(t), w(t) of a paced ask) when the strategy is paced."""

    KIND: ClassVar[str] = "round"
    EFFECT: ClassVar[str] = "logged; resume repeats the strategy's ask here"

    round: int
    expansions: tuple[Mapping[str, Any], ...] = _spec((), convert=_tuple)
    schedule: Mapping[str, Any] | None = _spec(None, omit=True)


# ---------------------------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class NodeRecorded(EventRecord):
    """``Candidate.to_dict()`` without ``program`` (its ``code_length`` stays), optional ``status``,
    ``reason``, ``tags``, ``summary_warning``, ``task`` (a policy run's task tag). A ``program`` key, if present,
    is stored as a blob in the same transaction and replaced by its hash (``program_of``)."""

    KIND: ClassVar[str] = "node"
    NODE_ID: ClassVar[str] = "candidate id"
    EFFECT: ClassVar[str] = (
        "inserts the row (status defaults to `implemented` if there is a program hash, else `proposed`; "
        "`default_status`). A mismatching `program_hash` is refused. A repeated `node` event replaces the "
        "candidate fields (e.g. after a repair) and keeps the verification outcome and `created_seq`"
    )

    candidate: Candidate = _spec(flat=Candidate)
    status: Status | None = _spec(None, omit=True, convert=status_of)
    reason: str | None = _spec(None, omit=True)
    tags: tuple[str, ...] | None = _spec(None, omit=True, convert=_tuple)
    summary_warning: str = _spec("", omit=True)
    task: str = _spec("", omit=True)

    def payload(self) -> dict[str, Any]:
        out = super().payload()
        if not self.candidate.program:
            out.pop("program")
        return out

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> NodeRecorded:
        idea = payload.get("idea") or {}
        idea = {"text": idea} if isinstance(idea, str) else {"text": "", **idea}
        fixed = {"program": "", "parent_id": None, "program_hash": "", **payload, "idea": idea}
        operator = fixed.setdefault("operator", Operator.DRAFT.value)
        if operator not in _OPERATORS:
            raise ValueError(f"unknown operator {operator!r}; use one of {sorted(_OPERATORS)}")
        fixed["program_hash"] = str(fixed["program_hash"] or "")
        return super().parse(fixed)

    @property
    def default_status(self) -> Status:
        """The status the store's view gives a node event without one: implemented with a program, else proposed."""
        if self.status is not None:
            return self.status
        return Status.IMPLEMENTED if self.candidate.program_hash else Status.PROPOSED

    @property
    def node_tags(self) -> tuple[str, ...]:
        """The node's tags: the event's own, else its idea's."""
        return self.tags if self.tags is not None else self.candidate.idea.tags


_OPERATORS = {o.value for o in Operator}


@dataclass(frozen=True)
class StatusChanged(EventRecord):
    """``{status, reason}`` (e.g. ``screened-out``, ``guard-failed``, ``duplicate``)."""

    KIND: ClassVar[str] = "status"
    NODE_ID: ClassVar[str] = "candidate id"
    EFFECT: ClassVar[str] = "sets status and reason"

    status: Status = _spec(convert=status_of)
    reason: str = ""


@dataclass(frozen=True)
class VerificationStarted(EventRecord):
    """Free payload (kept in ``extra``)."""

    KIND: ClassVar[str] = "verification_started"
    NODE_ID: ClassVar[str] = "candidate id"
    EFFECT: ClassVar[str] = (
        "none; `pending_verifications` lists nodes started but never finished (not charged: verify again on resume)"
    )


@dataclass(frozen=True)
class Verified(EventRecord):
    """``Verification.to_dict()`` + ``fitness`` (the oriented score; None unless ``ok``), and ``reused_from``
    (the node whose stored result was read back by program hash; charged nothing) when it was reused."""

    KIND: ClassVar[str] = "verification"
    NODE_ID: ClassVar[str] = "candidate id"
    EFFECT: ClassVar[str] = (
        "sets status, reason, score, fitness (NULL unless `ok`), test_score, metrics, test_metrics, "
        "program_hash (if non-empty), verified_seq"
    )

    verification: Verification = _spec(flat=Verification)
    fitness: float | None = None
    reused_from: str | None = _spec(None, omit=True)

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> Verified:
        status_of(payload.get("status"))  # a clear error for a missing or unknown status
        return super().parse(payload)

    @property
    def ok(self) -> bool:
        """A usable score (status ``ok`` with a fitness)."""
        return self.verification.status is Status.OK and self.fitness is not None


@dataclass(frozen=True)
class LowFidelityRan(EventRecord):
    """``Verification.to_dict()`` (its ``fidelity`` = the level) + ``{level, round, low_fidelity: true}``: one
    run at a cheaper fidelity level for the ``pilot`` screener (``ledger/pilots.py``)."""

    KIND: ClassVar[str] = "pilot_run"
    NODE_ID: ClassVar[str] = "candidate id"
    EFFECT: ClassVar[str] = (
        "none (never a verification: the node's outcome is untouched); charged "
        "`Charge(evaluator_seconds=seconds, pilot_seconds=seconds)`; the fold keeps it by (program hash, level), "
        "so it is never paid twice"
    )

    verification: Verification = _spec(flat=Verification)
    level: str = "full"
    round: int = 0
    low_fidelity: bool = True


@dataclass(frozen=True)
class SmokeRan(LowFidelityRan):
    """As ``pilot_run``: a smoke run at the cheapest level with a short wall limit, before a full verification."""

    KIND: ClassVar[str] = "smoke"
    EFFECT: ClassVar[str] = (
        "none; charged as `pilot_run`. A crash or contract violation is followed by a `status` event with that "
        "status (`smoke run at level ...: reason`) and no `verification`"
    )


@dataclass(frozen=True)
class NoveltyJudged(EventRecord):
    """``NoveltyVerdict.to_dict()`` + ``{round}``: candidate_id, outcome (``accepted`` / ``rejected`` /
    ``audited``), nearest_id, cosine, reason, judge, judge_reply."""

    KIND: ClassVar[str] = "novelty"
    NODE_ID: ClassVar[str] = "candidate id"
    EFFECT: ClassVar[str] = (
        "logged (a rejection also writes a `status` event `not-novel`); `report.peers.novelty_rates` counts them"
    )

    candidate_id: str
    outcome: str
    nearest_id: str | None = None
    cosine: float | None = None
    reason: str = ""
    judge: Any = None
    judge_reply: Any = _spec(None, omit=True)
    round: int = 0


# ---------------------------------------------------------------------------------------------- the round


@dataclass(frozen=True)
class Screened(EventRecord):
    """``Screening.to_dict()`` + ``{to_verify, audited, round}``. Stores that predate ``to_verify`` load it as
    the screening's ``chosen``."""

    KIND: ClassVar[str] = "screening"
    EFFECT: ClassVar[str] = "logged; resume verifies chosen candidates that never finished"

    screening: Screening = _spec(flat=Screening)
    to_verify: tuple[str, ...] = _spec((), convert=_tuple)
    audited: tuple[str, ...] = _spec((), convert=_tuple)
    round: int = 0

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> Screened:
        fixed = {"ranking": (), "chosen": (), "screener": "", **payload}
        if "to_verify" not in fixed:
            fixed["to_verify"] = fixed["chosen"]
        return super().parse(fixed)


@dataclass(frozen=True)
class PilotRan(EventRecord):
    """``{index, tool, seconds, device, outcome, reason, round}``: one agentic pilot experiment, written after
    the screening that ran it."""

    KIND: ClassVar[str] = "pilot"
    NODE_ID: ClassVar[str] = "optional"
    EFFECT: ClassVar[str] = "none; charged `Charge(evaluator_seconds=seconds, pilot_seconds=seconds)`"

    index: int = 0
    tool: str = ""
    seconds: float = 0.0
    device: str = ""
    outcome: str = ""
    reason: str = ""
    round: int = 0


@dataclass(frozen=True)
class Told(EventRecord):
    """``{round, node_ids}`` (one per round, possibly empty)."""

    KIND: ClassVar[str] = "tell"
    EFFECT: ClassVar[str] = "logged; the batch told to the strategy and learners"

    round: int
    node_ids: tuple[str, ...] = _spec((), convert=_tuple)


@dataclass(frozen=True)
class ScreenerLearned(EventRecord):
    """What ``LearningScreener.learn`` returned (``learned``: the screener's own record, e.g. ``adaptive`` for
    critic-ttl) + ``{round}``."""

    KIND: ClassVar[str] = "screener_learn"
    EFFECT: ClassVar[str] = "logged; handed to `restore` on resume"

    round: int = 0

    @property
    def learned(self) -> dict[str, Any]:
        """The screener's learn record, as it returned it (without the round)."""
        return dict(self.extra)

    @property
    def adaptive(self) -> Mapping[str, Any] | None:
        """The critic-ttl adapter's record (version, ...), or None: the learner was another screener."""
        value = self.extra.get("adaptive")
        return value if isinstance(value, Mapping) else None


@dataclass(frozen=True)
class ModelFailed(EventRecord):
    """``{round, reason}``: a proposer endpoint failure."""

    KIND: ClassVar[str] = "model_error"

    round: int
    reason: str = ""


@dataclass(frozen=True)
class ScreenerFellBack(EventRecord):
    """``{round, screener, reason, fallbacks, screenings}``: the screener's endpoint failed; the counts include
    this one."""

    KIND: ClassVar[str] = "screener_fallback"
    EFFECT: ClassVar[str] = (
        "the fold counts it (`RunState.fallbacks`); the round's screening that follows is the seeded random "
        "pick, named `<screener>-unavailable`"
    )

    round: int
    screener: str
    reason: str = ""
    fallbacks: int = 0
    screenings: int = 0


@dataclass(frozen=True)
class ModelChosen(EventRecord):
    """``ModelChoice.to_dict()`` + ``{ensemble}``: index, model, rule, role (the request's), scores, reason,
    owner (the node or expansion id the call was for), ensemble (its ``roles.models`` key)."""

    KIND: ClassVar[str] = "model_choice"
    EFFECT: ClassVar[str] = (
        "logged by an ensemble's choice recorder (`models_wiring.choice_recorder`); `report.peers.model_shares` counts"
    )

    index: int
    model: str
    rule: str = ""
    role: str = ""
    scores: Mapping[str, float] = _spec(factory=dict, convert=_dict)
    reason: str = ""
    owner: str = ""
    ensemble: str = ""


@dataclass(frozen=True)
class LlmCalled(EventRecord):
    """``{role, model, prompt_hash, prompt_tokens, completion_tokens, cost, cached, latency_s, n, error}``."""

    KIND: ClassVar[str] = "llm_call"
    NODE_ID: ClassVar[str] = "optional"
    EFFECT: ClassVar[str] = "none; aggregated by `llm_usage(run_id)`"

    role: str
    model: str
    prompt_hash: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    cached: bool = False
    latency_s: float = 0.0
    n: int = 1
    error: str | None = None


@dataclass(frozen=True)
class ReplyParsed(EventRecord):
    """``{role, model, outcome, reason}``: whether a reply an LLM role asked for could be read (``first``: the
    first reply; ``reminder``: after a short format reminder; ``never``: not at all, ``reason`` says why).
    Aggregated per role by ``reply_parsing(run_id)``; runs stored before it have none."""

    KIND: ClassVar[str] = "reply_parsed"
    NODE_ID: ClassVar[str] = "optional"
    EFFECT: ClassVar[str] = "none; aggregated by `reply_parsing(run_id)`"

    role: str
    model: str
    outcome: str
    reason: str = _spec("", omit=True)


@dataclass(frozen=True)
class ProposalsLogged(EventRecord):
    """``{key, parent_id, items}``: a collection's proposer replies, logged once per key so a resume asks no
    model twice (``critic_data/collect.py``)."""

    KIND: ClassVar[str] = "proposals"
    EFFECT: ClassVar[str] = "the fold keeps the items by key (`RunState.proposals`)"

    key: str
    parent_id: str | None = None
    items: tuple[Mapping[str, Any], ...] = _spec((), convert=_tuple)


# ---------------------------------------------------------------------------------------------- the end


@dataclass(frozen=True)
class FinalSelected(EventRecord):
    """``{winner, pool, points, strategy_best, matches}``: the judged round-robin over the top-N nodes."""

    KIND: ClassVar[str] = "final_selection"

    winner: str | None = None
    pool: tuple[str, ...] = _spec((), convert=_tuple)
    points: Mapping[str, float] = _spec(factory=dict, convert=_dict)
    strategy_best: str | None = None
    matches: tuple[Mapping[str, Any], ...] = _spec((), convert=_tuple)


@dataclass(frozen=True)
class SelectionSplitChosen(EventRecord):
    """``{metric, pool, eligible, scores, winner, strategy_best}``: the final node chosen on the task's selection
    split at the end of a run (issue 46; ``engine.lifecycle.Lifecycle.choose_on_selection_split``): the pool (top
    nodes by validation, the baseline, the strategy's pick), those not worse than the baseline on validation, the
    pool's selection scores, the winner (None: no eligible node had a score) and the strategy's pick."""

    KIND: ClassVar[str] = "selection_split"

    metric: str
    pool: tuple[str, ...] = _spec((), convert=_tuple)
    eligible: tuple[str, ...] = _spec((), convert=_tuple)
    scores: Mapping[str, float] = _spec(factory=dict, convert=_dict)
    winner: str | None = None
    strategy_best: str | None = None


@dataclass(frozen=True)
class Finalised(EventRecord):
    """``{node_id, stopped}``, and ``selection_metric`` (the metric the final pick was made on; absent in older
    stores: None)."""

    KIND: ClassVar[str] = "final"

    node_id: str | None
    stopped: str = ""
    selection_metric: str | None = _spec(None, omit=True)


@dataclass(frozen=True)
class Submitted(EventRecord):
    """``EnsembleSubmission.to_dict()`` (members, combined, member_runs, status, metrics, test_metrics, score,
    test_score, seconds, combine) plus ``final_id`` and ``beats_final`` (its validation score is better than the
    final node's; absent in stores made before 2026-12-04: None) and ``selection_score`` (the task's selection
    metric; absent without a selection split); ``status: skipped`` with a ``reason`` and no charge when the run's
    evaluator-seconds or wall-time cap was spent; ``status: unsupported`` with a ``reason``, no members and no
    charge when the run asked for ensembles on every task and this task's outputs do not combine."""

    KIND: ClassVar[str] = "submission"
    EFFECT: ClassVar[str] = "none; charged `evaluator_seconds=seconds` (a top-K ensemble's re-runs and scoring)"

    members: tuple[str, ...] = _spec((), convert=_tuple)
    status: str = ""
    reason: str = ""  # always written, as the writers before the records did ("" for an ok submission)
    score: float | None = _spec(None, omit=True)
    test_score: float | None = _spec(None, omit=True)
    seconds: float = 0.0
    final_id: str | None = None
    beats_final: bool | None = None
    combined: tuple[str, ...] = _spec((), convert=_tuple, omit=True)  # the members whose re-run went in
    combine: str = _spec("", omit=True)  # how outputs combined (e.g. mean); absent on a skipped submission
    selection_score: float | None = _spec(None, omit=True)  # the task's selection metric, where it holds one out


@dataclass(frozen=True)
class Unrecognised(EventRecord):
    """Any JSON object (all of it in ``extra``): an event of a kind no record claims."""

    NODE_ID: ClassVar[str] = "optional"
    EFFECT: ClassVar[str] = "logged only"

    kind: str = _spec("")

    def payload(self) -> dict[str, Any]:
        return dict(self.extra)

    @classmethod
    def parse(cls, payload: Mapping[str, Any]) -> Unrecognised:
        return cls(extra=dict(payload))


# ---------------------------------------------------------------------------------------------- helpers


def kind_of(record: EventRecord) -> str:
    """The kind string ``record`` is stored under."""
    return record.kind if isinstance(record, Unrecognised) else record.KIND


def parse_event(kind: str, payload: Mapping[str, Any]) -> EventRecord:
    """The record of one stored event (``Unrecognised`` for a kind no imported record claims)."""
    cls = KINDS.get(kind)
    if cls is None:
        return dataclasses.replace(Unrecognised.parse(payload), kind=kind)
    return cls.parse(payload)


def kinds_of(types: Iterable[type[EventRecord]]) -> list[str]:
    """The kind strings of record classes (for the store's ``WHERE kind IN``)."""
    return [t.KIND for t in types]


def store_program(payload: dict[str, Any], node_id: str | None, put_blob: Callable[[str], str]) -> str:
    """Check a ``node`` payload's id (the payload's and ``node_id`` must agree) and move its ``program`` text to a
    blob (``put_blob``), keeping its hash; changes ``payload`` in place and returns the node id (``StoreError``
    when the ids disagree or the hash does not match the text)."""
    pid = payload.get("id")
    if node_id is None:
        node_id = pid
    if not node_id or (pid is not None and pid != node_id):
        raise StoreError(f"node event needs a node id (payload id {pid!r}, node_id {node_id!r}); they must agree")
    payload["id"] = node_id
    if "program" in payload:
        digest = put_blob(payload.pop("program"))
        if payload.get("program_hash") and payload["program_hash"] != digest:
            raise StoreError(
                f"node {node_id!r}: program_hash {payload['program_hash'][:12]} does not match the "
                f"program text (sha256 {digest[:12]}); compute it with verifyless.node.content_hash"
            )
        payload["program_hash"] = digest
    return str(node_id)
