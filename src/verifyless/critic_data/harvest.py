"""Turn stored runs into critic examples: every verified parent -> child pair, with provenance.

``harvest_runs(store, run_ids)`` reads each run's nodes view and events:

* a pair is (parent node, child node) where the child has a finished
  verification (including audited screen-outs of a screened run) and the
  parent has a validation fitness;
* a child whose verification did not give a fitness (failed, timed out,
  invalid metric) is *infeasible*: excluded from the examples, counted per
  parent;
* labels are fitted per parent within one run (``verifyless.critic_data.labels``);
* the task brief is the run's last ``brief`` event (empty when the run has
  none); the task statement and metric direction come from the task when it
  can be loaded, else from the stored scores' orientation.

Repairs (``debug`` children whose parent is the failed program) are left out:
their parent has no fitness to compare against.
"""

from __future__ import annotations

import datetime as _dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from verifyless.critic_data.labels import MIN_IMPROVING, label_pairs
from verifyless.critic_data.schema import SCHEMA_VERSION
from verifyless.events import BriefLogged, DataReported
from verifyless.task import load_task

log = logging.getLogger(__name__)

COLLECT_KIND = "data-collect"


@dataclass(frozen=True)
class RunSource:
    """Provenance of one harvested run."""

    run_id: str
    task: str
    source: str  # collect-sft | collect-grpo | run
    created: str  # ISO date of the run
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Harvest:
    """Examples (schema rows without critiques) and infeasible children left out, per (task, "run/parent")."""

    rows: tuple[dict[str, Any], ...]
    infeasible: Mapping[tuple[str, str], int]
    runs: tuple[RunSource, ...]


@lru_cache(maxsize=64)
def _task_facts(name: str) -> tuple[str, bool | None, str]:
    """(statement, higher_is_better, metric name) of a loadable task, else ("", None, "")."""
    try:
        task = load_task(name)
    except Exception as exc:  # an unknown or broken task must not stop a harvest
        log.info("task %s cannot be loaded (%s); statement left empty", name, exc)
        return "", None, ""
    return task.statement.strip(), task.metric.direction == "maximize", task.metric.name


def _orientation(rows: Iterable[Mapping[str, Any]]) -> bool:
    for r in rows:
        score, fit = r.get("score"), r.get("fitness")
        if score is not None and fit is not None and score != 0:
            return bool(score == fit)
    return True


def _brief(store: Any, run_id: str) -> tuple[str, list[str]]:
    understanding, criteria = "", []
    for ev in store.events(run_id, BriefLogged):
        understanding = str(ev.record.understanding)
        criteria = [str(c) for c in ev.record.criteria]
    return understanding, criteria


def _data_report(store: Any, run_id: str) -> str:
    """The run's data report as its prompts carried it ('' when it has none; ``RunState.data_report_text``)."""
    text = ""
    for ev in store.events(run_id, DataReported):
        text = str(ev.record.markdown or "")
    return text.strip()


def _screeners_read_report(config: Mapping[str, Any]) -> bool:
    """Whether the run's critic prompts carried its data report (``engine.screener_data_report``, on when the
    configuration predates it): a row's critic prompt is what the run's critic read."""
    engine = config.get("engine")
    return not isinstance(engine, Mapping) or bool(engine.get("screener_data_report", True))


def run_source(store: Any, run_id: str) -> RunSource:
    info = store.run(run_id)
    config = dict(info.config)
    source = f"collect-{config.get('mode', 'sft')}" if config.get("kind") == COLLECT_KIND else "run"
    created = _dt.datetime.fromtimestamp(info.created, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return RunSource(info.run_id, info.task, source, created, config)


def harvest_run(
    store: Any, run_id: str, *, tolerance: float | None = None, min_improving: int = MIN_IMPROVING
) -> Harvest:
    """Examples of one run (see module docstring); ``tolerance`` None labels with the run's own ``tie_tolerance``."""
    src = run_source(store, run_id)
    if tolerance is None:
        tolerance = float(src.config.get("tie_tolerance") or 0.0)
    nodes = {r["node_id"]: r for r in store.node_rows(run_id)}
    statement, higher, _ = _task_facts(str(src.config.get("task_ref") or src.task))
    if higher is None:
        higher = _orientation(nodes.values())
    understanding, criteria = _brief(store, run_id)
    data_report = _data_report(store, run_id) if _screeners_read_report(src.config) else ""
    pairs = []
    for nid, row in nodes.items():
        parent = nodes.get(row.get("parent_id") or "")
        if parent is None or row.get("verified_seq") is None or row.get("operator") == "debug":
            continue
        pairs.append((parent["node_id"], nid, row.get("fitness"), parent.get("fitness")))
    labelled = label_pairs(pairs, min_improving=min_improving, tolerance=tolerance)
    rows = []
    for out in labelled.outcomes:
        child, parent = nodes[out.child_id], nodes[out.parent_id]
        rows.append(
            {
                "example_id": f"{run_id}/{out.child_id}",
                "task": src.task,
                "run_id": run_id,
                "parent_id": out.parent_id,
                "child_id": out.child_id,
                "task_description": statement,
                "understanding": understanding,
                "criteria": list(criteria),
                "parent_summary": str(parent.get("summary") or ""),
                "child_summary": str(child.get("summary") or ""),
                "idea": str(child.get("idea") or ""),
                "parent_score": float(parent["score"]),
                "child_score": float(child["score"]),
                "delta": float(out.delta),
                "higher_is_better": bool(higher),
                "label3": out.three,
                "label5": out.five,
                "critique": None,
                "stratum": None,
                "schema_version": SCHEMA_VERSION,
                "source": src.source,
                "parent_hash": str(parent.get("program_hash") or ""),
                "child_hash": str(child.get("program_hash") or ""),
                "created": src.created,
                "data_report": data_report,
            }
        )
    infeasible = {(src.task, f"{run_id}/{pid}"): n for pid, n in labelled.infeasible.items()}
    return Harvest(tuple(rows), infeasible, (src,))


def harvest_runs(
    store: Any, run_ids: Iterable[str], *, tolerance: float | None = None, min_improving: int = MIN_IMPROVING
) -> Harvest:
    """Examples of several runs (run ids or unique prefixes), in the given run order."""
    rows: list[dict[str, Any]] = []
    infeasible: dict[tuple[str, str], int] = {}
    runs: list[RunSource] = []
    for ref in run_ids:
        one = harvest_run(store, store.resolve_run(ref), tolerance=tolerance, min_improving=min_improving)
        rows.extend(one.rows)
        runs.extend(one.runs)
        for key, n in one.infeasible.items():
            infeasible[key] = infeasible.get(key, 0) + n
    return Harvest(tuple(rows), infeasible, tuple(runs))


__all__ = ["COLLECT_KIND", "Harvest", "RunSource", "harvest_run", "harvest_runs", "run_source"]
