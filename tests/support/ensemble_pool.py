"""Candidates whose summaries carry their id and a planted quality Q, for judges that read it."""

from __future__ import annotations

from verifyless.node import Candidate, Idea, Operator


def cands(*ids: str, q: dict[str, int] | None = None) -> list[Candidate]:
    q = q or {}
    return [
        Candidate(
            id=c,
            parent_id="p",
            operator=Operator.IMPROVE,
            idea=Idea(f"plan {c}"),
            program=f"x = 2  # Q={q.get(c, 0)}\n",
            program_hash=c,
            summary=f"ID={c} Q={q.get(c, 0)}",
        )
        for c in ids
    ]
