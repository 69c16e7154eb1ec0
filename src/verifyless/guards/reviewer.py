"""The optional LLM reviewer guard: one model call reads the change and passes or rejects it.

The prompt (``prompts/guards/reviewer.md``) asks for a ``VERDICT: pass|reject``
line and one ``ISSUE: line N --- ...`` line per concrete problem. A reject
becomes one ``reviewer`` issue per ISSUE line (or one issue saying that no
problem was named). A reply without a readable verdict never blocks: it is a
single advisory-only issue, so a confused reviewer cannot stop a search. An
endpoint failure raises ``ModelUnavailable`` (the caller records it as a
model error for this child).
"""

from __future__ import annotations

import re

from verifyless.guards.static import Issue
from verifyless.model.base import ModelRequest
from verifyless.prompts import messages
from verifyless.roles.render import code_lang
from verifyless.task.base import Task

_VERDICT = re.compile(r"^\s*\**VERDICT\**\s*:\s*\**\s*(pass|reject)\b", re.IGNORECASE | re.MULTILINE)
_ISSUE = re.compile(
    r"^\s*\**ISSUE\**\s*:\s*(?:line\s*(\d+))?\s*(?:-{2,3}|:|-)?\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE
)
MAX_PROGRAM_CHARS = 24_000
MAX_STATEMENT_CHARS = 4_000


class Reviewer:
    """Asks ``model`` (a ``verifyless.model.base.Model``) to review one change."""

    def __init__(self, model: object, *, temperature: float = 0.0, max_tokens: int = 800) -> None:
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens

    async def review(self, task: Task, parent_program: str, program: str) -> list[Issue]:
        reply = await self.model.generate(self.request(task, parent_program, program))  # type: ignore[attr-defined]
        return parse_review(reply.text)

    def request(self, task: Task, parent_program: str, program: str) -> ModelRequest:
        values = {
            "task": task.statement[:MAX_STATEMENT_CHARS],
            "metric": f"{task.metric.name} ({task.metric.direction})",
            "lang": code_lang(task) or "python",
            "parent": parent_program[:MAX_PROGRAM_CHARS],
            "program": program[:MAX_PROGRAM_CHARS],
        }
        return ModelRequest(
            messages=messages("guards/reviewer", values),
            role="reviewer",
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )


def parse_review(text: str) -> list[Issue]:
    """Issues from a reviewer reply (see the module docstring for the rules)."""
    verdicts = _VERDICT.findall(text or "")
    if not verdicts:
        return [
            Issue("reviewer", "the reviewer's reply had no readable VERDICT line; not blocking", advisory_only=True)
        ]
    if verdicts[-1].lower() == "pass":
        return []
    issues = []
    for line, what in _ISSUE.findall(text):
        if what.strip() and what.strip().lower() not in ("none", "n/a"):
            number = int(line) if line else None
            where = f" (line {number})" if number else ""
            issues.append(Issue("reviewer", f"{what.strip()}{where}", number))
    return issues or [Issue("reviewer", "rejected the program without naming a problem")]


__all__ = ["Reviewer", "parse_review"]
