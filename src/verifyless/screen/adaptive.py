"""Adaptive screening (``screener: adaptive``): screen only while the paid outcomes say it helps.

``AdaptiveScreener(inner, options)`` wraps any screener and decides, from a
stated prior and a documented test, whether to screen at all, how often to
audit and (within user bounds) how many votes k the inner screener samples.
Two rules (``rule``), both sequential tests at round boundaries:

**Evidence.** A *verdict unit* is every verified candidate the inner screener
scored: its score (``Evidence.rank_value``) and its paid label (improved on
its parent or not, ``outcome.improved``: a failed child did not). The
*concordance* is the share of (improved, not improved) unit pairs in which
the improved one had the higher score, ties one half (Mann-Whitney); under
the null "scores say nothing about labels" it is 0.5 whichever candidates
were verified, so the screener's own (selected) picks are valid evidence and
no audit is needed to get it. Its z uses the null's standard deviation with
the tie correction, and it is worth ``min(n improved, n other) x share of
untied pairs`` units (0 for a rank-only screener, whose picks all score the
same). An *audited pair* (rule ``pairs``' only evidence) is an expansion in
which the screener's first choice and one other drawn with ``ctx.rng`` are
both verified (one verification more): a win if the pick improved and the
random one did not, a loss if the reverse, nothing otherwise. Pairs share
parent and time, so a search that gets harder as it goes cannot bias them.

**Rule ``verdicts``** (the default):

* prior: Beta(``prior_win x prior_weight``, ``(1 - prior_win) x
  prior_weight``) on the pairs' win rate; p = P(screener beats random) is
  Stouffer's combination of the pairs posterior's z (weight pairs + prior
  weight) and the concordance's z (weight its units);
* trial: until ``trial`` units (pairs + verdict units), the screener picks
  and an expansion is audited with probability ``explore x taper / (taper +
  scored)``, ``scored`` = the screener's paid picks once their scores differ
  (so audits taper as verdicts accrue and stay at ``explore`` for a rank-only
  screener). With ``trial_picks: random`` the trial is a *shadow*: a uniform
  draw picks, the screener only scores (no audits; unbiased verdicts;
  random-quality picks until the test says on);
* test, every round boundary after the trial: p >= ``confidence`` -> ``on``
  (audited at ``audit x taper / (taper + scored)``); p < ``off_below`` ->
  ``off``, final: uniform random picks, the inner screener never called
  again; in between the state stays.
* k (only with ``k_min`` and ``k_max``): starts at ``k_max``; after a round
  whose picks' votes were all unanimous k falls by one, after one with a
  split vote it rises by one, within the bounds; the wrapper sets ``k`` on an
  inner screener that has one (``critic``). N, m and the engine's
  ``audit_rate`` are not chosen (they would need engine hooks).

**Rule ``pairs``** (the first rule, kept for comparison): evidence = audited
pairs only; audited at ``explore`` until ``trial`` pairs are decided; then
p >= ``confidence`` keeps screening on (audited at ``audit``), otherwise off,
final. Its first defaults were ``trial`` 6 and ``explore`` 0.5.

Guarantee (stated; measured in ``bench/adaptive.py``, docs/benchmarks.md):
the cost of safety is the audits, one verification each: with ``verdicts``
about ``explore x taper x ln(1 + n / taper)`` over n expansions for a
screener that scores (0.3-0.6 per run on the pool worlds), ``explore``
per expansion in the trial for a rank-only one; a shadow trial audits
nothing and pays random-quality picks instead. A screener at chance loses
nothing against random by being screened in expectation (its picks are
random-quality) and is random once off; one that helps loses the audits and
any false ``off`` against fixed screening. The test's errors shrink with
``trial``; it looks at every round boundary, so its error rates are those of
a repeated test (not the nominal ``1 - confidence``). Limits: the
concordance compares scores across parents and times: a screener whose
scores drift with time while improvements get rarer can look informative
when it is not (the audited pairs, free of this, keep weight in p). Where
improvements are rare (a search that has climbed), both kinds of evidence
accrue slowly (one unit per improvement, not per verification).

Records: every candidate's ``Evidence.detail["adaptive"]`` holds the
expansion's note (audited, rule, state, reason, k, wins, losses, verdicts,
concordance and its sd, units, p, audit rate), stored with the screening
event and shown on the live progress line (``screen/audit.audit_segment``);
``learn`` returns, per round boundary with new evidence, the cumulative
record plus ``new_verdicts`` (this round's [score, improved, first choice]
units), ``decisions`` (this round's state and k decisions, each with its
evidence and reason) and ``decision`` (the state decision), stored as a
``screener_learn`` event; ``restore`` rebuilds the rule from all of them, so
a resumed run (also after kill -9) continues from the stored record (a round
whose ``screener_learn`` never reached the store is lost for learning, as for
every learning screener). An inner screener that learns is forwarded to
(``observe``; ``learn``/``restore`` with its record under ``inner``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from verifyless.node import Candidate, Evidence, Screening
from verifyless.outcome import Outcome, improved
from verifyless.screen.base import LearningScreener, OutcomeObserver, ScreenContext, Screener
from verifyless.screen.options import BaseOptions

State = Literal["trial", "on", "off"]
Rule = Literal["verdicts", "pairs"]

__all__ = [
    "AdaptiveOptions",
    "AdaptiveRule",
    "AdaptiveScreener",
    "Concordance",
    "Pairs",
    "Verdicts",
    "concordance",
    "p_better",
    "p_combined",
]

_NORMAL = NormalDist()


class AdaptiveOptions(BaseOptions):
    """Options of screener ``adaptive`` (``AdaptiveScreener``); the rule is in ``screen/adaptive.py``."""

    screener: str = Field("critic", description="the wrapped screener's name")
    options: dict[str, Any] = Field(default_factory=dict, description="the wrapped screener's options")
    rule: Rule = Field(
        "verdicts",
        description="evidence: verdicts (every verified pick's score against its paid label, plus audited pairs) "
        "or pairs (audited pairs only, the first rule)",
    )
    prior_win: float = Field(
        0.5, gt=0.0, lt=1.0, description="prior chance that the screener's pick beats a random one"
    )
    prior_weight: float = Field(2.0, gt=0.0, description="pseudo-pairs the prior is worth")
    trial: int = Field(10, ge=1, description="units of evidence before the test decides (the first rule used 6)")
    explore: float = Field(
        0.1, gt=0.0, le=1.0, description="chance an expansion is audited during the trial (the first rule used 0.5)"
    )
    confidence: float = Field(0.8, gt=0.5, lt=1.0, description="P(screener beats random) needed to keep screening")
    audit: float = Field(0.1, ge=0.0, le=1.0, description="chance an expansion is audited while screening is on")
    trial_picks: Literal["screener", "random"] = Field(
        "screener",
        description="rule verdicts: who picks during the trial: the screener (audited at explore), or a uniform "
        "draw that the screener only scores (a shadow trial: no audits, unbiased verdicts, random-quality picks)",
    )
    off_below: float = Field(
        0.5, gt=0.0, lt=1.0, description="rule verdicts: P(screener beats random) below which screening goes off"
    )
    taper: float = Field(
        1.0,
        gt=0.0,
        description="rule verdicts: audit rates are scaled by taper / (taper + paid picks, once their scores differ)",
    )
    candidates_off: int | None = Field(
        1,
        ge=1,
        description="children made per expansion once screening is off (picks are then random, so more children "
        "only cost LLM calls); null keeps engine.candidates",
    )
    k_min: int | None = Field(None, ge=1, description="fewest votes k the rule may set on the inner screener")
    k_max: int | None = Field(None, ge=1, description="most votes k the rule may set (k is chosen when both are set)")

    @model_validator(mode="after")
    def _k_bounds(self) -> AdaptiveOptions:
        if (self.k_min is None) != (self.k_max is None):
            raise ValueError("k_min and k_max are set together (k is chosen within them) or not at all")
        if self.k_min is not None and self.k_max is not None and self.k_min > self.k_max:
            raise ValueError(f"k_min ({self.k_min}) must not exceed k_max ({self.k_max})")
        return self


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


@dataclass(frozen=True)
class Verdicts:
    """The screener's score (``Evidence.rank_value``) of each verified candidate, split by its paid label."""

    improved: tuple[float, ...] = ()
    other: tuple[float, ...] = ()

    @property
    def n(self) -> int:
        return len(self.improved) + len(self.other)

    def add(self, score: float, won: bool) -> Verdicts:
        if won:
            return Verdicts((*self.improved, score), self.other)
        return Verdicts(self.improved, (*self.other, score))


@dataclass(frozen=True)
class Concordance:
    """How often an improving pick outscored a non-improving one (ties one half), against chance 0.5.

    ``value`` is None without both labels; ``sd`` is its standard deviation under the null (scores independent
    of labels, Mann-Whitney with ties); ``units`` = min(n improved, n other) x the share of untied pairs, the
    evidence it is worth (0 when every pair is tied: a rank-only screener gives no verdict evidence).
    """

    value: float | None
    sd: float
    units: float
    n: int

    @property
    def z(self) -> float:
        return 0.0 if self.value is None or self.sd <= 0 else (self.value - 0.5) / self.sd

    def interval(self) -> tuple[float, float] | None:
        """value +- 1.96 sd (the null's sd), clipped to [0, 1]; None without a value."""
        if self.value is None:
            return None
        return max(0.0, self.value - 1.96 * self.sd), min(1.0, self.value + 1.96 * self.sd)


def concordance(verdicts: Verdicts) -> Concordance:
    """The concordance of scores with paid labels (``Concordance``), exact and deterministic."""
    pos, neg = np.asarray(verdicts.improved, float), np.sort(np.asarray(verdicts.other, float))
    n1, n0 = len(pos), len(neg)
    if n1 == 0 or n0 == 0:
        return Concordance(None, 0.0, 0.0, n1 + n0)
    below, upto = np.searchsorted(neg, pos, "left"), np.searchsorted(neg, pos, "right")
    ties = float(np.sum(upto - below))
    value = float(np.sum(below) + 0.5 * ties) / (n1 * n0)
    n = n1 + n0
    _, counts = np.unique(np.concatenate([pos, neg]), return_counts=True)
    correction = float(np.sum(counts**3 - counts)) / (n * (n - 1))
    var_u = n1 * n0 / 12.0 * ((n + 1) - correction)
    untied = 1.0 - ties / (n1 * n0)
    return Concordance(value, math.sqrt(max(var_u, 0.0)) / (n1 * n0), min(n1, n0) * untied, n)


def p_better(pairs: Pairs, prior: tuple[float, float]) -> float:
    """P(w > 1/2) for the Beta posterior of the win rate w, by its normal approximation."""
    a, b = prior[0] + pairs.wins, prior[1] + pairs.losses
    mean, var = a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))
    return 0.5 * (1.0 + math.erf((mean - 0.5) / math.sqrt(2.0 * var)))


def p_combined(pairs: Pairs, verdicts: Concordance, prior: tuple[float, float]) -> float:
    """Stouffer's combination of the pairs posterior (weight pairs + prior) and the verdict z (weight its units)."""
    p = min(max(p_better(pairs, prior), 1e-12), 1 - 1e-12)
    w_pairs, w_verdicts = pairs.n + sum(prior), verdicts.units
    z = (math.sqrt(w_pairs) * _NORMAL.inv_cdf(p) + math.sqrt(w_verdicts) * verdicts.z) / math.sqrt(w_pairs + w_verdicts)
    return _NORMAL.cdf(z)


class AdaptiveRule:
    """The decision rule alone (module docstring), shared by the screener and the pool-world replays.

    It holds the evidence (pairs, verdicts), the state and its reason, the
    chosen k, and the list of decisions; it draws nothing itself (the caller
    passes its draws).
    """

    def __init__(self, options: AdaptiveOptions) -> None:
        self.options = options
        self.state: State = "trial"
        self.reason = "trial: measuring the screener against random picks"
        self.pairs = Pairs()
        self.verdicts = Verdicts()
        self.pick_scores: tuple[float, ...] = ()  # the screener's first choices' scores (the taper reads them)
        self.k: int | None = options.k_max if self.chooses_k else None
        self.decisions: list[dict[str, Any]] = []

    @property
    def shadow(self) -> bool:
        """A shadow trial: the inner screener scores the pool, a uniform draw picks (``trial_picks: random``)."""
        o = self.options
        return self.state == "trial" and o.rule == "verdicts" and o.trial_picks == "random"

    @property
    def screens(self) -> bool:
        """Whether the inner screener is asked at all (False once screening is off)."""
        return self.state != "off"

    @property
    def chooses_k(self) -> bool:
        o = self.options
        return o.k_min is not None and o.k_max is not None

    def units(self) -> float:
        """Units of evidence: decided pairs, plus the verdict units under rule ``verdicts``."""
        return self.pairs.n + (self._concordance().units if self.options.rule == "verdicts" else 0.0)

    def audit_rate(self) -> float:
        """``explore`` in the trial, ``audit`` while on; rule verdicts scales it by ``taper / (taper + scored)``.

        ``scored`` is the number of the screener's own picks paid so far once their scores differ (0 while
        every pick scored the same, as for a rank-only screener, whose evidence is then the audited pairs).
        """
        o = self.options
        if not self.screens or self.shadow:
            return 0.0
        base = o.explore if self.state == "trial" else o.audit
        scored = len(self.pick_scores) if len(set(self.pick_scores)) > 1 else 0
        return base if o.rule == "pairs" else base * o.taper / (o.taper + scored)

    def audits(self, draw: float) -> bool:
        """Whether an expansion with the uniform ``draw`` in [0, 1) is audited."""
        return self.screens and draw < self.audit_rate()

    def add_pair(self, screened: bool, other: bool) -> bool:
        """Score one paid pair (whether the screener's pick improved, whether the random one did)."""
        if screened == other:
            return False
        self.pairs = self.pairs.add(screened)
        return True

    def add_verdict(self, score: float, won: bool, pick: bool = True) -> None:
        """One verified candidate: the screener's score of it, whether it improved, whether it was the pick."""
        self.verdicts = self.verdicts.add(float(score), won)
        if pick:
            self.pick_scores = (*self.pick_scores, float(score))

    def p(self) -> float:
        """P(the screener beats random) from the evidence the rule reads."""
        if self.options.rule == "pairs":
            return p_better(self.pairs, self._prior())
        return p_combined(self.pairs, self._concordance(), self._prior())

    def evidence(self) -> dict[str, Any]:
        c = self._concordance()
        return {
            "wins": self.pairs.wins,
            "losses": self.pairs.losses,
            "verdicts": c.n,
            "concordance": None if c.value is None else round(c.value, 6),
            "concordance_sd": round(c.sd, 6),
            "units": round(self.units(), 6),
            "p_screen_better": round(self.p(), 6),
            "audit_rate": round(self.audit_rate(), 6),
        }

    def decide(self, round: int) -> bool:
        """The sequential test (module docstring); True when the state changed."""
        if self.state == "off" or self.units() < self.options.trial:
            return False
        p = self.p()
        new = self._next(p)
        if new == self.state:
            return False
        self.reason = self._reason(new, p)
        self.state = new
        decision = {"round": round, "state": new, "reason": self.reason, **self.evidence()}
        if new == "off" and self.options.candidates_off is not None:
            n = self.options.candidates_off
            self.reason += f"; {n} candidate{'s' if n > 1 else ''} per expansion from now on (picks are random)"
            decision |= {"reason": self.reason, "candidates": n}
        self.decisions.append(decision)
        return True

    def choose_k(self, round: int, unanimous: Sequence[bool]) -> bool:
        """Fewer votes after a round whose picks were all unanimous, more after a split one; True on a change."""
        lo, hi = self.options.k_min, self.options.k_max
        if self.k is None or lo is None or hi is None or not unanimous or not self.screens:
            return False
        k = max(lo, self.k - 1) if all(unanimous) else min(hi, self.k + 1)
        if k == self.k:
            return False
        split = sum(not u for u in unanimous)
        why = "unanimous" if all(unanimous) else f"split in {split} of {len(unanimous)}"
        reason = f"k {self.k} -> {k}: the picks' votes were {why}"
        evidence = {"screenings": len(unanimous), "unanimous": sum(unanimous)}
        self.decisions.append({"round": round, "knob": "k", "value": k, "reason": reason, **evidence})
        self.k = k
        return True

    def record(self) -> dict[str, Any]:
        """The cumulative state (what ``restore`` reads back, with the verdict units in ``new_verdicts``)."""
        return {"rule": self.options.rule, "state": self.state, "reason": self.reason, "k": self.k, **self.evidence()}

    def restore(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Evidence, state, k and decisions from stored records (the last is cumulative; verdicts add up)."""
        self.decisions = [d for m in records for d in m.get("decisions", [m["decision"]] if "decision" in m else [])]
        self.verdicts, self.pick_scores = Verdicts(), ()
        for m in records:
            for score, won, pick in m.get("new_verdicts", ()):
                self.add_verdict(score, bool(won), bool(pick))
        if records:
            last = records[-1]
            self.pairs = Pairs(int(last["wins"]), int(last["losses"]))
            self.state, self.reason = last["state"], last["reason"]
            self.k = last.get("k", self.k)

    def _next(self, p: float) -> State:
        """Rule pairs: on at ``confidence``, else off. Rule verdicts: off below ``off_below``, on at ``confidence``."""
        o = self.options
        if p >= o.confidence:
            return "on"
        if o.rule == "pairs" or p < o.off_below:
            return "off"
        return self.state

    def _concordance(self) -> Concordance:
        return concordance(self.verdicts)

    def _prior(self) -> tuple[float, float]:
        o = self.options
        return o.prior_win * o.prior_weight, (1.0 - o.prior_win) * o.prior_weight

    def _reason(self, new: State, p: float) -> str:
        c = self._concordance()
        counts = f"its pick beat a random one in {self.pairs.wins} of {self.pairs.n} audited pairs"
        if self.options.rule == "verdicts":
            score = "-" if c.value is None else f"{c.value:.2f}"
            counts += f"; its scores ranked improving picks first in {score} of {c.n} verified (0.5 is chance)"
        if new == "on":
            return f"screening helps: P(screener beats random) = {p:.2f} >= {self.options.confidence}; {counts}"
        below = self.options.confidence if self.options.rule == "pairs" else self.options.off_below
        return f"screening switched off: P(screener beats random) = {p:.2f} < {below}; {counts}"


class AdaptiveScreener:
    """The adaptive wrapper; see the module docstring for the rule, its guarantee and its records."""

    def __init__(self, inner: Screener, options: AdaptiveOptions | None = None) -> None:
        self.inner = inner
        self.options = options or AdaptiveOptions()
        self.name = self.options.name or "adaptive"
        self.rule = AdaptiveRule(self.options)
        self.pending: dict[str, tuple[str, str]] = {}  # candidate id -> (screener's pick, random pick)
        self.seen: dict[str, bool] = {}  # whether pending candidates already paid improved on their parent
        self.scores: dict[str, tuple[float, bool]] = {}  # chosen id -> (the inner screener's score, first choice)
        self.unanimous: list[bool] = []  # per screening since the last round boundary: the pick's votes agreed

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

    def candidates(self, default: int) -> int:
        """Children the engine makes per expansion (``screen.base.candidates_wanted``): ``candidates_off`` once
        screening is off, else ``default``."""
        off = self.options.candidates_off
        return min(default, off) if self.state == "off" and off is not None else default

    # ------------------------------------------------------------------ screening

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        if not self.rule.screens:
            ranking, chosen, evidence = self._shuffle(ctx, candidates)
            audited = False
        else:
            self._set_k()
            inner = await self.inner.screen(ctx, candidates)
            ranking, chosen, evidence = list(inner.ranking), list(inner.chosen), dict(inner.evidence)
            if self.rule.shadow:
                chosen = ctx.rng.sample(ranking, min(len(chosen), len(ranking)))
            audited = self._audit(ctx, ranking, chosen)
            self._remember(chosen, evidence)
        note = {"audited": audited, **self.rule.record()}
        evidence = {cid: replace(ev, detail={**ev.detail, "adaptive": note}) for cid, ev in evidence.items()}
        return Screening(self.name, tuple(ranking), tuple(chosen), evidence, time.monotonic() - started)

    def _set_k(self) -> None:
        """The rule's k on the inner screener, where it has one (``k_min`` and ``k_max`` set)."""
        if self.rule.k is not None and hasattr(self.inner, "k"):
            self.inner.k = self.rule.k

    def _remember(self, chosen: list[str], evidence: Mapping[str, Evidence]) -> None:
        """The scores of the chosen candidates (verdict units once paid) and whether the pick's votes agreed."""
        self.scores.update(
            {cid: (float(evidence[cid].rank_value), i == 0) for i, cid in enumerate(chosen) if cid in evidence}
        )
        votes = evidence[chosen[0]].votes if chosen and chosen[0] in evidence else {}
        if votes:
            self.unanimous.append(max(votes.values()) >= 1.0)

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
        """Score this round's verdicts and completed pairs, run the test, choose k; the record is the decision event."""
        inner = await self.inner.learn(outcomes, round) if isinstance(self.inner, LearningScreener) else None
        before = len(self.decisions)
        new_verdicts = self._verdicts(outcomes)
        decided = self._pairs(outcomes)
        changed = self.rule.decide(round)
        self.rule.choose_k(round, self.unanimous)
        self.unanimous = []
        if not decided and not new_verdicts and len(self.decisions) == before and inner is None:
            return None
        record: dict[str, Any] = {"adaptive": {**self.rule.record(), "new_verdicts": new_verdicts}}
        if len(self.decisions) > before:
            record["adaptive"]["decisions"] = self.decisions[before:]
        if changed:
            record["adaptive"]["decision"] = next(d for d in reversed(self.decisions) if "state" in d)
        if inner is not None:
            record["inner"] = inner
        return record

    def _verdicts(self, outcomes: Sequence[Outcome]) -> list[list[float]]:
        """Verdict units of this round: [score, improved, first choice] (0/1 flags) per paid scored candidate."""
        units = []
        for o in outcomes:
            if o.child_id in self.scores:
                won = improved(o)
                score, pick = self.scores.pop(o.child_id)
                self.rule.add_verdict(score, won, pick)
                units.append([score, float(won), float(pick)])
        return units

    def _pairs(self, outcomes: Sequence[Outcome]) -> int:
        """Score the audited pairs completed this round; how many were decided (discordant)."""
        for o in outcomes:
            if o.child_id in self.pending:
                self.seen[o.child_id] = improved(o)
        decided = 0
        for top, other in {pair for pair in self.pending.values() if all(c in self.seen for c in pair)}:
            del self.pending[top], self.pending[other]
            decided += self.rule.add_pair(self.seen.pop(top), self.seen.pop(other))
        return decided

    def restore(self, records: Sequence[dict[str, Any]]) -> None:
        """Rebuild the rule from the stored ``learn`` records; the inner screener gets its own."""
        if isinstance(self.inner, LearningScreener):
            self.inner.restore([rec["inner"] for rec in records if "inner" in rec])
        self.rule.restore([rec["adaptive"] for rec in records if "adaptive" in rec])
