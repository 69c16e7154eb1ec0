"""The start and the end of a run: the data report, the brief, the baseline, the optional final selection, the result."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from verifyless import datareport
from verifyless.engine.baseline import check_baseline
from verifyless.errors import VerifylessError
from verifyless.node import Candidate, Idea, Operator, Status, content_hash
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.final import select_final as round_robin

if TYPE_CHECKING:  # pragma: no cover
    from verifyless.engine.core import Engine

__all__ = [
    "RunResult",
    "ensure_baseline",
    "ensure_brief",
    "ensure_data_report",
    "mark_stopped",
    "result",
    "select_final",
]


@dataclass(frozen=True)
class RunResult:
    """What a run reached: its final node and scores, what it spent, and why it stopped."""

    run_id: str
    best_id: str | None
    best_score: float | None
    best_test_score: float | None
    baseline_score: float | None
    verifications: int
    rounds: int
    stopped: str


def mark_stopped(engine: Engine, exc: BaseException) -> None:
    """Store why the run stopped early: ``failed`` with the reason for a ``VerifylessError`` (a failed
    baseline, a dead endpoint, replies that never parse); ``interrupted`` for Ctrl-C, a kill or a crash.
    Either way the run resumes from its events."""
    if isinstance(exc, VerifylessError):
        reason = f"{type(exc).__name__} (exit {exc.exit_code}): {exc}"
        engine.store.set_status(engine.ledger.rid, "failed", reason=reason)
    else:
        engine.store.set_status(engine.ledger.rid, "interrupted")


async def ensure_brief(engine: Engine) -> None:
    """Ask the briefer once per run (a resumed run keeps its stored brief), after the data report."""
    await ensure_data_report(engine)
    if engine.state.brief is None:
        brief = await engine.roles.briefer.brief(engine.task, data_report=engine.state.data_report_text())
        engine.ledger.emit("brief", {"understanding": brief.understanding, "criteria": list(brief.criteria)})


async def ensure_data_report(engine: Engine) -> None:
    """Compute the task's data report at the start of a new run (``engine.data_report``), as one event.

    Only a run whose log is still empty computes it: a resumed run keeps what its log holds, the stored
    report or none (a run stored before the option existed), so its prompts keep their bytes. The script
    runs in the executor's sandbox (a local one where the executor has none) with the task folder, the
    hidden data and the run store masked; it is framework code, so its seconds are recorded in the event
    and charged to no budget. A report that could not be computed is stored too: it says why.
    """
    if engine.state.last_seq or not engine.config.engine.data_report:
        return
    sandbox = getattr(engine.executor, "sandbox", None) or LocalSandbox()
    hide = (Path(engine.config.store).resolve().parent,)
    report, seconds = await asyncio.to_thread(datareport.report_for_run, engine.task, sandbox, hide=hide)
    blob = engine.store.put_blob(report.to_json())
    engine.ledger.emit(datareport.EVENT, datareport.event_payload(report, blob, seconds))


async def ensure_baseline(engine: Engine) -> None:
    """Verify the task's baseline program as node ``root`` (round 0), once per run; stop if it failed.

    The check (``engine/baseline.py``) runs on the stored result at every start, a resume included, so a
    run stopped by its baseline stops again instead of searching on.
    """
    if "root" not in engine.state.view.nodes:
        await _verify_baseline(engine)
    stored = engine.state.verifications.get("root")
    if stored is not None:
        check_baseline(engine.task, stored, allow_failed=engine.config.engine.allow_failed_baseline)


async def _verify_baseline(engine: Engine) -> None:
    program = engine.task.baseline_program
    cand = Candidate(
        id="root",
        parent_id=None,
        operator=Operator.BASELINE,
        idea=Idea("the task's baseline program"),
        program=program,
        program_hash=content_hash(program),
        round=0,
    )
    cand = cand.replace(summary=await engine.maker.summarize(cand.program, cand.idea))
    engine.ledger.record_candidate(cand, Status.IMPLEMENTED)
    await engine._verify(cand, engine.gate.reserve_anyway(), (0,), 0)  # every run verifies its baseline
    await engine._tell_round(0, engine.tells.take(0))


async def select_final(engine: Engine, best_id: str | None) -> str | None:
    """Optional end-of-run step: a judged round-robin over the top-N validation nodes (RPM paper)."""
    top_n = engine.config.engine.final_selection
    if top_n is None or engine.final_judge is None:
        return best_id
    selection = await round_robin(
        engine.state.view.nodes.values(),
        engine.final_judge,
        top_n,
        rng=random.Random(f"{engine.config.seed}:final"),
        task=engine.task,
        summaries=engine.state.summaries,
        data_report=engine.state.data_report_text(),
    )
    engine.ledger.emit(
        "final_selection",
        {
            "winner": selection.winner,
            "pool": list(selection.pool),
            "points": dict(selection.points),
            "strategy_best": best_id,
            "matches": [dict(m) for m in selection.matches],
        },
    )
    return selection.winner or best_id


def result(engine: Engine, final_id: str | None, stopped: str) -> RunResult:
    """The run's summary, read from the store's node view."""
    rows = {r["node_id"]: r for r in engine.store.node_rows(engine.ledger.rid)}
    best = rows.get(final_id, {}) if final_id else {}
    return RunResult(
        run_id=engine.run_id or "",
        best_id=final_id,
        best_score=best.get("score"),
        best_test_score=best.get("test_score"),
        baseline_score=rows.get("root", {}).get("score"),
        verifications=engine.gate.used().verifications,
        rounds=engine.state.rounds_done,
        stopped=stopped,
    )
