"""A verified data report: framework code summarises a task's public data once, in the sandbox.

``data_report(task, sandbox)`` copies the public data into a fresh workspace, runs the trusted
script ``_datareport_script.py`` there under the task's own limits with the task folder and hidden
data masked (the candidate's restrictions), reads its JSON and validates it into a frozen
``DataReport``: per CSV file the rows, column types (numeric / categorical / text), missing counts
and duplicate rows; for the target declared in ``data.target`` its distribution (regression) or
class balance (classification), the ten numeric features most associated with it (|Pearson r|, or
the one-way ANOVA F statistic for classification), and each numeric column's standardised mean
difference between the training file and every other public file (train vs validation/test inputs).

What could not be computed is said in ``DataReport.unavailable`` (an OpenEvolve folder has no public
data; a task without ``data.target`` gets no target statistics). ``hidden_visible`` lists hidden
paths the script could see from inside (empty under an isolating sandbox). The report is
deterministic: the same public files give byte-identical ``to_json()``; it is computed once per
``task_data_hash`` in this process and, given ``store_blob`` (e.g. ``RunStore.put_blob``), stored
as a blob. ``render_markdown`` is the text a prompt or the report includes.

In a run (``engine.data_report``, docs/design/screening.md): ``report_for_run`` computes it once at a new
run's start and never raises; ``event_record`` is the stored ``data_report`` event (the blob hash and the
markdown every prompt of the run uses); ``status_line`` is what ``show`` prints about it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verifyless.events import DataReported
from verifyless.node import content_hash
from verifyless.sandbox.base import Sandbox
from verifyless.task.base import Task
from verifyless.verify import copy_public_data, new_workspace

SCRIPT = Path(__file__).parent / "_datareport_script.py"
SCRIPT_NAME = "_verifyless_datareport.py"
SPEC_NAME = "datareport_spec.json"
OUT_NAME = "datareport.json"
SHIFT_SHOWN = 5  # columns per file in the markdown; the record keeps them all
# how the sandboxed script (which imports nothing of ours) marks a public file that is not a table
NOT_A_TABLE = "not a CSV file; no shape, types or missing values"


@dataclass(frozen=True)
class ColumnSummary:
    """One column of one file; the numeric fields are None unless ``type == "numeric"``."""

    name: str
    type: Literal["numeric", "categorical", "text"]
    missing: int
    distinct: int
    mean: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class FileSummary:
    name: str  # path inside the workspace's public folder
    rows: int
    columns: tuple[ColumnSummary, ...]
    duplicate_rows: int


@dataclass(frozen=True)
class TargetSummary:
    """The declared target in its training file: ``classes`` (label, count) or ``distribution``."""

    file: str
    column: str
    kind: Literal["regression", "classification"]
    missing: int
    classes: tuple[tuple[str, int], ...] = ()
    distribution: Mapping[str, float | None] = field(default_factory=dict)  # min p25 median p75 max mean std skew


@dataclass(frozen=True)
class Association:
    feature: str
    measure: Literal["abs_pearson_r", "anova_f"]
    score: float | None


@dataclass(frozen=True)
class Shift:
    """Standardised mean difference of ``column``: (mean in ``file`` - mean in ``reference``) / pooled sd."""

    file: str
    reference: str
    column: str
    smd: float | None


@dataclass(frozen=True)
class DataReport:
    task: str
    content_hash: str  # task_data_hash: what the report was computed from
    files: tuple[FileSummary, ...] = ()
    target: TargetSummary | None = None
    associations: tuple[Association, ...] = ()
    shifts: tuple[Shift, ...] = ()
    unavailable: tuple[str, ...] = ()
    hidden_visible: tuple[str, ...] = ()

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no spaces): the blob; equal reports give equal bytes."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True, separators=(",", ":"), allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes) -> DataReport:
        raw = json.loads(text)
        return parse_report(raw, str(raw.get("task", "")), str(raw.get("content_hash", "")))


# ------------------------------------------------------------------ computing

_cache: dict[str, DataReport] = {}


def data_report(
    task: Task,
    sandbox: Sandbox,
    store_blob: Callable[[str], Any] | None = None,
    *,
    workspace_root: Path | None = None,
    hide: Sequence[Path] = (),
) -> DataReport:
    """The task's data report, computed once per ``task_data_hash`` (a failed run is not cached).

    ``store_blob`` (optional) is called with ``report.to_json()`` every time, so the blob lands in
    the caller's store even when the report came from the cache. ``hide`` adds paths to mask (the
    run store), as for ``verify``.
    """
    key = task_data_hash(task)
    report = _cache.get(key)
    if report is None:
        report = compute_data_report(task, sandbox, workspace_root=workspace_root, hide=hide)
        if not report.unavailable or not report.unavailable[0].startswith(_FAILED):
            _cache[key] = report
    if store_blob is not None:
        store_blob(report.to_json())
    return report


def compute_data_report(
    task: Task, sandbox: Sandbox, *, workspace_root: Path | None = None, hide: Sequence[Path] = ()
) -> DataReport:
    """Run the report script in ``sandbox`` on a copy of the public data (no cache)."""
    key = task_data_hash(task)
    if not task.public_data:
        return DataReport(task.name, key, unavailable=(_no_public_data(task),))
    ws = new_workspace(workspace_root)
    try:
        copy_public_data(task, ws / "public")
        (ws / "out").mkdir()
        shutil.copy2(SCRIPT, ws / SCRIPT_NAME)
        (ws / SPEC_NAME).write_text(json.dumps(_spec(task, ws / "public")), encoding="utf-8")
        argv = [sys.executable, str(ws / SCRIPT_NAME), str(ws / SPEC_NAME), str(ws / "out" / OUT_NAME)]
        result = sandbox.run(argv, ws, task.limits, hide=(task.root, *task.hidden_data, *hide))
        if result.status != "ok":
            last = next((ln for ln in reversed(result.stderr_tail.splitlines()) if ln.strip()), "")
            return DataReport(task.name, key, unavailable=(f"{_FAILED} ({result.status}): {result.reason} {last}",))
        raw = json.loads((ws / "out" / OUT_NAME).read_text(encoding="utf-8"))
        return parse_report(raw, task.name, key)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return DataReport(task.name, key, unavailable=(f"{_FAILED}: {type(exc).__name__}: {exc}",))
    finally:
        shutil.rmtree(ws, ignore_errors=True)


_FAILED = "the data report script failed in the sandbox"


def _no_public_data(task: Task) -> str:
    return (
        f"no public data: this {task.kind} task declares no data files (its evaluator or program holds the "
        "problem), so shapes, column types, missing values, the target, feature associations, "
        "train/validation shift and duplicate rows were not computed"
    )


def _spec(task: Task, public: Path) -> dict[str, Any]:
    target = task.target
    return {
        "public": str(public),
        "files": sorted(_public_names(public)),
        "target": None
        if target is None
        else {"column": target.column, "kind": target.kind, "files": [p.name for p in target.files]},
        "must_not_see": [str(task.root), *(str(p) for p in task.hidden_data)],
    }


def _public_names(public: Path) -> Iterator[str]:
    for path in sorted(public.rglob("*")):
        if path.is_file():
            yield path.relative_to(public).as_posix()


def task_data_hash(task: Task) -> str:
    """SHA-256 over the public files' names and bytes, the target declaration and the script's text."""
    digest = hashlib.sha256()
    digest.update(content_hash(SCRIPT.read_bytes()).encode())
    digest.update(
        json.dumps([task.name, task.kind, repr(task.target and (task.target.column, task.target.kind))]).encode()
    )
    for src in task.public_data:
        files = sorted(p for p in src.rglob("*") if p.is_file()) if src.is_dir() else [src]
        for path in files:
            digest.update(path.relative_to(src.parent).as_posix().encode() + b"\0")
            digest.update(content_hash(path.read_bytes()).encode())
    if task.target is not None:
        digest.update(json.dumps(sorted(p.name for p in task.target.files)).encode())
    return digest.hexdigest()


# ------------------------------------------------------------------ in a run


def report_for_run(task: Task, sandbox: Sandbox, *, hide: Sequence[Path] = ()) -> tuple[DataReport, float]:
    """The report a run starts with and the seconds it took; never raises (an error is a ``Not computed`` line).

    Framework code, not a verification: the run records the seconds but charges nothing for them.
    """
    started = time.monotonic()
    try:
        report = data_report(task, sandbox, hide=hide)
    except Exception as exc:  # noqa: BLE001 - any failure is data: the run goes on without the report
        report = DataReport(task.name, "", unavailable=(f"{_FAILED}: {type(exc).__name__}: {exc}",))
    return report, time.monotonic() - started


def event_record(report: DataReport, blob: str, seconds: float) -> DataReported:
    """The ``data_report`` event: the blob of ``report.to_json()``, the markdown every prompt of the run uses
    (stored, so a resume shows the models the same bytes), what was computed and what was not."""
    return DataReported(
        blob=blob,
        content_hash=report.content_hash,
        files=tuple(f.name for f in report.files),
        target=report.target.column if report.target else None,
        unavailable=tuple(report.unavailable),
        hidden_visible=tuple(report.hidden_visible),
        seconds=seconds,
        markdown=render_markdown(report),
    )


def status_line(stored: DataReported | None) -> str:
    """One line about a run's data report (``show``): computed from which files, or what was missing."""
    if stored is None:
        return (
            "data report: none (the run predates it, engine.data_report was off, or it was a warm-started critic-rm "
            "run made before 2026-12-05, which skipped it)"
        )
    files = list(stored.files or ())
    unavailable = list(stored.unavailable or ())
    seconds = f"{float(stored.seconds or 0.0):.1f} s in the sandbox"
    if not files:
        return f"data report: not computed ({seconds}): {'; '.join(unavailable) or 'no reason stored'}"
    target = f", target {stored.target}" if stored.target else ""
    head = f"data report: computed from {len(files)} file(s) ({', '.join(files)}{target}; {seconds})"
    # public files that are not tables (a description, a task card) are expected, not a gap in the report
    texts = [str(u) for u in unavailable]
    other = [t.split(":", 1)[0] for t in texts if t.endswith(NOT_A_TABLE)]
    gaps = [t for t in texts if not t.endswith(NOT_A_TABLE)]
    head += f"; {len(other)} other file(s) not tables ({', '.join(other)})" if other else ""
    return head + (f"; not computed: {'; '.join(gaps)}" if gaps else "")


# ------------------------------------------------------------------ validating


def parse_report(raw: Any, task: str, key: str) -> DataReport:
    """Validate the script's JSON into a ``DataReport``; ValueError names the first bad field."""
    if not isinstance(raw, Mapping):
        raise ValueError("the data report is not a JSON object")
    target = raw.get("target")
    return DataReport(
        task=task,
        content_hash=key,
        files=tuple(_file(f) for f in _list(raw, "files")),
        target=None if target is None else _target(target),
        associations=tuple(
            Association(_str(a, "feature"), _choice(a, "measure", ("abs_pearson_r", "anova_f")), _num(a, "score"))
            for a in _list(raw, "associations")
        ),
        shifts=tuple(
            Shift(_str(s, "file"), _str(s, "reference"), _str(s, "column"), _num(s, "smd"))
            for s in _list(raw, "shifts")
        ),
        unavailable=tuple(_strings(raw, "unavailable")),
        hidden_visible=tuple(_strings(raw, _visible_key(raw))),
    )


def _visible_key(raw: Mapping[str, Any]) -> str:
    return "hidden_visible" if "hidden_visible" in raw else "visible"  # a stored blob / the script's output


def _file(raw: Any) -> FileSummary:
    columns = tuple(
        ColumnSummary(
            _str(c, "name"),
            _choice(c, "type", ("numeric", "categorical", "text")),
            _int(c, "missing"),
            _int(c, "distinct"),
            *(_num(c, k) for k in ("mean", "std", "min", "max")),
        )
        for c in _list(raw, "columns")
    )
    return FileSummary(_str(raw, "name"), _int(raw, "rows"), columns, _int(raw, "duplicate_rows"))


def _target(raw: Any) -> TargetSummary:
    classes = []
    for pair in _list(raw, "classes"):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and _is_int(pair[1])):
            raise ValueError(f"data report field classes: expected [label, count] pairs, got {pair!r}")
        classes.append((pair[0], int(pair[1])))
    distribution = raw.get("distribution", {})
    if not isinstance(distribution, Mapping):
        raise ValueError("data report field distribution: expected an object")
    return TargetSummary(
        _str(raw, "file"),
        _str(raw, "column"),
        _choice(raw, "kind", ("regression", "classification")),
        _int(raw, "missing"),
        tuple(classes),
        {str(k): _num(distribution, k) for k in sorted(distribution)},
    )


def _list(raw: Any, key: str) -> list[Any]:
    value = raw.get(key, []) if isinstance(raw, Mapping) else None
    if not isinstance(value, list):
        raise ValueError(f"data report field {key}: expected a list")
    return value


def _strings(raw: Any, key: str) -> list[str]:
    values = _list(raw, key)
    if not all(isinstance(v, str) for v in values):
        raise ValueError(f"data report field {key}: expected strings")
    return values


def _str(raw: Any, key: str) -> str:
    value = raw.get(key) if isinstance(raw, Mapping) else None
    if not isinstance(value, str):
        raise ValueError(f"data report field {key}: expected a string, got {value!r}")
    return value


def _choice(raw: Any, key: str, allowed: tuple[str, ...]) -> Any:
    value = _str(raw, key)
    if value not in allowed:
        raise ValueError(f"data report field {key}: {value!r} is not one of {allowed}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _int(raw: Any, key: str) -> int:
    value = raw.get(key) if isinstance(raw, Mapping) else None
    if not isinstance(value, int) or not _is_int(value):
        raise ValueError(f"data report field {key}: expected a count, got {value!r}")
    return value


def _num(raw: Any, key: str) -> float | None:
    value = raw.get(key) if isinstance(raw, Mapping) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"data report field {key}: expected a number or null, got {value!r}")
    return float(value)


# ------------------------------------------------------------------ rendering


def render_markdown(report: DataReport) -> str:
    """The report as markdown for a prompt or the run report (facts only, computed by the framework)."""
    lines = [f"## Data report for {report.task} (computed by the framework on the public data)", ""]
    lines += _files_md(report.files)
    lines += _target_md(report.target)
    lines += _associations_md(report.associations)
    lines += _shifts_md(report.shifts)
    if report.hidden_visible:
        lines += ["**Warning:** the sandbox did not hide: " + ", ".join(report.hidden_visible), ""]
    if report.unavailable:
        lines += ["### Not computed", "", *(f"- {reason}" for reason in report.unavailable), ""]
    return "\n".join(lines).rstrip() + "\n"


def _files_md(files: tuple[FileSummary, ...]) -> list[str]:
    if not files:
        return []
    out = [
        "### Files",
        "",
        "| file | rows | columns | numeric | categorical | text | missing cells | duplicate rows |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in files:
        kinds = [sum(c.type == t for c in f.columns) for t in ("numeric", "categorical", "text")]
        missing = sum(c.missing for c in f.columns)
        out.append(
            f"| {f.name} | {f.rows} | {len(f.columns)} | {kinds[0]} | {kinds[1]} | {kinds[2]} | {missing} "
            f"| {f.duplicate_rows} |"
        )
    out.append("")
    for f in files:
        gaps = [f"{c.name} ({c.missing})" for c in f.columns if c.missing]
        if gaps:
            out.append(f"Missing values in {f.name}: " + ", ".join(gaps))
        other = [f"{c.name} ({c.type}, {c.distinct} values)" for c in f.columns if c.type != "numeric"]
        if other:
            out.append(f"Non-numeric columns in {f.name}: " + ", ".join(other))
    return [*out, ""] if out[-1] else out


def _target_md(target: TargetSummary | None) -> list[str]:
    if target is None:
        return []
    head = f"### Target `{target.column}` ({target.kind}, in {target.file}; {target.missing} missing)"
    if target.kind == "classification":
        total = sum(n for _, n in target.classes) or 1
        body = ", ".join(f"{label}: {n} ({100 * n / total:.1f}%)" for label, n in target.classes)
        return [head, "", f"Class balance: {body}", ""]
    keys = ("mean", "std", "min", "p25", "median", "p75", "max", "skew")
    body = ", ".join(f"{k} {_fmt(target.distribution.get(k))}" for k in keys)
    return [head, "", f"Distribution: {body}", ""]


def _associations_md(associations: tuple[Association, ...]) -> list[str]:
    if not associations:
        return []
    measure = "|Pearson r|" if associations[0].measure == "abs_pearson_r" else "ANOVA F"
    out = [f"### Features most associated with the target ({measure}, top {len(associations)})", ""]
    out += ["| feature | score |", "|---|---|", *(f"| {a.feature} | {_fmt(a.score)} |" for a in associations), ""]
    return out


def _shifts_md(shifts: tuple[Shift, ...]) -> list[str]:
    if not shifts:
        return []
    out = ["### Shift from the training file (standardised mean difference)", ""]
    for name in sorted({s.file for s in shifts}):
        rows = [s for s in shifts if s.file == name]
        large = sum(abs(s.smd or 0.0) > 0.2 for s in rows)
        top = ", ".join(f"{s.column} {_fmt(s.smd)}" for s in rows[:SHIFT_SHOWN])
        out.append(f"- {name} vs {rows[0].reference}: {large} of {len(rows)} columns with |SMD| > 0.2; largest: {top}")
    return [*out, ""]


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


__all__ = [
    "Association",
    "ColumnSummary",
    "DataReport",
    "FileSummary",
    "Shift",
    "TargetSummary",
    "compute_data_report",
    "data_report",
    "event_record",
    "parse_report",
    "render_markdown",
    "report_for_run",
    "status_line",
    "task_data_hash",
]
