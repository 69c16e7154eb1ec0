"""Top-K ensemble submission (MLEvolve): the final answer combines the best K programs' outputs.

A task says how its outputs combine in ``Task.ensemble`` (``task.base.Ensemble``): declared in task.yaml
(``ensemble``), or given by its kind (an MLE-bench competition's ``submission.csv``, keyed by its id column).
``combine: mean`` averages numbers (probabilities, values), ``vote`` keeps the most frequent label
(``engine/combine.py``).

``ensemble_submission(task, members, sandbox)`` re-runs each member program in a fresh workspace through the
sandbox, the same ``verify`` path as any candidate (outputs of the original verifications are not kept; the
untrusted program never sees hidden labels), combines the declared files of the members that ran OK into a new
output folder, and scores that folder once with the task's trusted scorer: validation, the selection split where
the task holds one out (``selection_score``) and the hidden test. A member whose re-run fails is left out and
recorded; a stochastic task's re-run may differ slightly from its first verification. The re-runs and the scoring
are real execution time: the engine charges ``seconds`` as evaluator seconds of the run (not as verifications:
a verification cap counts search steps, as MLEvolve's 500 expansion steps do) in the ``submission`` event it
records after the ``final`` one.

``submits_ensemble(strategy, task)`` is the one rule for whether a run ends with an ensemble: the strategy must be
an ``EnsembleStrategy`` whose option asks for one (MCGS, ``submit_ensemble``) and the task have a rule that the
strategy's ``ensemble_tasks`` admits (``declared``: rules without ``opt_in``; ``all``: any). ``no_ensemble_reason``
says why a run that asked for ensembles on every task (``all``) submits its best node instead (a task whose kind
writes no predictions, e.g. an OpenEvolve program). ``ensemble_members(strategy, task, view)`` adds that at least
two usable nodes must exist.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from verifyless.engine.combine import combine_file
from verifyless.node import Status
from verifyless.sandbox.base import Sandbox
from verifyless.search.base import EnsembleStrategy, SearchStrategy, SearchView
from verifyless.task.base import Task
from verifyless.task.loader import kind_of
from verifyless.verify import check_metrics, split_metrics, verify

SKIPPED = "skipped"  # a submission's status when the run's time budget left no room to re-run its members
UNSUPPORTED = "unsupported"  # ... when the run asked for an ensemble but the task's outputs do not combine


@dataclass(frozen=True)
class EnsembleSubmission:
    """The scored combination of several programs' outputs (validation and hidden-test metrics)."""

    members: tuple[str, ...]
    status: str
    reason: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    test_metrics: dict[str, float] = field(default_factory=dict)
    score: float | None = None
    test_score: float | None = None
    seconds: float = 0.0
    member_runs: tuple[dict[str, Any], ...] = ()
    combine: str = "mean"
    selection_score: float | None = None  # the task's selection metric (None: the task holds no selection split)

    @property
    def combined(self) -> tuple[str, ...]:
        """The members whose outputs went into the average (their re-run was OK)."""
        return tuple(r["node_id"] for r in self.member_runs if r["status"] == Status.OK.value)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["combined"] = list(self.combined)
        out["members"] = list(self.members)
        out["member_runs"] = [dict(r) for r in self.member_runs]
        if self.selection_score is None:
            del out["selection_score"]  # absent, as in the events of stores made before it existed
        return out


def submits_ensemble(strategy: SearchStrategy, task: Task) -> bool:
    """Whether a run ends with an ensemble submission: the strategy asks and the task has a rule it admits."""
    if not isinstance(strategy, EnsembleStrategy) or not strategy.submits_ensemble or task.ensemble is None:
        return False
    return not task.ensemble.opt_in or strategy.ensemble_tasks == "all"


def no_ensemble_reason(strategy: SearchStrategy, task: Task) -> str | None:
    """Why a run that asked for an ensemble on every task submits its best node alone (None: it did not ask,
    or the task's outputs combine)."""
    asked = isinstance(strategy, EnsembleStrategy) and strategy.submits_ensemble and strategy.ensemble_tasks == "all"
    if not asked or task.ensemble is not None:
        return None
    return (
        f"task {task.name!r} (kind {task.kind}) declares no outputs that combine (no 'ensemble' in its task.yaml, "
        "and its kind writes no predictions): the run's answer is its final node"
    )


def ensemble_members(strategy: SearchStrategy, task: Task, view: SearchView) -> list[str]:
    """Ids to combine, best first, or [] when this run submits a single program."""
    if not isinstance(strategy, EnsembleStrategy) or not submits_ensemble(strategy, task):
        return []
    ids = list(strategy.final_ensemble(view))
    return ids if len(ids) >= 2 else []


def ensemble_submission(
    task: Task,
    members: Sequence[tuple[str, str]],
    sandbox: Sandbox,
    *,
    hide: Sequence[Path] = (),
    workspace_root: Path | None = None,
    keep: Path | None = None,
) -> EnsembleSubmission:
    """Re-run ``members`` (``(node id, program)``), combine the declared outputs, score once (see module doc).

    ``keep``: where to copy the combined output folder when the submission scored (``run --out``)."""
    if task.ensemble is None:
        raise ValueError(f"task {task.name!r} declares no 'ensemble' in its task.yaml; nothing to combine")
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="verifyless-ensemble-", dir=workspace_root))
    try:
        outs: list[Path] = []
        runs: list[dict[str, Any]] = []
        for node_id, program in members:
            member_root = root / f"member-{len(runs)}"
            v = verify(task, program, sandbox, workspace_root=member_root, hide=hide, keep_workspace=True)
            runs.append(
                {
                    "node_id": node_id,
                    "status": v.status.value,
                    "reason": v.reason,
                    "score": v.score,
                    "seconds": v.seconds,
                }
            )
            if v.status is Status.OK:
                (ws,) = list(member_root.iterdir())
                outs.append(ws)
        ids = tuple(node_id for node_id, _ in members)
        if not outs:
            return EnsembleSubmission(
                ids,
                Status.FAILED.value,
                "no member re-ran successfully",
                seconds=time.monotonic() - started,
                member_runs=tuple(runs),
            )
        sub = _combine_and_score(task, ids, outs, runs, root / "combined", started)
        if keep is not None and sub.status == Status.OK.value:
            shutil.copytree(root / "combined" / "out", keep, dirs_exist_ok=True)
        return sub
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _combine_and_score(
    task: Task, ids: tuple[str, ...], outs: list[Path], runs: list[dict[str, Any]], ws: Path, started: float
) -> EnsembleSubmission:
    rule = task.ensemble
    assert rule is not None
    (ws / "out").mkdir(parents=True)
    shutil.copytree(outs[0] / "public", ws / "public")
    for name in rule.files:
        problem = combine_file(rule, name, [member / "out" for member in outs], ws / "out")
        if problem:
            return EnsembleSubmission(
                ids, Status.FAILED.value, problem, seconds=time.monotonic() - started, member_runs=tuple(runs)
            )
    judged = kind_of(task).judge(task, ws, None)  # the trusted side, as for one candidate's workspace
    raw, problem = judged.raw, judged.failure
    metrics: dict[str, Any] = {}
    test: dict[str, float] = {}
    if raw is not None:
        metrics, test = split_metrics(task, raw)
        problem = check_metrics(task, metrics)
    seconds = time.monotonic() - started
    if problem:
        return EnsembleSubmission(ids, Status.FAILED.value, problem, seconds=seconds, member_runs=tuple(runs))
    test_score = next((test[n] for n in task.test_metrics if n in test), None)
    return EnsembleSubmission(
        members=ids,
        status=Status.OK.value,
        metrics={k: float(v) for k, v in metrics.items()},
        test_metrics=test,
        score=float(metrics[task.metric.name]),
        test_score=test_score,
        seconds=seconds,
        member_runs=tuple(runs),
        combine=rule.combine,
        selection_score=test.get(task.selection_metric) if task.selection_metric else None,
    )


__all__ = [
    "SKIPPED",
    "UNSUPPORTED",
    "EnsembleSubmission",
    "ensemble_members",
    "ensemble_submission",
    "no_ensemble_reason",
    "submits_ensemble",
]
