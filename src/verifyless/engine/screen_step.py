"""The round's screening step: screen the pool, store the screening, route it, dispatch the chosen ones.

``ScreenStep`` owns the run's screener (a snapshot's restored observer replaces it, ``Engine.adopt``) and
its reply health (``screen/health.py``: the parse rate per screening; consecutive screenings that parsed
nothing stop the run). A dead screener endpoint falls back to a seeded random pick or stops the run
(``engine/fallback.py``). Routing is the pure ``select`` (``engine/routing.py``); the candidates it does not
choose are screened out and queued for the round's tell in ranking order; the chosen ones are dispatched
through ``Dispatch`` after waiting for the executor, at tell positions ``(k,)``.
"""

from __future__ import annotations

import logging
import random
from functools import partial

from verifyless.config import RunConfig
from verifyless.engine.context import Programs
from verifyless.engine.dispatch import Dispatch
from verifyless.engine.fallback import screener_failed
from verifyless.engine.routing import select
from verifyless.engine.tells import TellOrder, TellQueue
from verifyless.errors import ModelUnavailable
from verifyless.events import Screened
from verifyless.ledger import Ledger
from verifyless.node import Candidate, Screening, Status, Verification
from verifyless.roles.base import ParentInfo
from verifyless.screen.agentic import pilot_records
from verifyless.screen.base import ScreenContext, Screener, candidates_wanted
from verifyless.screen.health import ReplyHealth
from verifyless.store.records import Charge
from verifyless.task.base import Task

log = logging.getLogger(__name__)

__all__ = ["ScreenStep"]


class ScreenStep:
    """Screens and routes one expansion's pool (module docstring); reads the run's state through ``ledger``."""

    def __init__(
        self,
        *,
        task: Task,
        config: RunConfig,
        ledger: Ledger,
        tells: TellQueue,
        programs: Programs,
        dispatch: Dispatch,
        screener: Screener,
    ) -> None:
        self.task, self.config, self.ledger, self.tells = task, config, ledger, tells
        self.programs, self.dispatch, self.screener = programs, dispatch, screener
        self.reply_health = ReplyHealth.for_screener(screener)  # parse rate per screening; stops on silence

    @property
    def name(self) -> str:
        """The screener's name."""
        return self.screener.name

    def wanted(self, candidates: int) -> int:
        """How many candidates to make for the screener when the configuration asks for ``candidates``."""
        return candidates_wanted(self.screener, candidates)

    async def screen_and_route(self, r: int, rng: random.Random, parent: ParentInfo, pool: list[Candidate]) -> None:
        """Screen ``pool`` (round ``r``), store the screening with what it routes, screen out the rest, dispatch."""
        screening = await self._screen(r, rng, parent, pool)
        eng = self.config.engine
        routed = select(
            screening,
            slots=self.ledger.gate.slots_left(),
            verify_uncertain=eng.verify_uncertain,
            threshold=eng.uncertainty_threshold,
            audit_rate=eng.audit_rate,
            rng=rng,
        )
        self.ledger.emit(Screened(screening, tuple(routed.to_verify), tuple(routed.audited), r))
        self._after_screening(r, screening, list(routed.to_verify))
        if routed.uncertain:
            log.info(
                "round %d: routed %s to verification (vote uncertainty >= %s)",
                r,
                list(routed.uncertain),
                eng.uncertainty_threshold,
            )
        for k, cid in enumerate(screening.ranking):
            if cid not in routed.to_verify:
                self.ledger.set_status(
                    cid, Status.SCREENED_OUT, f"ranked {k + 1} of {len(pool)} by {screening.screener}"
                )
                self.tells.add(r, TellOrder.SCREENED_OUT, (k,), cid)
        by_id = {c.id: c for c in pool}
        for k, cid in enumerate(routed.to_verify):
            await self.dispatch.wait_for_executor()
            self.dispatch.dispatch(by_id[cid], (k,), screening.ranking.index(cid))

    async def _peek(self, candidate: Candidate) -> Verification:
        """Run ``candidate`` off the books for the ``peek`` oracle: no slot, no charge, no event."""
        return await self.dispatch.executor.verify(self.task, candidate.program)

    async def _screen(self, r: int, rng: random.Random, parent: ParentInfo, pool: list[Candidate]) -> Screening:
        """The screener's ranking; a dead screener endpoint falls back to a seeded random pick or stops the run
        (``engine/fallback.py``: counted, shown, and never silent)."""
        eng, state, low = self.config.engine, self.ledger.state, self.dispatch.low_fidelity
        ctx = ScreenContext(
            task=self.task,
            parent=parent,
            rng=rng,
            brief=state.brief,
            data_report=state.data_report_text() if eng.screener_data_report else "",
            nodes={k: v for k, v in state.view.nodes.items() if v.status.verified},
            summaries=state.summaries,
            n_verify=eng.verify_per_expansion,
            round=r,
            budget_left_s=self.ledger.gate.seconds_left(),
            program_of=self.programs.text,
            pilot=None if low is None else partial(low.pilot, round=r),
            peek=self._peek,
        )
        try:
            return await self.screener.screen(ctx, pool)
        except ModelUnavailable as exc:
            return screener_failed(self.ledger, eng, self.name, r, rng, pool, exc)

    def _after_screening(self, r: int, screening: Screening, to_verify: list[str]) -> None:
        """After a screening is stored: check reply health, charge pilot seconds, show progress.

        ``reply_health.observe`` warns on a low parse rate and raises ``UnparseableReplies`` (the run stops)
        after consecutive screenings that parsed nothing. Agentic pilots are evaluator seconds (RPM paper):
        one ``pilot`` event each, charged so the budget gate sees them.
        """
        self.reply_health.observe(screening)
        for pilot in pilot_records(screening, r):
            self.ledger.emit(pilot, charge=Charge(evaluator_seconds=pilot.seconds, pilot_seconds=pilot.seconds))
        if self.ledger.watched:
            self.ledger.progress(
                "screening",
                {
                    "round": r,
                    "screener": screening.screener,
                    "chosen": to_verify,
                    "evidence": screening.to_dict()["evidence"],
                },
            )
