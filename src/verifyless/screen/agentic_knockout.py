"""The RPM paper's knockout for the agentic screener (``matches="pairwise"``).

Kept apart from ``agentic.py`` (the pilot agent itself): this module only
pairs candidates, runs one two-candidate investigation per match through the
screener's own ``choose`` and merges the matches' records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from verifyless.node import Candidate
from verifyless.screen.base import ScreenContext

MATCH_MODES = ("pool", "pairwise")

Chooser = Callable[[ScreenContext, Sequence[Candidate]], Awaitable[tuple[int, dict[str, Any]]]]


async def knockout(choose: Chooser, ctx: ScreenContext, candidates: Sequence[Candidate]) -> tuple[int, dict[str, Any]]:
    """The RPM paper's knockout: candidates paired in ``ctx.rng`` order, each match one two-candidate investigation.

    Every match gets the screener's full pilot budget (as in the paper), capped
    by the run's evaluator seconds left after the earlier matches. An odd
    candidate out gets a bye to the next round. The champion's record carries
    every match (``matches``) and every pilot (``pilots``, ``pilot_seconds``:
    summed over matches, so the engine charges each pilot once);
    ``runners_up`` ranks the others by the round they lost in, latest first.
    """
    alive = list(range(len(candidates)))
    ctx.rng.shuffle(alive)
    matches: list[dict[str, Any]] = []
    pilots: list[dict[str, Any]] = []
    lost_in: list[tuple[int, int]] = []  # (round, index)
    used, round_no = 0.0, 0
    while len(alive) > 1:
        bye = [alive.pop()] if len(alive) % 2 else []
        winners = []
        for a, b in zip(alive[::2], alive[1::2], strict=True):
            left = None if ctx.budget_left_s is None else max(0.0, ctx.budget_left_s - used)
            won, detail = await choose(dataclasses.replace(ctx, budget_left_s=left), [candidates[a], candidates[b]])
            winner, loser = (a, b) if won == 0 else (b, a)
            used += float(detail.get("pilot_seconds", 0.0))
            pilots += detail.get("pilots", [])
            matches.append(
                {"round": round_no, "pair": [candidates[a].id, candidates[b].id], "winner": candidates[winner].id}
                | {k: detail.get(k) for k in ("choice_source", "stop_reason", "n_pilots", "pilot_seconds", "findings")}
            )
            winners.append(winner)
            lost_in.append((round_no, loser))
        alive = winners + bye
        round_no += 1
    runners_up = [candidates[i].id for _, i in sorted(lost_in, key=lambda r: -r[0])]
    detail = {
        "chosen": True,
        "choice_source": "knockout",
        "matches": matches,
        "runners_up": runners_up,
        "pilots": pilots,
        "pilot_seconds": used,
        "n_pilots": len(pilots),
    }
    return alive[0], detail


__all__ = ["MATCH_MODES", "Chooser", "knockout"]
