"""The policy-training run's event log: what is already paid for, and how to record more.

One training run is one run in the run store (config ``kind: policy-grpo``).
``PolicyLedger`` reads its events once at start (so a reopened run resumes)
and appends new ones through the kernel's write path
(``verifyless.ledger.append_and_fold``): every append commits before the
caller goes on, so a verification, once paid, is never lost, and is folded
into the kernel's ``RunState``, whose ``known_result`` is the reuse lookup.
Its nodes carry a ``task`` tag, which is part of the reuse key (a program's
result holds for its own task only). Events:

* ``brief`` -- a task's brief (understanding + criteria), once per task;
* ``node`` -- a child (or a baseline) with its status, as the engine writes them;
* ``verification`` -- a verification and its budget charge in ONE transaction
  (a reused result of the same program on a deterministic task is recorded
  with no charge and ``reused_from``);
* ``policy_prompt`` -- one group's prompt (so a step's prompts come back identical);
* ``policy_critic`` -- the critic's evidence on one child, before anything acts on it;
* ``policy_idea`` -- the full ``IdeaReward`` plus ``step``, ``verifications``
  (paid for this idea, repairs included), ``audited`` and ``critic_improve``;
* ``policy_step`` -- ``StepStats`` and the parents of the next step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from verifyless.ledger import RunState, append_and_fold
from verifyless.node import Candidate, Evidence, Idea, Operator, Status, Verification
from verifyless.roles.base import ParentInfo, TaskBrief
from verifyless.store import Charge
from verifyless.store.protocol import RunStoreProtocol
from verifyless.train.policy.contract import IdeaReward, PolicyPrompt, StepStats

POLICY_KIND = "policy-grpo"
_KINDS = ("brief", "node", "verification", "policy_prompt", "policy_critic", "policy_idea", "policy_step")


@dataclass
class PolicyLog:
    """What the run's event log holds (rebuilt on resume)."""

    briefs: dict[str, TaskBrief] = field(default_factory=dict)
    nodes: dict[str, dict[str, Any]] = field(default_factory=dict)
    verifications: dict[str, Verification] = field(default_factory=dict)
    paid: dict[str, bool] = field(default_factory=dict)  # node id -> whether its verification was charged
    prompts: dict[str, PolicyPrompt] = field(default_factory=dict)
    critic: dict[str, Evidence] = field(default_factory=dict)  # node id -> evidence
    ideas: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    steps: dict[int, dict[str, Any]] = field(default_factory=dict)


def prompt_to(prompt: PolicyPrompt) -> dict[str, Any]:
    return {**asdict(prompt), "messages": [dict(m) for m in prompt.messages]}


def prompt_from(data: Mapping[str, Any]) -> PolicyPrompt:
    return PolicyPrompt(
        key=str(data["key"]),
        step=int(data["step"]),
        task=str(data["task"]),
        parent_id=str(data["parent_id"]),
        messages=tuple(dict(m) for m in data["messages"]),
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


class PolicyLedger:
    """Reads and appends the events of one policy-training run (see the module docstring)."""

    def __init__(self, store: RunStoreProtocol, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.log = PolicyLog()
        self.state = RunState()  # the kernel's fold of the same events: reuse by (task, program hash)
        self._read()

    def _read(self) -> None:
        log = self.log
        for ev in self.store.events(self.run_id, kinds=list(_KINDS)):
            self.state.apply(ev)
            p = ev.payload
            if ev.kind == "brief":
                log.briefs[str(p.get("task", ""))] = TaskBrief(str(p["understanding"]), tuple(p["criteria"]))
            elif ev.kind == "node":
                log.nodes[str(ev.node_id)] = dict(p)
            elif ev.kind == "verification":
                log.verifications[str(ev.node_id)] = Verification.from_dict(p)
                log.paid[str(ev.node_id)] = ev.charge is not None and ev.charge.verifications > 0
            elif ev.kind == "policy_prompt":
                log.prompts[str(p["key"])] = prompt_from(p)
            elif ev.kind == "policy_critic":
                log.critic[str(ev.node_id)] = Evidence.from_dict(p["evidence"])
            elif ev.kind == "policy_idea":
                log.ideas[(str(p["key"]), int(p["index"]))] = dict(p)
            else:
                log.steps[int(p["step"])] = dict(p)

    # ------------------------------------------------------------------ writing

    def _append(
        self, kind: str, payload: dict[str, Any], node_id: str | None = None, charge: Charge | bool | None = None
    ) -> None:
        """Every write goes through the kernel's one write path (durable, then folded into ``state``)."""
        append_and_fold(self.store, self.run_id, self.state, kind, payload, node_id=node_id, charge=charge)

    def known_result(self, task: str, digest: str) -> tuple[str, Verification] | None:
        """The first result of program ``digest`` on ``task`` in this run (the kernel's reuse lookup), or None."""
        return self.state.known_result(digest, scope=task)

    def brief(self, task: str, brief: TaskBrief) -> None:
        payload = {"task": task, "understanding": brief.understanding, "criteria": list(brief.criteria)}
        self._append("brief", payload)
        self.log.briefs[task] = brief

    def node(self, cand: Candidate, status: Status, reason: str, **extra: Any) -> dict[str, Any]:
        """Log a ``node`` event (program stored as a blob); returns the remembered payload."""
        payload = cand.to_dict()
        if not cand.program:
            payload.pop("program")
        payload.update(status=status.value, reason=reason[:2000], **extra)
        self._append("node", payload, node_id=cand.id)
        payload.pop("program", None)
        payload["program_hash"] = cand.program_hash
        self.log.nodes[cand.id] = payload
        return payload

    def verification(self, nid: str, v: Verification, fitness: float | None, reused_from: str | None = None) -> None:
        """Record a verification; charged (1 verification + its seconds) unless it reuses an earlier result."""
        payload: dict[str, Any] = {**v.to_dict(), "fitness": fitness}
        charge: Charge | bool = False
        if reused_from is None:
            charge = Charge(verifications=1, evaluator_seconds=v.seconds)
        else:
            payload["reused_from"] = reused_from
        self._append("verification", payload, node_id=nid, charge=charge)
        self.log.verifications[nid] = v
        self.log.paid[nid] = reused_from is None

    def prompt(self, prompt: PolicyPrompt) -> None:
        self._append("policy_prompt", prompt_to(prompt))
        self.log.prompts[prompt.key] = prompt

    def critic(self, nid: str, evidence: Evidence) -> None:
        self._append("policy_critic", {"evidence": evidence.to_dict()}, node_id=nid)
        self.log.critic[nid] = evidence

    def idea(self, reward: IdeaReward, **extra: Any) -> IdeaReward:
        payload = {**asdict(reward), "votes": dict(reward.votes), **extra}
        self._append("policy_idea", payload, node_id=reward.node_id or None)
        self.log.ideas[(reward.key, reward.index)] = payload
        return reward

    def step(self, stats: StepStats, parents: list[str], **extra: Any) -> None:
        payload = {**asdict(stats), "parents": list(parents), **extra}
        self._append("policy_step", payload)
        self.log.steps[stats.step] = payload

    # ------------------------------------------------------------------ reading

    def program(self, nid: str) -> str:
        return str(self.store.get_text(self.log.nodes[nid]["program_hash"]))

    def parent_info(self, nid: str) -> ParentInfo:
        """A recorded node as a parent: program, raw validation score (when verified OK), summary, idea."""
        node, v = self.log.nodes[nid], self.log.verifications.get(nid)
        idea = node.get("idea") or {}
        return ParentInfo(
            id=nid,
            program=self.program(nid),
            score=v.score if v is not None and v.status is Status.OK else None,
            summary=str(node.get("summary", "")),
            idea=Idea(str(idea.get("text", "")), dict(idea.get("params") or {})),
        )

    def candidate(self, nid: str) -> Candidate:
        """A recorded child as a screening candidate (its program read back from the blob store)."""
        node = self.log.nodes[nid]
        idea = node.get("idea") or {}
        return Candidate(
            id=nid,
            parent_id=node.get("parent_id"),
            operator=Operator.IMPROVE,
            idea=Idea(str(idea.get("text", "")), dict(idea.get("params") or {})),
            program=self.program(nid),
            program_hash=str(node["program_hash"]),
            summary=str(node.get("summary", "")),
            round=int(node.get("round", 0)),
        )

    def paid_verifications(self) -> int:
        return int(self.store.budget(self.run_id).verifications)


__all__ = ["POLICY_KIND", "PolicyLedger", "PolicyLog", "prompt_from", "prompt_to", "reward_from", "stats_from"]
