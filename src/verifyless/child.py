"""One way to make a child: implement an idea -> guards -> summarise.

Search (the engine), data collection (``collect-pools``, ``data collect``) and
policy training all turn a proposed idea into a screenable child through
``ChildMaker``, so the mapping from a role failure to a node status lives in
exactly one place (``status_for``) and every caller checks the same contract.

Contract of ``ChildMaker.make``:

* It never raises for a candidate's failure: an unparseable proposal or
  implementation, a changed fixed region, a syntax error, a blocking guard
  finding or a dead endpoint for *this* candidate comes back as a ``Made``
  whose ``status`` says why (``parse-error``, ``guard-failed``,
  ``model-error``) with a readable ``reason``.
* Fixed regions are checked against the parent with ``band_for`` -- the same
  band function the implementer uses, so line-range bands that grew or shrank
  in earlier generations are handled identically.
* A duplicate check (``skip``) runs *before* the summary is asked for, so a
  duplicate costs no summariser call; its status is ``duplicate``.
* Summaries are cached by program hash (``summaries``), shared with the caller.

It does not verify, screen, store or budget anything: those belong to the
caller (the engine's round, a collector's loop), which records the ``Made``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager as AsyncContextManager
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from verifyless.errors import ModelUnavailable
from verifyless.node import Idea, Status, content_hash
from verifyless.program import BandError, fixed_region_violation, syntax_error
from verifyless.roles.base import Implementation, ParentInfo, ProposeContext, RoleFailure, Roles
from verifyless.roles.render import band_for, code_lang
from verifyless.task.base import Task

__all__ = ["ChildMaker", "GuardCheck", "Made", "status_for"]

_STATUS = {
    "parse-error": Status.PARSE_ERROR,
    "guard-failed": Status.GUARD_FAILED,
    "model-error": Status.MODEL_ERROR,
}


def status_for(failure: RoleFailure) -> Status:
    """The node status a role failure becomes (the one mapping used everywhere)."""
    return _STATUS.get(failure.kind, Status.GUARD_FAILED)


class GuardCheck(Protocol):
    """Static and LLM guards run on an implementation before it may be verified.

    Returns ``None`` when the program may go on, else the reason it is blocked
    (one readable line per blocking finding; it is also what a repair sees),
    or a report with ``blocking``, ``reason()`` and ``notes()`` (advisory
    findings become the child's notes), as ``verifyless.guards.Guards`` does.
    """

    async def __call__(self, task: Task, parent_program: str, program: str) -> Any: ...


@dataclass(frozen=True)
class Made:
    """One idea turned into a child program, or the reason it was not."""

    idea: Idea
    status: Status  # IMPLEMENTED, or PARSE_ERROR / GUARD_FAILED / MODEL_ERROR / DUPLICATE
    program: str = ""
    program_hash: str = ""
    summary: str = ""
    reason: str = ""
    raw: str = ""  # the model's unparseable reply, clipped, when there was one
    attempts: int = 0  # implementer replies used
    notes: tuple[str, ...] = field(default_factory=tuple)  # advisory guard findings and the like

    @property
    def ok(self) -> bool:
        return self.status is Status.IMPLEMENTED


class ChildMaker:
    """Turns proposals into checked, summarised child programs for one task.

    ``llm`` bounds concurrent LLM calls across everything that shares it (the
    engine passes its semaphore); ``summaries`` maps program hash -> summary
    and is shared with the caller; ``guards`` is optional (see ``GuardCheck``).
    A child that ``make`` finds ``guard-failed`` goes back to the implementer's
    repair with the reason, keeping its idea, up to ``guard_repairs`` times.
    """

    def __init__(
        self,
        task: Task,
        roles: Roles,
        *,
        llm: AsyncContextManager[Any] | None = None,
        summaries: dict[str, str] | None = None,
        guards: GuardCheck | None = None,
        guard_repairs: int = 0,
    ) -> None:
        self.task = task
        self.roles = roles
        self.guards = guards
        self.guard_repairs = guard_repairs
        self.summaries = summaries if summaries is not None else {}
        self._llm = llm

    # ------------------------------------------------------------------ verbs

    async def propose(self, ctx: ProposeContext, n: int) -> list[Idea | RoleFailure]:
        """``n`` proposals; raises ``ModelUnavailable`` when the proposer's endpoint is dead."""
        return await self.roles.proposer.propose(ctx, n)

    async def make(
        self,
        parent: ParentInfo,
        proposal: Idea | RoleFailure,
        *,
        skip: Callable[[str], bool] | None = None,
    ) -> Made:
        """Implement ``proposal`` on ``parent``, check it, and summarise it (see the module contract)."""
        if isinstance(proposal, RoleFailure):
            return Made(Idea(""), status_for(proposal), reason=proposal.reason, raw=proposal.raw)
        try:
            async with self._slot():
                impl = await self.roles.implementer.implement(self.task, parent, proposal)
        except ModelUnavailable as exc:
            impl = Implementation(None, RoleFailure("model-error", f"implementer: {exc}"))
        made = await self._finish(parent.program, proposal, impl, skip)
        return await self._repair_guard_failures(parent.program, made, skip)

    async def repair(
        self,
        base_program: str,
        failed_program: str,
        idea: Idea,
        error: str,
        *,
        skip: Callable[[str], bool] | None = None,
    ) -> Made:
        """Repair ``failed_program`` keeping ``idea``; fixed regions are checked against ``base_program``.

        ``base_program`` is the program whose fixed regions the child must keep
        (the failed program itself, or the original parent: both share them).
        """
        try:
            async with self._slot():
                impl = await self.roles.implementer.repair(self.task, failed_program, idea, error)
        except ModelUnavailable as exc:
            impl = Implementation(None, RoleFailure("model-error", f"implementer: {exc}"))
        return await self._finish(base_program, idea, impl, skip)

    async def summarize(self, program: str, idea: Idea | None = None) -> str:
        """The neutral summary of ``program`` (cached by program hash)."""
        digest = content_hash(program)
        known = self.summaries.get(digest)
        if known:
            return known
        async with self._slot():
            summary = await self.roles.summarizer.summarize(self.task, program, idea)
        self.summaries[digest] = summary
        return summary

    # ------------------------------------------------------------------ steps

    async def _repair_guard_failures(self, base: str, made: Made, skip: Callable[[str], bool] | None) -> Made:
        tries = 0
        while made.status is Status.GUARD_FAILED and made.program and tries < self.guard_repairs:
            tries += 1
            fixed = await self.repair(base, made.program, made.idea, made.reason, skip=skip)
            history = (f"guard repair {tries} after: {made.reason}",)
            made = _replace(fixed, attempts=made.attempts + fixed.attempts, notes=made.notes + history + fixed.notes)
        return made

    async def _finish(self, base: str, idea: Idea, impl: Implementation, skip: Callable[[str], bool] | None) -> Made:
        if not impl.ok:
            failure = impl.failure or RoleFailure("guard-failed", "the implementer returned no program")
            return Made(idea, status_for(failure), reason=failure.reason, raw=failure.raw, attempts=impl.attempts)
        program = impl.program or ""
        digest = content_hash(program)
        made = Made(idea, Status.IMPLEMENTED, program, digest, attempts=impl.attempts)
        problem = self._contract_problem(base, program)
        if problem is None and self.guards is not None:
            try:
                problem, notes = _guard_outcome(await self.guards(self.task, base, program))
            except ModelUnavailable as exc:
                return _replace(made, status=Status.MODEL_ERROR, reason=f"guards: {exc}")
            made = _replace(made, notes=notes)
        if problem:
            return _replace(made, status=Status.GUARD_FAILED, reason=problem)
        if skip is not None and skip(digest):
            return _replace(
                made, status=Status.DUPLICATE, reason="an identical program was already verified or is in this pool"
            )
        try:
            summary = await self.summarize(program, idea)
        except ModelUnavailable as exc:
            return _replace(made, status=Status.MODEL_ERROR, reason=f"summarizer: {exc}")
        return _replace(made, summary=summary)

    def _contract_problem(self, base: str, program: str) -> str | None:
        """A changed fixed region (checked with the implementer's band function) or a syntax error."""
        try:
            band = band_for(self.task, base)
        except BandError as exc:  # pragma: no cover - band_for falls back to the task band
            return f"the parent program has no usable band: {exc}"
        return fixed_region_violation(base, program, band) or _syntax(self.task, program)

    def _slot(self) -> AsyncContextManager[Any]:
        return self._llm if self._llm is not None else contextlib.nullcontext()


def _syntax(task: Task, program: str) -> str | None:
    """Python syntax errors only (other languages are checked by their own run step)."""
    return syntax_error(program) if code_lang(task) in ("python", "") else None


def _guard_outcome(result: Any) -> tuple[str | None, tuple[str, ...]]:
    """(blocking reason or None, advisory notes) from a guard's ``str | None`` or report."""
    if hasattr(result, "blocking") and hasattr(result, "reason"):
        return (result.reason() or None) if result.blocking else None, tuple(result.notes())
    return result or None, ()


def _replace(made: Made, **changes: Any) -> Made:
    return replace(made, **changes)
