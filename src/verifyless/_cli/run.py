"""The ``run`` command's body: a new run (its task and models checked, its plan printed, its store opened) or a
resumed one (only caps raised, its task unchanged), run to its end with the live line, then the end-of-run table
and the commands that show, report and watch it. ``app.py`` holds the command's options and calls ``start_run``.
"""

from __future__ import annotations

import asyncio
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from verifyless._cli.common import console, err
from verifyless._cli.outputs import check_refit, write_outputs
from verifyless._cli.progress import LiveProgress
from verifyless._cli.report import default_out
from verifyless._cli.show import submission_line, submission_summary
from verifyless._cli.terminal import shown
from verifyless.config import DEFAULT_STORE, apply_changes, load_config, resume_changes, stored_config
from verifyless.engine.health import weak_model_line
from verifyless.engine.submission import submits_ensemble
from verifyless.errors import ConfigError, StoreError
from verifyless.events import ConfigUpdated, Finalised, LlmCalled, Submitted
from verifyless.models_wiring import check_models, probe_endpoints
from verifyless.preflight import plan
from verifyless.presets import preset_text
from verifyless.report.text import number
from verifyless.report.views.final import FinalView, final_view
from verifyless.roles.kinds import check_roles_fit
from verifyless.sandbox.doctor import require_gpu
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.audit import adaptive_state, safety_net_state
from verifyless.screen.registry import check_screener_fits
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.task.fingerprint import refuse_changed, stored_fingerprint
from verifyless.task.home import load_run_task
from verifyless.wiring import build_engine


def start_run(
    *,
    task: str | None,
    strategy: str | None,
    screener: str | None,
    budget: int | None,
    config: Path | None,
    preset: str | None,
    seed: int | None,
    store: Path | None,
    resume: str | None,
    quiet: bool,
    dry_run: bool,
    allow_changed_task: bool,
    out: Path | None,
    overrides: list[str] | None,
    take_over: bool = False,
    refit: bool = False,
) -> None:
    """``verifyless run`` with its options as given (app.py's ``run`` documents each)."""

    over = list(overrides or [])
    if task and "=" in task:  # `verifyless run engine.candidates=4` with the task from config
        over.insert(0, task)
        task = None
    given = {
        "task": task,
        "strategy.name": strategy,
        "screener.name": screener,
        "budget.verifications": budget,
        "seed": seed,
        "store": store,
    }
    flags = {key: value for key, value in given.items() if value is not None}  # typed, set as they are
    if preset is not None and resume is not None:
        raise ConfigError("--preset starts a new run; a resumed run keeps the configuration it stored")
    if take_over and resume is None:
        raise ConfigError(
            "--take-over goes with --resume RUN: it takes over a run held by a gone process on another host"
        )
    if refit and out is None:
        raise ConfigError(
            "--refit goes with --out DIR: it refits the returned program for the submission written there"
        )
    cfg = load_config(config, over, values=flags, preset=preset)
    if dry_run and preset is not None:
        console.print(f"preset {preset} (settings under --config, flags and overrides):", highlight=False)
        console.print(preset_text(preset), highlight=False, soft_wrap=True, markup=False)
    loaded = _check_new_run(cfg) if resume is None else None  # the task and the models, before the store exists
    if refit and loaded is not None:
        check_refit(loaded)
    if dry_run or (not quiet and resume is None):  # the pre-flight check, before the store is opened
        console.print("\n".join(plan(cfg, loaded).lines()), highlight=False, soft_wrap=True)
        if dry_run:
            raise typer.Exit(0)
    st = open_store(Path(cfg.store), must_exist=resume is not None)
    with ExitStack() as held:
        if resume is not None:
            resume = st.resolve_run(resume)
            held.enter_context(st.holding(resume, take_over=take_over))  # one process at a time pays for a run
            changes = resume_changes(flags, over)
            _refuse_lower_caps(st, resume, changes)
            named = load_task(task) if task is not None else None  # TASK with --resume: checked even when finished
            if named is not None:
                _refuse_other_task(st, resume, named)
            if not changes and st.run(resume).status == "finished":
                _print_finished(st, resume)
                return
            stored = stored_config(st, resume)
            # The store that holds the run (and its response cache) is the one just opened, wherever it was first
            # run from.
            cfg = apply_changes(stored, changes).model_copy(update={"store": st.path})
            loaded = _resumed_task(st, resume, named, allow_changed_task)
            if refit:
                check_refit(loaded)
            probe_endpoints(cfg)
            if changes:
                st.append(resume, ConfigUpdated(changes))
        if not quiet:
            console.print(f"watch it live: verifyless ui --store {st.path}", highlight=False)
        started: dict[str, Any] = {}
        try:
            result = asyncio.run(_run(cfg, st, resume, quiet, started, loaded, out, refit))
        except KeyboardInterrupt:
            _print_interrupted(started.get("engine"), st)
            sys.exit(130)
    print_result(result, st)
    if "wrote" in started:
        console.print(started["wrote"], highlight=False, soft_wrap=True)


def open_store(path: Path, must_exist: bool = True):
    if must_exist and not path.exists():
        raise StoreError(f"no run store at {path}: start a run with `verifyless run TASK`, or pass --store")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        blocker = next((p for p in path.parents if p.exists()), None)
        why = f"{blocker} is a file, not a folder" if blocker and not blocker.is_dir() else exc.strerror or str(exc)
        raise StoreError(
            f"cannot make the store's folder {path.parent}: {why}; pass --store with a path in a folder you can write"
        ) from None
    return RunStore(path)


def _print_finished(st, run_id: str) -> None:
    """``--resume`` of a finished run with no raised cap: nothing to do, say so and how to go on."""
    final = [e.record for e in st.events(run_id, Finalised)]
    stopped = (final[-1].stopped or "?") if final else "?"
    console.print(
        f"run {run_id} is finished (stopped: {stopped}; {st.budget(run_id).verifications} verifications); "
        f"nothing to resume. To go on, raise a cap: verifyless run --resume {run_id} --budget N --store {st.path}",
        highlight=False,
        soft_wrap=True,
    )


def _print_interrupted(engine: Any, st) -> None:
    """After Ctrl-C: what was kept and the command that continues the run (``engine`` is None before it was built)."""
    run_id = engine.run_id if engine is not None else None
    if run_id is None:
        err.print("interrupted before the run started; nothing was stored", highlight=False)
        return
    done = st.budget(run_id).verifications
    err.print(
        f"interrupted: run {run_id} stopped after {done} verifications (every finished one is stored; "
        f"unfinished ones are verified on resume). Continue it with: verifyless run --resume {run_id} "
        f"--store {st.path}",
        highlight=False,
        soft_wrap=True,
    )


# budget.* caps a resume may raise, and what the run has spent of each (``store.budget``)
_SPENT = {
    "budget.verifications": ("verifications", "--budget", lambda b: b.verifications),
    "budget.evaluator_seconds": ("evaluator seconds", "budget.evaluator_seconds=", lambda b: b.evaluator_seconds),
    "budget.tokens": ("tokens", "budget.tokens=", lambda b: b.tokens_in + b.tokens_out),
    "budget.cost": ("of LLM cost", "budget.cost=", lambda b: b.cost),
}


def _refuse_lower_caps(st, run_id: str, changes: dict[str, Any]) -> None:
    """A cap given with ``--resume`` below what the run already spent is a ``ConfigError`` (a resume only raises
    caps; it would otherwise stop at once and report "5 of 3 verifications paid")."""
    budget = st.budget(run_id)
    for key, (what, flag, spent_of) in _SPENT.items():
        cap, spent = changes.get(key), spent_of(budget)
        if cap is not None and cap < spent:
            sep = "" if flag.endswith("=") else " "
            more = int(spent) + 1 if key != "budget.cost" else round(spent * 2, 4)
            raise ConfigError(
                f"run {run_id} has already paid {number(spent, 6)} {what}; {flag}{sep}{cap} is below that and a resume "
                f"can only raise a cap: pass more to continue it (e.g. {flag}{sep}{more})"
            )


def _resumed_task(st, run_id: str, named: Any, allow_changed: bool) -> Any:
    """The task a resume continues on: ``named`` (the task argument, loaded; already checked to be the run's task),
    else the run's own, found where the run was made (``task.home``); refused when its files changed since the run
    was made (exit 3, unless ``--allow-changed-task``)."""
    task = named if named is not None else load_run_task(st, run_id)
    refuse_changed(stored_fingerprint(st, run_id), task, run_id=run_id, action="resume", allow=allow_changed)
    return task


def _refuse_other_task(st, run_id: str, task: Any) -> None:
    """``ConfigError`` (exit 2) when the task argument given with ``--resume`` is another task than the run's."""
    stored = st.run(run_id).task
    if task.name != stored:
        raise ConfigError(
            f"run {run_id} is a run of task {stored!r}, not of {task.name!r}: leave the task argument out to resume "
            f"it (a resumed run keeps its task), or start a new run of {task.name!r} without --resume"
        )


def _check_new_run(cfg) -> Any:
    """The task of a new run, loaded, and its models checked (``models_wiring.check_models``), as a dry run does too.

    A task argument that names nothing (a misspelt name, a folder that is not there) is bad input (``MissingTask``,
    exit 2; a misspelt name's message names close matches); a broken task folder is a task error (exit 3).
    """
    task = load_task(cfg.task)
    check_roles_fit(cfg.roles.kind, task)
    check_screener_fits(cfg.screener.name, cfg.screener.options, task)
    check_models(cfg)
    if task.limits.gpus > 0 and cfg.executor.name == "local":  # a Ray cluster's GPUs are its workers' to check
        require_gpu(LocalSandbox(), task.limits, task.name)
    probe_endpoints(cfg)
    return task


async def _run(
    cfg, st, resume, quiet, started: dict[str, Any], task: Any = None, out: Path | None = None, refit: bool = False
):
    """Build the engine (kept in ``started["engine"]`` for the Ctrl-C message), run it, and write ``--out``."""

    progress = None if quiet else LiveProgress(console, cap=cfg.budget.verifications)
    engine = build_engine(cfg, st, task=task, progress=progress)
    started["engine"] = engine
    if progress and submits_ensemble(engine.strategy, engine.task):
        progress.finish += ", then scoring the top-K ensemble submission (re-runs its members)"
    try:
        result = await engine.run(resume)
        if progress:
            progress.close()
        if out is not None:
            started["wrote"] = await write_outputs(engine, st, result.run_id, result.best_id, out, refit=refit)
        return result
    finally:
        if progress:
            progress.close()
        engine.executor.close()


def print_result(result, st) -> None:
    table = Table(title=f"run {result.run_id}", box=None)
    table.add_column("")
    table.add_column("value", justify="right")
    table.add_row("stopped", shown(result.stopped))
    table.add_row("rounds", str(result.rounds))
    table.add_row("verifications", str(result.verifications))
    if result.answer != "node":  # the strategy asked for its ensemble as the run's answer, and it scored
        table.add_row("answer", f"{result.answer} (validation {number(result.answer_score, 6)})")
    safety_net = safety_net_state(adaptive_state(st, result.run_id))
    if safety_net:
        table.add_row("safety net (adaptive screening)", safety_net)
    console.print(table)
    final = final_view(st, result.run_id)
    console.print(scores_table(final))
    if final.chosen_line:
        console.print(final.chosen_line, highlight=False, soft_wrap=True)
    llm = next(iter(st.events(result.run_id, LlmCalled)), None) is not None  # events() is a lazy iterator
    weak = weak_model_line({n.id: n.status for n in st.nodes(result.run_id)}, llm)
    if weak:
        console.print(f"[yellow]warning:[/] {weak.replace('RUN', result.run_id)}", highlight=False, soft_wrap=True)
    warning = final.transfer_warning
    if warning:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    submission = [e.record for e in st.events(result.run_id, Submitted)]
    if submission:
        console.print(submission_line(submission_summary(submission[-1])), highlight=False)
    console.print(
        f"store: {st.path}   show it with: {show_command(result.run_id, st.path)}", highlight=False, soft_wrap=True
    )
    print_links(result.run_id, st.path)


def scores_table(final: FinalView) -> Table:
    """The baseline, the node the run returned and, when a final selection returned another one, the search
    strategy's own pick (the best it found on validation): each on validation, the selection split (where the task
    holds one out) and the hidden test, side by side."""
    table = Table(box=None, header_style="bold")
    held = final.selection_metric is not None
    for col in ("score", "validation", *(["selection split"] if held else []), "hidden test"):
        table.add_column(col, justify="left" if col == "score" else "right")
    rows = [
        ("baseline (root)", final.baseline_score, final.baseline_selection_score, final.baseline_test_score),
        (f"returned node ({final.node_id})", final.score, final.selection_score, final.test_score),
    ]
    pick = final.strategy_pick
    if pick is not None:
        rows.append((f"strategy's pick ({pick.node_id})", pick.validation, pick.selection, pick.test))
    for label, validation, selection, test in rows:
        table.add_row(label, number(validation, 6), *([number(selection, 6)] if held else []), number(test, 6))
    return table


def show_command(run_id: str, store: Path) -> str:
    """The ``verifyless show`` line to paste: ``--store`` named unless the store is the default one."""
    default = Path(store).resolve() == DEFAULT_STORE.resolve()
    return f"verifyless show {run_id}" + ("" if default else f" --store {store}")


def print_links(run_id: str, store: Path) -> None:
    console.print(
        f"report: verifyless report {run_id} --store {store}  (writes {default_out(run_id)}/report.html)\n"
        f"dashboard: verifyless ui --store {store}  (http://127.0.0.1:8765/runs/{run_id})",
        highlight=False,
        soft_wrap=True,  # a long store path stays on its line, pastable
    )


__all__ = ["open_store", "print_links", "print_result", "show_command", "start_run"]
