"""``PolicyRewarder``: the reward pipeline of critic-in-the-loop policy GRPO (implements ``contract.Rewarder``).

Per step (critic paper, Section 5): ``prompts(step)`` hands out ``parents``
groups, each the proposer's own prompt (``LLMProposer.render``) for the
group's current parent asking for ONE idea; in idea-space worlds the menu of
options is appended so a policy can name them. The groups' tasks
(``step_tasks``): with no more tasks than groups, group g keeps task
``g % len(tasks)`` (every task every step); with more tasks than groups (the
paper: 141 environments, 16 groups), each step draws ``parents`` distinct
tasks from all of them with the run's seeded generator, so every task gets
prompted. A group's parent is the latest parent of its lineage (its task and
its place among the step's groups on that task), else the task's baseline. A
task's brief and baseline are made and verified lazily, when the task is
first prompted, never for a task that no step draws.

``score(prompt, completions)`` turns each completion into a reward:

1. text -> ``Idea`` (idea-space worlds -- a task with a space whose
   implementer renders templates: ``space_reader.read`` on the parent's
   assignment; with LLM roles: the reply's Approach section);
   nothing usable -> -1 from ``invalid``;
2. ``ChildMaker.make`` (implement, fixed-region and guard checks, a child
   identical to its parent is a duplicate, neutral summary); not runnable ->
   -1 from ``invalid``;
3. routing by mode: ``verify-all`` verifies; ``critic-only`` takes the
   critic's k-vote verdict; ``critic-in-loop`` takes the verdict when its
   uncertainty ``u < T`` and verifies otherwise (``screen.ranking.route``).
   A critic-sourced reward is also verified with probability ``audit_rate``
   (charged; the reward stays the critic's, the outcome is stored for auditing);
4. a verified child that fails repairably (the kernel's one rule,
   ``ledger.REPAIRABLE``: a crash, an invalid metric, out of memory -- never
   a timeout nor a contract violation) gets up to ``repairs`` repairs keeping
   the idea (``verifying.PaidVerifier``); the label is improve iff its validation fitness beats the parent's by more
   than ``tolerance`` (``verifyless.outcome.improved``, the one label rule): +1,
   else -1 (a failed child included).

Smoke runs (ledger/pilots.py, as in the engine): with ``settings.smoke`` a
fidelity level (default: the task's cheapest level for LLM roles -- a task
that is not an idea-space world -- none for idea-space worlds), each
attempt of step 4 (the child and each repair) is first run once at that
level under a short wall limit. One that crashes there is never fully
verified: the smoke result stands for that verification (the idea gets -1
unless a repair passes), charged in evaluator seconds only. Smoke runs are
``smoke`` events of the policy run, read back by (program, level) on resume
(the run's ``PolicyLedger`` is their ``PaidBook``).

The critic's verdict is "improve" when improve has strictly the most votes of
the three directions (unparsed critiques count in the denominator as votes
for nothing, as in ``screen.critic``). Every reward is stored (``policy_idea``)
before ``score`` returns, with its source, the critic's vote counts, u and,
for verified ideas, the outcome; the critic's evidence is stored
(``policy_critic``) before anything acts on it, so a resumed run routes the
same way. Scoring a stored ``(key, index)`` again returns the stored reward.
The completions of one call are scored concurrently; if one raises (e.g.
``VerificationBudgetSpent``) the others still finish and are stored, then the
first error propagates.

``finish_step(step)`` advances parents: a group whose scored ideas (at least
one) ALL got +1 moves to one improving child -- the best verified one, else
one drawn with the run's seeded generator, which is then verified (charged)
so the next step's labels have a parent score (this check may raise
``VerificationBudgetSpent``); if it does not beat the current parent, the
parent stays. It writes ``policy_step`` with the
``StepStats`` and the parents of the next step.

The bookkeeping lives in the run's ``PolicyLedger`` (``ledger.py``: the run's
config, what is stored, the groups' lineages) and in ``PaidVerifier``
(``verifying.py``: the cap, reuse, repairs); the rewarder keeps the reward logic.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any, cast

from verifyless.child import ChildMaker
from verifyless.engine.baseline import check_baseline
from verifyless.errors import ConfigError
from verifyless.ledger import candidate_from
from verifyless.ledger.paid import Smoke
from verifyless.ledger.pilots import LowFidelity, PaidBook, run_in_sandbox, smoke_level
from verifyless.node import BASELINE_IDEA, Candidate, Evidence, Idea, Operator, Status, Verification, content_hash
from verifyless.roles.base import ParentInfo, ProposeContext
from verifyless.roles.llm import LLMProposer
from verifyless.roles.menu import idea_from_text, menu_text, parent_assignment
from verifyless.screen.base import ScreenContext
from verifyless.screen.ranking import route
from verifyless.task.base import Task
from verifyless.train.policy.contract import IdeaReward, PolicyPrompt, StepStats
from verifyless.train.policy.ideas import audit_draw, critic_improves, space_world, vote_counts
from verifyless.train.policy.ledger import PolicyLedger, open_policy_run, reward_from, stats_from
from verifyless.train.policy.metrics import step_stats
from verifyless.train.policy.settings import RewardSettings
from verifyless.train.policy.verifying import Checked, PaidVerifier, fitness, improves

log = logging.getLogger(__name__)
_KEEP = 4000  # characters of a completion stored with its reward


def smoke_steps(
    tasks: Sequence[Task], makers: Mapping[str, ChildMaker], settings: RewardSettings, executor: Any, book: PaidBook
) -> dict[str, Smoke]:
    """Task name -> its smoke step, for tasks with a smoke level (a named level missing is a ``ConfigError``)."""
    run = run_in_sandbox(executor)
    steps: dict[str, Smoke] = {}
    for task in tasks:
        level = smoke_level(task, settings.smoke, not space_world(task, makers[task.name].roles))
        if run is None or level is None:
            continue
        low = LowFidelity(book, task, run, smoke_wall_seconds=settings.smoke_wall_seconds)
        steps[task.name] = _smoke_at(low, level)
    return steps


class PolicyRewarder:
    """Rewards policy ideas by mode, durably, under a hard verification cap (see the module docstring).

    ``tasks`` and ``child_makers`` (task name -> ``ChildMaker``) give the groups'
    tasks and how children are made; ``critic`` is a ``PointwiseCritic`` (may be
    None for ``verify-all``); ``executor`` has ``async verify(task, program)``.
    ``run_id=None`` creates a new run; an existing run id resumes it with its
    stored settings and seed (``settings`` and ``rng`` are then ignored).
    ``rng`` seeds the run's draws (audits, next-parent choice) at creation.
    """

    def __init__(
        self,
        tasks: Sequence[Task],
        child_makers: Mapping[str, ChildMaker],
        critic: Any,
        executor: Any,
        store: Any,
        run_id: str | None,
        settings: RewardSettings,
        rng: random.Random | None = None,
        *,
        run_config: Mapping[str, Any] | None = None,
    ) -> None:
        if not tasks:
            raise ConfigError("policy rewards need at least one task")
        names = [t.name for t in tasks]
        if len(set(names)) != len(names) or set(names) - set(child_makers):
            raise ConfigError(f"policy rewards need distinct task names, each with a ChildMaker; got {names}")
        self.tasks, self.makers, self.critic, self.store = list(tasks), dict(child_makers), critic, store
        self._by_name = {t.name: t for t in self.tasks}
        self.roots = {t.name: f"t{i}-root" for i, t in enumerate(self.tasks)}  # task -> its baseline node
        self.run_id, self.settings, self.draw_seed = open_policy_run(store, run_id, names, settings, rng, run_config)
        store.hold(self.run_id)  # one process at a time pays for a run (RunHeld); let go when the store closes
        if self.settings.mode != "verify-all" and critic is None:
            raise ConfigError(f"mode {self.settings.mode} needs a critic; pass one or use mode verify-all")
        self.ledger = PolicyLedger(store, self.run_id)
        self.verifier = PaidVerifier(self.ledger, executor, self.settings.budget)
        self.smoke = smoke_steps(self.tasks, self.makers, self.settings, executor, self.ledger)
        self._started: set[str] = set()  # tasks whose brief and baseline are ready

    # ------------------------------------------------------------------ Rewarder

    def verifications_left(self) -> int:
        return self.verifier.left()

    async def prompts(self, step: int) -> list[PolicyPrompt]:
        """The step's groups (stored ones come back identical)."""
        tasks = self.step_tasks(step)
        for task in tasks:
            await self._start(task)
        parents = self.ledger.parents_for(step, [t.name for t in tasks], self.roots)
        out = []
        for g, task in enumerate(tasks):
            key = f"s{step}/g{g:02d}"
            prompt = self.ledger.log.prompts.get(key)
            if prompt is None:
                prompt = PolicyPrompt(key, step, task.name, parents[g], self._messages(task, parents[g]))
                self.ledger.prompt(prompt)
            out.append(prompt)
        return out

    def step_tasks(self, step: int) -> list[Task]:
        """The task of each of ``step``'s groups (see the module docstring); the same on every call."""
        n, groups = len(self.tasks), self.settings.parents
        if n <= groups:
            return [self.tasks[g % n] for g in range(groups)]
        return random.Random(f"{self.draw_seed}:tasks:{step}").sample(self.tasks, groups)

    async def score(self, prompt: PolicyPrompt, completions: Sequence[str]) -> list[IdeaReward]:
        """One reward per completion, in order (see the module docstring)."""
        await self._start(self._task(prompt.task))
        results = await asyncio.gather(
            *(self._score_one(prompt, i, str(text)) for i, text in enumerate(completions)), return_exceptions=True
        )
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return cast(list[IdeaReward], results)

    async def finish_step(self, step: int) -> StepStats:
        """Advance the parents of ``step``'s groups and store its ``StepStats`` (idempotent)."""
        if step in self.ledger.log.steps:
            return stats_from(self.ledger.log.steps[step])
        keys = self.ledger.step_keys(step)
        if not keys:
            raise ConfigError(f"step {step} has no prompts; call prompts({step}) and score them first")
        parents, advanced, checks = [], 0, 0
        for key in keys:
            parent, paid = await self._next_parent(key)
            parents.append(parent)
            advanced += parent != self.ledger.log.prompts[key].parent_id
            checks += paid
        ideas = [p for key in keys for p in self.ledger.group(key)]
        stats = step_stats(
            step, ideas, verifications_left=self.verifications_left(), parents_advanced=advanced, extra_verified=checks
        )
        self.ledger.step(stats, parents, parent_checks=checks)
        return stats

    # ------------------------------------------------------------------ start and prompts

    async def _start(self, task: Task) -> None:
        """The task's brief and verified baseline, made once per run (stored ones are reused)."""
        if task.name in self._started:
            return
        if task.name not in self.ledger.log.briefs:
            self.ledger.brief(task.name, await self.makers[task.name].roles.briefer.brief(task))
        await self._root(task)
        self._started.add(task.name)

    async def _root(self, task: Task) -> None:
        nid = self.roots[task.name]
        if not self.ledger.recorded(nid):
            program, idea = task.baseline_program, Idea(BASELINE_IDEA)
            summary = await self.makers[task.name].summarize(program, idea)
            cand = Candidate(nid, None, Operator.BASELINE, idea, program, content_hash(program), summary)
            self.ledger.node(cand, Status.IMPLEMENTED, "", task=task.name)
        v, _ = await self.verifier.verify(nid, task)
        check_baseline(task, v, allow_failed=False, needs="policy training")

    def _messages(self, task: Task, parent_id: str) -> tuple[dict[str, str], ...]:
        parent = self.ledger.parent_info(parent_id)
        system, user = LLMProposer(cast(Any, None)).render(ProposeContext(task=task, parent=parent))
        content = user.content
        if task.idea_space is not None and space_world(task, self.makers[task.name].roles):
            content += "\n\n" + menu_text(task.idea_space, parent_assignment(task, parent))
        return ({"role": "system", "content": system.content}, {"role": "user", "content": content})

    # ------------------------------------------------------------------ one idea

    async def _score_one(self, prompt: PolicyPrompt, index: int, text: str) -> IdeaReward:
        stored = self.ledger.log.ideas.get((prompt.key, index))
        if stored is not None:
            if stored.get("completion", text[:_KEEP]) != text[:_KEEP]:
                log.warning(
                    "idea %s/%d was scored for another completion; its stored reward is returned", prompt.key, index
                )
            return reward_from(stored)
        reward, source, fields = await self._judge(prompt, index, text)
        stored_too = {
            "step": prompt.step,
            "verifications": fields.pop("paid", 0),
            "audited": fields.pop("audited", False),
            "critic_improve": fields.pop("critic_improve", None),
            "completion": text[:_KEEP],
        }  # stored with the reward, not part of it
        made = IdeaReward(key=prompt.key, index=index, reward=reward, source=cast(Any, source), **fields)
        return self.ledger.idea(made, **stored_too)

    async def _judge(self, prompt: PolicyPrompt, index: int, text: str) -> tuple[float, str, dict[str, Any]]:
        """(reward, source, the reward's other fields) of one completion; see the module docstring, steps 1-4."""
        task = self._task(prompt.task)
        parent = self.ledger.parent_info(prompt.parent_id)
        space = space_world(task, self.makers[task.name].roles)
        idea = idea_from_text(task, parent, text, space=space)
        if idea is None:
            what = "names no option that changes the parent" if space else "has no usable idea"
            return -1.0, "invalid", {"status": "parse-error", "reason": f"the completion {what}"}
        nid = f"{prompt.key.replace('/', '')}i{index:02d}"
        status, reason = await self._child(nid, prompt, task, parent, idea)
        if status is not Status.IMPLEMENTED:
            return -1.0, "invalid", {"node_id": nid, "status": status.value, "reason": reason}
        evidence = await self._critique(nid, task, parent) if self.settings.mode != "verify-all" else None
        verify = evidence is None or (
            self.settings.mode == "critic-in-loop" and route(evidence.uncertainty, self.settings.threshold)
        )
        audited = not verify and audit_draw(self.draw_seed, prompt.key, index, self.settings.audit_rate)
        checked = None
        if verify or audited:
            maker = self.makers[task.name]
            checked = await self.verifier.verify_with_repairs(
                nid, task, maker, parent.program, idea, self.settings.repairs, smoke=self.smoke.get(task.name)
            )
        return self._reward(task, parent, nid, status, evidence, checked, audited)

    async def _child(
        self, nid: str, prompt: PolicyPrompt, task: Task, parent: ParentInfo, idea: Idea
    ) -> tuple[Status, str]:
        """The status and reason of idea ``nid``'s child, made and recorded unless it is recorded already."""
        if not self.ledger.recorded(nid):
            own = content_hash(parent.program)
            made = await self.makers[task.name].make(parent, idea, skip=lambda digest: digest == own)
            cand = candidate_from(made, id=nid, parent_id=parent.id, operator=Operator.IMPROVE, round=prompt.step + 1)
            self.ledger.node(cand, made.status, made.reason, task=task.name, key=prompt.key)
        return self.ledger.made(nid)

    async def _critique(self, nid: str, task: Task, parent: ParentInfo) -> Evidence:
        known = self.ledger.log.critic.get(nid)
        if known is not None:
            return known
        ctx = ScreenContext(
            task=task, parent=parent, rng=random.Random(0), brief=self.ledger.log.briefs.get(task.name), n_verify=0
        )
        evidence = (await self.critic.screen(ctx, [self.ledger.candidate(nid)])).evidence[nid]
        self.ledger.critic(nid, evidence)
        return evidence

    def _reward(
        self,
        task: Task,
        parent: ParentInfo,
        nid: str,
        status: Status,
        evidence: Evidence | None,
        checked: Checked | None,
        audited: bool,
    ) -> tuple[float, str, dict[str, Any]]:
        """The reward of a runnable child from the critic's evidence and/or its verification (``_judge``)."""
        improved = None
        extra: dict[str, Any] = {"node_id": nid, "status": status.value}
        if checked is not None:
            v = checked.verification
            improved = improves(task, v, parent, self.settings.tolerance)
            extra.update(
                node_id=checked.node_id,
                status=v.status.value,
                reason=v.reason[:500],
                child_score=v.score,
                verify_seconds=checked.seconds,
            )
        says = critic_improves(evidence) if evidence is not None else None
        if evidence is not None:
            extra.update(votes=vote_counts(evidence), uncertainty=evidence.uncertainty)
            extra["tokens"] = int(evidence.detail.get("tokens", 0) or 0)
        from_critic = checked is None or audited
        good = says if from_critic else improved
        fields = {"improved": improved, "parent_score": parent.score, **extra}
        fields.update(paid=checked.paid if checked else 0, audited=audited, critic_improve=says)
        return 1.0 if good else -1.0, "critic" if from_critic else "verifier", fields

    # ------------------------------------------------------------------ next parents

    async def _next_parent(self, key: str) -> tuple[str, int]:
        """(the group's parent for the next step, verifications paid to check it)."""
        prompt = self.ledger.log.prompts[key]
        group = self.ledger.group(key)
        if not group or any(float(p["reward"]) <= 0 for p in group):
            return prompt.parent_id, 0
        task = self._task(prompt.task)
        verified = [p for p in group if p.get("improved")]
        if verified:
            best = max(verified, key=lambda p: (fitness(task, self.ledger.state.verifications[p["node_id"]]) or 0.0))
            return str(best["node_id"]), 0
        pick = random.Random(f"{self.draw_seed}:parent:{key}").choice(group)
        v, paid = await self.verifier.verify(str(pick["node_id"]), task)
        parent = self.ledger.parent_info(prompt.parent_id)
        return (str(pick["node_id"]) if improves(task, v, parent, self.settings.tolerance) else prompt.parent_id), paid

    def _task(self, name: str) -> Task:
        task = self._by_name.get(name)
        if task is None:
            raise ConfigError(f"prompt names task {name!r}, which this rewarder was not given")
        return task


def _smoke_at(low: LowFidelity, level: str) -> Smoke:
    async def smoke(cand: Candidate, attempt: int) -> Verification | None:
        return await low.smoke(cand, level)

    return smoke


__all__ = ["PolicyRewarder", "smoke_steps"]
