"""A pool of seven candidates of known quality and the critic labels a cascade screens them with."""

from __future__ import annotations

import re

from critic_screens import VERDICT

from verifyless.node import Candidate, Idea, Operator


def child(cid: str, program: str, summary: str) -> Candidate:
    """An improvement of parent ``p`` with id and program hash ``cid`` and idea ``plan <cid>``."""
    return Candidate(
        id=cid,
        parent_id="p",
        operator=Operator.IMPROVE,
        idea=Idea(f"plan {cid}"),
        program=program,
        program_hash=cid,
        summary=summary,
    )


def cand(cid: str, q: int) -> Candidate:
    return child(cid, f"model = '{cid}'  # Q{q}\n", f"Child ID={cid}; a forest.")


def critic_fn(labels: dict[str, list[str]]):
    def fn(request, i):
        cid = re.search(r"ID=(\w+)", request.messages[-1].content).group(1)
        return "Criteria...\n" + VERDICT[labels[cid][i % len(labels[cid])]]

    return fn


LABELS = {
    "a": ["BigWin"],
    "b": ["BigWin", "MediumWin"],
    "c": ["MediumWin"],
    "d": ["SmallWin", "Tie"],
    "e": ["Tie"],
    "f": ["Lose"],
    "g": ["Lose"],
}


QUALITY = {"a": 3, "b": 8, "c": 9, "d": 7, "e": 2, "f": 9, "g": 1}
