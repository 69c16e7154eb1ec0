"""What the roles are shown about a parent: read-only views of the run state (no writes, no randomness)."""

from __future__ import annotations

import dataclasses
import random
from collections import OrderedDict
from typing import Literal

from verifyless.ledger.fold import RunState
from verifyless.node import Operator, Status
from verifyless.roles.base import ParentInfo, ProposeContext
from verifyless.search.base import Expansion
from verifyless.search.memory import Memory
from verifyless.store.protocol import RunStoreProtocol
from verifyless.task.base import Task

__all__ = ["Programs", "TriedIdeas", "parent_info", "propose_context", "tried_ideas"]

TriedIdeas = Literal["proposed", "verified"]  # engine.tried_ideas


class Programs:
    """Program text by node id, read from the store's blobs (a small cache keeps the recent ones)."""

    def __init__(self, store: RunStoreProtocol, state: RunState, keep: int = 256) -> None:
        self.store, self.state, self.keep = store, state, keep
        self._cache: OrderedDict[str, str] = OrderedDict()

    def text(self, node_id: str) -> str:
        digest = self.state.programs[node_id]
        if digest in self._cache:
            self._cache.move_to_end(digest)
            return self._cache[digest]
        text = self.store.get_text(digest)
        self._cache[digest] = text
        if len(self._cache) > self.keep:
            self._cache.popitem(last=False)
        return text


def node_info(state: RunState, programs: Programs, node_id: str) -> ParentInfo:
    v = state.verifications.get(node_id)
    return ParentInfo(
        id=node_id,
        program=programs.text(node_id),
        score=v.score if v is not None and v.status is Status.OK else None,
        summary=state.summaries.get(node_id, ""),
        idea=state.ideas.get(node_id),
    )


def parent_info(state: RunState, programs: Programs, exp: Expansion) -> ParentInfo:
    """The expansion's parent (the root if unknown); a DEBUG expansion also shows the parent's error."""
    pid = exp.parent_id if exp.parent_id is not None and exp.parent_id in state.programs else "root"
    info = node_info(state, programs, pid)
    v = state.verifications.get(pid)
    if exp.operator is Operator.DEBUG and v is not None and v.status is not Status.OK:
        info = dataclasses.replace(info, error=f"{v.status.value}: {v.reason}\n{v.stderr_tail[-2000:]}")
    return info


def propose_context(
    task: Task,
    state: RunState,
    programs: Programs,
    memory: Memory | None,
    exp: Expansion,
    parent: ParentInfo,
    rng: random.Random,
    tried: TriedIdeas = "proposed",
) -> ProposeContext:
    """Everything the proposer sees for one expansion; draws one seed from ``rng``.

    Inspirations are the strategy's ``inspiration_ids`` that have a summary, each shown with its verified
    validation score (the critic paper's proposer sees both). ``avoid`` lists the ideas of the parent's earlier
    children (``tried_ideas``, ``engine.tried_ideas``).
    """
    shown = [n for n in exp.inspiration_ids if n in state.summaries]
    return ProposeContext(
        task=task,
        parent=parent,
        operator=exp.operator,
        inspirations=tuple(state.summaries[n] for n in shown),
        inspiration_scores=tuple(_score(state, n) for n in shown),
        memory=memory_snippets(memory, exp, parent),
        avoid=tried_ideas(state, parent.id, tried)[-50:],
        references=tuple(node_info(state, programs, n) for n in exp.reference_ids if n in state.programs),
        seed=rng.randrange(2**31),
    )


def tried_ideas(state: RunState, parent_id: str | None, tried: TriedIdeas = "proposed") -> tuple[str, ...]:
    """The ideas of ``parent_id``'s children told so far, in tell order.

    ``proposed``: every child made from the parent, screened-out and failed-before-verification ones included
    (the proposer is steered away from ideas a screener rejected). ``verified``: only children whose program was
    run (a ``verified`` event, whatever its status): the papers' proposers see the population or tree of executed
    solutions only, so two screening arms that verified the same children see the same list, however many
    candidates each screened out.
    """
    children = state.view.children.get(parent_id, ())
    if tried == "verified":
        children = [c for c in children if c in state.verifications]
    return tuple(state.ideas[c].text for c in children if c in state.ideas)


def _score(state: RunState, node_id: str) -> float | None:
    node = state.view.nodes.get(node_id)
    return node.score if node is not None else None


def memory_snippets(memory: Memory | None, exp: Expansion, parent: ParentInfo) -> tuple[str, ...]:
    if memory is None:
        return ()
    stage = "debug" if exp.operator is Operator.DEBUG else "improve"
    idea_text = parent.idea.text if parent.idea else parent.summary
    query = memory.query_for(stage, idea=idea_text, error=parent.error)
    return tuple(memory.snippet(hit.record) for hit in memory.search(query, k=5, stage=stage))
