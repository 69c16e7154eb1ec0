"""Progressive Monte-Carlo graph search (MLEvolve).

Graph: ``Node.parent_id`` is the primary edge and carries credit;
``Node.reference_ids`` are information-only edges and never receive any
backpropagated statistics.

Definitions used below:

- *root*: the first BASELINE node told. *Branch* of a node: the root's child on
  its primary path (a root child is its own branch; the root has none). A
  node whose parent is unknown or None starts its own branch.
- *time* ``t``: the number of verified non-baseline nodes told (one expansion
  step each). Screened-out / unimplemented candidates do not advance time.
- *reward* of a verified node: -1 without a usable score; +2 when it beats the
  best score seen so far in its branch (the first usable node of a branch
  counts as a new branch best); +1 otherwise. ``N += 1, W += R`` for the node
  and each primary ancestor up to the root; ``Q = W / (N + eps)``.
- *branch stagnation*: consecutive verified expansions in a branch without a
  new branch best. At ``tau_branch`` the next expansion of an OK node in that
  branch is EVOLVE (references: the nearest ``evolve_k`` primary ancestors in
  the branch); after ``evolve_tries`` such EVOLVE steps without improvement it
  becomes REFERENCE (references: the best ``reference_n`` nodes of other
  branches). A new branch best resets both counters.
- *global stagnation*: verified steps since the last new global best. At
  ``tau_global`` (and when at least two branches have a usable node) the first
  expansion of the next ask is AGGREGATE: parent = the root, so the result is a
  new branch; references = the best node of each of the top ``aggregate_n``
  branches. Telling an AGGREGATE node restarts the global count, so
  aggregation fires at most once per ``tau_global`` stagnant steps.

Schedules: ``c(t)`` from ``c0`` to ``c_min`` and ``w(t)`` from 1 to ``w_min`` over the run. The engine
paces the strategy before each ask (``pace``: the verified steps the budget leaves after that ask), so the
progress ``t / (t + steps_left)`` reaches 1 at the run's last ask; a fixed ``horizon`` counts steps instead.
The budget's verifications and evaluator seconds pace it; with ``wall_pacing`` a ``budget.wall_seconds`` cap
does too (``BudgetGate.steps_left``: wall seconds left over the wall seconds per verification so far).

Selection for each expansion: during the draft phase (fewer than ``num_drafts``
root children) a DRAFT from the root. Otherwise with probability ``w(t)`` a UCT
descent from the root, else an elite-guided draw from the global top
``top_k`` usable nodes with weight ``1/rank``. UCT descent: at a node with fewer
than ``expand_width`` verified children (and not the root) expand it; else move
to the child maximising ``Q + c(t) * sqrt(ln(N_parent + 1) / (N_child + eps))``.
Buggy nodes are expanded by DEBUG once each, up to ``max_debug_depth``
consecutive debug steps; with ``debug_first`` (default) such buggy leaves are
repaired before any selection, newest first, as MLEvolve's debug agent
retries failures right away (otherwise they wait for UCT, whose -1 reward
rarely picks them). Within one ask, expansions already handed out count
as virtual visits so that ``k`` expansions spread out.

Final answer: ``final`` is the best validation node; ``final_ensemble`` the
top ``top_k`` usable nodes, which the engine submits as one ensemble
when ``submit_ensemble`` is on and the task has a rule for combining its outputs
that ``ensemble_tasks`` admits (MLEvolve's top-K submission;
``verifyless.engine.submission``); with ``ensemble_answer`` the ensemble is the
run's result.

Per-ask randomness is seeded from ``(seed, tells, asks since last tell)``.
All state is plain data (picklable).
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from typing import Literal

from pydantic import Field, model_validator

from verifyless.errors import ConfigError
from verifyless.node import Node, Operator
from verifyless.registry import StrictOptions
from verifyless.search.base import Expansion, SearchView, ToldState
from verifyless.search.greedy import debug_depth

SCHEDULES = ("linear", "cosine")


def anneal(start: float, end: float, t: float, horizon: float, kind: str = "linear") -> float:
    """Move from ``start`` (t=0) to ``end`` (t >= horizon), monotonically, by ``kind``."""
    frac = 1.0 if horizon <= 0 else min(max(t / horizon, 0.0), 1.0)
    if kind == "linear":
        return start + (end - start) * frac
    if kind == "cosine":
        return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * frac))
    raise ConfigError(f"unknown schedule {kind!r}; use one of {SCHEDULES}")


def inverse_rank_sample(rng: random.Random, ranked_ids: Sequence[str]) -> str:
    """Draw one id; the id at rank r (1 = best) has weight proportional to 1/r."""
    weights = [1.0 / r for r in range(1, len(ranked_ids) + 1)]
    return rng.choices(list(ranked_ids), weights=weights, k=1)[0]


def effective_branches(branches: Sequence[str]) -> float:
    """exp of the Shannon entropy of how often each branch occurs in ``branches`` (0 for none)."""
    if not branches:
        return 0.0
    n = len(branches)
    counts: dict[str, int] = {}
    for b in branches:
        counts[b] = counts.get(b, 0) + 1
    return math.exp(-sum(c / n * math.log(c / n) for c in counts.values()))


Schedule = Literal["linear", "cosine"]
DEFAULT_HORIZON = 100  # steps of the anneal for a strategy that no run paces (used outside the engine)
ENTROPY_WINDOW = 10  # selections behind the reported effective branch count exp(H(pi_t))


class MCGSConfig(StrictOptions):
    """Constants of progressive MCGS (MLEvolve); the rules that use them are in the module docstring."""

    c0: float = Field(1.414, ge=0.0, description="UCT exploration constant c(t) at t=0 (at least c_min)")
    c_min: float = Field(0.1, ge=0.0, description="UCT exploration constant at the end of the anneal")
    schedule: Schedule = Field("linear", description="annealing of c(t) from c0 to c_min")
    horizon: int | None = Field(
        None,
        ge=1,
        description="steps T of the anneal; None: the run's budget (the engine paces the strategy before each ask, "
        f"so c and w reach their floors at the run's last ask; {DEFAULT_HORIZON} steps where nothing paces it)",
    )
    w_min: float = Field(
        0.2, ge=0.0, le=1.0, description="floor of the probability w(t) of UCT selection (w(0) = 1; else elites)"
    )
    w_schedule: Schedule = Field("linear", description="annealing of w(t) from 1 to w_min")
    w_horizon: int | None = Field(None, ge=0, description="steps of the w(t) anneal (None: as c(t), see horizon)")
    wall_pacing: bool = Field(
        False,
        description="a budget.wall_seconds cap paces the anneal too: the wall seconds left become steps at the "
        "run's wall seconds per verification so far (MLEvolve anneals over its wall-clock budget); the schedule "
        "then depends on timing, so such a run's choices are not replay-exact",
    )
    top_k: int = Field(5, ge=1, description="size of the elite set for elite-guided sampling and the final ensemble")
    eps: float = Field(1e-6, gt=0.0, description="added to N in Q = W / (N + eps) and in the UCT denominator")
    tau_branch: int = Field(3, ge=1, description="steps without a better node before a branch counts as stagnant")
    tau_global: int = Field(6, ge=1, description="steps without a better node before the whole search is stagnant")
    evolve_k: int = Field(3, ge=0, description="ancestors given to EVOLVE")
    evolve_tries: int = Field(1, ge=0, description="EVOLVE steps on a stagnant branch before REFERENCE")
    reference_n: int = Field(3, ge=0, description="other-branch nodes given to REFERENCE")
    aggregate_n: int = Field(3, ge=0, description="branches merged by AGGREGATE")
    num_drafts: int = Field(3, ge=1, description="root children drafted before UCT starts")
    expand_width: int = Field(3, ge=1, description="verified children a non-root node gets before UCT descends past it")
    max_debug_depth: int = Field(3, ge=0, description="consecutive DEBUG steps before a buggy node is abandoned")
    debug_first: bool = Field(
        True, description="repair debuggable buggy leaves (newest first) before selecting by UCT or elites"
    )
    submit_ensemble: bool = Field(
        True,
        description="submit the top top_k nodes as one ensemble when the task declares how to combine outputs "
        "(MLEvolve's final submission; engine/submission.py); off: the best node alone",
    )
    ensemble_tasks: Literal["declared", "all"] = Field(
        "declared",
        description="which tasks get the ensemble: declared = those whose task.yaml declares one without opt_in "
        "(built-in: diabetes); all = every task whose outputs combine (opt_in rules too: the other built-in "
        "prediction tasks, MLE-bench competitions), the others say why not and submit the best node",
    )
    ensemble_answer: bool = Field(
        False,
        description="report the ensemble's scores as the run's result (RunResult.answer = ensemble) when it "
        "scored; off: the final node is the result and the ensemble is reported beside it",
    )

    @model_validator(mode="after")
    def _anneals_down(self) -> MCGSConfig:
        if self.c0 < self.c_min:
            raise ValueError(f"c0 must be >= c_min, got c0={self.c0}, c_min={self.c_min}")
        return self


class MCGSStrategy(ToldState):
    """Progressive MCGS over primary edges with reference edges for context."""

    name = "mcgs"

    def __init__(self, rng: random.Random, config: MCGSConfig | None = None) -> None:
        self.config = config or MCGSConfig()
        super().__init__(rng)
        self.root_id: str | None = None
        self.N: dict[str, int] = {}
        self.W: dict[str, float] = {}
        self.reward: dict[str, float] = {}
        self.branch_of: dict[str, str | None] = {}
        self._branch_best: dict[str, str] = {}  # branch -> id of its best usable node
        self.branch_stale: dict[str, int] = {}
        self._branch_evolves: dict[str, int] = {}
        self.global_stale = 0
        self.t = 0
        # Incremental indexes so ask() stays O(top_k) instead of scanning every node.
        self._ok_ranked: list[tuple[float, int, str]] = []  # (-fitness, order, id) of usable non-root nodes
        self._buggy_leaves: dict[str, None] = {}  # buggy verified nodes with no verified child yet
        self.steps_left: int | None = None  # set by pace(); None: no run paces this strategy
        self._picks: list[str] = []  # branches of the last ENTROPY_WINDOW selections (measurement only)

    # ------------------------------------------------------------ schedules
    @property
    def paces_wall(self) -> bool:
        return self.config.wall_pacing

    def pace(self, steps_left: int | None) -> None:
        """Say how many verified steps the run's budget allows after the ones the next ask hands out.

        With ``horizon`` None the schedules then run over ``t + steps_left`` steps: the progress
        ``t / (t + steps_left)`` is 1 at the run's last ask whatever the budget, and a budget raised on resume
        stretches what is left of the anneal over the new steps. None: the run states no such count.
        """
        self.steps_left = None if steps_left is None else max(0, steps_left)

    def progress(self, t: float | None = None, steps: int | None = None) -> float:
        """How far the anneal is at step ``t`` (default: now), from 0 to 1.

        ``steps``: a fixed anneal length (an explicit ``horizon``); else the paced run's length; else
        ``DEFAULT_HORIZON``.
        """
        t = self.t if t is None else t
        if steps is None and self.steps_left is not None:
            total = self.t + self.steps_left
            return 1.0 if total <= 0 else min(max(t / total, 0.0), 1.0)
        steps = steps or DEFAULT_HORIZON
        return min(max(t / steps, 0.0), 1.0)

    def c(self, t: float | None = None) -> float:
        """UCT exploration constant at step ``t`` (default: now)."""
        frac = self.progress(t, self.config.horizon)
        return anneal(self.config.c0, self.config.c_min, frac, 1.0, self.config.schedule)

    def w(self, t: float | None = None) -> float:
        """Probability of UCT (vs elite-guided) selection at step ``t``."""
        frac = self.progress(t, self.config.w_horizon or self.config.horizon)
        return anneal(1.0, self.config.w_min, frac, 1.0, self.config.w_schedule)

    def schedule(self) -> dict[str, float | int | None]:
        """Where the anneal stands now, for the run's ``round`` events and the report.

        ``branches`` is exp(H) of the branches chosen by the last ``ENTROPY_WINDOW`` UCT or elite selections
        (MLEvolve's effective number of active branches; 0 before any selection).
        """
        return {
            "t": self.t,
            "steps_left": self.steps_left,
            "progress": round(self.progress(None, self.config.horizon), 6),
            "c": round(self.c(), 6),
            "w": round(self.w(), 6),
            "branches": round(effective_branches(self._picks), 6),
        }

    def Q(self, node_id: str) -> float:
        return self.W.get(node_id, 0.0) / (self.N.get(node_id, 0) + self.config.eps)

    # ------------------------------------------------------------------ tell
    def tell(self, node: Node) -> None:
        if not self._record(node):
            return
        if node.operator is Operator.BASELINE and self.root_id is None:
            self.root_id = node.id
            self.branch_of[node.id] = None
            return
        if node.parent_id is not None:
            self._buggy_leaves.pop(node.parent_id, None)  # it now has a verified child
        if node.ok:
            bisect.insort(self._ok_ranked, (-(node.fitness or 0.0), self._order[node.id], node.id))
        elif node.status.buggy and debug_depth(self._seen, node.id) < self.config.max_debug_depth:
            self._buggy_leaves[node.id] = None  # a node's debug depth never changes: checked once, here
        self.t += 1
        parent = node.parent_id if node.parent_id in self._seen.nodes else None
        branch = node.id if parent is None or parent == self.root_id else self.branch_of.get(parent) or node.id
        self.branch_of[node.id] = branch

        best_id = self._branch_best.get(branch)
        if not node.ok:
            r = -1.0
        elif best_id is None or node.fitness > self._seen.nodes[best_id].fitness:  # type: ignore[operator]
            r = 2.0
            self._branch_best[branch] = node.id
        else:
            r = 1.0
        self.reward[node.id] = r
        if r == 2.0:
            self.branch_stale[branch] = 0
            self._branch_evolves[branch] = 0
        else:
            self.branch_stale[branch] = self.branch_stale.get(branch, 0) + 1
            if node.operator is Operator.EVOLVE:
                self._branch_evolves[branch] = self._branch_evolves.get(branch, 0) + 1

        self.global_stale = 0 if self._seen.best_id == node.id else self.global_stale + 1
        if node.operator is Operator.AGGREGATE:
            self.global_stale = 0

        # Backpropagate along primary edges only; reference_ids are never touched.
        u: str | None = node.id
        while u is not None:
            self.N[u] = self.N.get(u, 0) + 1
            self.W[u] = self.W.get(u, 0.0) + r
            up = self._seen.nodes[u].parent_id
            u = up if up in self._seen.nodes else None

    # ------------------------------------------------------------------- ask
    def ask(self, view: SearchView, k: int) -> list[Expansion]:
        """Return ``k`` expansions (reads only told state; ``view`` is not consulted)."""
        rng = self._ask_rng()
        virtual: dict[str, int] = {}
        out: list[Expansion] = []
        drafts = len(self._verified_children(self.root_id))
        repairs = self._debuggable_leaves() if self.config.debug_first else []
        elites = self._elites()
        aggregated = False  # at most one AGGREGATE per ask
        for _ in range(k):
            if self.root_id is None or drafts < self.config.num_drafts:
                drafts += 1
                out.append(Expansion(self.root_id, Operator.DRAFT, note="draft phase"))
                continue
            if not aggregated and self._aggregate_due():
                aggregated = True
                refs = tuple(self._top_branch_bests()[: self.config.aggregate_n])
                out.append(
                    Expansion(
                        self.root_id,
                        Operator.AGGREGATE,
                        reference_ids=refs,
                        note=f"no new global best for {self.global_stale} steps",
                    )
                )
                continue
            if repairs:
                out.append(Expansion(repairs.pop(0), Operator.DEBUG, note="repair a failure"))
                continue
            if rng.random() < self.w():
                target, how = self._uct_select(virtual), "uct"
            else:
                target = inverse_rank_sample(rng, elites) if elites else self._uct_select(virtual)
                how = "elite"
            virtual[target] = virtual.get(target, 0) + 1
            self._picks = [*self._picks, self.branch_of.get(target) or target][-ENTROPY_WINDOW:]
            out.append(self._expansion_for(target, how))
        return out

    def _debuggable_leaves(self) -> list[str]:
        """Buggy verified nodes without verified children, under the debug limit, newest first."""
        return list(reversed(self._buggy_leaves))  # insertion order is tell order, so reversed = newest first

    def _aggregate_due(self) -> bool:
        return self.global_stale >= self.config.tau_global and len(self._top_branch_bests()) >= 2

    def _top_branch_bests(self) -> list[str]:
        return self._ranked(list(self._branch_best.values()))

    def _verified_children(self, node_id: str | None) -> list[str]:
        return [c for c in self._seen.children.get(node_id, []) if self._seen.nodes[c].status.verified]

    def _expandable(self, node_id: str, virtual: dict[str, int]) -> bool:
        node = self._seen.nodes[node_id]
        n_children = len(self._verified_children(node_id)) + virtual.get(node_id, 0)
        if node.ok:
            return n_children < self.config.expand_width
        return n_children == 0 and debug_depth(self._seen, node_id) < self.config.max_debug_depth

    def _alive(self, node_id: str) -> bool:
        """False for an abandoned buggy leaf: UCT never descends into it."""
        node = self._seen.nodes[node_id]
        if node.ok or self._verified_children(node_id):
            return True
        return debug_depth(self._seen, node_id) < self.config.max_debug_depth

    def _uct_select(self, virtual: dict[str, int]) -> str:
        u = self.root_id
        assert u is not None
        c, eps = self.c(), self.config.eps
        while True:
            if u != self.root_id and self._expandable(u, virtual):
                return u
            children = [v for v in self._verified_children(u) if self._alive(v)]
            if not children:
                return u if u != self.root_id else self._seen.best_id or u
            n_u = self.N.get(u, 0) + virtual.get(u, 0)

            def score(v: str) -> tuple[float, int]:
                n_v = self.N.get(v, 0) + virtual.get(v, 0)
                bonus = c * math.sqrt(math.log(n_u + 1) / (n_v + eps))  # noqa: B023 (used in this iteration)
                return self.Q(v) + bonus, -self._order[v]

            u = max(children, key=score)

    def _elites(self) -> list[str]:
        """The global top ``top_k`` usable nodes, best first (the root is expanded only by drafts)."""
        return [i for _, _, i in self._ok_ranked[: self.config.top_k]]

    def _expansion_for(self, target: str, how: str) -> Expansion:
        node = self._seen.nodes[target]
        if target == self.root_id:
            return Expansion(target, Operator.DRAFT, note=how)
        if not node.ok:
            return Expansion(target, Operator.DEBUG, note=how)
        branch = self.branch_of.get(target) or target
        if self.branch_stale.get(branch, 0) < self.config.tau_branch:
            return Expansion(target, Operator.IMPROVE, note=how)
        ancestors = self._branch_ancestors(target)
        if self._branch_evolves.get(branch, 0) < self.config.evolve_tries and ancestors:
            return Expansion(target, Operator.EVOLVE, reference_ids=ancestors, note=f"{how}; branch stagnant")
        others = []
        for _, _, i in self._ok_ranked:  # best first; stop as soon as enough are found
            if self.branch_of.get(i) not in (branch, None):
                others.append(i)
                if len(others) >= self.config.reference_n:
                    break
        if others:
            return Expansion(
                target,
                Operator.REFERENCE,
                reference_ids=tuple(others[: self.config.reference_n]),
                note=f"{how}; branch still stagnant",
            )
        if ancestors:
            return Expansion(target, Operator.EVOLVE, reference_ids=ancestors, note=f"{how}; no other branch")
        return Expansion(target, Operator.IMPROVE, note=f"{how}; stagnant, nothing to reference")

    def _branch_ancestors(self, node_id: str) -> tuple[str, ...]:
        """Up to ``evolve_k`` nearest primary ancestors, stopping before the root."""
        out: list[str] = []
        up = self._seen.nodes[node_id].parent_id
        while up is not None and up != self.root_id and up in self._seen.nodes and len(out) < self.config.evolve_k:
            out.append(up)
            up = self._seen.nodes[up].parent_id
        return tuple(out)

    # ----------------------------------------------------------------- final
    @property
    def submits_ensemble(self) -> bool:
        return self.config.submit_ensemble

    @property
    def ensemble_tasks(self) -> str:
        return self.config.ensemble_tasks

    @property
    def ensemble_answer(self) -> bool:
        return self.config.ensemble_answer

    def final_ensemble(self, view: SearchView, k: int | None = None) -> list[str]:
        """Ids of the top ``k`` (default ``top_k``) usable nodes (the baseline included), best first."""
        ok = [i for i in self._order if self._seen.nodes[i].ok]
        return self._ranked(ok)[: k or self.config.top_k]
