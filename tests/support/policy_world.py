"""A small real ``Rewarder`` over an idea-space-like world, for policy-trainer tests.

Each parent's prompt asks for one idea; an idea that names one of the world's
options is "verified" (one unit of a hard budget) and rewarded +1 when that
option is a good one, -1 otherwise; an idea that names no option is invalid
(-1, free). Rewards are appended to a JSONL file (flushed and fsynced) before
``score`` returns, and a ``(key, index)`` already there is read back instead of
being paid again, as the contract asks of the real pipeline.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from verifyless.train.policy.contract import IdeaReward, PolicyPrompt, StepStats, VerificationBudgetSpent

OPTIONS = ("alpha", "bravo", "charlie", "delta")
GOOD = frozenset({"bravo"})


def answers() -> list[str]:
    return [f"## Approach\nUse {o} for the model." for o in OPTIONS]


def world_messages(parent: str) -> tuple[dict[str, str], ...]:
    return (
        {"role": "system", "content": "You propose one change to a model. Name one option."},
        {"role": "user", "content": f"Parent {parent} uses alpha. Options: {', '.join(OPTIONS)}."},
    )


class WorldRewarder:
    def __init__(self, store: Path, *, parents: int = 2, budget: int = 10_000) -> None:
        self.store = Path(store)
        self.parents = parents
        self.budget = budget
        self.paid: list[tuple[str, int]] = []  # verifications paid by this object
        self.stored: dict[tuple[str, int], IdeaReward] = {}
        if self.store.is_file():
            for line in self.store.read_text().splitlines():
                r = IdeaReward(**json.loads(line))
                self.stored[(r.key, r.index)] = r

    async def prompts(self, step: int) -> list[PolicyPrompt]:
        return [
            PolicyPrompt(f"s{step}/g{j}", step, "world", f"p{j}", world_messages(f"p{j}")) for j in range(self.parents)
        ]

    def _verified(self) -> int:
        return sum(1 for r in self.stored.values() if r.source == "verifier")

    async def score(self, prompt: PolicyPrompt, completions: Sequence[str]) -> list[IdeaReward]:
        out = []
        for i, text in enumerate(completions):
            if (prompt.key, i) in self.stored:
                out.append(self.stored[(prompt.key, i)])
                continue
            named = [o for o in OPTIONS if re.search(rf"\b{o}\b", text)]
            if not named:
                reward = IdeaReward(prompt.key, i, -1.0, "invalid", reason="names no option")
            else:
                if self._verified() >= self.budget:
                    raise VerificationBudgetSpent(f"{self.budget} verifications used")
                good = named[0] in GOOD
                reward = IdeaReward(prompt.key, i, 1.0 if good else -1.0, "verifier", improved=good)
                self.paid.append((prompt.key, i))
            with self.store.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps({**reward.__dict__, "votes": dict(reward.votes)}) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            self.stored[(prompt.key, i)] = reward
            out.append(reward)
        return out

    async def finish_step(self, step: int) -> StepStats:
        rs = [r for (k, _), r in self.stored.items() if k.startswith(f"s{step}/")]
        verified = sum(1 for r in rs if r.source == "verifier")
        rewarded = sum(1 for r in rs if r.source != "invalid")
        return StepStats(
            step=step,
            ideas=len(rs),
            mean_reward=sum(r.reward for r in rs) / max(len(rs), 1),
            verified=verified,
            share_verified=verified / max(len(rs), 1),
            rewarded_per_verification=rewarded / verified if verified else 0.0,
            audited=0,
            agreement=None,
            tokens=0,
            verify_seconds=0.0,
            verifications_left=self.verifications_left(),
            parents_advanced=0,
        )

    def verifications_left(self) -> int:
        return max(self.budget - self._verified(), 0)
