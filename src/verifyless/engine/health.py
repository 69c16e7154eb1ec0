"""Reply health of the child-making roles (proposer, implementer): the screeners' tracker, per role.

The engine feeds one observation per reply unit: each ``propose`` call (its
proposals: parsed = ideas, the rest parse errors) and each child the
implementer made from an idea (parsed unless its status is ``parse-error``;
``attempts`` replies, of which the last one parsed when the child was made).
Endpoint failures (``model-error``) neither count nor reset the streak.

``RoleHealth`` is ``verifyless.screen.health.ReplyHealth`` with the role's
name: below ``engine.min_parse_rate`` it warns, and after
``engine.max_unparsed_replies`` observations in a row with nothing parsed it
raises ``ParseError`` (CLI exit code 7) naming the expected format and quoting
the reply. ``stored_role_health`` computes the same rates from a run's stored
``node`` events, for ``show`` (a proposer failure is the node whose idea is
empty: nothing was proposed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from verifyless.child import Made
from verifyless.errors import ParseError
from verifyless.events import NodeRecorded
from verifyless.node import Idea, Status
from verifyless.roles.base import RoleFailure
from verifyless.screen.health import EXAMPLE_CHARS, ReplyHealth, ReplyStats

__all__ = ["EXPECTED", "RoleHealth", "made_stats", "proposal_stats", "stored_role_health", "weak_model_line"]
_REPAIR = re.compile(r"f\d+$")  # repair nodes (``<id>f<k>``) are recorded only when their reply parsed

EXPECTED = {
    "proposer": "an 'Approach' section describing one idea",
    "implementer": "a fenced code block holding the new editable band, or SEARCH/REPLACE blocks",
}

UNITS = {"proposer": "propose calls", "implementer": "children"}  # what one observation is, per role


class RoleHealth(ReplyHealth):
    """One child-making role's reply health over a run (see the module docstring).

    ``account`` (per reply unit) keeps the streak and stops the run; ``warn`` (per expansion, over its
    replies) logs a low parse rate once per expansion instead of once per child.
    """

    noun = "role"
    error = ParseError

    def __init__(self, role: str, model: str = "", min_parse_rate: float = 0.5, max_unparsed: int = 10) -> None:
        super().__init__(role, model, min_parse_rate=0.0, max_unparsed_screenings=max_unparsed)
        self.warn_below = min_parse_rate

    def feed(self, r: int, replies: list[ReplyStats]) -> None:
        """Account round ``r``'s reply units in candidate order (the stop is positional); warn once on a low rate."""
        for stats in replies:
            self.account(stats)
        self.warn(r, sum(replies, ReplyStats()))

    def warn(self, r: int, stats: ReplyStats) -> None:
        """Log a WARNING when one expansion's replies parsed below ``warn_below``."""
        self.warn_low(stats, self.warn_below, f"round {r}: ")

    def message(self, stats: ReplyStats) -> str:
        return (
            f"the {self.screener} (model {self.model}) produced no parseable reply for {self.streak} "
            f"{UNITS.get(self.screener, 'calls')} in a row, so the run stopped instead of paying for more replies. "
            f"Expected {stats.expected}; the "
            f"model wrote: {stats.example!r}. Fix: use a model that follows the format, raise its max_tokens if "
            "replies are cut off, or check the role's prompt; engine.max_unparsed_replies sets how many such "
            "replies in a row stop a run"
        )


def proposal_stats(proposals: Sequence[Idea | RoleFailure]) -> ReplyStats:
    """One ``propose`` call: ideas parsed of proposals made (endpoint failures left out)."""
    counted = [p for p in proposals if not (isinstance(p, RoleFailure) and p.kind == "model-error")]
    failed = [p for p in counted if isinstance(p, RoleFailure) and p.kind == "parse-error"]
    example = next((f.raw or f.reason for f in failed), "")
    return ReplyStats(len(counted) - len(failed), len(counted), EXPECTED["proposer"], _clip(example))


def made_stats(made: Made) -> ReplyStats:
    """One child the implementer made from an idea: its replies, parsed or not."""
    if made.status is Status.MODEL_ERROR:
        return ReplyStats()
    replies = max(1, made.attempts)
    if made.status is Status.PARSE_ERROR:
        return ReplyStats(0, replies, EXPECTED["implementer"], _clip(made.raw or made.reason))
    return ReplyStats(1, replies, EXPECTED["implementer"])


def stored_role_health(nodes: Iterable[NodeRecorded]) -> dict[str, dict[str, Any]]:
    """``{role: {"parsed", "total", "rate"}}`` from a run's stored ``node`` records (one reply per child, repairs
    apart; a record without its own status is skipped).

    Only roles that made a child appear; a node with an empty idea is a proposal that never parsed.
    """
    out: dict[str, ReplyStats] = {}
    for record in nodes:
        status, node_id = record.status, record.candidate.id
        if status in (Status.MODEL_ERROR, None) or node_id == "root" or _REPAIR.search(node_id):
            continue
        role = "implementer" if record.candidate.idea.text else "proposer"
        parsed = int(status is not Status.PARSE_ERROR)
        out[role] = out.get(role, ReplyStats()) + ReplyStats(parsed, 1)
        if role == "implementer":
            out["proposer"] = out.get("proposer", ReplyStats()) + ReplyStats(1, 1)
    return {role: stats.to_dict() for role, stats in sorted(out.items(), key=lambda kv: kv[0] != "proposer")}


def _clip(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= EXAMPLE_CHARS else "..." + text[-EXAMPLE_CHARS:]


def weak_model_line(statuses: Mapping[str, Status], llm: bool) -> str | None:
    """One line when an LLM-driven run made children but none of them verified ok; None otherwise.

    ``statuses`` are the run's nodes' current statuses by id (the store's node view). The line counts the
    children by what stopped them (unreadable replies, a broken band contract, a crash, a timeout, a screen
    that never sent them to verification, ...), so the user sees whether the model could not follow the format
    or wrote code that does not run, and what to try. Runs without LLM roles, and runs that made no child (a
    budget spent on the baseline), get None.
    """
    made = {node: status for node, status in statuses.items() if node != "root"}
    if not llm or not made or Status.OK in made.values():
        return None
    counts: dict[str, int] = {}
    for status in made.values():
        counts[status.value] = counts.get(status.value, 0) + 1
    why = ", ".join(f"{n} {status}" for status, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return (
        f"no child the model wrote verified ok ({len(made)} made: {why}); the model may be too weak for this "
        "task or its reply format: try a larger model, or `verifyless show RUN` for each child's reason"
    )
