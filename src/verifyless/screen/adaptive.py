"""Adaptive screening (``screener: adaptive``): screen only while the paid outcomes say it helps.

``AdaptiveScreener(inner, options)`` wraps any screener and decides, from
evidence that every paid verification adds to, whether screening by the
inner screener helps, is at chance or hurts; a screener that does not help
is switched off (final: uniform random picks from then on, the inner
screener never called again for screening). It exists for one case above
all: the user's critic is worse than random on their task and nobody can
know that in advance.

**Evidence: units x in [-1, 1], each worth as much whatever the search's
improvement rate.** Two kinds, both read from outcomes already paid for:

* *canary* (no verification): at every round boundary, ``canaries`` (4; once
  ``on``, ``canaries_on``, 1) re-presentations of known outcomes. A canary is a triple of paid programs
  (P, A, B) with fitness f(A) > f(P) > f(B) (a failed program is below every
  score): the inner screener screens A and B, in a random order, as children
  of P, a parent/child pairing it has not seen (a triple whose A or B is a
  true child of P is not drawn; no triple is drawn twice). x = +1 when it
  ranks A (the better) first, -1 when it ranks B first, 0 when its scores
  tie. Costs screener calls only (two candidates each). An inner screener
  that learns from paid outcomes (``OutcomeObserver``, ``LearningScreener``:
  the surrogate, test-time critics) would have memorised them, so a stable
  ``holdout`` share (0.25) of outcomes is kept from it and only those appear
  as A or B (measured: the surrogate scored +1.00 on canaries it had been
  told of, while its picks were at chance).
* *pair* (one verification): with probability ``audit`` (0.1) per
  expansion in the trial and ``audit_on`` (0.02) once on, one random unchosen
  sibling is verified beside the pick; x = sign(f(pick) - f(sibling)), a
  pair whose two programs score the same (both failed included) is no unit.
  With ``sizing: evidence`` (what a new run around a learnt critic-rm records)
  each rate is scaled by the bets (``AdaptiveRule.scale``): down to a quarter
  as the help bet nears its threshold (clearly right: audits cost less), up to
  twice as the harm bet nears its own (doubtful: caught sooner). The rate is a
  function of the stored units, so a resume audits at the same rate. An inner
  critic that abstains (``abstaining``: a gated critic-rm picking at random
  until its evidence says its head helps) is neither audited nor shown
  canaries: its picks are random already, and the test starts when it ranks
  (canaries then go to its ``probe``, the head's ranking whatever its gate).

Under the null "the screener's preference is independent of which program is
better", every unit has mean 0 given the past: a pair's two programs are
exchangeable (the sibling is a uniform draw), and a canary's order is a coin
flip over a pair whose better member the screener cannot see. The mean of x
is P(right) - P(wrong): 1 for a perfect screener, 0 at chance, -1 for one
that always prefers the worse program.

**The test: two bets, anytime-valid (testing by betting, Ville's inequality).**
``help`` bets against "no better than random" (mean x <= 0): its wealth
multiplies by 1 + l x; ``harm`` bets against "helps by at least ``margin``"
(mean x >= margin): its wealth multiplies by 1 + l (margin - x). Each bet
size l is predictable (from the units before it and two pseudo-units at
chance, at most 0.75: the harm bet starts betting on "no help", the help bet
starts at 0), so either wealth is a nonnegative
supermartingale under its null, and P(it ever reaches 1 / ``alpha``) <=
``alpha`` however often it is looked at. Every round boundary: harm's wealth
>= 1 / alpha -> ``off`` (final; the screener hurts or does not help by the
margin); else help's wealth >= 1 / alpha -> ``on`` (still audited, at
``audit_on``, and still tested: a screener that turns harmful is switched off
later). In between the state is ``trial`` and the screener picks. A third
bet, against "at least as good as random" (the harm bet at margin 0), only
words the reason: an ``off`` is "hurting" when it too has crossed, "not
helping and looks harmful" when the units' mean is below 0, else "not
helping enough".

Error rates (stated, measured in ``bench/adaptive.py``): a screener whose
mean x is at least ``margin`` is ever switched off with probability at most
``alpha``; one no better than random is ever declared helpful with
probability at most ``alpha``. A screener between 0 and the margin is
switched off eventually (it is not worth its LLM calls). The nominal rates
assume the null above; canaries also assume that a screener's errors on
distinct triples are independent (a critic that misreads one program in
every pairing breaks it a little: a pair unit never does). Cost in
verifications: the audits (``audit`` per trial expansion, ``audit_on``
after), and the screener's picks until ``off``; canaries cost
``2 x canaries`` candidate screenings per round boundary in the trial
(``2 x canaries_on`` once on) and no verification. The verifications to a decision are about
ln(1 / alpha) / (l x mean x) units (a few for a screener that is always
wrong, hundreds for one just short of the margin); ``AdaptiveRule.needs``
estimates them from the units so far and the reason says it.

k (only with ``k_min`` and ``k_max``): starts at ``k_max``; after a round whose
picks' votes were all unanimous k falls by one, after one with a split vote it
rises by one, within the bounds (on an inner screener that has a ``k``).

Records: every candidate's ``Evidence.detail["adaptive"]`` holds the
expansion's note (audited, state, reason, units, mean, p values, k), stored
with the screening event and shown on the live progress line
(``screen/audit.audit_segment``); ``learn`` returns, per round boundary, the
cumulative record plus ``new_units`` (this round's [kind, x]), ``new_known``
(the paid programs the canaries may draw from: candidate, raw score,
fitness), ``decisions`` and ``decision`` (the state decision with its
evidence and reason), stored as a ``screener_learn`` event; ``restore``
rebuilds the rule and the canary library from all of them, so a resumed run
(also after kill -9) continues from the stored evidence and draws the same
canaries. An inner screener that learns is forwarded to (``observe``;
``learn``/``restore`` with its record under ``inner``).

The first two rules (``verdicts``: a Mann-Whitney concordance of scores with
improved-or-not labels; ``pairs``: audited pairs decided by improved-or-not)
accrued one unit per *improvement* and never switched off an inverted critic
(docs/benchmarks.md); they were removed. Their concordance lives on in the
live audit of any screener (``screen/audit.py``); the bets are
``screen/bets.py``.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field, model_validator

from verifyless.events import EventRecord
from verifyless.node import Candidate, Evidence, Idea, Operator, Screening, content_hash
from verifyless.outcome import Outcome
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import LearningScreener, OutcomeObserver, ScreenContext, Screener
from verifyless.screen.bets import Bets
from verifyless.screen.options import BaseOptions

log = logging.getLogger(__name__)

State = Literal["trial", "on", "off"]

__all__ = [
    "AdaptiveOptions",
    "AdaptiveRule",
    "AdaptiveScreener",
    "Known",
]


class AdaptiveOptions(BaseOptions):
    """Options of screener ``adaptive`` (``AdaptiveScreener``); the rule is in ``screen/adaptive.py``."""

    screener: str = Field(
        "critic-rm",
        description="the wrapped screener's name (default: critic-rm, the head learnt from this task's paid outcomes)",
    )
    options: dict[str, Any] = Field(default_factory=dict, description="the wrapped screener's options")
    rule: Literal["betting"] = Field(
        "betting",
        description="the test: betting (canaries and audited pairs, two anytime-valid bets)",
    )
    alpha: float = Field(
        0.1, gt=0.0, lt=0.5, description="error rate of each bet: switching off a screener that helps by the margin"
    )
    margin: float = Field(
        0.3,
        ge=0.0,
        lt=1.0,
        description="how much better than random screening must be to stay on: P(right) - P(wrong) on the units",
    )
    canaries: int = Field(
        4,
        ge=0,
        description="canaries per round boundary before a decision: known outcomes re-presented to the screener "
        "(two candidates each; screener calls, no verification)",
    )
    canaries_on: int = Field(1, ge=0, description="canaries per round boundary once screening is on (still tested)")
    audit: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="chance an expansion also verifies a random sibling of the pick (a pair) before a decision",
    )
    audit_on: float = Field(
        0.02, ge=0.0, le=1.0, description="the same chance once screening is on (the canaries keep testing)"
    )
    sizing: Literal["evidence", "fixed"] | None = Field(
        None,
        description="audit rates: evidence (audit / audit_on scaled by the bets: down to a quarter when the screener "
        "has been clearly right, up to twice when it looks unhelpful), fixed (as given); recorded by a new run "
        "around a learnt critic-rm (evidence); unset, as in runs stored before it: fixed",
    )
    holdout: float = Field(
        0.25,
        ge=0.0,
        lt=1.0,
        description="share of paid outcomes kept from an inner screener that learns from outcomes, so that canaries "
        "show it only programs it was never told of (a learner has memorised the rest); unused for other screeners",
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
class Known:
    """A paid program the canaries may draw from: as a candidate, its raw score, its oriented fitness (None: failed)."""

    candidate: Candidate
    score: float | None
    fitness: float | None
    told: bool = False  # the inner screener learnt this outcome (a canary never shows it as A or B)

    @property
    def parent(self) -> ParentInfo:
        c = self.candidate
        return ParentInfo(id=c.id, program=c.program, score=self.score, summary=c.summary, idea=c.idea)

    def row(self) -> dict[str, Any]:
        return {"candidate": self.candidate.to_dict(), "score": self.score, "fitness": self.fitness, "told": self.told}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Known:
        return cls(Candidate.from_dict(row["candidate"]), row.get("score"), row.get("fitness"), bool(row.get("told")))


def _below(a: float | None, b: float | None) -> bool:
    """Whether fitness ``a`` is strictly worse than ``b`` (a failed program, None, is below every score)."""
    if b is None:
        return False
    return a is None or a < b


class AdaptiveRule:
    """The decision rule alone (module docstring): the units, the two bets, the state and its reason, k.

    It draws nothing itself: the screener passes the units and the audit draws.
    """

    def __init__(self, options: AdaptiveOptions) -> None:
        self.options = options
        self.state: State = "trial"
        self.bets = Bets(options.margin)
        self.worse = Bets(0.0)  # its harm bet is against "at least as good as random": what "hurting" means
        self.kinds: dict[str, int] = {"canary": 0, "pair": 0}
        self.verifications = 0  # paid verifications the screener was told of
        self.decided_at: int | None = None  # verifications when the state last changed
        self.k: int | None = options.k_max if self.chooses_k else None
        self.decisions: list[dict[str, Any]] = []
        self.reason = self.summary()

    @property
    def screens(self) -> bool:
        """Whether the inner screener is asked at all (False once screening is off)."""
        return self.state != "off"

    @property
    def chooses_k(self) -> bool:
        o = self.options
        return o.k_min is not None and o.k_max is not None

    def audit_rate(self) -> float:
        """``audit`` in the trial, ``audit_on`` once on, 0 once off; with ``sizing: evidence`` times ``scale``."""
        if not self.screens:
            return 0.0
        base = self.options.audit_on if self.state == "on" else self.options.audit
        return min(1.0, base * self.scale()) if self.options.sizing == "evidence" else base

    def scale(self) -> float:
        """The evidence's factor on the audit rate: (1 - 0.75 c) (1 + s), where c and s in [0, 1] are how far the
        help and the harm bets' wealths have come towards 1 / alpha (c = 1: clearly right, a quarter of the audits;
        s = 1: about to be switched off, twice the audits, so a harmful screener is caught sooner)."""
        threshold = math.log(1 / self.options.alpha)
        right = min(1.0, max(0.0, self.bets.help.log / threshold))
        doubt = min(1.0, max(0.0, self.bets.harm.log / threshold))
        return (1.0 - 0.75 * right) * (1.0 + doubt)

    def audits(self, draw: float) -> bool:
        """Whether an expansion with the uniform ``draw`` in [0, 1) is audited."""
        return draw < self.audit_rate()

    def add(self, kind: str, x: float) -> None:
        """One unit of evidence (``canary`` or ``pair``), x in [-1, 1]."""
        self.bets, self.worse = self.bets.add(x), self.worse.add(x)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def p_values(self) -> tuple[float, float]:
        """(p that screening is no better than random, p that it helps by the margin): anytime-valid."""
        return self.bets.p_values()

    def needs(self) -> int | None:
        """About how many more verifications until a decision, from the units so far (None: none in sight)."""
        rate, per = self.bets.rate(), self.bets.n / max(1, self.verifications)
        if rate <= 1e-6 or per <= 0:
            return None
        left = math.log(1 / self.options.alpha) - max(self.bets.help.log, self.bets.harm.log)
        return max(1, math.ceil(left / rate / per))

    def evidence(self) -> dict[str, Any]:
        mean = self.bets.mean
        p_help, p_harm = self.p_values()
        return {
            "units": self.bets.n,
            "canaries": self.kinds.get("canary", 0),
            "pairs": self.kinds.get("pair", 0),
            "mean": None if mean is None else round(mean, 6),
            "p_no_help": round(p_help, 6),
            "p_helps": round(p_harm, 6),
            "p_not_worse": round(self.worse.p_values()[1], 6),
            "verifications": self.verifications,
            "needs": self.needs() if self.state == "trial" else None,
            "audit_rate": round(self.audit_rate(), 6),
        }

    def decide(self, round: int) -> bool:
        """The two bets at a round boundary (module docstring); True when the state changed."""
        if self.state == "off":
            return False
        threshold = math.log(1 / self.options.alpha)
        new: State = self.state
        if self.bets.harm.log >= threshold:
            new = "off"
        elif self.state == "trial" and self.bets.help.log >= threshold:
            new = "on"
        if new == self.state:
            self.reason = self.summary()
            return False
        self.state, self.decided_at = new, self.verifications
        self.reason = self.summary()
        decision = {"round": round, "state": new, "reason": self.reason, **self.evidence()}
        if new == "off" and self.options.candidates_off is not None:
            n = self.options.candidates_off
            self.reason += f"; {n} candidate{'s' if n > 1 else ''} per expansion from now on (picks are random)"
            decision |= {"reason": self.reason, "candidates": n}
        self.decisions.append(decision)
        log.info("safety net: %s", self.reason)
        return True

    def summary(self) -> str:
        """What the evidence says, in one sentence for the user (the reason of the state)."""
        p_help, p_harm = self.p_values()
        mean, n = self.bets.mean, self.bets.n
        units = f"{n} units ({self.kinds.get('canary', 0)} canaries, {self.kinds.get('pair', 0)} audited pairs)"
        said = units if mean is None else f"{units}, right minus wrong {mean:+.2f}"
        if self.state == "off":
            p_worse = self.worse.p_values()[1]
            helps = f"p = {p_harm:.3f} that it helps by {self.options.margin}"
            if p_worse <= self.options.alpha:
                verdict = f"hurting (p = {p_worse:.3f} that it is at least as good as random)"
            elif mean is not None and mean < 0:
                verdict = f"not helping and looks harmful ({helps})"
            else:
                verdict = f"not helping enough ({helps})"
            return f"screening is {verdict}, switched off at verification {self.decided_at}; {said}"
        if self.state == "on":
            return (
                f"screening is helping (p = {p_help:.3f} that it is no better than random), on since verification "
                f"{self.decided_at}; {said}; still tested"
            )
        need = self.needs()
        more = f"needs about {need} more verifications" if need is not None else "no decision in sight yet"
        return f"not enough evidence yet ({more}); {said}"

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
        """The cumulative state (what ``restore`` checks against; the units are in ``new_units``)."""
        return {
            "rule": self.options.rule,
            "state": self.state,
            "reason": self.reason,
            "k": self.k,
            "decided_at": self.decided_at,
            **self.evidence(),
        }

    def restore(self, records: Sequence[Mapping[str, Any]]) -> None:
        """Units, state, k and decisions from stored records (the last is cumulative; units add up)."""
        self.decisions = [d for m in records for d in m.get("decisions", [m["decision"]] if "decision" in m else [])]
        self.bets, self.worse = Bets(self.options.margin), Bets(0.0)
        self.kinds = {"canary": 0, "pair": 0}
        for m in records:
            for kind, x in m.get("new_units", ()):
                self.add(str(kind), float(x))
        if records:
            last = records[-1]
            self.state, self.reason = last["state"], last["reason"]
            self.k, self.decided_at = last.get("k", self.k), last.get("decided_at")
            self.verifications = int(last.get("verifications", 0))


class AdaptiveScreener:
    """The adaptive wrapper; see the module docstring for the rule, its guarantee and its records."""

    def __init__(self, inner: Screener, options: AdaptiveOptions | None = None) -> None:
        self.inner = inner
        self.options = options or AdaptiveOptions()
        self.name = self.options.name or "adaptive"
        self.rule = AdaptiveRule(self.options)
        self.pending: dict[str, tuple[str, str]] = {}  # audited candidate id -> (screener's pick, random sibling)
        self.paid: dict[str, float | None] = {}  # fitness of paid audited candidates whose pair is incomplete
        self.known: dict[str, Known] = {}  # the canary library: paid programs by id
        self.seen: dict[str, Candidate] = {}  # candidates screened and not yet paid (or never paid)
        self.parents: dict[str, ParentInfo] = {}  # parents screened for (the baseline enters the library so)
        self.used: set[tuple[str, str, str]] = set()  # canary triples drawn
        self.drawn: list[list[str]] = []  # canary triples drawn this round (stored as new_triples)
        self.context: ScreenContext | None = None  # the last screening's context (the canaries' template)
        self.unanimous: list[bool] = []  # per screening since the last round boundary: the pick's votes agreed

    @property
    def state(self) -> State:
        return self.rule.state

    def start_events(self) -> list[EventRecord]:
        """The wrapped screener's events for the start of a new run (``critic-rm``'s warm start), if any."""
        events = getattr(self.inner, "start_events", None)
        return list(events()) if events is not None else []

    @property
    def reason(self) -> str:
        return self.rule.reason

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
            self.context = ctx
            self.seen.update({c.id: c for c in candidates})
            if ctx.parent.id is not None:
                self.parents.setdefault(ctx.parent.id, ctx.parent)
            inner = await self.inner.screen(ctx, candidates)
            ranking, chosen, evidence = list(inner.ranking), list(inner.chosen), dict(inner.evidence)
            audited = self._audit(ctx, ranking, chosen)
            self._votes(chosen, evidence)
        note = {"audited": audited, **self.rule.record()}
        evidence = {cid: replace(ev, detail={**ev.detail, "adaptive": note}) for cid, ev in evidence.items()}
        return Screening(self.name, tuple(ranking), tuple(chosen), evidence, time.monotonic() - started)

    def _set_k(self) -> None:
        """The rule's k on the inner screener, where it has one (``k_min`` and ``k_max`` set)."""
        if self.rule.k is not None and hasattr(self.inner, "k"):
            self.inner.k = self.rule.k

    def _votes(self, chosen: list[str], evidence: Mapping[str, Evidence]) -> None:
        votes = evidence[chosen[0]].votes if chosen and chosen[0] in evidence else {}
        if votes:
            self.unanimous.append(max(votes.values()) >= 1.0)

    def _audit(self, ctx: ScreenContext, ranking: list[str], chosen: list[str]) -> bool:
        """Maybe add one random unchosen candidate to ``chosen`` and remember the pair; whether it did."""
        rest = [cid for cid in ranking if cid not in chosen]
        if getattr(self.inner, "abstaining", False):
            return False  # the pick is random already: a random sibling beside it would test nothing
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

    @property
    def learns(self) -> bool:
        """Whether the inner screener learns from paid outcomes (then ``holdout`` of them are kept from it)."""
        # a screener may say it does not learn although it can observe (critic-rm with a fixed head)
        return isinstance(self.inner, OutcomeObserver | LearningScreener) and getattr(self.inner, "learns", True)

    @property
    def guarded(self) -> bool:
        """Whether canaries keep to held-out outcomes (a learning inner screener and ``holdout`` > 0)."""
        return self.learns and self.options.holdout > 0

    def held(self, child_id: str) -> bool:
        """Whether this outcome is kept from a learning inner screener: a stable hash of the id, share ``holdout``."""
        if not self.guarded:
            return False
        digest = int(hashlib.sha256(f"adaptive-holdout:{child_id}".encode()).hexdigest()[:8], 16)
        return digest / 2**32 < self.options.holdout

    def observe(self, outcome: Outcome) -> None:
        """Forwarded to the inner screener when it observes, except the held-out outcomes (canary material)."""
        if isinstance(self.inner, OutcomeObserver) and not self.held(outcome.child_id):
            self.inner.observe(outcome)

    async def learn(self, outcomes: Sequence[Outcome], round: int) -> dict[str, Any] | None:
        """Take this round's paid outcomes, score completed pairs, run the canaries, then the test and k."""
        told = [o for o in outcomes if not self.held(o.child_id)]
        inner = await self.inner.learn(told, round) if isinstance(self.inner, LearningScreener) else None
        full = [o for o in outcomes if not o.low_fidelity]
        self.rule.verifications += len(full)
        new_known = self._know(full)
        units = self._pairs(full)
        if self.rule.screens and not getattr(self.inner, "abstaining", False):
            units += await self._canaries(round)  # an abstaining critic ranks nothing yet: nothing to test
        for kind, x in units:
            self.rule.add(kind, x)
        before = len(self.decisions)
        changed = self.rule.decide(round)
        self.rule.choose_k(round, self.unanimous)
        self.unanimous = []
        if not full and not units and len(self.decisions) == before and inner is None:
            self.drawn = []
            return None
        record: dict[str, Any] = {
            "adaptive": {
                **self.rule.record(),
                "new_units": [list(u) for u in units],
                "new_known": new_known,
                "new_triples": self.drawn,
            }
        }
        self.drawn = []
        if len(self.decisions) > before:
            record["adaptive"]["decisions"] = self.decisions[before:]
        if changed:
            record["adaptive"]["decision"] = next(d for d in reversed(self.decisions) if "state" in d)
        if inner is not None:
            record["inner"] = inner
        return record

    def _know(self, outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
        """Add the paid programs (and a parent seen for the first time, e.g. the baseline) to the canary library."""
        rows: list[dict[str, Any]] = []
        for o in outcomes:
            parent = self.parents.get(o.parent_id)
            if parent is not None and parent.program and o.parent_id not in self.known and o.parent_fitness is not None:
                rows.append(self._learnt(Known(_as_candidate(parent), parent.score, o.parent_fitness, self.guarded)))
            child = self.seen.pop(o.child_id, None) or o.candidate
            if child is not None and child.program and o.child_id not in self.known:  # a program a canary can show
                fitness, told = None if o.failed else o.child_fitness, self.guarded and not self.held(o.child_id)
                rows.append(self._learnt(Known(child, None if o.failed else o.child_score, fitness, told)))
        return rows

    def _learnt(self, known: Known) -> dict[str, Any]:
        self.known[known.candidate.id] = known
        return known.row()

    def _pairs(self, outcomes: Sequence[Outcome]) -> list[tuple[str, float]]:
        """Units of the audited pairs completed this round: the sign of pick minus sibling (equal: no unit)."""
        for o in outcomes:
            if o.child_id in self.pending:
                self.paid[o.child_id] = None if o.failed else o.child_fitness
        units = []
        for top, other in sorted({pair for pair in self.pending.values() if all(c in self.paid for c in pair)}):
            del self.pending[top], self.pending[other]
            a, b = self.paid.pop(top), self.paid.pop(other)
            if _below(b, a) or _below(a, b):
                units.append(("pair", 1.0 if _below(b, a) else -1.0))
        return units

    async def _canaries(self, round: int) -> list[tuple[str, float]]:
        """``canaries`` known triples re-presented to the inner screener (module docstring); their units."""
        if self.context is None:
            return []
        units = []
        for i in range(self.options.canaries_on if self.state == "on" else self.options.canaries):
            rng = random.Random(f"adaptive-canary:{round}:{i}:{len(self.used)}")
            triple = self._triple(rng)
            if triple is None:
                break
            self.drawn.append([k.candidate.id for k in triple])
            units.append(("canary", await self._canary(triple, rng)))
        return units

    def _triple(self, rng: random.Random) -> tuple[Known, Known, Known] | None:
        """A fresh (P, A, B) with f(A) > f(P) > f(B), neither A nor B a true child of P; None when none is left."""
        ok = sorted((k for k in self.known.values() if k.fitness is not None), key=lambda k: k.candidate.id)
        every = sorted(self.known.values(), key=lambda k: k.candidate.id)
        for _ in range(32):
            if not ok:
                return None
            p = rng.choice(ok)
            pid = p.candidate.id
            better = [k for k in ok if _below(p.fitness, k.fitness) and k.candidate.parent_id != pid and not k.told]
            worse = [k for k in every if _below(k.fitness, p.fitness) and k.candidate.parent_id != pid and not k.told]
            if better and worse:
                a, b = rng.choice(better), rng.choice(worse)
                key = (pid, a.candidate.id, b.candidate.id)
                if key not in self.used:
                    self.used.add(key)
                    return p, a, b
        return None

    async def _canary(self, triple: tuple[Known, Known, Known], rng: random.Random) -> float:
        """+1 when the inner screener ranks the better program first, -1 the worse, 0 when its scores tie."""
        assert self.context is not None
        p, a, b = triple
        pair = [a.candidate, b.candidate]
        rng.shuffle(pair)
        ctx = replace(self.context, parent=p.parent, rng=rng, n_verify=1, pilot=None)  # a canary pays no pilot
        probe = getattr(self.inner, "probe", None)  # a gated critic's head, measured even while it abstains
        screening = await (probe or self.inner.screen)(ctx, pair)
        first = screening.chosen[0] if screening.chosen else screening.ranking[0]
        ev = screening.evidence
        if a.candidate.id in ev and b.candidate.id in ev:
            if ev[a.candidate.id].rank_value == ev[b.candidate.id].rank_value:
                return 0.0
        return 1.0 if first == a.candidate.id else -1.0

    def restore(self, records: Sequence[dict[str, Any]]) -> None:
        """Rebuild the rule and the canary library from the stored ``learn`` records; the inner gets its own."""
        if isinstance(self.inner, LearningScreener):
            self.inner.restore([rec["inner"] for rec in records if "inner" in rec])
        mine = [rec["adaptive"] for rec in records if "adaptive" in rec]
        self.rule.restore(mine)
        for m in mine:
            for row in m.get("new_known", ()):
                known = Known.from_row(row)
                self.known[known.candidate.id] = known
        self.used = {(str(t[0]), str(t[1]), str(t[2])) for m in mine for t in m.get("new_triples", ())}


def _as_candidate(parent: ParentInfo) -> Candidate:
    """A parent seen by the screener (e.g. the baseline) as a candidate a canary can present."""
    return Candidate(
        id=str(parent.id),
        parent_id=None,
        operator=Operator.IMPROVE,
        idea=parent.idea or Idea(text=""),
        program=parent.program,
        program_hash=content_hash(parent.program),
        summary=parent.summary,
    )
