"""The single child-making unit: statuses, band checks, duplicates before summaries, the summary cache."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from verifyless.child import ChildMaker, status_for
from verifyless.errors import ModelUnavailable
from verifyless.node import Idea, Status, content_hash
from verifyless.roles.base import Implementation, ParentInfo, RoleFailure, Roles
from verifyless.task.base import Band
from verifyless.testing import fake_roles, fake_task

LINES_PROGRAM = "import sys\nx = 1\na = 0\nprint(a)\nprint(x)\n"


class Summaries:
    def __init__(self) -> None:
        self.calls = 0

    async def summarize(self, task, program, idea=None):
        self.calls += 1
        return f"summary {self.calls}"


class BandImplementer:
    """Writes ``idea.params['band']`` as the new band of a line-range task (any number of lines)."""

    async def implement(self, task, parent, idea):
        from verifyless.program import replace
        from verifyless.roles.render import band_for

        return Implementation(replace(parent.program, band_for(task, parent.program), idea.params["band"]))

    async def repair(self, task, program, idea, error):  # pragma: no cover - not used here
        raise AssertionError


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize(
    ("kind", "status"),
    [("parse-error", Status.PARSE_ERROR), ("guard-failed", Status.GUARD_FAILED), ("model-error", Status.MODEL_ERROR)],
)
def test_role_failures_map_to_one_status_each(kind, status):
    assert status_for(RoleFailure(kind, "why")) is status  # type: ignore[arg-type]
    maker = ChildMaker(fake_task(), fake_roles())
    made = run(maker.make(ParentInfo("root", fake_task().baseline_program), RoleFailure(kind, "why", "raw")))  # type: ignore[arg-type]
    assert (made.status, made.reason, made.raw, made.ok) == (status, "why", "raw", False)


def test_a_child_is_implemented_checked_and_summarised():
    task = fake_task()
    maker = ChildMaker(task, fake_roles())
    made = run(maker.make(ParentInfo("root", task.baseline_program), Idea("set a to 5", {"a": 5})))
    assert made.ok and "a = 5" in made.program and made.program_hash == content_hash(made.program)
    assert made.summary == "The program sets a to 5 and prints it."


def test_duplicates_are_caught_before_the_summariser_is_called():
    task = fake_task()
    summaries = Summaries()
    base = fake_roles()
    maker = ChildMaker(task, Roles(base.briefer, base.proposer, base.implementer, summaries))
    made = run(maker.make(ParentInfo("root", task.baseline_program), Idea("a=5", {"a": 5}), skip=lambda h: True))
    assert made.status is Status.DUPLICATE and summaries.calls == 0
    first = run(maker.make(ParentInfo("root", task.baseline_program), Idea("a=5", {"a": 5})))
    again = run(maker.make(ParentInfo("root", task.baseline_program), Idea("a=5", {"a": 5})))
    assert first.summary == again.summary and summaries.calls == 1  # cached by program hash


def test_dead_implementer_and_summariser_endpoints_are_model_errors():
    task = fake_task()

    class Dead:
        async def implement(self, *a):
            raise ModelUnavailable("down")

        async def summarize(self, *a):
            raise ModelUnavailable("down")

    base = fake_roles()
    parent = ParentInfo("root", task.baseline_program)
    made = run(
        ChildMaker(task, Roles(base.briefer, base.proposer, Dead(), base.summarizer)).make(parent, Idea("x", {"a": 1}))
    )
    assert made.status is Status.MODEL_ERROR and "implementer" in made.reason
    made = run(
        ChildMaker(task, Roles(base.briefer, base.proposer, base.implementer, Dead())).make(parent, Idea("x", {"a": 1}))
    )
    assert made.status is Status.MODEL_ERROR and "summarizer" in made.reason


@pytest.mark.parametrize("band", ["a = 1\n", "a = 1\nb = 2\nc = 3\n", ""])
def test_line_range_bands_that_grew_or_shrank_are_checked_with_the_implementers_band(band):
    task = dataclasses.replace(fake_task(), baseline_program=LINES_PROGRAM, band=Band(None, None, (3, 3)))
    roles = fake_roles()
    maker = ChildMaker(task, Roles(roles.briefer, roles.proposer, BandImplementer(), Summaries()))
    grown = run(maker.make(ParentInfo("root", LINES_PROGRAM), Idea("grow", {"band": "a = 7\nb = 8\n"})))
    assert grown.ok, grown.reason
    # The grown child is now a parent: its band spans two lines, and its children keep head and tail.
    child = run(maker.make(ParentInfo("c1", grown.program), Idea("again", {"band": band})))
    assert child.ok, child.reason
    assert child.program.startswith("import sys\nx = 1\n") and child.program.endswith("print(a)\nprint(x)\n")


def test_a_changed_fixed_region_or_a_syntax_error_is_guard_failed():
    task = fake_task()

    class Bad:
        def __init__(self, program):
            self.program = program

        async def implement(self, *a):
            return Implementation(self.program)

    base = fake_roles()
    parent = ParentInfo("root", task.baseline_program)
    edited_head = task.baseline_program.replace("import sys", "import os")
    made = run(
        ChildMaker(task, Roles(base.briefer, base.proposer, Bad(edited_head), base.summarizer)).make(parent, Idea("x"))
    )
    assert made.status is Status.GUARD_FAILED and "fixed region" in made.reason
    broken = task.baseline_program.replace("a = 0", "a = (")
    made = run(
        ChildMaker(task, Roles(base.briefer, base.proposer, Bad(broken), base.summarizer)).make(parent, Idea("x"))
    )
    assert made.status is Status.GUARD_FAILED and made.reason.startswith("line ")


def test_guards_block_with_their_reason():
    task = fake_task()

    async def guard(task, parent_program, program):
        return "metric written as a literal" if "a = 9" in program else None

    maker = ChildMaker(task, fake_roles(), guards=guard)
    parent = ParentInfo("root", task.baseline_program)
    assert run(maker.make(parent, Idea("x", {"a": 8}))).ok
    blocked = run(maker.make(parent, Idea("x", {"a": 9})))
    assert blocked.status is Status.GUARD_FAILED and blocked.reason == "metric written as a literal"
