"""The engine's side of model ensembles, and ``Peers``, the record wiring builds (docs/design/novelty-and-ensembles.md).

``Peers`` holds the run's novelty gate (None: off; the verification ``Dispatch`` runs it) and its model
ensembles by ``roles.models`` key; ``wiring.build_engine`` passes it to the ``Engine`` constructor.

``observe_ensembles`` feeds each ensemble the outcomes of a told round: a call whose ``owner`` (the
``model_choice`` event's node id, set by the engine with ``ensemble.call_owner``, ``dispatch.owned``) is a
told verified node gets that node's outcome; a proposer call owned by an expansion (``r<round>e<i>``) gets
"did any child of the expansion improve". Improved is the one outcome rule (``outcome.node_improved``,
the run's tie tolerance); cost is 0 (the bandit's ``cost_weight`` is not fed yet). On resume,
``Peers.restore`` replays the stored choices and tells into the fresh ensembles.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from verifyless.events import ModelChosen, Told
from verifyless.model.ensemble import ModelEnsemble, call_owner
from verifyless.node import Node
from verifyless.outcome import node_improved
from verifyless.screen.novelty import NoveltyGate
from verifyless.store.protocol import RunStoreProtocol

log = logging.getLogger(__name__)

__all__ = ["Peers", "observe_ensembles"]


@dataclass(frozen=True)
class Peers:
    """The run's novelty gate (None: off) and its model ensembles by ``roles.models`` key (built by wiring)."""

    novelty: NoveltyGate | None = None
    ensembles: Mapping[str, ModelEnsemble] = field(default_factory=dict)

    def observe(self, told: Sequence[Node], nodes: Mapping[str, Node], tie: float) -> None:
        """Feed the ensembles the outcomes of a told batch (``observe_ensembles``)."""
        observe_ensembles(self.ensembles, told, nodes, tie)

    def restore(
        self,
        store: RunStoreProtocol,
        run_id: str | None,
        nodes: Mapping[str, Node],
        tie: float,
        until_seq: int | None = None,
    ) -> None:
        """Replay the run's ``model_choice`` and ``tell`` events, in log order, into the (fresh) ensembles.

        Each stored choice is made again (``choose`` with its owner, not stored twice) and each told batch
        observed as the live run did, so tallies, call indexes and a Thompson rule's generator end where
        the run left them. A replayed choice that names another member than the stored one is logged.
        """
        if not self.ensembles or run_id is None:
            return
        for ev in store.events(run_id, ModelChosen, Told):
            if until_seq is not None and ev.seq > until_seq:
                break
            match ev.record:
                case Told(node_ids=node_ids):
                    told = [nodes[n] for n in node_ids if n in nodes]
                    observe_ensembles(self.ensembles, told, nodes, tie)
                case ModelChosen() as stored if (ensemble := self.ensembles.get(stored.ensemble)) is not None:
                    _choose_again(ensemble, stored)


def _choose_again(ensemble: ModelEnsemble, stored: ModelChosen) -> None:
    token = call_owner.set(str(stored.owner))
    try:
        choice = ensemble.choose(stored.role, replay=True)
    finally:
        call_owner.reset(token)
    if choice.model != stored.model:
        log.warning(
            "resume: ensemble %s chose %s for call %d, the run chose %s",
            ensemble.name,
            choice.model,
            choice.index,
            stored.model,
        )


def observe_ensembles(
    ensembles: Mapping[str, ModelEnsemble], told: Sequence[Node], nodes: Mapping[str, Node], tie: float
) -> None:
    """Feed every ensemble call owned by a told verified node (or its expansion) the node's outcome."""
    if not ensembles:
        return
    better: dict[str, bool] = {}
    for node in told:
        if not node.status.verified:
            continue
        better[node.id] = node_improved(node, nodes.get(node.parent_id or ""), tie)
        expansion = node.id.partition("c")[0]  # r<round>e<i>c<j>[f<k>] -> r<round>e<i>
        better[expansion] = better.get(expansion, False) or better[node.id]
    for ensemble in ensembles.values():
        for choice in ensemble.choices:
            if choice.owner in better and choice.index not in ensemble.observed_calls:
                ensemble.observe(choice.model, better[choice.owner], call=choice.index)
