"""Adaptive screening (``screener: adaptive``): screen only while the paid outcomes say it helps.

``AdaptiveScreener(inner, options)`` wraps any screener. Its evidence is the
*audited selection advantage*, measured in pairs: in an audited expansion the
inner screener ranks the pool and two candidates are chosen, the screener's
first and one other drawn uniformly with ``ctx.rng`` (so that expansion costs
one verification more). When both are paid, the pair is a **win** if the
screener's pick improved on the parent and the random one did not
(``outcome.improved``: a failed child did not), a **loss** if the reverse, and
no evidence if both or neither improved (a pool with nothing to gain says
nothing about the screener; ranking by fitness among losers was tried and
read such pools as coin flips, switching a perfect critic off). Pairs share
parent and time, so a search that gets harder as it goes cannot bias the
comparison (comparing arms played at different times did).

The rule (a sequential test on the pairs):

* **prior**: the screener's win rate w starts from Beta(``prior_win *
  prior_weight``, ``(1 - prior_win) * prior_weight``), the stated prior.
* **trial** (the start): an expansion is audited with probability
  ``explore``; otherwise the screener's choice is verified alone.
* **test**: once ``trial`` pairs are decided, at every round boundary,
  p = P(w > 1/2) under the Beta posterior (normal approximation,
  deterministic). p >= ``confidence`` keeps screening (state ``on``, audited
  with probability ``audit`` only, so a later test can still switch it off);
  otherwise screening is switched ``off`` for the rest of the run: every
  expansion is a uniform random choice and the inner screener is never called
  again (a chance critic stops costing screener calls). ``off`` is final.

Guarantee (stated; measured in ``bench/adaptive.py``): the cost of safety is
the audits, one verification each: about ``explore`` of the expansions until
``trial`` pairs are decided, then ``audit`` of them while on. A screener at
chance loses nothing against random by being audited (both picks are
random-quality) and is random after the trial; a screener that helps loses
only the audits against fixed screening. The test errs (switches a helpful
screener off, or keeps a useless one on) with probability that shrinks with
``trial`` and ``confidence``. The rule chooses whether to screen and how
often to audit; N, k and m stay as configured.

Records: every candidate's ``Evidence.detail["adaptive"]`` holds the
expansion's decision and its evidence (audited or not, state, wins / losses,
p, reason), stored with the screening event; ``learn`` returns, per round
boundary with new evidence, the cumulative counts and the state with its
reason (a ``screener_learn`` event: the decision event), and ``restore``
rebuilds the state from the last of them, so a resumed run (also after
kill -9) continues from the stored record (a round whose ``screener_learn``
never reached the store is lost for learning, as for every learning
screener). An inner screener that learns is forwarded to (``observe``;
``learn``/``restore`` with its record under ``inner``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field

from verifyless.node import Candidate, Evidence, Screening
from verifyless.outcome import Outcome, improved
from verifyless.screen.base import LearningScreener, OutcomeObserver, ScreenContext, Screener
from verifyless.screen.options import BaseOptions

State = Literal["trial", "on", "off"]

__all__ = ["AdaptiveOptions", "AdaptiveRule", "AdaptiveScreener", "Pairs", "p_better"]


class AdaptiveOptions(BaseOptions):
    """Options of screener ``adaptive`` (``AdaptiveScreener``); the rule is in ``screen/adaptive.py``."""

    screener: str = Field("critic", description="the wrapped screener's name")
    options: dict[str, Any] = Field(default_factory=dict, description="the wrapped screener's options")
    prior_win: float = Field(
        0.5, gt=0.0, lt=1.0, description="prior chance that the screener's pick beats a random one"
    )
    prior_weight: float = Field(2.0, gt=0.0, description="pseudo-pairs the prior is worth")
    trial: int = Field(6, ge=1, description="decided pairs before the test decides")
    explore: float = Field(0.5, gt=0.0, le=1.0, description="chance an expansion is audited during the trial")
    confidence: float = Field(0.8, gt=0.5, lt=1.0, description="P(screener beats random) needed to keep screening")
    audit: float = Field(0.1, ge=0.0, le=1.0, description="chance an expansion is audited while screening is on")


@dataclass(frozen=True)
class Pairs:
    """Decided audited pairs: the screener's pick won ``wins`` and lost ``losses``."""

    wins: int = 0
    losses: int = 0

    @property
    def n(self) -> int:
        return self.wins + self.losses

    def add(self, won: bool) -> Pairs:
        return Pairs(self.wins + int(won), self.losses + int(not won))


def p_better(pairs: Pairs, prior: tuple[float, float]) -> float:
    """P(w > 1/2) for the Beta posterior of the win rate w, by its normal approximation."""
    a, b = prior[0] + pairs.wins, prior[1] + pairs.losses
    mean, var = a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
    return 0.5 * (1.0 + math.erf((mean - 0.5) / math.sqrt(2.0 * var)))


class AdaptiveRule:
    """The decision rule alone (module docstring), shared by the screener and the pool-world replays.

    It holds the decided pairs, the state and its reason, and the list of
    state changes; it draws nothing itself (the caller passes its draws).
    """

    def __init__(self, options: AdaptiveOptions) -> None:
        self.options = options
        self.state: State = "trial"
        self.reason = "trial: measuring the screener against random picks"
        self.pairs = Pairs()
        self.decisions: list[dict[str, Any]] = []

    @property
    def screens(self) -> bool:
        """Whether the inner screener is asked at all (False once screening is off)."""
        return self.state != "off"

    def audits(self, draw: float) -> bool:
        """Whether an expansion with the uniform ``draw`` in [0, 1) is audited."""
        rate = self.options.explore if self.state == "trial" else self.options.audit
        return self.screens and draw < rate

    def add_pair(self, screened: bool, other: bool) -> bool:
        """Score one paid pair (whether the screener's pick improved, whether the random one did)."""
        if screened == other:
            return False
        self.pairs = self.pairs.add(screened)
        return True

    def evidence(self) -> dict[str, Any]:
        return {
            "wins": self.pairs.wins,
            "losses": self.pairs.losses,
            "p_screen_better": round(p_better(self.pairs, self._prior()), 6),
        }

    def decide(self, round: int) -> bool:
        """The sequential test (module docstring); True when the state changed."""
        if self.state == "off" or self.pairs.n < self.options.trial:
            return False
        p = p_better(self.pairs, self._prior())
        new: State = "on" if p >= self.options.confidence else "off"
        if new == self.state:
            return False
        counts = f"its pick beat a random one in {self.pairs.wins} of {self.pairs.n} audited pairs"
        self.reason = (
            f"screening helps: P(screener beats random) = {p:.2f} >= {self.options.confidence}; {counts}"
            if new == "on"
            else f"screening switched off: P(screener beats random) = {p:.2f} < {self.options.confidence}; {counts}"
        )
        self.state = new
        self.decisions.append({"round": round, "state": new, "reason": self.reason, **self.evidence()})
        return True

    def record(self) -> dict[str, Any]:
        """The cumulative state (what ``restore`` reads back)."""
        return {"state": self.state, "reason": self.reason, **self.evidence()}

    def restore(self, records: Sequence[dict[str, Any]]) -> None:
        """Counts, state and decisions from stored ``record()`` payloads (the last one is cumulative)."""
        self.decisions = [m["decision"] for m in records if "decision" in m]
        if records:
            last = records[-1]
            self.pairs = Pairs(int(last["wins"]), int(last["losses"]))
            self.state, self.reason = last["state"], last["reason"]

    def _prior(self) -> tuple[float, float]:
        o = self.options
        return o.prior_win * o.prior_weight, (1.0 - o.prior_win) * o.prior_weight


class AdaptiveScreener:
    """The adaptive wrapper; see the module docstring for the rule, its guarantee and its records."""

    def __init__(self, inner: Screener, options: AdaptiveOptions | None = None) -> None:
        self.inner = inner
        self.options = options or AdaptiveOptions()
        self.name = self.options.name or "adaptive"
        self.rule = AdaptiveRule(self.options)
        self.pending: dict[str, tuple[str, str]] = {}  # candidate id -> (screener's pick, random pick)
        self.seen: dict[str, bool] = {}  # whether pending candidates already paid improved on their parent

    @property
    def state(self) -> State:
        return self.rule.state

    @property
    def reason(self) -> str:
        return self.rule.reason

    @property
    def pairs(self) -> Pairs:
        return self.rule.pairs

    @property
    def decisions(self) -> list[dict[str, Any]]:
        return self.rule.decisions

    # ------------------------------------------------------------------ screening

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        if not self.rule.screens:
            ranking, chosen, evidence = self._shuffle(ctx, candidates)
            audited = False
        else:
            inner = await self.inner.screen(ctx, candidates)
            ranking, chosen, evidence = list(inner.ranking), list(inner.chosen), dict(inner.evidence)
            audited = self._audit(ctx, ranking, chosen)
        note = {"audited": audited, **self.rule.record()}
        evidence = {cid: replace(ev, detail={**ev.detail, "adaptive": note}) for cid, ev in evidence.items()}
        return Screening(self.name, tuple(ranking), tuple(chosen), evidence, time.monotonic() - started)

    def _audit(self, ctx: ScreenContext, ranking: list[str], chosen: list[str]) -> bool:
        """Maybe add one random unchosen candidate to ``chosen`` and remember the pair; whether it did."""
        rest = [cid for cid in ranking if cid not in chosen]
        if not chosen or not rest or not self.rule.audits(ctx.rng.random()):
            return False
        other = ctx.rng.choice(rest)
        chosen.append(other)
        pair = (chosen[0], other)
        self.pending.update({chosen[0]: pair, other: pair})
        return True

    def _shuffle(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> tuple[list[str], list[str], dict]:
        ranking = [c.id for c in candidates]
        ctx.rng.shuffle(ranking)
        n_verify = self.options.n_verify if self.options.n_verify is not None else ctx.n_verify
        evidence = {
            cid: Evidence(cid, float(len(ranking) - i), detail={"position": i}) for i, cid in enumerate(ranking)
        }
        return ranking, ranking[: max(0, n_verify)], evidence

    # ------------------------------------------------------------------ learning from paid outcomes

    def observe(self, outcome: Outcome) -> None:
        """Forwarded to the inner screener when it observes (the adaptive rule learns in ``learn``)."""
        if isinstance(self.inner, OutcomeObserver):
            self.inner.observe(outcome)

    async def learn(self, outcomes: Sequence[Outcome], round: int) -> dict[str, Any] | None:
        """Score this round's completed pairs, then run the test; the record is the decision event."""
        inner = await self.inner.learn(outcomes, round) if isinstance(self.inner, LearningScreener) else None
        for o in outcomes:
            if o.child_id in self.pending:
                self.seen[o.child_id] = improved(o)
        decided = 0
        for top, other in {pair for pair in self.pending.values() if all(c in self.seen for c in pair)}:
            del self.pending[top], self.pending[other]
            decided += self.rule.add_pair(self.seen.pop(top), self.seen.pop(other))
        changed = self.rule.decide(round)
        if not decided and not changed and inner is None:
            return None
        record: dict[str, Any] = {"adaptive": self.rule.record()}
        if changed:
            record["adaptive"]["decision"] = self.decisions[-1]
        if inner is not None:
            record["inner"] = inner
        return record

    def restore(self, records: Sequence[dict[str, Any]]) -> None:
        """Rebuild the rule from the stored ``learn`` records; the inner screener gets its own."""
        if isinstance(self.inner, LearningScreener):
            self.inner.restore([rec["inner"] for rec in records if "inner" in rec])
        self.rule.restore([rec["adaptive"] for rec in records if "adaptive" in rec])
