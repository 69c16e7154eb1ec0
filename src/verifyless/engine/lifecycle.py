"""The start and the end of a run: the data report, the brief, the baseline, the optional final selection,
the ensemble submission, the result, and how an early stop is stored.

``Lifecycle`` is built by the engine with the collaborators these steps need (task, briefer, config,
ledger, child maker, final judge, the verification ``Dispatch`` and a ``tell`` callback for round 0);
it holds no state of its own beyond them. ``mark_stopped`` is also a plain function, for the fallback
policy (``engine/fallback.py``).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from verifyless.config import RunConfig
from verifyless.engine.baseline import check_baseline
from verifyless.engine.context import Programs
from verifyless.engine.dispatch import Dispatch
from verifyless.engine.submission import (
    SKIPPED,
    UNSUPPORTED,
    ensemble_members,
    ensemble_submission,
    no_ensemble_reason,
)
from verifyless.errors import RunHeld, VerifylessError
from verifyless.events import BriefLogged, FinalSelected, SelectionSplitChosen, Submitted
from verifyless.ledger import Ledger
from verifyless.ledger.budget import EVALUATOR_SPENT, GPU_SPENT, WALL_SPENT
from verifyless.model.base import Model
from verifyless.node import BASELINE_IDEA, Candidate, Idea, Operator, Status, content_hash
from verifyless.roles.base import Roles
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.final import choose_on_held_out
from verifyless.screen.final import select_final as round_robin
from verifyless.search.base import EnsembleStrategy, SearchStrategy
from verifyless.store.protocol import RunStoreProtocol
from verifyless.store.records import Budget, Charge
from verifyless.task.base import Task
from verifyless.task.home import recorded

log = logging.getLogger(__name__)

__all__ = ["Lifecycle", "RunResult", "mark_stopped"]

TellRound = Callable[[int], Awaitable[None]]  # tell round r's queued nodes as one batch (the engine's boundary)


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
    baseline_test_score: float | None = None  # hidden: reporting only, beside best_test_score
    # The run's answer: "node" (the final node, best_*) or "ensemble" (the top-K ensemble submission, which
    # scored, when the strategy's ``ensemble_answer`` asks for it); its validation and hidden test scores.
    answer: str = "node"
    answer_score: float | None = None
    answer_test_score: float | None = None


def mark_stopped(store: RunStoreProtocol, run_id: str, exc: BaseException) -> None:
    """Store why run ``run_id`` stopped early: ``failed`` with the reason for a ``VerifylessError`` (a failed
    baseline, a dead endpoint, replies that never parse); ``interrupted`` for Ctrl-C, a kill or a crash.
    Either way the run resumes from its events. Nothing for ``RunHeld``: the run is another process's now."""
    if isinstance(exc, RunHeld):
        return
    if isinstance(exc, VerifylessError):
        reason = f"{type(exc).__name__} (exit {exc.exit_code}): {exc}"
        store.set_status(run_id, "failed", reason=reason)
    else:
        store.set_status(run_id, "interrupted")


class Lifecycle:
    """The steps before the first round and after the last one, for one run (module docstring).

    Reads the run's state through ``ledger`` (so a state adopted from a snapshot is the one read) and
    the executor through ``dispatch`` (its one owner).
    """

    def __init__(
        self,
        *,
        task: Task,
        roles: Roles,
        config: RunConfig,
        ledger: Ledger,
        dispatch: Dispatch,
        programs: Programs,
        final_judge: Model | None,
        tell: TellRound,
        strategy: Callable[[], SearchStrategy] | None = None,
    ) -> None:
        self.task, self.roles, self.config, self.ledger = task, roles, config, ledger
        self.dispatch, self.programs, self.final_judge, self.tell = dispatch, programs, final_judge, tell
        self.strategy = strategy
        ledger.gate.hold = self.ensemble_hold

    def ensemble_hold(self, used: Budget) -> float:
        """Evaluator seconds the search leaves for the top-K ensemble when it is the run's answer (the strategy's
        ``ensemble_answer``): its members times the mean seconds per paid verification so far, so a run under a
        time cap still scores its answer. 0 where the ensemble is not the answer (nothing changes there)."""
        strategy = self.strategy() if self.strategy is not None else None
        if not isinstance(strategy, EnsembleStrategy) or not strategy.ensemble_answer or not used.verifications:
            return 0.0
        members = ensemble_members(strategy, self.task, self.ledger.state.view)
        return len(members) * used.evaluator_seconds / used.verifications

    def new_run(self) -> str:
        """Register a new run of the task in the store (its config, the task's fingerprint, folder and metric)."""
        return self.ledger.store.create_run(
            self.task.name,
            self.config.model_dump(mode="json"),
            seed=self.config.seed,
            **recorded(self.task),  # its fingerprint, folder and metric
        )

    def mark_stopped(self, exc: BaseException) -> None:
        """``mark_stopped`` for this run."""
        mark_stopped(self.ledger.store, self.ledger.rid, exc)

    async def ensure_brief(self) -> None:
        """Ask the briefer once per run (a resumed run keeps its stored brief), after the data report."""
        await self.ensure_data_report()
        state = self.ledger.state
        if state.brief is None:
            brief = await self.roles.briefer.brief(self.task, data_report=state.data_report_text())
            self.ledger.emit(BriefLogged(brief.understanding, tuple(brief.criteria)))

    async def ensure_data_report(self) -> None:
        """Compute the task's data report at the start of a new run, as one event.

        Only a run that has neither a report nor a brief yet computes it (a new run, or one stopped before its
        first report was stored): a resumed run keeps what its log holds, the stored report or none (a run
        stored before the option existed reads it as off), so its prompts keep their bytes. The script
        runs in the executor's sandbox (a local one where the executor has none) with the task folder, the
        hidden data and the run store masked; it is framework code, so its seconds are recorded in the event
        and charged to no budget. A report that could not be computed is stored too: it says why.
        """
        state = self.ledger.state
        if state.data_report is not None or state.brief is not None or not self.config.engine.data_report:
            return
        sandbox = self.dispatch.executor.sandbox or LocalSandbox()
        await self.ledger.record_data_report(self.task, sandbox, hide=(Path(self.config.store).resolve().parent,))

    async def ensure_baseline(self) -> None:
        """Verify the task's baseline program as node ``root`` (round 0), once per run; stop if it failed.

        The check (``engine/baseline.py``) runs on the stored result at every start, a resume included, so a
        run stopped by its baseline stops again instead of searching on.
        """
        if "root" not in self.ledger.state.view.nodes:
            await self._verify_baseline()
        stored = self.ledger.state.verifications.get("root")
        if stored is not None:
            check_baseline(self.task, stored, allow_failed=self.config.engine.allow_failed_baseline)

    async def _verify_baseline(self) -> None:
        program = self.task.baseline_program
        cand = Candidate(
            id="root",
            parent_id=None,
            operator=Operator.BASELINE,
            idea=Idea(BASELINE_IDEA),
            program=program,
            program_hash=content_hash(program),
            round=0,
        )
        cand = cand.replace(summary=await self.dispatch.maker.summarize(cand.program, cand.idea))
        self.ledger.record_candidate(cand, Status.IMPLEMENTED)
        await self.dispatch.verify(cand, self.ledger.gate.reserve_anyway(), (0,), 0)  # every run verifies it
        await self.tell(0)

    async def select_final(self, best_id: str | None) -> str | None:
        """The run's final node: a judged round-robin over the top-N validation nodes when
        ``engine.final_selection`` is on (RPM paper), else the choice on the task's selection split (when it has
        one and ``engine.selection_pool`` > 0), else the strategy's ``best_id``."""
        top_n = self.config.engine.final_selection
        if top_n is None or self.final_judge is None:
            return self.choose_on_selection_split(best_id)
        state = self.ledger.state
        selection = await round_robin(
            state.view.nodes.values(),
            self.final_judge,
            top_n,
            rng=random.Random(f"{self.config.seed}:final"),
            task=self.task,
            summaries=state.summaries,
            data_report=state.data_report_text() if self.config.engine.screener_data_report else "",
        )
        self.ledger.emit(
            FinalSelected(
                selection.winner,
                tuple(selection.pool),
                dict(selection.points),
                best_id,
                tuple(dict(m) for m in selection.matches),
            )
        )
        return selection.winner or best_id

    def choose_on_selection_split(self, best_id: str | None) -> str | None:
        """The final node by the task's selection metric (``screen.final.choose_on_held_out``: among the top
        ``engine.selection_pool`` validation nodes, the baseline and ``best_id``, those not worse than the baseline
        on validation), logged as ``selection_split``. The scores were measured when each node was verified, so
        this costs nothing. ``best_id`` when the task has no selection metric or no eligible node has a score."""
        name, top_n = self.task.selection_metric, self.config.engine.selection_pool
        if name is None or top_n == 0:
            return best_id
        state = self.ledger.state
        scores = {i: v.test_metrics[name] for i, v in state.verifications.items() if name in v.test_metrics}
        choice = choose_on_held_out(state.view.nodes.values(), scores, self.task.metric.orient, top_n, keep=(best_id,))
        self.ledger.emit(
            SelectionSplitChosen(name, choice.pool, choice.eligible, dict(choice.scores), choice.winner, best_id)
        )
        return choice.winner or best_id

    async def submit_ensemble(self, strategy: SearchStrategy, final_id: str | None) -> None:
        """MLEvolve's top-K ensemble submission, where the task declares how outputs combine (engine/submission.py).

        The members (``strategy``'s choice) re-run in the executor's sandbox; one ``submission`` event, charged
        as evaluator seconds. Its ``beats_final`` says whether the ensemble's validation score is better than
        the final node's (None when either has none): averaging in weak members can make it worse, and then
        the final node is the better thing to submit. The re-runs spend evaluator seconds and wall time, so a
        run whose ``budget.evaluator_seconds`` or ``budget.wall_seconds`` is spent records the submission as
        ``skipped`` (with why) instead of running past its cap; a resume with a raised cap scores it then. A run
        that asked for ensembles on every task (``ensemble_tasks: all``) on a task whose outputs do not combine
        records ``unsupported`` with why, once, and its answer is the final node.
        """
        events = list(self.ledger.store.events(self.ledger.rid, Submitted))
        unsupported = no_ensemble_reason(strategy, self.task)
        if unsupported:
            log.info("ensemble submission: %s", unsupported)
            if not any(e.record.status == UNSUPPORTED for e in events):
                self.ledger.emit(Submitted((), UNSUPPORTED, unsupported, final_id=final_id, beats_final=None))
            return
        ids = ensemble_members(strategy, self.task, self.ledger.state.view)
        executor = self.dispatch.executor
        sandbox = executor.sandbox
        if not ids or sandbox is None:
            return
        scored = [e.record.members for e in events if e.record.status not in (SKIPPED, UNSUPPORTED)]
        if scored and list(scored[-1]) == list(
            ids
        ):  # a resume that changed nothing: the same members were scored already
            return
        spent = self.ledger.gate.llm_stop_reason(final=True)
        if spent in (EVALUATOR_SPENT, GPU_SPENT, WALL_SPENT):
            reason = f"{spent} is spent: the members were not re-run (raise the cap and resume to score it)"
            log.info("ensemble submission skipped: %s", reason)
            self.ledger.emit(Submitted(tuple(ids), SKIPPED, reason, final_id=final_id, beats_final=None))
            return
        members = [(i, self.programs.text(i)) for i in ids]
        sub = await asyncio.to_thread(
            ensemble_submission, self.task, members, sandbox, hide=tuple(Path(p) for p in executor.hide)
        )
        final = self.ledger.state.view.nodes.get(final_id) if final_id else None
        beats = None
        if sub.score is not None and final is not None and final.fitness is not None:
            beats = self.task.metric.orient(sub.score) > final.fitness
        record = Submitted.parse({**sub.to_dict(), "final_id": final_id, "beats_final": beats})
        self.ledger.emit(record, charge=Charge(evaluator_seconds=sub.seconds))

    def result(self, final_id: str | None, stopped: str, strategy: SearchStrategy | None = None) -> RunResult:
        """The run's summary, read from the store's node view; its answer is the ensemble submission when
        ``strategy`` asks for it (``ensemble_answer``) and the run's last submission scored, else the final node."""
        rows = {r["node_id"]: r for r in self.ledger.store.node_rows(self.ledger.rid)}
        best = rows.get(final_id, {}) if final_id else {}
        answer = ("node", best.get("score"), best.get("test_score"))
        if isinstance(strategy, EnsembleStrategy) and strategy.ensemble_answer:
            subs = [e.record for e in self.ledger.store.events(self.ledger.rid, Submitted)]
            if subs and subs[-1].status == Status.OK.value and subs[-1].score is not None:
                answer = ("ensemble", subs[-1].score, subs[-1].test_score)
        return RunResult(
            run_id=self.ledger.run_id or "",
            best_id=final_id,
            best_score=best.get("score"),
            best_test_score=best.get("test_score"),
            baseline_score=rows.get("root", {}).get("score"),
            baseline_test_score=rows.get("root", {}).get("test_score"),
            verifications=self.ledger.gate.used().verifications,
            rounds=self.ledger.state.rounds_done,
            stopped=stopped,
            answer=answer[0],
            answer_score=answer[1],
            answer_test_score=answer[2],
        )
