"""One paid verification: workspace, untrusted run, trusted scoring, metric checks.

``verify(task, program, sandbox)`` follows docs/design/verification-contract.md:

1. a fresh workspace ``WS`` holds the program, ``WS/public/`` (copies of the
   public data) and an empty ``WS/out/``; the task's kind (``task.loader.kind_of``,
   contract in ``task.kind.TaskKind``) then ``prepare``s the untrusted step (OpenEvolve
   tasks also get a runner script: their evaluator runs from the task folder itself);
2. the untrusted step runs in the sandbox with what the kind masks (native and
   competition: the task folder and the hidden data; OpenEvolve: the task folder is
   shown read-only at its own path, hidden data and dotfiles masked) and the
   caller's ``hide`` paths;
3. the kind ``judge``s the workspace on the trusted side: the scorer reads ``WS/out``
   plus the hidden data in this process (native, competition), or the runner's
   ``WS/out/metrics.json`` is read (OpenEvolve);
4. metrics are validated; the workspace is deleted unless ``keep_workspace``.

``level`` picks one of the task's fidelity levels (``task.fidelity``; default
``"full"``, which behaves exactly as before levels existed): a data-fraction
level replaces the declared target files in ``WS/public/`` by a seeded
subsample (stratified for classification; hidden data is never touched), a
knob level fills ``{fidelity}`` in the run command and sets the task's
fidelity environment variable, an OpenEvolve ``stage<k>`` level runs the
first k cascade stages. ``Verification.fidelity`` names the level.

Every candidate problem is a ``Status`` with a reason. Sandbox results map as
``failed -> FAILED``, ``timeout -> TIMEOUT``, ``oom -> OOM`` and both
``output-limit`` and ``disk-limit -> CONTRACT_VIOLATION`` (the candidate broke
the task's resource contract; the reason names which limit). A workspace
holding a symlink that leads outside it, or a FIFO/socket/device, is also a
CONTRACT_VIOLATION: the trusted scorer would otherwise read host files (the
hidden labels) or block. A scorer that raises ``InvalidSubmission`` (wrong columns, rows or ids)
makes a CONTRACT_VIOLATION with its message. Only a broken sandbox raises ``SandboxUnavailable``;
a broken task (scorer file that does not load, missing public data, a scorer that raises ``TaskError``
because its own hidden files are gone, a scorer still running at ``limits.score_seconds``: ``ScorerTimedOut``)
raises ``TaskError``. ``metrics``/``score`` are filled only when the status is OK.
"""

from __future__ import annotations

import csv
import logging
import math
import numbers
import os
import random
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.errors import InvalidSubmission, SandboxUnavailable, TaskError
from verifyless.node import Status, Verification, content_hash
from verifyless.processes import alive
from verifyless.sandbox.base import ExecResult, Sandbox
from verifyless.task.base import FULL_FIDELITY, HIDDEN_PREFIXES, FidelityLevel, Task
from verifyless.task.kind import Step
from verifyless.task.loader import kind_of

log = logging.getLogger(__name__)

TAIL_BYTES = 4096

_EXEC_STATUS = {
    "ok": Status.OK,
    "failed": Status.FAILED,
    "timeout": Status.TIMEOUT,
    "oom": Status.OOM,
    "output-limit": Status.CONTRACT_VIOLATION,
    "disk-limit": Status.CONTRACT_VIOLATION,
}


def verify(
    task: Task,
    program: str,
    sandbox: Sandbox,
    *,
    workspace_root: Path | None = None,
    hide: Sequence[Path] = (),
    keep_workspace: bool = False,
    level: str = FULL_FIDELITY,
    gpus: Sequence[int] = (),
) -> Verification:
    """Verify ``program`` (full text) on ``task`` at fidelity ``level``; see the module docstring for the contract.

    ``gpus``: the host GPU indices this verification holds (an executor's assignment) for a task with
    ``limits.gpus > 0``; empty lets the sandbox use every GPU it sees.
    """
    chosen = fidelity_level(task, level)
    started = time.monotonic()
    ws = _new_workspace(workspace_root)
    try:
        step = _materialise(task, program, ws, chosen)
        setup_seconds = time.monotonic() - started
        result = _run_step(task, step, sandbox, ws, hide, gpus)
        scoring_started = time.monotonic()
        status, reason, metrics, test_metrics = _judge(task, ws, result, chosen)
        score_seconds = time.monotonic() - scoring_started
    finally:
        cleanup_started = time.monotonic()
        if not keep_workspace:
            shutil.rmtree(ws, ignore_errors=True)
        teardown_seconds = time.monotonic() - cleanup_started

    ok = status is Status.OK
    return Verification(
        status=status,
        reason=reason,
        metrics=metrics if ok else {},
        test_metrics=test_metrics if ok else {},
        score=metrics[task.metric.name] if ok else None,
        test_score=_test_score(task, test_metrics) if ok else None,
        run_seconds=result.wall_seconds,
        score_seconds=score_seconds,
        overhead_seconds=setup_seconds + result.overhead_seconds + teardown_seconds,
        peak_memory_mb=result.peak_memory_mb,
        peak_gpu_memory_mb=result.peak_gpu_memory_mb,
        gpus=task.limits.gpus,
        stdout_tail=_clip(result.stdout_tail),
        stderr_tail=_clip(result.stderr_tail),
        program_hash=content_hash(program),
        fidelity=level,
    )


def _run_step(
    task: Task, step: Step, sandbox: Sandbox, ws: Path, hide: Sequence[Path], gpus: Sequence[int]
) -> ExecResult:
    """The untrusted step in the sandbox, with the kind's masks and the caller's ``hide`` paths."""
    return sandbox.run(
        list(step.argv),
        ws,
        task.limits,
        hide=(*step.hide, *hide),
        expose=step.expose,
        env={**step.env, **_devices(task, gpus)},
    )


@dataclass(frozen=True)
class Produced:
    """What ``produce`` ran: the program's status and reason (mapped as a verification maps them), its wall seconds
    and the tail of its stderr."""

    status: Status
    reason: str
    seconds: float
    stderr_tail: str = ""


def produce(
    task: Task,
    program: str,
    sandbox: Sandbox,
    dest: Path,
    *,
    workspace_root: Path | None = None,
    hide: Sequence[Path] = (),
    gpus: Sequence[int] = (),
) -> Produced:
    """Run ``program`` once as a full-fidelity verification would (the same workspace, untrusted step and masks) and
    copy what it wrote to ``out/`` into the folder ``dest`` (made when missing); nothing is scored.

    For ``run --out``: verifications keep no outputs, and a refit runs the program on data no scorer grades. The
    program's failure is the result's status (as ``verify`` maps it); so is an output entry the trusted side must
    not read (a symlink out of the workspace: ``contract-violation``, nothing copied). The workspace is deleted.
    """
    ws = _new_workspace(workspace_root)
    try:
        result = _run_step(task, _materialise(task, program, ws), sandbox, ws, hide, gpus)
        status, reason = _EXEC_STATUS[result.status], result.reason
        unsafe = unsafe_entry(ws) if status is Status.OK else None
        if unsafe:
            status, reason = Status.CONTRACT_VIOLATION, unsafe
        if status is Status.OK:
            shutil.copytree(ws / "out", dest, dirs_exist_ok=True)
        return Produced(status, reason, result.wall_seconds, _clip(result.stderr_tail))
    finally:
        shutil.rmtree(ws, ignore_errors=True)


def _devices(task: Task, gpus: Sequence[int]) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for a GPU task given its GPUs (a CPU task's is emptied by the sandbox)."""
    return {"CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in gpus)} if task.limits.gpus > 0 and gpus else {}


def fidelity_level(task: Task, name: str) -> FidelityLevel | None:
    """The task's level ``name`` (None for full fidelity); TaskError naming the known levels otherwise."""
    try:
        return task.fidelity.level(name)
    except KeyError:
        raise TaskError(
            f"task {task.name!r} has no fidelity level {name!r}; use one of {list(task.fidelity.names)}"
        ) from None


# ------------------------------------------------------------------ workspace


WORKSPACE_PREFIX = "verifyless-ws-"
_LEGACY_STALE_SECONDS = 3600.0
_swept: set[Path] = set()


def new_workspace(root: Path | None) -> Path:
    """A fresh, empty workspace folder under ``root`` (default: the temp dir), named after this process."""
    base = Path(root) if root is not None else Path(tempfile.gettempdir())
    try:
        base.mkdir(parents=True, exist_ok=True)
        if base.resolve() not in _swept:
            _swept.add(base.resolve())
            sweep_stale_workspaces(base)
        return Path(tempfile.mkdtemp(prefix=f"{WORKSPACE_PREFIX}{os.getpid()}-", dir=base)).resolve()
    except OSError as exc:
        raise SandboxUnavailable(
            f"cannot create a verification workspace under {base}: {exc}; pass a writable workspace_root"
        ) from exc


_new_workspace = new_workspace  # the older private name (tests/test_verify_workspace_sweep.py)


def sweep_stale_workspaces(base: Path, *, now: float | None = None) -> list[Path]:
    """Remove workspaces under ``base`` left by a verifier process that no longer exists; return them.

    A workspace is named ``verifyless-ws-<pid>-<random suffix>`` after the process that made it, so a run killed
    with -9 leaves folders whose PID is dead: those go. A live PID's folders are never touched (another
    run on this machine may be verifying in them). Folders in the older ``verifyless-ws-<random suffix>`` form
    carry no PID and go once untouched for an hour. Called once per process and folder, before the
    first workspace is made (so at the start and at the resume of every run); never raises.
    """
    now = time.time() if now is None else now
    removed = []
    for ws in base.glob(f"{WORKSPACE_PREFIX}*"):
        if not ws.is_dir() or ws.is_symlink():
            continue
        pid = _workspace_pid(ws.name)
        if pid is None:
            try:
                stale = now - ws.stat().st_mtime > _LEGACY_STALE_SECONDS
            except OSError:
                continue
        else:
            stale = pid != os.getpid() and not alive(pid)
        if stale:
            shutil.rmtree(ws, ignore_errors=True)
            removed.append(ws)
    return removed


def _workspace_pid(name: str) -> int | None:
    head = name[len(WORKSPACE_PREFIX) :].split("-", 1)[0]
    return int(head) if head.isdigit() and "-" in name[len(WORKSPACE_PREFIX) :] else None


def _materialise(task: Task, program: str, ws: Path, level: FidelityLevel | None = None) -> Step:
    """Fill the workspace (at ``level``'s fidelity; None is full); return the untrusted step the task's kind makes."""
    public, out = ws / "public", ws / "out"
    copy_public_data(task, public)
    out.mkdir(exist_ok=True)
    if level is not None and level.data_fraction is not None:
        _subsample_targets(task, public, level)
    (ws / task.program_file).write_text(program, encoding="utf-8")
    return kind_of(task).prepare(task, ws, level)


def _subsample_targets(task: Task, public: Path, level: FidelityLevel) -> None:
    """Replace each target file's copy in ``public`` by its seeded subsample (see ``subsample_rows``)."""
    if task.target is None or level.data_fraction is None:
        raise TaskError(f"task {task.name!r}: level {level.name!r} subsamples data but declares no data.target")
    for src in task.target.files:
        copy = public / src.name
        text = copy.read_text(encoding="utf-8")
        stratify = task.target.column if task.target.kind == "classification" else None
        copy.write_text(subsample_rows(text, level.data_fraction, level.seed, stratify), encoding="utf-8")


def subsample_rows(text: str, fraction: float, seed: int, stratify: str | None = None) -> str:
    """A seeded subsample of a CSV text's data rows: header kept, rows kept verbatim and in file order.

    ``round(fraction * n)`` rows are kept (at least one); with ``stratify`` (a column name) the
    share is taken within each value of that column, so every class keeps at least one row.
    Deterministic: the same text, fraction and seed always give the same bytes.
    """
    lines = text.splitlines()
    if len(lines) < 2:
        return text
    header, rows = lines[0], [ln for ln in lines[1:] if ln.strip()]
    groups: dict[str, list[int]] = {"": list(range(len(rows)))}
    if stratify is not None:
        names = next(csv.reader([header]))
        if stratify not in names:
            raise TaskError(f"target column {stratify!r} is not in the header {names}; fix data.target.column")
        column = names.index(stratify)
        groups = {}
        for i, row in enumerate(csv.reader(rows)):
            groups.setdefault(row[column], []).append(i)
    rng = random.Random(seed)
    kept: list[int] = []
    for key in sorted(groups):
        members = groups[key]
        kept.extend(rng.sample(members, max(1, round(fraction * len(members)))))
    return "\n".join([header, *(rows[i] for i in sorted(kept))]) + "\n"


def copy_public_data(task: Task, public: Path) -> None:
    """Copy the task's public data into the folder ``public`` (each entry as ``public/<basename>``)."""
    public.mkdir(exist_ok=True)
    for src in task.public_data:
        if not src.exists():
            raise TaskError(f"task {task.name!r}: public data {src} does not exist; fix 'data.public' in its task.yaml")
        if src.is_dir():
            shutil.copytree(src, public / src.name, symlinks=False)
        else:
            shutil.copy2(src, public / src.name)


# ------------------------------------------------------------------ judging


def _whose_hang(task: Task, status: Status) -> str:
    """For an OpenEvolve task, a timeout cannot be laid on the program alone: its evaluator runs in the same
    process (``task/openevolve.py``), and an evaluator that hangs times out every candidate, the baseline too."""
    if status is not Status.TIMEOUT or task.evaluator is None:
        return ""
    return (
        f" (the program and the task's {task.evaluator.name} ran together in one process, so either may have hung; "
        "if the baseline times out too, check the evaluator)"
    )


def _judge(
    task: Task, ws: Path, result: ExecResult, level: FidelityLevel | None = None
) -> tuple[Status, str, dict[str, float], dict[str, float]]:
    status = _EXEC_STATUS[result.status]
    if status is not Status.OK:
        prefix = {"output-limit": "output limit: ", "disk-limit": "disk limit: "}.get(result.status, "")
        return status, prefix + result.reason + _whose_hang(task, status), {}, {}
    unsafe = unsafe_entry(ws)
    if unsafe:
        return Status.CONTRACT_VIOLATION, unsafe, {}, {}
    try:
        judged = kind_of(task).judge(task, ws, level)
    except InvalidSubmission as exc:  # the candidate's output broke the submission contract
        return Status.CONTRACT_VIOLATION, f"invalid submission: {exc}", {}, {}
    raw, failure, silent = judged.raw, judged.failure, judged.silent
    if failure:
        return Status.FAILED, _output_failure(failure, silent), {}, {}
    if not isinstance(raw, Mapping):
        return Status.INVALID_METRIC, f"the scorer returned {type(raw).__name__}, not a mapping of metrics", {}, {}
    metrics, test_metrics = split_metrics(task, raw)
    problem = check_metrics(task, metrics)
    if problem and silent:  # a scorer that returns {} for a missing file: the program's failure all the same
        return Status.FAILED, _output_failure(problem, silent), {}, {}
    if problem:
        return Status.INVALID_METRIC, problem, {}, {}
    return Status.OK, "", {k: float(v) for k, v in metrics.items()}, test_metrics


NO_OUTPUT = "the program wrote no output (out/ is empty)"
INVALID_OUTPUT = "invalid output"


def _output_failure(failure: str, silent: bool) -> str:
    """The reason of a scorer failure on candidate output: the candidate's failure, and which one.

    A program that wrote nothing at all, or output the scorer raised on (the verification contract: a
    scorer exception on candidate output is a candidate failure). A failing scorer *command* with output
    present keeps its own reason: that one may be the evaluator's (``engine/baseline.failure_source``).
    """
    if silent:
        return f"{NO_OUTPUT}: {failure}"
    return f"{INVALID_OUTPUT}: {failure}" if failure.startswith("scorer raised") else failure


def unsafe_entry(ws: Path) -> str | None:
    """Reason if the workspace holds something the trusted side must not read, else None."""
    root = os.path.realpath(ws)
    for dirpath, dirnames, filenames in os.walk(ws):  # symlinked directories are listed, not followed
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            rel = os.path.relpath(path, ws)
            if stat.S_ISLNK(mode):
                target = os.path.realpath(path)
                if target != root and not target.startswith(root + os.sep):
                    return f"workspace entry {rel} is a symlink to {os.readlink(path)}, outside the workspace"
            elif not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return f"workspace entry {rel} is not a regular file or directory (FIFO, socket or device)"
    return None


# ------------------------------------------------------------------ metrics


def split_metrics(task: Task, raw: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, float]]:
    """``(validation, hidden)``: test names and the selection metric go to ``hidden`` (finite numbers only), the
    rest to validation.

    Required validation metrics are kept as returned (``check_metrics`` judges
    them); optional extras are kept only when they are finite numbers.
    """
    test_names = {*task.test_metrics, *([task.selection_metric] if task.selection_metric else [])}
    required = set(required_metrics(task))
    validation: dict[str, Any] = {}
    test: dict[str, float] = {}
    for key, value in raw.items():
        key = str(key)
        if key in test_names or (key not in required and key.startswith(HIDDEN_PREFIXES)):
            if _finite_number(value):
                test[key] = float(value)
        elif key in required:
            validation[key] = value
        elif _finite_number(value):
            validation[key] = float(value)
    _warn_undeclared(task, sorted(set(test) - test_names))
    return validation, test


_warned: set[tuple[str, tuple[str, ...]]] = set()


def _warn_undeclared(task: Task, names: list[str]) -> None:
    """Once per task and set of keys: hidden-named scorer keys that ``metrics.test`` does not declare."""
    if not names or (task.name, tuple(names)) in _warned:
        return
    _warned.add((task.name, tuple(names)))
    log.warning(
        "task %r: the scorer returned %s, which metrics.test does not declare; kept as hidden test metrics "
        "(never shown to search). Declare them in task.yaml metrics.test to say so.",
        task.name,
        ", ".join(names),
    )


def required_metrics(task: Task) -> tuple[str, ...]:
    names = tuple(task.validation_metrics) or (task.metric.name,)
    return names if task.metric.name in names else (task.metric.name, *names)


def check_metrics(task: Task, metrics: Mapping[str, Any]) -> str | None:
    """None if every required validation metric is a finite number and the main one is in bounds."""
    for name in required_metrics(task):
        if name not in metrics:
            got = ", ".join(sorted(metrics)) or "nothing"
            return f"metric {name!r} is missing (got: {got})"
        value = metrics[name]
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"metric {name!r} is not a number: {value!r} ({type(value).__name__})"
        if not math.isfinite(float(value)):
            return f"metric {name!r} is not finite: {value!r}"
    main, value = task.metric, float(metrics[task.metric.name])
    # Bounds belong to the main metric (the only one with declared bounds).
    if main.lower is not None and value < main.lower:
        return f"metric {main.name!r} = {value:g} is below its lower bound {main.lower:g}"
    if main.upper is not None and value > main.upper:
        return f"metric {main.name!r} = {value:g} is above its upper bound {main.upper:g}"
    return None


def _finite_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _test_score(task: Task, test_metrics: Mapping[str, float]) -> float | None:
    """The first declared test metric returned; without declared ones, the main metric's twin (val_x -> test_x)."""
    declared = next((test_metrics[n] for n in task.test_metrics if n in test_metrics), None)
    if declared is not None or task.test_metrics:
        return declared
    main = task.metric.name
    twin = "test_" + next((main[len(p) :] for p in ("val_", "validation_") if main.startswith(p)), main)
    return test_metrics.get(twin)


def _clip(text: str) -> str:
    data = text.encode("utf-8")
    return text if len(data) <= TAIL_BYTES else data[-TAIL_BYTES:].decode("utf-8", "ignore")


__all__ = [
    "INVALID_OUTPUT",
    "NO_OUTPUT",
    "Produced",
    "check_metrics",
    "copy_public_data",
    "fidelity_level",
    "new_workspace",
    "produce",
    "required_metrics",
    "split_metrics",
    "subsample_rows",
    "unsafe_entry",
    "verify",
]
