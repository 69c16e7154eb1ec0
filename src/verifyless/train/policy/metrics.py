"""Numbers for the training log and the benchmark, computed from stored ``policy_idea`` payloads.

* ``step_stats``: one step's ``StepStats``.
* ``share_verified`` / ``rewarded_per_verification`` / ``agreement``: the
  three headline numbers of critic-in-the-loop training (paper, Section 5:
  36.3% verified, 2.75x more ideas rewarded per verification than verify-all).
* ``audit_run``: the critic's reward error over a whole stored run -- a
  confusion table of the critic's verdict (improve or not) against the
  verifier's outcome, for every idea that has both, split into ``confident``
  (u < T: the critic's verdict was, or would have been, the reward) and
  ``routed`` (u >= T: verified because the critic was unsure), by the
  router's own rule (``metrics.critic.route``). The verifier's outcome
  (``improved``) is the one label rule's (``verifyless.outcome.improved``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from verifyless.screen.ranking import route
from verifyless.train.policy.contract import StepStats
from verifyless.train.policy.events import PolicyIdea

Payload = Mapping[str, Any]


def _rewarded(ideas: Sequence[Payload]) -> int:
    return sum(1 for p in ideas if p.get("source") in ("critic", "verifier"))


def _paid(ideas: Sequence[Payload]) -> int:
    return sum(int(p.get("verifications", 0)) for p in ideas)


def _both(ideas: Iterable[Payload]) -> list[Payload]:
    """Ideas with a critic verdict and a verifier outcome."""
    return [p for p in ideas if p.get("critic_improve") is not None and p.get("improved") is not None]


def share_verified(ideas: Sequence[Payload]) -> float:
    """Share of ideas whose child was really verified (0.0 for no ideas)."""
    return sum(1 for p in ideas if p.get("improved") is not None) / len(ideas) if ideas else 0.0


def rewarded_per_verification(ideas: Sequence[Payload]) -> float:
    """Ideas that got a critic or verifier reward per paid verification (repairs and audits count as paid).

    With no paid verification the count of rewarded ideas itself is returned (per ``max(1, paid)``),
    so the number stays finite in the log.
    """
    return _rewarded(ideas) / max(1, _paid(ideas))


def agreement(ideas: Sequence[Payload]) -> float | None:
    """Share of ideas with both a critic verdict and a verification where they agree; None when none."""
    both = _both(ideas)
    if not both:
        return None
    return sum(1 for p in both if bool(p["critic_improve"]) == bool(p["improved"])) / len(both)


def step_stats(
    step: int, ideas: Sequence[Payload], *, verifications_left: int, parents_advanced: int, extra_verified: int = 0
) -> StepStats:
    """``StepStats`` for one step from its ``policy_idea`` payloads (``extra_verified``: parent checks)."""
    n = len(ideas)
    return StepStats(
        step=step,
        ideas=n,
        mean_reward=sum(float(p["reward"]) for p in ideas) / n if n else 0.0,
        verified=sum(1 for p in ideas if p.get("improved") is not None),
        share_verified=share_verified(ideas),
        rewarded_per_verification=_rewarded(ideas) / max(1, _paid(ideas) + extra_verified),
        audited=len(_both(ideas)),
        agreement=agreement(ideas),
        tokens=sum(int(p.get("tokens", 0)) for p in ideas),
        verify_seconds=sum(float(p.get("verify_seconds", 0.0)) for p in ideas),
        verifications_left=verifications_left,
        parents_advanced=parents_advanced,
    )


@dataclass(frozen=True)
class Confusion:
    """Critic verdict (rows) against verifier outcome (columns), improve vs not."""

    tp: int = 0  # critic improve, verifier improve
    fp: int = 0  # critic improve, verifier not
    fn: int = 0  # critic not, verifier improve
    tn: int = 0  # critic not, verifier not

    @property
    def n(self) -> int:
        return self.tp + self.fp + self.fn + self.tn

    @property
    def accuracy(self) -> float | None:
        return (self.tp + self.tn) / self.n if self.n else None

    @property
    def reward_error(self) -> float | None:
        """Share of ideas whose critic reward would have had the wrong sign."""
        return (self.fp + self.fn) / self.n if self.n else None

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "n": self.n,
            "accuracy": self.accuracy,
            "reward_error": self.reward_error,
        }


def confusion(ideas: Iterable[Payload]) -> Confusion:
    counts = {"tp": 0, "fp": 0, "fn": 0, "tn": 0}
    for p in _both(ideas):
        said, was = bool(p["critic_improve"]), bool(p["improved"])
        counts[("t" if said == was else "f") + ("p" if said else "n")] += 1
    return Confusion(**counts)


@dataclass(frozen=True)
class Audit:
    """The critic's reward error over a stored run."""

    run_id: str
    ideas: int
    by_source: Mapping[str, int]
    paid_verifications: int
    confident: Confusion  # u < T and verified anyway (audit draws, or verify-all with a critic)
    routed: Confusion  # u >= T, verified because the critic was unsure
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ideas": self.ideas,
            "by_source": dict(self.by_source),
            "paid_verifications": self.paid_verifications,
            "confident": self.confident.to_dict(),
            "routed": self.routed.to_dict(),
            **dict(self.extra),
        }


def audit_run(store: Any, run_id: str) -> Audit:
    """Read a run's ``policy_idea`` events and tabulate the critic's verdict against the verifier's outcome."""
    ideas = [ev.record.payload() for ev in store.events(run_id, PolicyIdea)]
    threshold = float(store.run(run_id).config.get("settings", {}).get("threshold", 0.25))
    sources: dict[str, int] = {}
    for p in ideas:
        sources[str(p["source"])] = sources.get(str(p["source"]), 0) + 1
    judged = [p for p in ideas if p.get("uncertainty") is not None]
    confident = [p for p in judged if not route(float(p["uncertainty"]), threshold)]
    routed = [p for p in judged if route(float(p["uncertainty"]), threshold)]
    return Audit(
        run_id=run_id,
        ideas=len(ideas),
        by_source=sources,
        paid_verifications=int(store.budget(run_id).verifications),
        confident=confusion(confident),
        routed=confusion(routed),
        extra={"share_verified": share_verified(ideas), "rewarded_per_verification": rewarded_per_verification(ideas)},
    )


__all__ = [
    "Audit",
    "Confusion",
    "agreement",
    "audit_run",
    "confusion",
    "rewarded_per_verification",
    "share_verified",
    "step_stats",
]
