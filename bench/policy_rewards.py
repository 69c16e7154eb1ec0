"""Policy-training rewards: verify-all against critic-in-the-loop under one verification cap.

Setting: the tiny real task ``tests/data_task`` (score 2A + B - C, C < 0
crashes; every verification runs in the real sandbox), ``--parents`` groups x
``--ideas`` ideas per step. The "policy" is a seeded random proposer that
names one or two options per idea (the same texts in every arm), so this
measures the reward pipeline, not learning. The critic is a real
``PointwiseCritic`` (k = ``--votes``) over a ``ScriptedModel`` that knows the
true outcome and answers like a critic of known quality: each (parent, child)
pair gets one persistent verdict, right with probability ``--accuracy``
(errors split evenly over the two wrong directions); each of the k samples
repeats it with probability ``--rho`` and otherwise draws afresh. It reads
the truth from the neutral summaries, so nothing outside the prompt is used.

Arms (same cap, same texts): ``verify-all``; ``critic-in-loop`` (T = 0.25);
``critic-in-loop`` with ``audit_rate`` 0.25; ``critic-only`` (run for as
many steps as critic-in-loop reached). Columns: steps completed before the
cap, ideas rewarded, paid verifications, verification results reused for a
program already verified in the run (no charge; off unless ``--reuse``: the
toy space has only 36 programs, so with reuse verify-all stops paying after
a few steps; without it the task is treated as stochastic and every
verification is paid, as on a noisy task), share of ideas verified, rewarded
ideas per paid verification, and reward accuracy against the true outcome (the
bench knows 2A + B - C for every idea; a reward is right when +1 <=> the
child really improves).

Usage::

    python bench/policy_rewards.py             # cap 48, 4 x 8 ideas, k 16 (about a minute per arm)
    python bench/policy_rewards.py --quick     # cap 10, 2 x 4 ideas, k 4 (a few seconds per arm)

Prints a markdown table; ``main`` returns the rows for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import random
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verifyless.child import ChildMaker
from verifyless.executors.local import LocalExecutor
from verifyless.model.base import ModelRequest
from verifyless.model.scripted import ScriptedModel
from verifyless.roles.space import space_roles
from verifyless.screen.critic import CriticOptions, PointwiseCritic
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.testing import verification_events
from verifyless.train.policy.contract import VerificationBudgetSpent
from verifyless.train.policy.events import PolicyIdea
from verifyless.train.policy.rewards import PolicyRewarder
from verifyless.train.policy.settings import RewardSettings

TASK_DIR = Path(__file__).resolve().parents[1] / "tests" / "data_task"
_VALUE = {"zero": 0, "one": 1, "two": 2, "three": 3, "below zero": -1}
_WORDS = ("improve", "tie", "lose")
_REPLY = {
    "improve": "[IMPROVEMENT] improve --- the weights favour it\n[WINTIER] medium --- a clear gain",
    "tie": "[IMPROVEMENT] tie --- no effect expected\n[WINTIER] NA --- none",
    "lose": "[IMPROVEMENT] lose --- the weights work against it\n[WINTIER] NA --- none",
}


def true_score(summary: str) -> float | None:
    """2A + B - C from a neutral summary's option descriptions; None when C < 0 (the program crashes)."""
    found = {
        m.group(1): _VALUE[m.group(2)] for m in re.finditer(r"sets ([ABC]) (?:to|below) (zero|one|two|three)", summary)
    }
    if re.search(r"sets C below zero", summary):
        return None
    if set(found) != {"A", "B", "C"}:
        raise ValueError(f"cannot read the assignment from the summary: {summary[:200]}")
    return 2 * found["A"] + found["B"] - found["C"]


def truth(parent_summary: str, child_summary: str) -> str:
    child, parent = true_score(child_summary), true_score(parent_summary)
    if child is None or parent is None or child < parent:
        return "lose"
    return "improve" if child > parent else "tie"


class KnownQualityCritic:
    """The scripted critic's reply function (see the module docstring)."""

    def __init__(self, accuracy: float, rho: float, seed: int) -> None:
        self.accuracy, self.rho, self.seed = accuracy, rho, seed

    def _draw(self, right: str, rng: random.Random) -> str:
        if rng.random() < self.accuracy:
            return right
        return rng.choice([w for w in _WORDS if w != right])

    def __call__(self, request: ModelRequest) -> str:
        user = request.messages[-1].content
        parent = user.split("## Parent", 1)[1].split("## Child", 1)[0]
        child = user.split("## Child", 1)[1].split("## What is known", 1)[0]
        right = truth(parent, child)
        pair = random.Random(f"{self.seed}:{parent}:{child}")
        persistent = self._draw(right, pair)
        sample = random.Random(f"{self.seed}:{parent}:{child}:{request.sample_offset}")
        word = persistent if sample.random() < self.rho else self._draw(right, sample)
        return _REPLY[word]


def policy_texts(seed: int, key: str, n: int, task: object) -> list[str]:
    """``n`` seeded random idea texts naming one or two options of the task's space."""
    space = task.idea_space  # type: ignore[attr-defined]
    rng = random.Random(f"{seed}:{key}")
    out = []
    for _ in range(n):
        dims = rng.sample(list(space.dimensions), rng.choice((1, 2)))
        out.append("Switch to " + " and ".join(f"`{rng.choice(space.dimensions[d]).name}`" for d in dims) + ".")
    return out


@dataclass(frozen=True)
class Row:
    arm: str
    steps: int
    ideas: int
    rewarded: int
    paid: int
    reused: int
    share_verified: float
    per_verification: float
    reward_accuracy: float
    wall_s: float


async def _run_arm(
    arm: str, mode: str, audit: float, args: argparse.Namespace, store: RunStore, tmp: Path, max_steps: int
) -> Row:
    task = load_task(str(TASK_DIR))
    if not args.reuse:  # pay every verification, as on a noisy task (the toy space has only 36 programs)
        task = dataclasses.replace(task, stochastic=True)
    settings = RewardSettings(
        mode=mode,
        parents=args.parents,
        ideas=args.ideas,
        votes=args.votes,
        verifications=args.cap,
        audit_rate=audit,
        seed=args.seed,
    )
    critic = PointwiseCritic(
        ScriptedModel(function=KnownQualityCritic(args.accuracy, args.rho, args.seed)), CriticOptions(k=args.votes)
    )
    executor = LocalExecutor(capacity=args.workers, hide=[tmp])
    makers = {task.name: ChildMaker(task, space_roles(task))}
    rewarder = PolicyRewarder([task], makers, critic, executor, store, None, settings, random.Random(args.seed))
    started, steps = time.monotonic(), 0
    try:
        for step in range(max_steps):
            for prompt in await rewarder.prompts(step):
                await rewarder.score(prompt, policy_texts(args.seed, prompt.key, args.ideas, task))
            await rewarder.finish_step(step)
            steps += 1
    except VerificationBudgetSpent:
        pass
    wall = time.monotonic() - started
    return _row(arm, steps, store, rewarder, wall)


def _row(arm: str, steps: int, store: RunStore, rewarder: PolicyRewarder, wall: float) -> Row:
    ideas = [e.record.payload() for e in store.events(rewarder.run_id, PolicyIdea)]
    done = [p for p in ideas if int(str(p["key"])[1:].split("/")[0]) < steps]
    summaries = rewarder.ledger.state.summaries  # node id -> its neutral summary (the kernel's fold)
    right = 0
    for p in done:
        prompt = rewarder.ledger.log.prompts[p["key"]]
        child = summaries.get(p["node_id"]) if p["node_id"] else None
        real = truth(summaries[prompt.parent_id], child) if child else "lose"
        right += (p["reward"] > 0) == (real == "improve")
    rewarded = sum(p["source"] != "invalid" for p in done)
    paid = int(store.budget(rewarder.run_id).verifications)
    verified = sum(p["improved"] is not None for p in done)
    reused = sum(e.record.reused_from is not None for e in verification_events(store, rewarder.run_id))
    return Row(
        arm,
        steps,
        len(done),
        rewarded,
        paid,
        reused,
        verified / max(1, len(done)),
        rewarded / max(1, paid),
        right / max(1, len(done)),
        wall,
    )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cap", type=int, default=48, help="verification cap per arm (baseline included)")
    parser.add_argument("--parents", type=int, default=4)
    parser.add_argument("--ideas", type=int, default=8)
    parser.add_argument("--votes", type=int, default=16)
    parser.add_argument("--accuracy", type=float, default=0.633, help="per-sample critic accuracy (paper's trained)")
    parser.add_argument("--rho", type=float, default=0.7, help="correlation of a pair's samples")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=40)
    parser.add_argument("--reuse", action="store_true", help="reuse results of programs already verified in the run")
    parser.add_argument("--quick", action="store_true", help="cap 10, 2 x 4 ideas, k 4")
    args = parser.parse_args(argv)
    if args.quick:
        args.cap, args.parents, args.ideas, args.votes, args.max_steps = 10, 2, 4, 4, 6
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, RunStore(Path(tmp) / "bench.db") as store:
        arms = [
            ("verify-all", "verify-all", 0.0),
            ("critic-in-loop", "critic-in-loop", 0.0),
            ("critic-in-loop audit 0.25", "critic-in-loop", 0.25),
        ]
        for arm, mode, audit in arms:
            rows.append(asyncio.run(_run_arm(arm, mode, audit, args, store, Path(tmp), args.max_steps)))
        reached = max(1, rows[1].steps)
        rows.append(asyncio.run(_run_arm("critic-only", "critic-only", 0.0, args, store, Path(tmp), reached)))
    print(
        f"cap {args.cap}, {args.parents} x {args.ideas} ideas per step, k {args.votes}, "
        f"critic accuracy {args.accuracy}, rho {args.rho}, seed {args.seed}\n"
    )
    print(
        "| arm | steps | ideas | rewarded | paid verifications | reused results | share verified | rewarded / verification "
        "| reward accuracy | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r.arm} | {r.steps} | {r.ideas} | {r.rewarded} | {r.paid} | {r.reused} | {r.share_verified:.2f} "
            f"| {r.per_verification:.2f} | {r.reward_accuracy:.2f} | {r.wall_s:.1f} |"
        )
    return rows


if __name__ == "__main__":
    main()
