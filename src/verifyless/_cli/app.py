"""The ``verifyless`` command line (Typer + rich).

Exit codes: 0 success (``verify``: the verification ran, whatever the program's
status; ``--strict``: 1 when the program failed); 1 unexpected error; 2 bad
configuration or arguments (a task, program or folder argument that names
nothing included); 3 bad task folder, or a run whose baseline failed
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
from verifyless._cli.demo import run_demo, world_tasks
from verifyless._cli.export import export_command
from verifyless._cli.propose import propose_for_baseline
from verifyless._cli.report import report_command
from verifyless._cli.run import open_store, print_links, start_run
from verifyless._cli.serve import serve_command
from verifyless._cli.show import (
    print_show,
    run_row,
    show_data,
)
from verifyless._cli.task import app as task_app
from verifyless._cli.terminal import shown
from verifyless._cli.train import app as train_app
from verifyless._cli.train import models_command
from verifyless._cli.tune import app as tune_app
from verifyless._cli.ui import ui_command
from verifyless.config import DEFAULT_STORE
from verifyless.engine.baseline import failure_source
from verifyless.engine.replay import ReplayDiverged, replay_run
from verifyless.errors import ConfigError, TaskError, VerifylessError
from verifyless.presets import preset_names
from verifyless.report.text import number
from verifyless.sandbox.doctor import require_gpu, sandbox_report
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.registry import SCREENERS
from verifyless.search.registry import STRATEGIES
from verifyless.task import InvalidTask, builtin_tasks_dir, discover_tasks, is_task_folder, load_task
from verifyless.task.fingerprint import OVERRIDE
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
        err.print(f"[bold red]error:[/] {shown(exc)}", highlight=False, soft_wrap=True)
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
            err.print(f"[bold red]error:[/] {shown(_usage_line(exc))}", highlight=False, soft_wrap=True)
            sys.exit(2)
        if os.environ.get("VERIFYLESS_DEBUG"):
            raise
        err.print(
            f"[bold red]unexpected error:[/] {type(exc).__name__}: {shown(exc)}\n"
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
        raise ConfigError(f"{directory} is not a folder: pass a folder that holds task folders")
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
            console.print(f"[red]{shown(name):<16} {'invalid':<11}[/] {shown(head)}", soft_wrap=True, highlight=False)
            for line in problems:
                console.print(f"{'':<16} {line}", soft_wrap=True, highlight=False, markup=False)
            continue
        arrow = "↓" if t.metric.direction == "minimize" else "↑"
        metric = f"{t.metric.name} {arrow}"
        console.print(
            f"{t.name:<16} {t.kind:<11} {metric:<20} {'yes' if t.idea_space else 'no':<6} {t.description}",
            soft_wrap=True,
            highlight=False,
            markup=False,
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
    3 when the failure is the evaluator's (it raised outside the program, returned no dict of metrics, or its scorer
    ran past limits.score_seconds).
    """

    t = load_task(task)
    if program is not None and not program.is_file():
        raise ConfigError(f"program file {program} not found; pass the path of a Python program file")
    text = program.read_text() if program else t.baseline_program
    sandbox = LocalSandbox()
    if t.limits.gpus > 0:
        require_gpu(sandbox, t.limits, t.name)
    result = run_verify(t, text, sandbox)
    if as_json:
        print(json.dumps({"task": t.name, **result.to_dict()}, indent=2))
        raise typer.Exit(_verify_exit(t, result, strict))
    colour = "green" if result.status.value == "ok" else "red"
    console.print(f"[bold]{shown(t.name)}[/]: [{colour}]{result.status.value}[/] {shown(result.reason)}")
    table = Table(box=None)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("split")
    for k, v in result.metrics.items():
        table.add_row(shown(k), f"{v:.6g}", "validation")
    for k, v in result.test_metrics.items():  # the selection split's metric is hidden from search, not a test
        table.add_row(shown(k), f"{v:.6g}", "selection split" if k == t.selection_metric else "hidden test")
    console.print(table)
    console.print(
        f"run {result.run_seconds:.2f}s · score {result.score_seconds:.2f}s · overhead "
        f"{result.overhead_seconds:.3f}s · peak {result.peak_memory_mb:.0f} MB host"
        + (f", {result.peak_gpu_memory_mb:.0f} MB GPU" if result.peak_gpu_memory_mb is not None else "")
    )
    if result.status.value != "ok" and result.stderr_tail:
        console.print(result.stderr_tail[-1500:], style="dim", highlight=False, markup=False)
    raise typer.Exit(_verify_exit(t, result, strict))


def _verify_exit(task: Any, result: Any, strict: bool) -> int:
    """0 when the program ran (1 with ``strict`` when it failed); 3 when the evaluator failed (a task problem)."""

    source = failure_source(task, result)
    if source == "evaluator":
        err.print(f"the failure is in the evaluator of task {task.name!r}, not in the program", highlight=False)
        return 3
    return 1 if strict and source == "program" else 0


# ---------------------------------------------------------------------- runs


@app.command()
def run(
    task: str | None = typer.Argument(None, help="built-in task name or folder (default: from config)"),
    strategy: str | None = typer.Option(None, "--strategy", "-s", help=" | ".join(STRATEGIES)),
    screener: str | None = typer.Option(None, "--screener", "-c", help=" | ".join(SCREENERS)),
    budget: int | None = typer.Option(None, "--budget", "-b", help="verification budget"),
    config: Path | None = typer.Option(None, "--config", help="run.yaml"),
    preset: str | None = typer.Option(
        None, "--preset", help=f"a paper's settings under --config and flags: {' | '.join(preset_names())}"
    ),
    seed: int | None = typer.Option(None, "--seed", help="seed of every draw the run makes (default: from config)"),
    store: Path | None = typer.Option(None, "--store", help=f"run store (default {DEFAULT_STORE})"),
    resume: str | None = typer.Option(None, "--resume", help="continue this run id (or unique prefix)"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no pre-flight notes and no live progress line"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print what the budget buys and exit (spends nothing)"),
    allow_changed_task: bool = typer.Option(
        False, OVERRIDE, help="--resume even if the task's files changed since the run was made"
    ),
    take_over: bool = typer.Option(
        False,
        "--take-over",
        help="--resume a run held by a process on another machine that is gone (one on this machine is checked)",
    ),
    out: Path | None = typer.Option(
        None,
        "--out",
        callback=out_folder,
        help="at the end, write the returned program, its output files (submission/: for a competition, exactly "
        "the sample submission's rows and columns) and a config.yaml that reruns the run into this folder",
    ),
    refit: bool = typer.Option(
        False,
        "--refit",
        help="with --out, for a competition: refit the returned program on every public training row (validation "
        "and selection rows included) before it predicts the submission",
    ),
    overrides: list[str] = typer.Argument(None, help="dotted overrides, e.g. engine.candidates=4", show_default=False),
) -> None:
    """Run the search: propose, screen, verify, learn, until the budget is spent."""
    start_run(
        task=task,
        strategy=strategy,
        screener=screener,
        budget=budget,
        config=config,
        preset=preset,
        seed=seed,
        store=store,
        resume=resume,
        quiet=quiet,
        dry_run=dry_run,
        allow_changed_task=allow_changed_task,
        out=out,
        overrides=overrides,
        take_over=take_over,
        refit=refit,
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
    for col in ("run", "task", "strategy", "screener", "status", "created", "verifications", "best validation"):
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
    print_show(data)
    print_links(data["run_id"], store)


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

    st = open_store(store)
    run_id = st.resolve_run(run_id)
    report = asyncio.run(replay_run(st, run_id, build=build_engine, allow_changed_task=allow_changed_task))
    console.print(report.describe(), highlight=False, markup=False)
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
    task: str = typer.Option(
        "affairs_gbm", help=f"built-in task with a pool world, for part 2: {', '.join(world_tasks())}"
    ),
    budget: int = typer.Option(16, help="verifications per arm"),
    store: Path = typer.Option(Path("runs/demo.db"), "--store", help="run store for the demo's runs"),
) -> None:
    """The main job on embedded defaults: warm-started adaptive screening (critic-rm) against an unscreened run at
    the same budget, then the same comparison over many seeds on the task's pool world, with the oracle ceiling."""

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
app.command("serve")(serve_command)
app.add_typer(tune_app, name="tune", help="Tune screener prompts on a critic dataset's dev slice.")

if __name__ == "__main__":  # pragma: no cover
    main()
