"""The policy-training run's event log: what is already paid for, and how to record more.

One training run is one run in the run store (config ``kind: policy-grpo``;
``open_policy_run`` creates or reopens it). ``PolicyLedger`` reads its events
once at start (so a reopened run resumes) and appends new ones through the
kernel's write path (``verifyless.ledger.append_and_fold``): every append
commits before the caller goes on, so a verification, once paid, is never
lost. The kernel's ``RunState`` is the run's one in-memory projection of its
nodes, verifications, smoke runs and status changes (``known_result`` is the
reuse lookup); ``PolicyLog`` keeps only the policy events and the per-task
briefs. Its nodes carry a ``task`` tag, which is part of the reuse key (a
program's result holds for its own task only). Events:

* ``brief`` -- a task's brief (understanding + criteria), once per task;
* ``node`` -- a child (or a baseline) with its status, as the engine writes them;
* ``verification`` -- a verification and its budget charge in ONE transaction
  (a reused result of the same program on a deterministic task is recorded
  with no charge and ``reused_from``);
* ``smoke`` and ``status`` -- a smoke run (charged in evaluator seconds) and,
  when it stops the child, the child's new status (``ledger.pilots.LowFidelity``);
* ``policy_prompt`` -- one group's prompt (so a step's prompts come back identical);
* ``policy_critic`` -- the critic's evidence on one child, before anything acts on it;
* ``policy_idea`` -- the full ``IdeaReward`` plus ``step``, ``verifications``
  (paid for this idea, repairs included), ``audited`` and ``critic_improve``;
* ``policy_step`` -- ``StepStats`` and the parents of the next step.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from verifyless.errors import ConfigError
from verifyless.events import BriefLogged, EventRecord, LowFidelityRan, NodeRecorded, SmokeRan, StatusChanged, Verified
from verifyless.ledger import RunState, append_and_fold
from verifyless.node import Candidate, Evidence, Idea, Operator, Status, Verification
from verifyless.roles.base import ParentInfo, TaskBrief
from verifyless.store import Charge
from verifyless.store.protocol import RunStoreProtocol
from verifyless.train.policy.contract import IdeaReward, PolicyPrompt, StepStats
from verifyless.train.policy.events import PolicyCritic, PolicyIdea, PolicyPrompted, PolicyStep
from verifyless.train.policy.settings import RewardSettings

POLICY_KIND = "policy-grpo"
_RECORDS = (
    *(BriefLogged, NodeRecorded, Verified, SmokeRan, LowFidelityRan, StatusChanged),  # the kernel's fold
    *(PolicyPrompted, PolicyCritic, PolicyIdea, PolicyStep),  # the policy log
)


@dataclass
class PolicyLog:
    """The policy events of the run (rebuilt on resume): what the kernel's ``RunState`` does not fold.

    Nodes, verifications, smoke runs and status changes are the kernel's fold
    (``PolicyLedger.state``), the run's one projection of them; a policy run
    keeps one brief per task, so briefs are kept here by task.
    """

    briefs: dict[str, TaskBrief] = field(default_factory=dict)
    prompts: dict[str, PolicyPrompt] = field(default_factory=dict)
    critic: dict[str, Evidence] = field(default_factory=dict)  # node id -> evidence
    ideas: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)


def prompt_to(prompt: PolicyPrompt) -> PolicyPrompted:
    return PolicyPrompted(
        prompt.key, prompt.step, prompt.task, prompt.parent_id, tuple(dict(m) for m in prompt.messages)
    )


def prompt_from(record: PolicyPrompted) -> PolicyPrompt:
    return PolicyPrompt(
        key=str(record.key),
        step=int(record.step),
        task=str(record.task),
        parent_id=str(record.parent_id),
        messages=tuple(dict(m) for m in record.messages),
    )


def reward_from(data: Mapping[str, Any]) -> IdeaReward:
    """The ``IdeaReward`` of a stored ``policy_idea`` payload (extra keys ignored)."""
    names = {f.name for f in fields(IdeaReward)}
    values = {k: v for k, v in data.items() if k in names}
    values["votes"] = dict(values.get("votes") or {})
    return IdeaReward(**values)


def stats_from(data: Mapping[str, Any]) -> StepStats:
    names = {f.name for f in fields(StepStats)}
    return StepStats(**{k: v for k, v in data.items() if k in names})


def open_policy_run(
    store: RunStoreProtocol,
    run_id: str | None,
    task_names: Sequence[str],
    settings: RewardSettings,
    rng: random.Random | None = None,
    run_config: Mapping[str, Any] | None = None,
) -> tuple[str, RewardSettings, int]:
    """(run id, its stored settings, its draw seed): a new run when ``run_id`` is None, else the stored one.

    A new run's config is ``kind: policy-grpo`` with ``settings``, a ``draw_seed`` drawn from ``rng`` (else
    from ``settings.seed``) and ``run_config``; an existing run's stored settings and seed win over the
    arguments. A run of another kind is a ``ConfigError``.
    """
    if run_id is None:
        seed = (rng or random.Random(settings.seed)).getrandbits(63)
        config = {"kind": POLICY_KIND, "settings": settings.model_dump(), "draw_seed": seed, **(run_config or {})}
        run_id = store.create_run(",".join(task_names), config, seed=settings.seed)
    stored = dict(store.run(run_id).config)
    if stored.get("kind") != POLICY_KIND:
        raise ConfigError(f"run {run_id} is not a policy-training run (kind {stored.get('kind')!r})")
    return run_id, RewardSettings.of(dict(stored["settings"])), int(stored["draw_seed"])


class PolicyLedger:
    """Reads and appends the events of one policy-training run (see the module docstring).

    ``state`` (the kernel's ``RunState``) is the run's one fold of its nodes,
    verifications, smoke runs and status changes; ``log`` keeps the policy
    events. A policy run tells no node to a strategy, so every recorded node
    stays in ``state.staged``. The ledger is also the ``PaidBook`` of the run's
    smoke runs (``ledger.pilots.LowFidelity``): ``state``, ``emit``, ``set_status``.
    """

    def __init__(self, store: RunStoreProtocol, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.log = PolicyLog()
        self.state = RunState()
        self._read()

    def _read(self) -> None:
        log = self.log
        for ev in self.store.events(self.run_id, *_RECORDS):
            self.state.apply(ev)
            match ev.record:
                case BriefLogged() as r:
                    log.briefs[str(r.task)] = TaskBrief(str(r.understanding), tuple(r.criteria))
                case PolicyPrompted() as r:
                    log.prompts[str(r.key)] = prompt_from(r)
                case PolicyCritic() as r:
                    log.critic[str(ev.node_id)] = r.evidence
                case PolicyIdea() as r:
                    log.ideas[(str(r.key), int(r.index))] = r.payload()
                case PolicyStep() as r:
                    log.steps[int(r.step)] = r.payload()

    # ------------------------------------------------------------------ writing

    def emit(self, record: EventRecord, node_id: str | None = None, charge: Charge | bool | None = None) -> None:
        """Every write goes through the kernel's one write path (durable, then folded into ``state``)."""
        append_and_fold(self.store, self.run_id, self.state, record, node_id=node_id, charge=charge)

    def set_status(self, node_id: str, status: Status, reason: str) -> None:
        """A ``status`` event: a smoke run stopped node ``node_id`` (``LowFidelity.smoke``)."""
        self.emit(StatusChanged(status, reason), node_id=node_id)

    def brief(self, task: str, brief: TaskBrief) -> None:
        self.emit(BriefLogged(brief.understanding, tuple(brief.criteria), task=task))
        self.log.briefs[task] = brief

    def node(self, cand: Candidate, status: Status, reason: str, task: str = "", **extra: Any) -> None:
        """Log a ``node`` event (program stored as a blob; ``extra``: more keys, e.g. ``key``, ``repair_of``);
        ``made(cand.id)`` reads its status back."""
        record = NodeRecorded(cand, status=status, reason=reason[:2000], task=task, extra=extra)
        self.emit(record, node_id=cand.id)

    def verification(self, nid: str, v: Verification, fitness: float | None, reused_from: str | None = None) -> None:
        """Record a verification; charged (1 verification + its seconds) unless it reuses an earlier result."""
        charge: Charge | bool = (
            False if reused_from is not None else Charge(verifications=1, evaluator_seconds=v.seconds)
        )
        self.emit(Verified(v, fitness, reused_from), node_id=nid, charge=charge)

    def prompt(self, prompt: PolicyPrompt) -> None:
        self.emit(prompt_to(prompt))
        self.log.prompts[prompt.key] = prompt

    def critic(self, nid: str, evidence: Evidence) -> None:
        self.emit(PolicyCritic(evidence), node_id=nid)
        self.log.critic[nid] = evidence

    def idea(self, reward: IdeaReward, **extra: Any) -> IdeaReward:
        record = PolicyIdea.parse({**asdict(reward), "votes": dict(reward.votes), **extra})
        self.emit(record, node_id=reward.node_id or None)
        self.log.ideas[(reward.key, reward.index)] = record.payload()
        return reward

    def step(self, stats: StepStats, parents: list[str], **extra: Any) -> None:
        record = PolicyStep.parse({**asdict(stats), "parents": list(parents), **extra})
        self.emit(record)
        self.log.steps[stats.step] = record.payload()

    # ------------------------------------------------------------------ reading

    def known_result(self, task: str, digest: str) -> tuple[str, Verification] | None:
        """The first result of program ``digest`` on ``task`` in this run (the kernel's reuse lookup), or None."""
        return self.state.known_result(digest, scope=task)

    def verified(self, nid: str) -> Verification | None:
        """The recorded verification of node ``nid``, or None."""
        return self.state.verifications.get(nid)

    def recorded(self, nid: str) -> bool:
        """Whether node ``nid`` has its ``node`` event."""
        return nid in self.state.candidates

    def made(self, nid: str) -> tuple[Status, str]:
        """The status and reason recorded node ``nid`` was made with (``KeyError`` when it is not recorded).

        The fold's status of a node moves on with its verification or a smoke run's ``status`` event, and
        only a runnable node gets either; a made child's status is never a verification outcome, so a node
        whose status is one was ``IMPLEMENTED`` when it was recorded.
        """
        node = self.state.staged[nid]
        return (Status.IMPLEMENTED, "") if node.status.verified else (node.status, node.reason)

    def program(self, nid: str) -> str:
        return str(self.store.get_text(self.state.candidates[nid].program_hash))

    def parent_info(self, nid: str) -> ParentInfo:
        """A recorded node as a parent: program, raw validation score (when verified OK), summary, idea."""
        cand, v = self.state.candidates[nid], self.verified(nid)
        return ParentInfo(
            id=nid,
            program=self.program(nid),
            score=v.score if v is not None and v.status is Status.OK else None,
            summary=cand.summary,
            idea=Idea(cand.idea.text, dict(cand.idea.params)),
        )

    def candidate(self, nid: str) -> Candidate:
        """A recorded child as a screening candidate (its program read back from the blob store)."""
        cand = self.state.candidates[nid]
        return Candidate(
            id=nid,
            parent_id=cand.parent_id,
            operator=Operator.IMPROVE,
            idea=Idea(cand.idea.text, dict(cand.idea.params)),
            program=self.program(nid),
            program_hash=cand.program_hash,
            summary=cand.summary,
            round=cand.round,
        )

    def paid_verifications(self) -> int:
        return int(self.store.budget(self.run_id).verifications)

    # ------------------------------------------------------------------ groups and lineages

    def step_keys(self, step: int) -> list[str]:
        """The keys of ``step``'s stored prompts, in order."""
        return sorted(k for k, p in self.log.prompts.items() if p.step == step)

    def group(self, key: str) -> list[dict[str, Any]]:
        """The stored ``policy_idea`` payloads of group ``key``, by index."""
        return [p for (k, _), p in sorted(self.log.ideas.items()) if k == key]

    def parents_for(self, step: int, task_names: Sequence[str], roots: Mapping[str, str]) -> list[str]:
        """Each group's parent: the latest of its lineage (task, place among the step's groups on it), else its root.

        ``task_names``: the task of each of ``step``'s groups; ``roots``: task name -> its baseline node.
        """
        latest: dict[tuple[str, int], str] = {}
        for s in sorted(x for x in self.log.steps if x < step):
            done = lineages([self.log.prompts[k].task for k in self.step_keys(s)])
            for lineage, parent in zip(done, self.log.steps[s]["parents"], strict=False):
                latest[lineage] = str(parent)
        return [latest.get(lineage, roots[lineage[0]]) for lineage in lineages(task_names)]


def lineages(task_names: Sequence[str]) -> list[tuple[str, int]]:
    """(task, how many earlier groups of the step share it) for each group: the key of a parent's line."""
    seen: dict[str, int] = {}
    out = []
    for name in task_names:
        out.append((name, seen.get(name, 0)))
        seen[name] = seen.get(name, 0) + 1
    return out


__all__ = [
    "POLICY_KIND",
    "PolicyLedger",
    "PolicyLog",
    "lineages",
    "open_policy_run",
    "prompt_from",
    "prompt_to",
    "reward_from",
    "stats_from",
]
