"""One verified parent -> child outcome, and the one rule that labels it (SPEC section 5).

Every learner gets the same record: the surrogate (``OutcomeObserver.observe``),
test-time critics (``LearningScreener.learn``), the policy reward, critic
datasets and critic metrics. ``outcome_of`` builds it from the parent (a
``Node`` or its oriented fitness), the child and its ``Verification`` and the
metric direction; ``verified_outcome`` from ids and a parent fitness (policy
rewards); ``pair_outcome`` from two stored fitnesses (datasets, metrics).
Hidden test scores never enter it.

**Delta** is the signed *relative* improvement ``(f_child - f_parent) / |f_parent|``
on oriented fitness (higher is better, so positive = better); the absolute
difference when the parent's fitness is exactly 0 (a relative change is
undefined there).

**Three-way label** (``label3``): ``improve`` if Delta > tie, ``lose`` if
Delta < -tie, else ``tie``. ``tie`` is the run's ONE tie tolerance: the
config field ``tie_tolerance`` (default 0: exact equality, as in the paper),
stamped on each outcome by its constructor (``Outcome.tie``); no learner has a
tolerance of its own.

**A failed child** (any non-OK status, or no finite validation fitness) is
never compared with its parent:

* ``label3`` gives it no label (None), as the critic paper leaves infeasible
  children out of critic data: datasets, critic metrics and the test-time
  critic (TT-SDFT and TT-GRPO) skip it;
* ``reward_label`` counts it as ``lose``: learners paid to avoid wasted
  verifications use this one -- the policy reward (improve is +1, anything
  else -1, as GRPO gives a failed child -1) and the surrogate screener (a
  failed child is a ``lose`` example).

Both agree on every compared child. An OK child whose parent has no fitness
(a draft, or a child of a failed program) has no label in either.

**A low-fidelity outcome** (``Outcome.fidelity`` names a cheaper level: a
pilot result, ``PilotObserver.observe_pilot``) is evidence, never a full
outcome: ``label3`` and ``reward_label`` give it no label, so it never
becomes critic data, a test-time critic example or a policy reward. Its
``delta`` is still computed (against the parent's result at the same level
when the learner was given one) for a learner that chooses to read it.

**Five-level, parent-specific** labels (``BigWin`` > ``MediumWin`` >
``SmallWin`` > ``Tie`` > ``Lose``): all compared children of one parent share
the parent's mean ``mu_p`` and population standard deviation ``sigma_p`` of
Delta; each child gets ``z = (Delta - mu_p) / sigma_p`` (0 when ``sigma_p`` is
0) and the FIRST rule that holds:

  ===========  ==========================================
  BigWin       Delta > 0 and (Delta > 0.25 or z > 2)
  MediumWin    Delta > 0 and (Delta > 0.10 or z > 1)
  SmallWin     Delta > 0 and z > 0.2
  Tie          Delta >= 0 or -0.2 <= z <= 0.2
  Lose         otherwise
  ===========  ==========================================

A parent with fewer than ``min_improving`` (default 3) improving children
(Delta > 0) gets no five-level labels. The five-level rules always use the
paper's exact thresholds; the tie tolerance does not change them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from verifyless.node import Candidate, Node, Status, Verification

THREE: tuple[str, ...] = ("improve", "tie", "lose")
FIVE: tuple[str, ...] = ("BigWin", "MediumWin", "SmallWin", "Tie", "Lose")
_FIVE_TO_THREE = {"BigWin": "improve", "MediumWin": "improve", "SmallWin": "improve", "Tie": "tie", "Lose": "lose"}

BIG_DELTA, MEDIUM_DELTA = 0.25, 0.10
BIG_Z, MEDIUM_Z, SMALL_Z, TIE_Z = 2.0, 1.0, 0.2, 0.2
MIN_IMPROVING = 3


# ---------------------------------------------------------------------- the record


@dataclass(frozen=True)
class Outcome:
    """One verified parent -> child pair, validation side only.

    ``parent_fitness`` / ``child_fitness`` are oriented (higher is better; None
    when unknown or failed), ``parent_score`` / ``child_score`` the raw metric
    values (for prompts that show them), ``delta`` the relative change (None
    unless both fitnesses are finite). ``status`` is the child's ``Status``
    value. ``tie`` is the run's tie tolerance. ``candidate`` is the child as it
    was made (learners that read its features); it is not serialised.
    ``fidelity`` is None for a full verification, else the cheaper level the
    child ran at (a pilot): such an outcome is never labelled (module docstring).
    """

    parent_id: str
    child_id: str
    status: str
    parent_fitness: float | None
    child_fitness: float | None
    parent_score: float | None
    child_score: float | None
    higher_is_better: bool
    tie: float = 0.0
    round: int = 0
    parent_summary: str = ""
    child_summary: str = ""
    idea: str = ""
    candidate: Candidate | None = field(default=None, compare=False, repr=False)
    fidelity: str | None = None

    @property
    def low_fidelity(self) -> bool:
        """A pilot result at a cheaper level, not a full verification."""
        return self.fidelity is not None

    @property
    def failed(self) -> bool:
        """The child did not verify OK with a finite validation fitness."""
        return self.status != Status.OK.value or not _finite(self.child_fitness)

    @property
    def delta(self) -> float | None:
        """Relative, oriented change (module docstring); None for a failed child or a parent without fitness."""
        child, parent = self.child_fitness, self.parent_fitness
        if self.failed or child is None or parent is None or not math.isfinite(parent):
            return None
        return relative_delta(child, parent)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the candidate left out); ``from_dict`` reads them back."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name in _FIELDS}
        if self.fidelity is None:
            del data["fidelity"]  # a full outcome keeps the shape stored before fidelity levels existed
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        """An outcome from ``to_dict``, or from the older stored shape (``node_id``, raw scores only)."""
        if "child_fitness" in data:
            return cls(**{k: v for k, v in data.items() if k in _FIELDS})
        sign = 1.0 if data["higher_is_better"] else -1.0
        parent, child = data.get("parent_score"), data.get("child_score")
        return cls(
            parent_id=str(data["parent_id"]),
            child_id=str(data["node_id"]),
            status=str(data["status"]),
            parent_fitness=None if parent is None else sign * float(parent),
            child_fitness=None if child is None else sign * float(child),
            parent_score=parent,
            child_score=child,
            higher_is_better=bool(data["higher_is_better"]),
            round=int(data.get("round", 0)),
            parent_summary=str(data.get("parent_summary", "")),
            child_summary=str(data.get("child_summary", "")),
            idea=str(data.get("idea", "")),
        )


_FIELDS = frozenset(Outcome.__dataclass_fields__) - {"candidate"}


def outcome_of(
    parent: Node | float | None,
    child: Node | Candidate,
    verification: Verification,
    *,
    higher_is_better: bool,
    tie: float = 0.0,
    round: int = 0,
    parent_summary: str = "",
    child_summary: str = "",
) -> Outcome:
    """The outcome of ``child`` verified as ``verification`` against ``parent``.

    ``parent`` is the parent ``Node`` (its fitness is read from it), its
    oriented fitness, or None when it has none. Only the validation score of
    ``verification`` is read. A ``Candidate`` child is kept on the record.
    """
    parent_fit = parent.fitness if isinstance(parent, Node) else parent
    parent_id = child.parent_id or (parent.id if isinstance(parent, Node) else "")
    idea = child.idea.text if isinstance(child, Candidate) else child.idea
    return verified_outcome(
        parent_id,
        parent_fit,
        child.id,
        verification,
        higher_is_better=higher_is_better,
        tie=tie,
        round=round,
        parent_summary=parent_summary,
        child_summary=child_summary,
        idea=idea,
        candidate=child if isinstance(child, Candidate) else None,
    )


def verified_outcome(
    parent_id: str,
    parent_fitness: float | None,
    child_id: str,
    verification: Verification,
    *,
    higher_is_better: bool,
    tie: float = 0.0,
    **context: Any,
) -> Outcome:
    """The outcome from ids, the parent's oriented fitness and the child's verification.

    ``context`` fills the descriptive fields (``round``, summaries, ``idea``,
    ``candidate``). Raw scores are the oriented fitnesses turned back by the
    metric direction; a non-finite parent fitness counts as none.
    """
    sign = 1.0 if higher_is_better else -1.0
    parent_fit = float(parent_fitness) if parent_fitness is not None and math.isfinite(parent_fitness) else None
    score = verification.score
    child_score = (
        float(score) if verification.status is Status.OK and score is not None and math.isfinite(score) else None
    )
    return Outcome(
        parent_id=parent_id,
        child_id=child_id,
        status=verification.status.value,
        parent_fitness=parent_fit,
        child_fitness=None if child_score is None else sign * child_score,
        parent_score=None if parent_fit is None else sign * parent_fit,
        child_score=child_score,
        higher_is_better=higher_is_better,
        tie=float(tie),
        **context,
    )


# ---------------------------------------------------------------------- the label rule


def label3(outcome: Outcome, tie: float | None = None) -> str | None:
    """``improve`` / ``tie`` / ``lose``; None for a failed child, a parent without fitness or a low-fidelity outcome.

    ``tie`` defaults to the outcome's own run tolerance (``Outcome.tie``);
    pass one only to relabel offline data with another tolerance.
    """
    delta = None if outcome.low_fidelity else outcome.delta
    return None if delta is None else three_way(delta, outcome.tie if tie is None else tie)


def reward_label(outcome: Outcome, tie: float | None = None) -> str | None:
    """``label3``, except that a failed child is ``lose`` (policy rewards and the surrogate; module docstring).

    A low-fidelity outcome has no label here either (a failed pilot is not a paid loss).
    """
    if outcome.low_fidelity:
        return None
    return "lose" if outcome.failed else label3(outcome, tie)


def improved(outcome: Outcome, tie: float | None = None) -> bool:
    """Whether the child beats its parent (``reward_label`` is ``improve``): the policy reward's +1."""
    return reward_label(outcome, tie) == "improve"


def node_improved(node: Node, parent: Node | None, tie: float) -> bool:
    """Whether verified ``node`` improved on ``parent`` by the one outcome rule (``improved``), read from the store's
    node rows: the pair's scores are the nodes' oriented fitnesses (higher is better), so the rule sees them as
    they were told; a node without a parent (the baseline) never improved. Not a second rule: the novelty gate's
    false-rejection rate and the ensembles' feedback use it where they hold ``Node`` rows, not ``Outcome``s."""
    if parent is None:
        return False
    pair = Outcome(
        parent.id, node.id, node.status.value, parent.fitness, node.fitness, parent.fitness, node.fitness, True, tie=tie
    )
    return improved(pair)


def relative_delta(child_fitness: float, parent_fitness: float) -> float:
    """Signed relative improvement of a child over its parent (positive = better)."""
    diff = float(child_fitness) - float(parent_fitness)
    return diff if parent_fitness == 0 else diff / abs(float(parent_fitness))


def three_way(delta: float, tolerance: float = 0.0) -> str:
    """``improve`` if Delta > tolerance, ``lose`` if Delta < -tolerance, else ``tie``."""
    if delta > tolerance:
        return "improve"
    if delta < -tolerance:
        return "lose"
    return "tie"


def five_level(delta: float, z: float) -> str:
    """The first five-level rule (module table) that holds for this Delta and z."""
    if delta > 0 and (delta > BIG_DELTA or z > BIG_Z):
        return "BigWin"
    if delta > 0 and (delta > MEDIUM_DELTA or z > MEDIUM_Z):
        return "MediumWin"
    if delta > 0 and z > SMALL_Z:
        return "SmallWin"
    if delta >= 0 or -TIE_Z <= z <= TIE_Z:
        return "Tie"
    return "Lose"


def to_three(label: str | None) -> str | None:
    """Collapse a five-level label (or pass a three-way one through); None stays None."""
    if label is None:
        return None
    if label in _FIVE_TO_THREE:
        return _FIVE_TO_THREE[label]
    low = label.lower()
    if low in THREE:
        return low
    raise ValueError(f"unknown label {label!r}; expected one of {FIVE + THREE}")


def parent_five_levels(deltas: Sequence[float], *, min_improving: int = MIN_IMPROVING) -> list[str] | None:
    """Five-level labels for one parent's children (same order), or None if the parent is dropped.

    ``deltas`` are the Deltas of every compared (feasible) child of the parent.
    """
    values = [float(d) for d in deltas]
    if sum(d > 0 for d in values) < min_improving:
        return None
    mu = sum(values) / len(values)
    sigma = math.sqrt(sum((d - mu) ** 2 for d in values) / len(values))
    return [five_level(d, (d - mu) / sigma if sigma > 0 else 0.0) for d in values]


# ---------------------------------------------------------------------- labelling many outcomes


@dataclass(frozen=True)
class ChildOutcome:
    """One compared child with its labels (``five`` None when the parent was dropped from the five-level pool)."""

    parent_id: str
    child_id: str
    delta: float
    three: str
    five: str | None = None


def label_outcomes(outcomes: Iterable[Outcome], *, min_improving: int = MIN_IMPROVING) -> list[ChildOutcome]:
    """Three-way (``label3``) and per-parent five-level labels of the compared outcomes, in input order.

    Failed children and children of parents without fitness get no label and
    are left out; five-level labels are fitted per parent over its remaining
    children.
    """
    labelled = [(o, three, o.delta) for o in outcomes if (three := label3(o)) is not None and o.delta is not None]
    by_parent: dict[str, list[int]] = {}
    for i, (o, _, _) in enumerate(labelled):
        by_parent.setdefault(o.parent_id, []).append(i)
    five: dict[int, str] = {}
    for idx in by_parent.values():
        labels = parent_five_levels([labelled[i][2] for i in idx], min_improving=min_improving)
        if labels is not None:
            five.update(zip(idx, labels, strict=True))
    return [ChildOutcome(o.parent_id, o.child_id, d, t, five.get(i)) for i, (o, t, d) in enumerate(labelled)]


def label_children(
    pairs: Iterable[tuple[str, str, float | None, float | None]],
    *,
    min_improving: int = MIN_IMPROVING,
    tolerance: float = 0.0,
) -> list[ChildOutcome]:
    """``label_outcomes`` of ``(parent_id, child_id, child_fitness, parent_fitness)`` rows (oriented fitness).

    A missing or non-finite child fitness is a failed child; a missing parent
    fitness leaves the pair unlabelled.
    """
    return label_outcomes((pair_outcome(*row, tie=tolerance) for row in pairs), min_improving=min_improving)


def pair_outcome(
    parent_id: str, child_id: str, child_fitness: float | None, parent_fitness: float | None, *, tie: float = 0.0
) -> Outcome:
    """An outcome from oriented fitnesses alone (stored runs and datasets; raw scores equal the fitnesses)."""
    ok = _finite(child_fitness)
    parent = parent_fitness if _finite(parent_fitness) else None
    return Outcome(
        parent_id=str(parent_id),
        child_id=str(child_id),
        status=Status.OK.value if ok else Status.INVALID_METRIC.value,
        parent_fitness=parent,
        child_fitness=child_fitness if ok else None,
        parent_score=parent,
        child_score=child_fitness if ok else None,
        higher_is_better=True,
        tie=float(tie),
    )


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


__all__ = [
    "FIVE",
    "MIN_IMPROVING",
    "THREE",
    "ChildOutcome",
    "Outcome",
    "five_level",
    "improved",
    "label3",
    "label_children",
    "label_outcomes",
    "node_improved",
    "outcome_of",
    "pair_outcome",
    "parent_five_levels",
    "relative_delta",
    "reward_label",
    "three_way",
    "to_three",
    "verified_outcome",
]
