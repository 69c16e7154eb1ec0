"""The ``verifyless`` command line (Typer + rich).

Exit codes: 0 success (``verify``: the verification ran, whatever the program's
status; ``--strict``: 1 when the program failed); 1 unexpected error; 2 bad
configuration or arguments; 3 bad task folder, or a run whose baseline failed
(in the evaluator always; as a program unless ``engine.allow_failed_baseline``);
4 sandbox unavailable; 5 store problem; 6 model endpoint unusable; 7 an LLM
reply that never parsed (a proposer or implementer with
``engine.max_unparsed_replies`` unparseable children in a row); 8 a screener's
replies stopped parsing (``UnparseableReplies``); 9 ``replay`` found a decision
that differs from the stored run; 130 interrupted (Ctrl-C; the message names the
``--resume`` command). Errors print one clear message, never a traceback (set
``VERIFYLESS_DEBUG=1`` to see it).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from verifyless._cli.bench import app as bench_app
from verifyless._cli.bench import collect_pools_command
from verifyless._cli.common import RUN_ID, STORE, TASK, console, err, out_folder, read_store
from verifyless._cli.components import components_command
from verifyless._cli.data import app as data_app
from verifyless._cli.demo import run_demo
from verifyless._cli.export import export_command
from verifyless._cli.outputs import write_outputs
from verifyless._cli.progress import LiveProgress as _LiveProgress
from verifyless._cli.propose import propose_for_baseline
from verifyless._cli.report import default_out, report_command
from verifyless._cli.show import (
    peers_text,
    run_row,
    selection_line,
    show_data,
    submission_line,
    submission_summary,
    transfer_lines,
)
from verifyless._cli.task import app as task_app
from verifyless._cli.train import app as train_app
from verifyless._cli.train import models_command
from verifyless._cli.tune import app as tune_app
from verifyless._cli.ui import ui_command
from verifyless.config import DEFAULT_STORE, apply_changes, load_config, resume_changes, stored_config
from verifyless.engine.baseline import failure_source
from verifyless.engine.replay import ReplayDiverged, replay_run
from verifyless.engine.submission import submits_ensemble
from verifyless.errors import ConfigError, StoreError, TaskError, VerifylessError
from verifyless.events import ConfigUpdated, Finalised, Submitted
from verifyless.models_wiring import check_models, probe_endpoints
from verifyless.preflight import plan
from verifyless.presets import PRESETS, preset_text
from verifyless.report.text import number
from verifyless.report.views.final import final_view
from verifyless.report.views.learned import learned_critic_line
from verifyless.roles.kinds import check_roles_fit
from verifyless.sandbox.doctor import require_gpu, sandbox_report
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.audit import adaptive_line, adaptive_state, audit_line, safety_net_state
from verifyless.screen.base import fallback_line
from verifyless.screen.registry import SCREENERS, check_screener_fits
from verifyless.search.registry import STRATEGIES
from verifyless.store import RunStore
from verifyless.task import InvalidTask, UnknownTask, builtin_tasks_dir, discover_tasks, is_task_folder, load_task
from verifyless.task.fingerprint import OVERRIDE, refuse_changed, stored_fingerprint
from verifyless.verify import verify as run_verify
from verifyless.wiring import build_engine

# add_completion: `verifyless --install-completion` / `--show-completion` for bash, zsh, fish and PowerShell.
app = typer.Typer(
    add_completion=True, no_args_is_help=True, help="Screen candidate ideas before you pay to verify them."
)


_FULL = {errno.ENOSPC, errno.EDQUOT}
_CANNOT_WRITE = {errno.EACCES, errno.EPERM, errno.EROFS, *_FULL}


def main() -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        code = app(standalone_mode=False)  # Typer returns (not raises) the code of ``typer.Exit`` and Ctrl-C (130)
    except VerifylessError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        if os.environ.get("VERIFYLESS_DEBUG"):
            raise
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err.print("interrupted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in _CANNOT_WRITE or os.environ.get("VERIFYLESS_DEBUG"):
            raise
        # a default output place that cannot be written (a read-only folder, a full disk): the user's to fix
        where = f" {exc.filename}" if exc.filename else ""
        hint = (
            "free some space, or choose another place (--out, --store)"
            if exc.errno in _FULL
            else "that place is not writable (read-only, or no permission): choose a place you can write to "
            "(--out, --store)"
        )
        err.print(f"[bold red]error:[/] cannot write{where}: {exc.strerror}; {hint}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except Exception as exc:  # usage errors (unknown option, missing argument) and the unexpected
        if _is_usage_error(exc):
            err.print(f"[bold red]error:[/] {_usage_line(exc)}", highlight=False, soft_wrap=True)
            sys.exit(2)
        if os.environ.get("VERIFYLESS_DEBUG"):
            raise
        err.print(
            f"[bold red]unexpected error:[/] {type(exc).__name__}: {exc}\n"
            "Re-run with VERIFYLESS_DEBUG=1 for the traceback, and please report it.",
            highlight=False,
        )
        sys.exit(1)
    if code == 130:
        err.print("interrupted")
    if isinstance(code, int) and code:
        sys.exit(code)


def _is_usage_error(exc: BaseException) -> bool:
    """Click's usage errors, whether raised by click itself or by Typer's vendored copy of it."""
    import click

    if isinstance(exc, click.ClickException):
        return True
    typer_exceptions = getattr(typer, "exceptions", None)
    base = getattr(typer_exceptions, "TyperException", None)
    return base is not None and isinstance(exc, base) and hasattr(exc, "format_message")


def _usage_line(exc: BaseException) -> str:
    """One line: what is wrong and where to look (``verifyless CMD --help``)."""
    message = " ".join(str(exc.format_message()).split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    path = getattr(ctx, "command_path", None) or "verifyless"
    return f"{message} (see `{path} --help`)"


def _setup_logging(verbose: int) -> None:
    """``-v``: the library's INFO messages (routing, fallbacks); ``-vv``: DEBUG (retries, snapshots)."""
    import logging

    if verbose <= 0:
        return
    from rich.logging import RichHandler

    handler = RichHandler(console=err, show_time=False, show_path=False, markup=False)
    logger = logging.getLogger("verifyless")
    logger.setLevel(logging.INFO if verbose == 1 else logging.DEBUG)
    logger.addHandler(handler)


@app.callback()
def _main_options(
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="log retries, fallbacks and routing decisions (-vv: more)"
    ),
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=lambda v: _print_version(v), help="print the version and exit"
    ),
) -> None:
    """Screen candidate ideas before you pay to verify them."""
    _setup_logging(verbose)


def _print_version(wanted: bool) -> None:
    if not wanted:
        return
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        print(f"verifyless {dist_version('verifyless')}")
    except PackageNotFoundError:  # a source tree run without installing
        print("verifyless (not installed: no version metadata)")
    raise typer.Exit(0)


# ---------------------------------------------------------------------- tasks


@app.command()
def tasks(
    directory: Path | None = typer.Argument(None, help="folder of task folders (default: built-in tasks)"),
) -> None:
    """List tasks, one line each (given a task folder itself: that task, or every problem it has, exit 3)."""

    directory = directory or builtin_tasks_dir()
    if not directory.is_dir():
        raise TaskError(f"{directory} is not a folder: pass a folder that holds task folders")
    found = discover_tasks(directory)
    if not found and is_task_folder(directory):
        found = [load_task(str(directory))]  # an invalid folder raises with all its problems
    if not found:
        raise TaskError(
            f"no task folders in {directory} (a task folder has task.yaml, or initial_program.py + evaluator.py)"
        )
    # Plain lines, one per task, never wrapped or truncated (easy to grep).
    console.print(f"[bold]{'task':<16} {'kind':<11} {'metric':<20} {'space':<6} description[/]", soft_wrap=True)
    for t in found:
        if isinstance(t, TaskError):
            name = t.root.name if isinstance(t, InvalidTask) else "?"
            head, *problems = str(t).splitlines()
            console.print(f"[red]{name:<16} {'invalid':<11}[/] {head}", soft_wrap=True, highlight=False)
            for line in problems:
                console.print(f"{'':<16} {line}", soft_wrap=True, highlight=False)
            continue
        arrow = "↓" if t.metric.direction == "minimize" else "↑"
        metric = f"{t.metric.name} {arrow}"
        console.print(
            f"{t.name:<16} {t.kind:<11} {metric:<20} {'yes' if t.idea_space else 'no':<6} {t.description}",
            soft_wrap=True,
            highlight=False,
        )
    invalid = sum(isinstance(t, TaskError) for t in found)
    if invalid:
        raise TaskError(
            f"{invalid} of {len(found)} task folders in {directory} are invalid: their problems are listed above"
        )


@app.command()
def verify(
    task: str = TASK,
    program: Path | None = typer.Argument(None, help="program file (default: the task's baseline)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    strict: bool = typer.Option(
        False, "--strict", help="for scripts: exit 1 when the program fails (3 when the evaluator does)"
    ),
) -> None:
    """Run one verification in the sandbox and print status and metrics.

    Exit 0 when the verification ran, whatever the program's status (``--strict``: 1 when it failed);
    3 when the failure is the evaluator's (it raised outside the program, or returned no dict of metrics).
    """

    t = load_task(task)
    if program is not None and not program.is_file():
        raise TaskError(f"program file {program} not found")
    text = program.read_text() if program else t.baseline_program
    sandbox = LocalSandbox()
    if t.limits.gpus > 0:
        require_gpu(sandbox, t.limits, t.name)
    result = run_verify(t, text, sandbox)
    if as_json:
        print(json.dumps({"task": t.name, **result.to_dict()}, indent=2))
        raise typer.Exit(_verify_exit(t, result, strict))
    colour = "green" if result.status.value == "ok" else "red"
    console.print(f"[bold]{t.name}[/]: [{colour}]{result.status.value}[/] {result.reason}")
    table = Table(box=None)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("split")
    for k, v in result.metrics.items():
        table.add_row(k, f"{v:.6g}", "validation")
    for k, v in result.test_metrics.items():
        table.add_row(k, f"{v:.6g}", "hidden test")
    console.print(table)
    console.print(
        f"run {result.run_seconds:.2f}s · score {result.score_seconds:.2f}s · overhead "
        f"{result.overhead_seconds:.3f}s · peak {result.peak_memory_mb:.0f} MB host"
        + (f", {result.peak_gpu_memory_mb:.0f} MB GPU" if result.peak_gpu_memory_mb is not None else "")
    )
    if result.status.value != "ok" and result.stderr_tail:
        console.print("[dim]" + result.stderr_tail[-1500:] + "[/]", highlight=False)
    raise typer.Exit(_verify_exit(t, result, strict))


def _verify_exit(task: Any, result: Any, strict: bool) -> int:
    """0 when the program ran (1 with ``strict`` when it failed); 3 when the evaluator failed (a task problem)."""

    source = failure_source(task, result)
    if source == "evaluator":
        err.print(f"the failure is in the evaluator of task {task.name!r}, not in the program", highlight=False)
        return 3
    return 1 if strict and source == "program" else 0


# ---------------------------------------------------------------------- runs


def _open_store(path: Path, must_exist: bool = True):
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


@app.command()
def run(
    task: str | None = typer.Argument(None, help="built-in task name or folder (default: from config)"),
    strategy: str | None = typer.Option(None, "--strategy", "-s", help=" | ".join(STRATEGIES)),
    screener: str | None = typer.Option(None, "--screener", "-c", help=" | ".join(SCREENERS)),
    budget: int | None = typer.Option(None, "--budget", "-b", help="verification budget"),
    config: Path | None = typer.Option(None, "--config", help="run.yaml"),
    preset: str | None = typer.Option(
        None, "--preset", help=f"a paper's settings under --config and flags: {' | '.join(PRESETS)}"
    ),
    seed: int | None = typer.Option(None, "--seed", help="seed of every draw the run makes (default: from config)"),
    store: Path | None = typer.Option(None, "--store", help=f"run store (default {DEFAULT_STORE})"),
    resume: str | None = typer.Option(None, "--resume", help="continue this run id (or unique prefix)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no pre-flight notes and no live progress line"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print what the budget buys and exit (spends nothing)"),
    allow_changed_task: bool = typer.Option(
        False, OVERRIDE, help="--resume even if the task's files changed since the run was made"
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        callback=out_folder,
        help="at the end, write the returned program, its output files (submission/) and the config into this folder",
    ),
    overrides: list[str] = typer.Argument(None, help="dotted overrides, e.g. engine.candidates=4", show_default=False),
) -> None:
    """Run the search: propose, screen, verify, learn, until the budget is spent."""

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
    cfg = load_config(config, over, values=flags, preset=preset)
    if dry_run and preset is not None:
        console.print(f"preset {preset} (settings under --config, flags and overrides):", highlight=False)
        console.print(preset_text(preset), highlight=False, soft_wrap=True, markup=False)
    loaded = _check_new_run(cfg) if resume is None else None  # the task and the models, before the store exists
    if dry_run or (not quiet and resume is None):  # the pre-flight check, before the store is opened
        console.print("\n".join(plan(cfg, loaded).lines()), highlight=False, soft_wrap=True)
        if dry_run:
            raise typer.Exit(0)
    st = _open_store(Path(cfg.store), must_exist=resume is not None)
    if resume is not None:
        resume = st.resolve_run(resume)
        changes = resume_changes(flags, over)
        _refuse_lower_caps(st, resume, changes)
        if not changes and st.run(resume).status == "finished":
            _print_finished(st, resume)
            return
        stored = stored_config(st, resume)
        # The store that holds the run (and its response cache) is the one just opened, wherever it was first run from.
        cfg = apply_changes(stored, changes).model_copy(update={"store": st.path})
        loaded = _resumed_task(st, resume, task or cfg.task, allow_changed_task)
        probe_endpoints(cfg)
        if changes:
            st.append(resume, ConfigUpdated(changes))
    if not quiet:
        console.print(f"watch it live: verifyless ui --store {st.path}", highlight=False)
    started: dict[str, Any] = {}
    try:
        result = asyncio.run(_run(cfg, st, resume, quiet, started, loaded, out))
    except KeyboardInterrupt:
        _print_interrupted(started.get("engine"), st)
        sys.exit(130)
    _print_result(result, st)
    if "wrote" in started:
        console.print(started["wrote"], highlight=False, soft_wrap=True)


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


def _resumed_task(st, run_id: str, name: str, allow_changed: bool) -> Any:
    """The task a resume continues on: ``name`` (the task argument, else the stored one), refused when it is
    another task than the run's (exit 2) or when its files changed since the run was made (exit 3, unless
    ``--allow-changed-task``)."""
    task = load_task(name)
    stored = st.run(run_id).task
    if task.name != stored:
        raise ConfigError(
            f"run {run_id} is a run of task {stored!r}, not of {task.name!r}: leave the task argument out to resume "
            f"it (a resumed run keeps its task), or start a new run of {task.name!r} without --resume"
        )
    refuse_changed(stored_fingerprint(st, run_id), task, run_id=run_id, action="resume", allow=allow_changed)
    return task


def _check_new_run(cfg) -> Any:
    """The task of a new run, loaded, and its models checked (``models_wiring.check_models``), as a dry run does too.

    A misspelled task name is a configuration error (exit 2) naming close matches; a broken task folder stays
    a task error (exit 3).
    """
    try:
        task = load_task(cfg.task)
    except UnknownTask as exc:
        raise ConfigError(f"task: {exc}") from None
    check_roles_fit(cfg.roles.kind, task)
    check_screener_fits(cfg.screener.name, cfg.screener.options, task)
    check_models(cfg)
    if task.limits.gpus > 0 and cfg.executor.name == "local":  # a Ray cluster's GPUs are its workers' to check
        require_gpu(LocalSandbox(), task.limits, task.name)
    probe_endpoints(cfg)
    return task


async def _run(cfg, st, resume, quiet, started: dict[str, Any], task: Any = None, out: Path | None = None):
    """Build the engine (kept in ``started["engine"]`` for the Ctrl-C message), run it, and write ``--out``."""

    progress = None if quiet else _LiveProgress(console, cap=cfg.budget.verifications)
    engine = build_engine(cfg, st, task=task, progress=progress)
    started["engine"] = engine
    if progress and submits_ensemble(engine.strategy, engine.task):
        progress.finish += ", then scoring the top-K ensemble submission (re-runs its members)"
    try:
        result = await engine.run(resume)
        if progress:
            progress.close()
        if out is not None:
            started["wrote"] = await write_outputs(engine, st, result.run_id, result.best_id, out)
        return result
    finally:
        if progress:
            progress.close()
        engine.executor.close()


def _print_result(result, st) -> None:
    table = Table(title=f"run {result.run_id}", box=None)
    table.add_column("")
    table.add_column("value", justify="right")
    table.add_row("stopped", result.stopped)
    table.add_row("rounds", str(result.rounds))
    table.add_row("verifications", str(result.verifications))
    final = final_view(st, result.run_id)
    table.add_row("baseline validation score", number(result.baseline_score, 6))
    if final.selection_metric:
        table.add_row("baseline selection-split score", number(final.baseline_selection_score, 6))
    table.add_row("baseline hidden test score", number(result.baseline_test_score, 6))
    table.add_row(f"best node ({result.best_id})", number(result.best_score, 6))
    if final.selection_metric:
        table.add_row("best node selection-split score", number(final.selection_score, 6))
    table.add_row("best node hidden test score", number(result.best_test_score, 6))
    safety_net = safety_net_state(adaptive_state(st, result.run_id))
    if safety_net:
        table.add_row("safety net (adaptive screening)", safety_net)
    console.print(table)
    held = final.held_out
    if held:
        line = selection_line(final.node_id, held.strategy_best, len(held.pool), len(held.eligible))
        console.print(line, highlight=False, soft_wrap=True)
    warning = final.transfer_warning
    if warning:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    submission = [e.record for e in st.events(result.run_id, Submitted)]
    if submission:
        console.print(submission_line(submission_summary(submission[-1])), highlight=False)
    console.print(
        f"store: {st.path}   show it with: {show_command(result.run_id, st.path)}", highlight=False, soft_wrap=True
    )
    _print_links(result.run_id, st.path)


def show_command(run_id: str, store: Path) -> str:
    """The ``verifyless show`` line to paste: ``--store`` named unless the store is the default one."""
    default = Path(store).resolve() == DEFAULT_STORE.resolve()
    return f"verifyless show {run_id}" + ("" if default else f" --store {store}")


def _print_links(run_id: str, store: Path) -> None:
    console.print(
        f"report: verifyless report {run_id} --store {store}  (writes {default_out(run_id)}/report.html)\n"
        f"dashboard: verifyless ui --store {store}  (http://127.0.0.1:8765/runs/{run_id})",
        highlight=False,
        soft_wrap=True,  # a long store path stays on its line, pastable
    )


@app.command()
def runs(
    store: Path = STORE,
    as_json: bool = typer.Option(False, "--json", help="print a JSON list (for scripts)"),
) -> None:
    """List runs in the store (a missing default store means no runs yet)."""
    if store == DEFAULT_STORE and not store.exists():
        if as_json:
            print("[]")
        else:
            console.print(f"no runs yet in {store}: start one with `verifyless run TASK`", highlight=False)
        return
    with read_store(store) as st:
        rows = [run_row(st, info) for info in st.runs()]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    table = Table(box=None, header_style="bold")
    for col in ("run", "task", "strategy", "screener", "status", "created", "verifications", "best"):
        table.add_column(col)
    for r in rows:
        created = r["created"]
        when = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(created))
            if isinstance(created, (int, float))
            else str(created)[:16]
        )
        table.add_row(
            r["run_id"],
            r["task"],
            r["strategy"] or "-",
            (r["screener"] or "-") + (f" ({r['screener_fallbacks']} fallbacks)" if r["screener_fallbacks"] else ""),
            r["status"],
            when,
            str(r["verifications"]),
            number(r["best_score"], 6),
        )
    console.print(table)


@app.command()
def show(
    run_id: str = RUN_ID,
    store: Path = STORE,
    nodes: int = typer.Option(15, help="how many verified nodes to list"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object (for scripts)"),
) -> None:
    """Summarise one run: budget, best nodes, statuses, LLM calls (cached ones counted apart)."""
    with read_store(store) as st:
        data = show_data(st, st.resolve_run(run_id), nodes)
    if as_json:
        print(json.dumps(data, indent=2))
        return
    b = data["budget"]
    console.print(f"[bold]{data['run_id']}[/]  task {data['task']}  status {data['status']}")
    if data["stop_reason"]:
        console.print(f"[red]stopped:[/] {data['stop_reason']}", highlight=False, soft_wrap=True)
    console.print(
        f"verifications {b['verifications']} · evaluator {b['evaluator_seconds']:.1f}s"
        + (f" · GPU {b['gpu_seconds']:.1f}s" if b.get("gpu_seconds") else "")
        + f" · tokens {b['tokens_in'] + b['tokens_out']} · cost {b['cost']:.4f}"
    )
    table = Table(box=None, header_style="bold")
    for col in ("node", "parent", "operator", "status", "validation", "test", "idea"):
        table.add_column(col)
    for r in data["best_nodes"]:
        table.add_row(
            r["node_id"],
            r.get("parent_id") or "",
            r["operator"],
            r["status"],
            number(r.get("score"), 6),
            number(r.get("test_score"), 6),
            (r.get("idea") or "")[:70],
        )
    console.print(table)
    for line in transfer_lines(data["transfer"]):
        console.print(line, highlight=False, soft_wrap=True)
    console.print("statuses: " + ", ".join(f"{k} {v}" for k, v in data["statuses"].items()))
    peak = data["peak_memory"]
    gpu_peak = f", GPU {peak['gpu_mb']:.0f} MB" if peak["gpu_mb"] is not None else ""
    console.print(f"peak memory of a verification: host {peak['host_mb']:.0f} MB{gpu_peak}", highlight=False)
    console.print(data["data_report"], highlight=False, soft_wrap=True)
    console.print(data["memory"], highlight=False, soft_wrap=True)
    if data["resolved"]:
        console.print(data["resolved"], highlight=False, soft_wrap=True)
    for a in data["adapters"]:  # the adapter each critic screened with, by the hash of its weights
        what = (
            f"{a['folder']} ({a['tag'] or 'folder gone'})" if "folder" in a else f"v{a['version']} from {a['origin']}"
        )
        console.print(f"adapter {a['role']}: {what}", highlight=False)
    if data["submission"]:
        console.print(submission_line(data["submission"]), highlight=False)
    if data["llm_calls"]:
        calls = Table(box=None, header_style="bold", title="LLM calls")
        for col in ("role", "model", "calls", "cached", "tokens in", "tokens out", "cost"):
            calls.add_column(col)
        for c in data["llm_calls"]:
            calls.add_row(
                str(c["role"]),
                str(c["model"]),
                str(c["calls"]),
                str(c["cached"]),
                str(c["prompt_tokens"]),
                str(c["completion_tokens"]),
                f"{c['cost'] or 0:.4f}",
            )
        console.print(calls)
    health = {**data["reply_health"], **data["role_health"]}
    if health:
        console.print(
            "replies parsed: "
            + ", ".join(f"{name} {h['parsed']}/{h['total']} ({100 * h['rate']:.0f}%)" for name, h in health.items())
        )
    if data["learned_critic"]:
        console.print(learned_critic_line(data["learned_critic"]), highlight=False, soft_wrap=True)
    if data["screener_audit"]:
        console.print(audit_line(data["screener_audit"]), highlight=False)
        if adaptive_line(data["screener_audit"]):
            console.print(adaptive_line(data["screener_audit"]), highlight=False)
    if fallback_line(**data["screener_fallbacks"]):
        console.print(f"[red]{fallback_line(**data['screener_fallbacks'])}[/]", highlight=False, soft_wrap=True)
    for line in peers_text(data):
        console.print(line, highlight=False)
    _print_links(data["run_id"], store)


@app.command()
def replay(
    run_id: str = RUN_ID,
    store: Path = STORE,
    allow_changed_task: bool = typer.Option(
        False, OVERRIDE, help="replay even if the task's files changed since the run was made"
    ),
) -> None:
    """Re-execute a run's decisions from stored outcomes and cached LLM replies, with no endpoint.

    A resumed run is replayed part by part, each from the log as its resume saw it. Exit 0 when every
    decision is the same, 9 when one differs (or the replay needed a reply or an outcome never stored).
    """

    st = _open_store(store)
    run_id = st.resolve_run(run_id)
    report = asyncio.run(replay_run(st, run_id, build=build_engine, allow_changed_task=allow_changed_task))
    console.print(report.describe())
    raise typer.Exit(0 if report.equal else ReplayDiverged.exit_code)


@app.command()
def doctor(
    probe: bool = typer.Option(True, "--probe/--no-probe", help="run the CUDA probe inside the sandbox (GPU hosts)"),
    task: str | None = typer.Option(None, "--task", help="probe under this task's limits (memory, GPUs)"),
) -> None:
    """Say what the sandbox gives a candidate here: isolation, what it sees, memory limit, GPUs.

    Where this host has an NVIDIA GPU and this interpreter a CUDA build of torch, a short probe runs a
    CUDA matrix product inside the sandbox and prints the device, or the piece that is missing (exit 4).
    """

    limits = load_task(task).limits if task else None
    report = sandbox_report(LocalSandbox(), probe=probe, **({"limits": limits} if limits else {}))
    console.print("\n".join(report.lines()), highlight=False, soft_wrap=True)
    if report.probe is not None and not report.probe.ok:
        raise typer.Exit(4)


@app.command()
def propose(
    task: str = typer.Argument(..., help="built-in task name or folder"),
    n: int = typer.Option(4, "--n", help="how many ideas"),
    model: str | None = typer.Option(
        None,
        "--model",
        help="scripted:FILE | openai:MODEL | env "
        "(default: the task's idea space, or env if VERIFYLESS_BASE_URL is set)",
    ),
    seed: int = typer.Option(0, "--seed", help="seed of the proposer's and implementer's draws"),
) -> None:
    """Propose N ideas for the task's baseline, implement them and summarise them."""

    asyncio.run(propose_for_baseline(task, n=n, model=model, seed=seed, console=console))


@app.command()
def demo(
    task: str = typer.Option("affairs_gbm", help="built-in task (one with a pool world under bench/worlds)"),
    budget: int = typer.Option(16, help="verifications per arm"),
    store: Path = typer.Option(Path("runs/demo.db"), "--store", help="run store for the demo's runs"),
) -> None:
    """The main job on embedded defaults: surrogate-screened search vs an unscreened run, same budget."""

    asyncio.run(run_demo(task=task, budget=budget, store_path=store, console=console))


# Command groups and commands that live in their own modules, registered last so that
# `verifyless --help` lists them after the run commands above.
app.add_typer(task_app, name="task", help="Make task folders: `task new DIR --data train.csv --target COL`.")
app.add_typer(bench_app, name="bench", help="Measure critics, selection and arms from stored runs.")
app.command("collect-pools")(collect_pools_command)
app.add_typer(data_app, name="data", help="Critic data: collect outcomes, harvest runs, synthesise critiques.")
app.command("report")(report_command)
app.command("ui")(ui_command)
app.command("export")(export_command)
app.command("components")(components_command)
app.add_typer(train_app, name="train", help="Train critics (SFT, GRPO) on critic datasets.")
app.command("models")(models_command)
app.add_typer(tune_app, name="tune", help="Tune screener prompts on a critic dataset's dev slice.")

if __name__ == "__main__":  # pragma: no cover
    main()
