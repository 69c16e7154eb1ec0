"""Base vs trained proposer under the same verification budget (``verifyless train policy-eval``).

Protocol (matched budget): for every held-out task and seed, each arm (the
base policy, and the base + trained adapter) gets its own fresh reward run in
``verify-all`` mode with the same cap of ``verifications`` and the same seed,
and proposes ``parents x ideas`` ideas per step from the tasks' prompts
(parents advance exactly as in training) until the cap or ``steps`` is reached;
nothing is trained. Per run we record the best validation fitness reached
(oriented so higher is better; the baseline counts), its gain over the
baseline, and the share of verified ideas that improved on their parent. Arms
are compared with ``verifyless.offline.compare``: the mean gain per arm with a
task-stratified bootstrap interval and the probability that a random run of
the trained arm beats a random run of the base arm on a random task (ties
half). Both arms sample with the same per-idea seeds, so with an unchanged
adapter they would propose the same ideas.

Limits: it measures the proposer inside the policy-training loop (the same
children, summaries and verifier), not a full ``verifyless run`` with
screening and search; for that, run the normal engine with
``roles.models.proposer: {provider: local, model: BASE, adapter: DIR}``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.offline.compare import arm_score, probability_of_improvement
from verifyless.task import load_task
from verifyless.train.policy.contract import VerificationBudgetSpent
from verifyless.train.policy.events import PolicyIdea
from verifyless.train.policy.grpo_settings import PolicySettings
from verifyless.train.policy.trainer import PolicyTrainer
from verifyless.train.policy.wiring import build_rewarder

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalRun:
    """One arm's matched-budget run on one task with one seed."""

    arm: str  # "base" | "trained"
    task: str
    seed: int
    baseline: float  # oriented fitness of the task's baseline (higher is better)
    best: float  # best oriented fitness reached (the baseline included)
    verified: int  # ideas verified
    improved: int  # verified ideas that beat their parent
    invalid: int  # ideas that could not become a runnable child
    ideas: int
    steps: int
    seconds: float

    @property
    def gain(self) -> float:
        """Best minus baseline; 0 when nothing was verified (the run learned nothing better)."""
        return 0.0 if self.best != self.best else self.best - self.baseline

    @property
    def improved_share(self) -> float:
        return self.improved / self.verified if self.verified else 0.0


@dataclass(frozen=True)
class EvalSummary:
    runs: tuple[EvalRun, ...]
    gain: dict[str, Any]  # arm -> Estimate of the mean gain
    improved_share: dict[str, float]  # arm -> pooled share of verified ideas that improved
    p_improvement: Any  # Estimate of P(trained beats base) on gain


async def rollout(trainer: Any, rewarder: Any, steps: int) -> int:
    """Sample-and-score steps without updates until ``steps`` or the budget; returns the steps completed."""
    trainer.rewarder = rewarder
    done = 0
    for step in range(steps):
        try:
            record = await trainer.step(step, update=False)
        except VerificationBudgetSpent:
            break
        if record is None:
            break
        done += 1
    return done


def stored_rewards(store: Any, run_id: str) -> list[dict[str, Any]]:
    """Every idea reward the run stored (``policy_idea`` events, as stored), the budget-cut last step's included."""
    return [e.record.payload() for e in store.events(run_id, PolicyIdea)]


def summarise_run(
    arm: str, task: Any, seed: int, rewards: Sequence[Mapping[str, Any]], steps: int, seconds: float
) -> EvalRun:
    """One run's numbers from its stored reward payloads (``IdeaReward`` fields)."""
    orient = task.metric.orient
    verified = [r for r in rewards if r.get("improved") is not None]
    parents = [r["parent_score"] for r in rewards if r.get("parent_score") is not None]
    scores = [r["child_score"] for r in verified if r.get("child_score") is not None]
    baseline = orient(parents[0]) if parents else float("nan")
    best = max([baseline, *(orient(s) for s in scores)]) if parents else float("nan")
    return EvalRun(
        arm,
        task.name,
        seed,
        baseline,
        best,
        len(verified),
        sum(1 for r in verified if r["improved"]),
        sum(1 for r in rewards if r.get("source") == "invalid"),
        len(rewards),
        steps,
        seconds,
    )


async def evaluate_proposers(
    base: str,
    adapter: Path,
    tasks: Sequence[str],
    *,
    out: Path,
    verifications: int,
    seeds: Sequence[int] = (0, 1, 2),
    steps: int = 1000,
    parents: int = 4,
    settings: PolicySettings | None = None,
    models: Sequence[str] = (),
    executor: str | None = None,
    workers: int | None = None,
    on_run: Callable[[EvalRun], None] | None = None,
) -> EvalSummary:
    """Run both arms on every task and seed (see the module docstring); stores go under ``out``."""
    settings = settings or PolicySettings()
    out.mkdir(parents=True, exist_ok=True)
    runs: list[EvalRun] = []
    for arm, init in (("base", None), ("trained", adapter)):
        trainer = PolicyTrainer(None, base=base, out=out / arm, settings=settings, init_adapter=init)  # type: ignore[arg-type]
        trainer.load()
        for ref in tasks:
            task = load_task(ref)
            for seed in seeds:
                trainer.settings = settings.model_copy(update={"seed": seed})
                started = time.monotonic()
                db = out / f"{arm}-{task.name}-s{seed}.db"
                with build_rewarder(
                    [ref], db, mode="verify-all", parents=parents, ideas=settings.generations,
                    verifications=verifications, seed=seed, models=models, executor=executor, workers=workers,
                ) as built:  # fmt: skip
                    done = await rollout(trainer, built.rewarder, steps)
                    rewards = stored_rewards(built.store, built.run_id)
                run = summarise_run(arm, task, seed, rewards, done, time.monotonic() - started)
                runs.append(run)
                if on_run is not None:
                    on_run(run)
    return summarise(runs)


def summarise(runs: Sequence[EvalRun]) -> EvalSummary:
    def by_task(arm: str) -> dict[str, list[float]]:
        table: dict[str, list[float]] = {}
        for r in runs:
            if r.arm == arm:
                table.setdefault(r.task, []).append(r.gain)
        return table

    arms = sorted({r.arm for r in runs})
    gain = {arm: arm_score(by_task(arm)) for arm in arms}
    shares = {}
    for arm in arms:
        mine = [r for r in runs if r.arm == arm]
        verified = sum(r.verified for r in mine)
        shares[arm] = sum(r.improved for r in mine) / verified if verified else 0.0
    p = probability_of_improvement(by_task("trained"), by_task("base")) if len(arms) == 2 else None
    return EvalSummary(tuple(runs), gain, shares, p)


__all__ = ["EvalRun", "EvalSummary", "evaluate_proposers", "rollout", "stored_rewards", "summarise", "summarise_run"]
