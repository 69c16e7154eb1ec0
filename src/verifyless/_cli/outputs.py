"""``verifyless run --out DIR``: what a run returned, written where a person can use it.

``write_outputs`` writes into ``DIR``:

* ``<program file>``: the final node's program, exactly as verified;
* ``submission/``: that program's output files. Verifications keep no outputs, so the program runs once more in
  the sandbox (``verify.produce``; not charged to the run's budget). For a competition (an MLE-bench folder or a
  ``task new`` folder) ``submission/submission.csv`` holds exactly the competition's sample submission's ids and
  columns, in its order (``task.tabular.deliver``): the rows the run held out for validation and selection are
  predicted during a run but are no part of the competition. With ``--refit`` the program is first refitted on
  every public training row (those held-out rows included); should that run fail, the submission comes from the
  program as verified and the line says why. The line names the submission's hidden test score either way (and the
  node's as verified), so the gain of a refit can be read off (docs/design/task-format.md, "After a run").
* ``ensemble/``: where the run's answer is its top-K ensemble (mcgs ``ensemble_answer``, the mlevolve preset, and
  the run's last ``submission`` scored), the members' combined output files: the members run once more in the
  sandbox and their outputs are combined as in the run (``engine.submission.ensemble_submission``; not charged);
  for a competition, ``ensemble/submission.csv`` holds the sample submission's rows, as ``submission/`` does.
* ``config.yaml``: the configuration in force (every ``config_update`` applied), rewritten to rerun from any
  folder (``rerun_config``): the task as an absolute path (a built-in by its name), the store absolute, other
  relative paths made absolute against the folder the command runs in; a pin that only the run's store can honour
  (the recorded critic-rm warm start, a blob of that store) is left out, with a comment that says what it was.
  ``verifyless run --config DIR/config.yaml`` then starts a new run like it.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

import yaml

from verifyless.config import relative_to, stored_config
from verifyless.engine.submission import ensemble_submission
from verifyless.errors import ConfigError, InvalidSubmission
from verifyless.events import Submitted
from verifyless.node import Status
from verifyless.report.text import number, one_line
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.reward import COLD
from verifyless.search.base import EnsembleStrategy
from verifyless.task.base import Task
from verifyless.task.loader import builtin_tasks_dir
from verifyless.task.tabular.deliver import competition_submission, full_data_task, is_competition_task
from verifyless.verify import Produced, produce

__all__ = ["check_refit", "rerun_config", "write_outputs"]

WARM_KEYS = ("screener.options.options.warm", "screener.options.warm")  # adaptive's inner critic-rm, a bare one


def check_refit(task: Task) -> None:
    """``ConfigError`` when ``--refit`` is asked for a task that has no public rows to refit on."""
    if not is_competition_task(task):
        raise ConfigError(
            f"--refit refits on a competition's public rows; task {task.name!r} is a {task.kind} task, whose "
            "program decides its own data: leave --refit out"
        )


async def write_outputs(engine: Any, st: Any, run_id: str, final_id: str | None, out: Path, refit: bool = False) -> str:
    """Write the run's returned program, its outputs and its configuration into ``out``; one line saying what."""
    out.mkdir(parents=True, exist_ok=True)
    task = engine.task
    (out / "config.yaml").write_text(rerun_config(stored_config(st, run_id), task, Path(st.path), run_id))
    if final_id is None:
        return f"wrote {out}: config.yaml (the run returned no node)"
    program = st.candidate(run_id, final_id).program
    (out / Path(task.program_file).name).write_text(program, encoding="utf-8")
    verified = next((r.get("test_score") for r in st.node_rows(run_id) if r["node_id"] == final_id), None)
    made = await asyncio.to_thread(_submission, engine.executor, task, program, out / "submission", refit, verified)
    ensemble = await asyncio.to_thread(_ensemble, engine, st, run_id, out / "ensemble")
    return f"wrote {out}: {Path(task.program_file).name} (node {final_id}), submission/ ({made}){ensemble}, config.yaml"


def _ensemble(engine: Any, st: Any, run_id: str, dest: Path) -> str:
    """``dest``: the combined outputs of the run's ensemble when it is the run's answer; what was written ('' when
    the answer is the final node)."""
    strategy, task = engine.strategy, engine.task
    subs = [e.record for e in st.events(run_id, Submitted)]
    if not (isinstance(strategy, EnsembleStrategy) and strategy.ensemble_answer and subs):
        return ""
    if subs[-1].status != Status.OK.value:
        return ""
    members = [(i, st.candidate(run_id, i).program) for i in subs[-1].combined]
    sandbox = getattr(engine.executor, "sandbox", None) or LocalSandbox()
    hide = tuple(Path(p) for p in engine.executor.hide)
    with tempfile.TemporaryDirectory(prefix="verifyless-out-") as tmp:
        combined = Path(tmp) / "combined"
        sub = ensemble_submission(task, members, sandbox, hide=hide, keep=combined)
        if sub.status != Status.OK.value:
            return f", no ensemble/ (its re-run failed: {one_line(sub.reason)})"
        if is_competition_task(task):
            try:
                competition_submission(task, combined, dest)
            except InvalidSubmission as exc:
                return f", no ensemble/ (invalid submission: {one_line(str(exc))})"
        else:
            shutil.copytree(combined, dest, dirs_exist_ok=True)
    return (
        f", ensemble/ (the run's answer: {sub.combine} of {len(sub.combined)} members, hidden test "
        f"{number(sub.test_score, 6)}; re-run {sub.seconds:.1f} s, not charged)"
    )


def _submission(executor: Any, task: Task, program: str, dest: Path, refit: bool, verified: float | None) -> str:
    """Run ``program`` for ``dest`` (refitted first when asked) and say what was written."""
    sandbox = getattr(executor, "sandbox", None) or LocalSandbox()
    hide = tuple(Path(p) for p in executor.hide)
    with tempfile.TemporaryDirectory(prefix="verifyless-out-") as tmp:

        def run(on: Task, name: str) -> Produced:
            return produce(on, program, sandbox, Path(tmp) / name, workspace_root=Path(tmp), hide=hide)

        if not is_competition_task(task):
            ran = run(task, "out")
            if ran.status is Status.OK:
                shutil.copytree(Path(tmp) / "out", dest, dirs_exist_ok=True)
            files = sorted(p.name for p in dest.iterdir()) if dest.is_dir() else []
            return f"{', '.join(files) or 'no files'}; {_ran(ran)}"
        failed = ""
        if refit:
            ran = run(full_data_task(task), "refit")
            ok, said = _deliver(task, ran, Path(tmp) / "refit", dest, "refitted on every public training row", verified)
            if ok:
                return said
            failed = f"the refit gave {said}; instead "
        ran = run(task, "out")
        return failed + _deliver(task, ran, Path(tmp) / "out", dest, "as verified", verified)[1]


def _deliver(
    task: Task, ran: Produced, produced: Path, dest: Path, how: str, verified: float | None
) -> tuple[bool, str]:
    """The competition's submission from a finished run of the program (``how`` it was fitted): whether it was
    written, and what was written or why nothing was."""
    if ran.status is not Status.OK:
        return False, f"no submission.csv ({_ran(ran)})"
    try:
        done = competition_submission(task, produced, dest)
    except InvalidSubmission as exc:
        return False, f"no submission.csv (invalid submission: {one_line(str(exc))}; {_ran(ran)})"
    node = f"; the node as verified: {number(verified, 6)}" if how != "as verified" else ""
    return True, (
        f"submission.csv: the sample submission's {done.rows} rows from the program {how} (hidden test "
        f"{number(done.test_score, 6)}{node}); {_ran(ran)}"
    )


def _ran(ran: Produced) -> str:
    reason = f": {one_line(ran.reason)}" if ran.reason else ""
    return f"re-run {ran.status.value}{reason}, {ran.seconds:.1f} s, not charged"


def rerun_config(stored: dict[str, Any], task: Task, store: Path, run_id: str, cwd: Path | None = None) -> str:
    """``config.yaml``'s text: ``stored`` (run ``run_id``'s configuration in force, which names paths as they were
    typed in ``cwd``, default the current folder) made to rerun from any folder (module docstring), with a header
    comment saying so and naming each pin left out."""
    data = relative_to(stored, (cwd or Path.cwd()).resolve())
    data["store"] = str(Path(store).resolve())
    data["task"] = _task_reference(task, str(stored.get("task") or task.name))
    dropped = _drop_store_pins(data)
    lines = [
        f"# The configuration of run {run_id} (store {data['store']}), with every path absolute:",
        "# `verifyless run --config THIS_FILE` starts a new run like it from any folder.",
    ]
    for key, digest in dropped:
        lines.append(
            f"# {key}: left out: the run warm-started critic-rm from blob {digest[:16]}... of its store, which a "
            "new run cannot reuse; it fits its own from its store's earlier runs (set it to 'cold' to start cold)."
        )
    return "\n".join(lines) + "\n" + yaml.safe_dump(data, sort_keys=False)


def _task_reference(task: Task, typed: str) -> str:
    """The task as a new run names it: a built-in by its name, any other by its folder's absolute path."""
    root = Path(task.root).resolve()
    return typed if root.is_relative_to(builtin_tasks_dir().resolve()) else str(root)


def _drop_store_pins(data: dict[str, Any]) -> list[tuple[str, str]]:
    """Remove from ``data`` each recorded warm-start digest (``WARM_KEYS``); the dotted keys and digests removed."""
    dropped = []
    for key in WARM_KEYS:
        *path, last = key.split(".")
        node: Any = data
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(last), str) and node[last] != COLD:
            dropped.append((key, node.pop(last)))
    return dropped
