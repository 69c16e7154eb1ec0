"""ModelEnsemble: one ``Model`` over named member models, a bandit choosing the member per call.

The caller tells the ensemble how each call turned out with ``observe(model,
improved, cost)`` (for a proposer: whether the child it led to improved on its
parent, and what it cost). Each ``generate`` first chooses a member by a rule:

* ``ucb1``: score = rate + exploration * sqrt(ln(total calls) / member's calls);
  a member never called scores +inf, so each member is tried once, in order.
  The bonus counts *calls*, not outcomes, so a batch of calls made before any
  outcome returns still spreads over the members.
* ``thompson``: score = a draw from Beta(prior + improved, prior + not improved),
  one draw per member in member order, from the injected ``random.Random``.

The rate is the posterior mean (prior + improved) / (2 prior + observed). With
``cost_weight`` w > 0 a score is divided by (member's mean cost / the members'
average mean cost) ** w; members without cost data count as average. Ties go to
the member listed first.

Every choice is a ``ModelChoice`` record (the member, the rule, every member's
score, a reason), appended to ``choices`` (``last_choice`` is the newest) and
returned with the reply by ``generate_with_choice``, the way to attribute a reply
when calls overlap; the reply itself is the member's, unchanged. Choices depend only on the options, the
rng's seed and the sequence of calls and observations, so a replay that repeats
them repeats the choices.
"""

from __future__ import annotations

import contextvars
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.model.base import Model, ModelReply, ModelRequest
from verifyless.registry import StrictOptions

call_owner: contextvars.ContextVar[str] = contextvars.ContextVar("verifyless_call_owner", default="")
"""Who a call is made for (the engine sets a node or expansion id); every ``ModelChoice`` records it."""


class BanditOptions(StrictOptions):
    """How a model ensemble chooses its member per call."""

    rule: Literal["ucb1", "thompson"] = Field("ucb1", description="ucb1 (deterministic) or thompson (sampled)")
    exploration: float = Field(1.0, ge=0.0, description="ucb1's weight of the exploration bonus")
    prior: float = Field(1.0, gt=0.0, description="pseudo-counts of improved and of not improved per member")
    cost_weight: float = Field(
        0.0, ge=0.0, description="0: ignore cost; w > 0: divide scores by (relative mean cost) ** w"
    )


@dataclass(frozen=True)
class ModelChoice:
    """Which member answered call ``index`` and why (an event payload via ``to_dict``)."""

    index: int
    model: str
    rule: str
    role: str
    scores: Mapping[str, float]
    reason: str
    owner: str = ""  # ``call_owner`` when the call was made: the node (or expansion) the call was for

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Tally:
    calls: int = 0
    observed: int = 0
    improved: int = 0
    cost: float = 0.0


@dataclass(frozen=True)
class MemberStats:
    """One member's calls and outcomes, for the report."""

    model: str
    calls: int
    share: float  # of all calls
    observed: int
    improved: int
    cost: float

    @property
    def rate(self) -> float | None:
        """Share of observed outcomes that improved; None before any outcome."""
        return self.improved / self.observed if self.observed else None


@dataclass
class ModelEnsemble:
    """A ``Model`` that forwards each request to the member its bandit chooses (module docstring)."""

    members: Mapping[str, Model]
    rng: random.Random
    options: BanditOptions = field(default_factory=BanditOptions)
    name: str = "ensemble"
    choices: list[ModelChoice] = field(default_factory=list)
    on_choice: Callable[[ModelChoice], None] | None = None  # e.g. stores a ``model_choice`` event
    observed_calls: set[int] = field(default_factory=set)  # call indexes already given an outcome

    def __post_init__(self) -> None:
        if not self.members:
            raise ConfigError("a model ensemble needs at least one member model")
        self._tally = {name: _Tally() for name in self.members}

    @property
    def last_choice(self) -> ModelChoice | None:
        return self.choices[-1] if self.choices else None

    async def generate(self, request: ModelRequest) -> ModelReply:
        reply, _ = await self.generate_with_choice(request)
        return reply

    async def generate_with_choice(self, request: ModelRequest) -> tuple[ModelReply, ModelChoice]:
        """The member's reply and the choice that picked it; safe with concurrent calls (``last_choice`` is not)."""
        choice = self.choose(request.role)
        return await self.members[choice.model].generate(request), choice

    def choose(self, role: str = "default", *, replay: bool = False) -> ModelChoice:
        """Choose the member for the next call and record the choice (counts as a call).

        ``replay``: a resume re-making a choice the run already stored; it counts, but ``on_choice`` is not told.
        """
        scores = self._scores()
        best = max(scores, key=lambda name: scores[name])  # max keeps the first of equal scores
        reason = self._reason(best, scores)
        choice = ModelChoice(len(self.choices), best, self.options.rule, role, scores, reason, call_owner.get())
        self._tally[best].calls += 1
        self.choices.append(choice)
        if self.on_choice is not None and not replay:
            self.on_choice(choice)
        return choice

    def observe(self, model: str, improved: bool, cost: float = 0.0, call: int | None = None) -> None:
        """Feed one outcome of a call that ``model`` answered (``call``: its index, remembered in ``observed_calls``)."""
        if model not in self._tally:
            raise ConfigError(f"ensemble {self.name!r} has no member {model!r}; members: {', '.join(self._tally)}")
        if call is not None:
            self.observed_calls.add(call)
        tally = self._tally[model]
        tally.observed += 1
        tally.improved += int(improved)
        tally.cost += cost

    def stats(self) -> list[MemberStats]:
        """Per member, in member order: calls, share of calls, outcomes and cost."""
        total = sum(t.calls for t in self._tally.values())
        return [
            MemberStats(name, t.calls, t.calls / total if total else 0.0, t.observed, t.improved, t.cost)
            for name, t in self._tally.items()
        ]

    # -- scoring -----------------------------------------------------------------
    def _rate(self, tally: _Tally) -> float:
        prior = self.options.prior
        return (prior + tally.improved) / (2 * prior + tally.observed)

    def _scores(self) -> dict[str, float]:
        raw = self._ucb() if self.options.rule == "ucb1" else self._thompson()
        if self.options.cost_weight == 0:
            return raw
        relative = self._relative_costs()
        return {name: score / relative[name] ** self.options.cost_weight for name, score in raw.items()}

    def _ucb(self) -> dict[str, float]:
        total = sum(t.calls for t in self._tally.values())
        out = {}
        for name, tally in self._tally.items():
            if tally.calls == 0:
                out[name] = math.inf
                continue
            bonus = self.options.exploration * math.sqrt(math.log(total) / tally.calls)
            out[name] = self._rate(tally) + bonus
        return out

    def _thompson(self) -> dict[str, float]:
        prior = self.options.prior
        return {
            name: self.rng.betavariate(prior + t.improved, prior + t.observed - t.improved)
            for name, t in self._tally.items()
        }

    def _relative_costs(self) -> dict[str, float]:
        means = {name: t.cost / t.observed for name, t in self._tally.items() if t.observed and t.cost > 0}
        if not means:
            return {name: 1.0 for name in self._tally}
        average = sum(means.values()) / len(means)
        return {name: means.get(name, average) / average for name in self._tally}

    def _reason(self, best: str, scores: Mapping[str, float]) -> str:
        tally = self._tally[best]
        if math.isinf(scores[best]):
            return f"{self.options.rule}: {best} had not been tried"
        what = "the highest score" if self.options.rule == "ucb1" else "the highest posterior draw"
        return (
            f"{self.options.rule}: {best} had {what}, {scores[best]:.3f} (improved {tally.improved} of "
            f"{tally.observed} outcomes, {tally.calls} calls before this one)"
        )


__all__ = ["BanditOptions", "MemberStats", "ModelChoice", "ModelEnsemble", "call_owner"]
