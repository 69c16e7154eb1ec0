"""The Screener contract: ``screen(context, candidates) -> Screening``.

A screener ranks every candidate, chooses the ids to verify and records its
evidence. Screeners that learn from outcomes already paid for implement one of
two optional protocols, which the engine checks with ``isinstance``:

* ``OutcomeObserver.observe`` -- called with the ``Outcome`` of every
  verified node as it is told (the surrogate);
* ``LearningScreener.learn`` / ``restore`` -- called once per round boundary
  with that round's verified parent -> child pairs (the same ``Outcome``
  records, ``verifyless.outcome``); what
  ``learn`` returns is stored as a ``screener_learn`` event and handed back to
  ``restore`` on resume and replay (test-time critic adapters).
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from verifyless.events import EventRecord, Screened, ScreenerFellBack
from verifyless.node import Candidate, Evidence, Node, Screening, Verification
from verifyless.outcome import Outcome
from verifyless.roles.base import ParentInfo, TaskBrief
from verifyless.task.base import Task


@dataclass(frozen=True)
class ContextNode:
    """An executed, non-buggy node shown to pairwise judges: description, validation score and program.

    ``program`` is empty when the screening context has no way to read it
    (``ScreenContext.program_of`` is None); the node is then shown without code.
    """

    id: str
    summary: str
    score: float
    idea: str = ""
    program: str = ""


@dataclass
class ScreenContext:
    """Everything a screener may look at. Never contains hidden test scores.

    ``nodes`` is the executed part of the search graph (for BFS context);
    ``summaries`` maps node id -> neutral summary where known.
    ``rng`` is the run's seeded generator for tie-breaks (explicit randomness).
    ``program_of`` reads an executed node's program text by node id (the
    engine passes its store-backed reader); None means programs are unknown.
    ``budget_left_s``: the run's evaluator seconds left (None when the run has
    no evaluator-seconds cap); screeners that spend evaluator time (agentic
    pilots) stay within it.
    ``pilot``: ``await pilot(candidate, level)`` runs a candidate at one of the
    task's cheaper fidelity levels, paid and recorded by the engine's ledger
    (read back when it ran before); None where no sandbox can run it.
    ``data_report``: the run's data report as markdown (``verifyless.datareport``), '' when it has none;
    the critic and the judges put it in their prompts (an empty one leaves them as before).
    ``peek``: ``await peek(candidate)`` runs a candidate's program off the books: neither charged nor recorded.
    Only the ``peek`` oracle uses it (a measured ceiling, never a screener to compare at equal cost); None
    where the engine does not offer it.
    """

    task: Task
    parent: ParentInfo
    rng: random.Random
    brief: TaskBrief | None = None
    nodes: dict[str, Node] = field(default_factory=dict)
    summaries: Mapping[str, str] = field(default_factory=dict)
    n_verify: int = 1
    round: int = 0
    budget_left_s: float | None = None
    program_of: Callable[[str], str] | None = None
    pilot: Callable[[Candidate, str], Awaitable[Verification]] | None = None
    data_report: str = ""
    peek: Callable[[Candidate], Awaitable[Verification]] | None = None


@runtime_checkable
class Screener(Protocol):
    @property
    def name(self) -> str: ...  # recorded in screening events (an attribute or, from options, a property)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening: ...


@runtime_checkable
class OutcomeObserver(Protocol):
    """Sees each verified node's ``Outcome`` once, in tell order (validation side only).

    The outcome carries the child ``candidate`` (for features) and the run's
    tie tolerance; label it with ``verifyless.outcome.reward_label`` (a failed
    child is a loss) or ``label3``, never with a rule of its own.
    """

    def observe(self, outcome: Outcome) -> None: ...


@runtime_checkable
class PilotObserver(Protocol):
    """Sees each told node's pilot results as low-fidelity outcomes (``Outcome.fidelity`` set), in tell order.

    One call per level the node's program was piloted at (cheapest first),
    just before that node's ``observe`` (engine/learners.py). ``label3`` and
    ``reward_label`` give these outcomes no label; a learner that uses them
    reads ``child_fitness`` / ``delta`` as weaker evidence on its own terms.
    A screener without this method never receives pilot results.
    """

    def observe_pilot(self, outcome: Outcome) -> None: ...


@runtime_checkable
class LearningScreener(Protocol):
    """A screener that learns between rounds from the pairs verified in them.

    ``learn`` is called by the engine once per round boundary with that round's
    newly verified pairs (possibly empty); the dict it returns (e.g.
    ``{"adapter_version": 3, "adapter_dir": "...", "loss": 0.1}``) is stored as
    a ``screener_learn`` event, ``None`` stores nothing. ``restore`` receives
    the stored payloads in order on resume and replay, so the screener reloads
    the state its next decision must use. A crash between a round's ``tell``
    and its ``screener_learn`` event loses that one learning step (the run
    continues with the state the last stored record describes).
    """

    async def learn(self, outcomes: Sequence[Outcome], round: int) -> dict[str, Any] | None: ...

    def restore(self, records: Sequence[dict[str, Any]]) -> None: ...


FALLBACK_SUFFIX = "-unavailable"  # the screener name of a screening the engine picked at random instead


def fallback_screening(screener: str, ranking: Sequence[str], n_verify: int) -> Screening:
    """The seeded random pick that stands in for a screener whose endpoint failed (``ranking`` shuffled)."""
    return Screening(f"{screener}{FALLBACK_SUFFIX}", tuple(ranking), tuple(ranking[:n_verify]))


def fell_back(screener: str) -> bool:
    """Whether a stored screening (by its ``screener`` name) was such a fallback, not the screener's answer."""
    return screener.endswith(FALLBACK_SUFFIX)


@dataclass
class FallbackCount:
    """How often a run's screener answered and how often the engine fell back to a random pick instead.

    Fed the run's ``Screened`` and ``ScreenerFellBack`` records in log order (``feed``): a fallback event
    counts one fallback (also the one that stopped a run, which stores no screening), a screening that is
    not a fallback (``fell_back``) one answer. ``streak``: fallbacks in a row since the last answer.
    """

    answered: int = 0
    fallbacks: int = 0
    streak: int = 0

    @property
    def screenings(self) -> int:
        return self.answered + self.fallbacks

    def feed(self, record: EventRecord) -> None:
        if isinstance(record, ScreenerFellBack):
            self.fallbacks += 1
            self.streak += 1
        elif isinstance(record, Screened) and not fell_back(str(record.screening.screener)):
            self.answered += 1
            self.streak = 0

    @classmethod
    def of_run(cls, store: Any, run_id: str) -> FallbackCount:
        """The counts of a stored run (``store.events``)."""
        counts = cls()
        for ev in store.events(run_id, Screened, ScreenerFellBack):
            counts.feed(ev.record)
        return counts

    def to_dict(self) -> dict[str, int]:
        return {"fallbacks": self.fallbacks, "screenings": self.screenings}

    def line(self) -> str:
        """One line for ``show`` and the report ('' when nothing fell back)."""
        return fallback_line(**self.to_dict())


def fallback_line(fallbacks: int, screenings: int) -> str:
    """``screener fallbacks: 2 of 5 screenings fell back ...`` ('' when nothing fell back)."""
    if not fallbacks:
        return ""
    return (
        f"screener fallbacks: {fallbacks} of {screenings} screenings fell back to a seeded random pick "
        "(the screener's endpoint failed)"
    )


def choose_top(
    name: str,
    ranking: Sequence[str],
    evidence: Mapping[str, Evidence],
    n_verify: int | None,
    ctx: ScreenContext,
    started: float,
) -> Screening:
    """The screening that chooses the first ``n_verify`` ids of ``ranking`` (None: the engine's ``ctx.n_verify``).

    ``name`` is the screener's recorded name; ``started`` is the ``time.monotonic()`` reading when the
    screening began, so ``seconds`` covers all of it.
    """
    n = n_verify if n_verify is not None else ctx.n_verify
    return Screening(name, tuple(ranking), tuple(ranking[: max(0, n)]), evidence, time.monotonic() - started)


def candidates_wanted(screener: Screener, default: int) -> int:
    """Children to make for one expansion: ``default`` (``engine.candidates``), or fewer where the screener says
    so through an optional ``candidates(default) -> int`` (adaptive screening once it is off: its picks are then
    random, so every child past the first costs LLM calls and is never verified). Never below 1 or above
    ``default``."""
    ask = getattr(screener, "candidates", None)
    return max(1, min(default, int(ask(default)))) if callable(ask) else default
