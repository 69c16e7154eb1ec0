"""Resume: rebuild the engine from the store, then finish what a crash left open.

``restore`` loads the latest snapshot when one is usable (else starts from an
empty state) and applies the events after it with ``RunState.apply`` -- the
same projection the live path uses (``verifyless.ledger.fold``). While applying, each logged ``round``
repeats the strategy's ``ask`` and each ``tell`` batch is fed to the
strategy, the memory and an observing screener, so their state matches the
uninterrupted run's at that point of the log; learning screeners get their
stored ``screener_learn`` records through ``restore``.

Nodes recorded after the last batch are queued again for their round.
``finish_interrupted`` then verifies candidates a screening chose but that
never finished (they were never charged: the charge is part of the
verification event) and marks the ones made but never screened as
screened-out.

``Resume`` is built by the engine with what these steps read and feed (ledger, learners, snapshots,
peers, tell queue, verification dispatch) and an ``adopt`` callback that points the engine's parts at
a loaded snapshot's state (``Engine.adopt``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from verifyless.config import RunConfig
from verifyless.engine.dispatch import Dispatch
from verifyless.engine.ensembles import Peers
from verifyless.engine.learners import Learners
from verifyless.engine.snapshot import Loaded, Snapshots
from verifyless.engine.tells import TellOrder, TellQueue
from verifyless.events import RoundStarted
from verifyless.ledger import Ledger
from verifyless.node import Status
from verifyless.search.base import PacedStrategy

log = logging.getLogger(__name__)

__all__ = ["Resume"]


def replay_pace(strategy: object, logged: RoundStarted) -> None:
    """Pace an annealing strategy as the logged round did before its ask is repeated (older logs: no pace)."""
    schedule = logged.schedule
    if isinstance(strategy, PacedStrategy) and isinstance(schedule, dict):
        strategy.pace(schedule.get("steps_left"))


class Resume:
    """Rebuilds one run's derived state from its events and finishes what a crash left open (module docstring)."""

    def __init__(
        self,
        *,
        config: RunConfig,
        ledger: Ledger,
        learners: Learners,
        snapshots: Snapshots,
        peers: Peers,
        tells: TellQueue,
        dispatch: Dispatch,
        adopt: Callable[[Loaded], None],
    ) -> None:
        self.config, self.ledger, self.learners, self.snapshots = config, ledger, learners, snapshots
        self.peers, self.tells, self.dispatch, self.adopt = peers, tells, dispatch, adopt

    def restore(self, *, from_snapshot: bool = True, until_seq: int | None = None) -> None:
        """Rebuild the state, strategy, memory and screener learning from the run's events.

        ``until_seq`` stops after that event (benchmarks and tests build a snapshot
        of an earlier point with it); a resume applies every event.
        """
        loaded = self.snapshots.load() if from_snapshot else None
        refeed_memory = refeed_observer = False
        if loaded is not None:
            self.adopt(loaded)
            refeed_memory, refeed_observer = not loaded.has_memory, not loaded.has_observer
        state, learners, k = self.ledger.state, self.learners, self.config.engine.expansions_per_round
        store = self.ledger.store
        with learners.batched_memory():
            if refeed_memory or refeed_observer:  # parts the snapshot could not hold: fed again in tell order
                learners.tell(
                    state,
                    list(state.view.nodes.values()),
                    strategy=False,
                    memory=refeed_memory,
                    observer=refeed_observer,
                )
            for ev in store.events(self.ledger.rid, after=state.last_seq):
                if until_seq is not None and ev.seq > until_seq:
                    break
                told = state.apply(ev)
                if isinstance(ev.record, RoundStarted):
                    replay_pace(learners.strategy, ev.record)
                    learners.strategy.ask(state.view, k)  # the strategy's own bookkeeping (and generator) moves on
                elif told:
                    learners.tell(state, told)
        learners.restore(state.learn_records)
        self.peers.restore(store, self.ledger.run_id, state.view.nodes, self.config.tie_tolerance, until_seq)
        for k_, cid in enumerate(state.staged):
            node = state.staged[cid]
            if cid == "root" or (node.status is Status.IMPLEMENTED and cid not in state.verifications):
                continue  # chosen but unfinished, or screened when the crash hit: finish_interrupted decides
            self.tells.add(state.candidates[cid].round, TellOrder.RESTORED, (k_,), cid)

    async def finish_interrupted(self) -> None:
        """Verify the candidates chosen before a crash that never finished; mark the unscreened ones."""
        state = self.ledger.state
        todo = sorted(
            (i, cid)
            for cid, i in state.chosen.items()
            if cid in state.staged
            and state.staged[cid].status is Status.IMPLEMENTED
            and cid in state.candidates
            and cid not in state.verifications
        )
        for i, cid in todo:
            slot = self.ledger.gate.reserve()
            if slot is None:
                break
            cand = state.candidates[cid]
            cand = cand.replace(program=self.ledger.store.get_text(cand.program_hash))
            await self.dispatch.verify_chain(cand, (i,), slot)
        todo_ids = {cid for _, cid in todo}
        for cid, node in list(state.staged.items()):
            if node.status is Status.IMPLEMENTED and cid not in state.verifications and cid not in todo_ids:
                self.ledger.set_status(
                    cid, Status.SCREENED_OUT, "the run was interrupted before this candidate was verified"
                )
                self.tells.add(state.candidates[cid].round, TellOrder.INTERRUPTED, (cid,), cid)

    def announce(self) -> None:
        """Say where a resumed run continues: INFO log and a ``resume`` progress event (the CLI prints it)."""
        used, cap = self.ledger.gate.used().verifications, self.config.budget.verifications
        paid = f"{used} of {cap}" if cap is not None else f"{used}"
        data = {"round": self.ledger.state.rounds_done + 1, "verifications": used, "cap": cap}
        log.info("resuming run %s at round %d: %s verifications paid", self.ledger.run_id, data["round"], paid)
        self.ledger.progress("resume", data)
