"""A task's fingerprint: one stable hash of what makes two runs comparable, with a hash per part.

``task_fingerprint(task)`` hashes the baseline program, the run command, the scorer (its command and,
where the scorer is a file, that file's bytes; an OpenEvolve task's evaluator file), the metric, the
statement, the idea space and the content of every public and hidden data file (folders walked, files
read in 1 MiB chunks, so a large file never sits in memory). ``Fingerprint.parts`` maps a readable part
name (``"program"``, ``"scorer"``, ``"public data public/train.csv"``, ...) to its hash, and
``Fingerprint.diff(other)`` names the parts that differ, so a refusal can say *what* changed.

Not in the fingerprint: limits, fidelity levels, the ensemble rule, the description line and the task's
name (renaming a folder does not make another task). Runs record it in their ``config`` event
(``task_fingerprint``, docs/design/store-schema.md); ``stored_fingerprint`` reads it back (None for a
run stored before fingerprints existed), and ``refuse_changed(...)`` is the one check resume and replay make.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from verifyless.errors import TaskError
from verifyless.events import RunCreated
from verifyless.task.base import Task

VERSION = "task-fingerprint-1"  # bump when what is hashed changes: older digests then never match by accident
OVERRIDE = "--allow-changed-task"
_CHUNK = 1 << 20
_file_hashes: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256: one read per file and process


@dataclass(frozen=True)
class Fingerprint:
    """``digest``: the hash of every part (with the format version); ``parts``: part name -> sha256 hex."""

    digest: str
    parts: Mapping[str, str] = field(default_factory=dict)

    def diff(self, other: Fingerprint) -> list[str]:
        """The names of the parts that differ between the two, sorted (a part only one of them has included)."""
        names = set(self.parts) | set(other.parts)
        return sorted(n for n in names if self.parts.get(n) != other.parts.get(n))

    def to_dict(self) -> dict[str, Any]:
        return {"digest": self.digest, "parts": dict(sorted(self.parts.items()))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprint:
        return cls(str(data["digest"]), {str(k): str(v) for k, v in dict(data.get("parts") or {}).items()})

    @classmethod
    def of_parts(cls, parts: Mapping[str, str]) -> Fingerprint:
        lines = [VERSION, *(f"{name}={digest}" for name, digest in sorted(parts.items()))]
        return cls(_sha("\n".join(lines).encode("utf-8")), dict(sorted(parts.items())))


def task_fingerprint(task: Task) -> Fingerprint:
    """The fingerprint of ``task`` as it is on disk now (module docstring: what counts)."""
    parts = {
        "program": _sha(task.baseline_program.encode("utf-8")),
        "run command": _canonical_hash(task.run_command),
        "scorer": _scorer_hash(task),
        "metric": _canonical_hash(task.metric),
        "statement": _sha(task.statement.encode("utf-8")),
    }
    if task.idea_space is not None:
        parts["idea space"] = _canonical_hash(task.idea_space)
    for kind, paths in (("public", task.public_data), ("hidden", task.hidden_data)):
        for name, path in _data_files(task.root, paths):
            parts[f"{kind} data {name}"] = file_hash(path)
    return Fingerprint.of_parts(parts)


def file_hash(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks; cached per process by (path, size, mtime); a missing file
    hashes as ``missing``."""
    try:
        st = path.stat()
    except OSError:
        return "missing"
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _file_hashes:
        h = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
        _file_hashes[key] = h.hexdigest()
    return _file_hashes[key]


class _Events(Protocol):
    def events(self, run_id: str, first: type[RunCreated], /) -> Iterator[Any]: ...


def stored_fingerprint(store: _Events, run_id: str) -> Fingerprint | None:
    """The fingerprint a run recorded when it was made; None for a run stored before fingerprints existed."""
    for ev in store.events(run_id, RunCreated):
        data = ev.record.task_fingerprint
        return Fingerprint.from_dict(data) if data else None
    return None


def refuse_changed(stored: Fingerprint | None, task: Task, *, run_id: str, action: str, allow: bool = False) -> None:
    """Raise ``TaskError`` (one line naming the changed parts and the override) when ``task`` is not the task
    the run was made on; ``action`` is the verb (``resume``, ``replay``). Nothing to compare (a run stored before
    fingerprints) or ``allow``: no check."""
    if stored is None or allow:
        return
    changed = stored.diff(task_fingerprint(task))
    if not changed:
        return
    shown = ", ".join(changed[:6]) + (f" and {len(changed) - 6} more" if len(changed) > 6 else "")
    raise TaskError(
        f"task {task.name!r} changed since run {run_id} was made ({shown}); refusing to {action} it on a different "
        f"task (new scores would be ranked against old ones). Restore the task as it was, or pass {OVERRIDE} to "
        f"{action} anyway"
    )


def _scorer_hash(task: Task) -> str:
    """The scorer's text plus the bytes of the file it names (``file.py:function``), or of every command
    argument that is a file of the task; an OpenEvolve task's evaluator file."""
    h = hashlib.sha256((task.scorer or "").encode("utf-8"))
    for path in _scorer_files(task):
        h.update(f"\n{path.name}={file_hash(path)}".encode())
    return h.hexdigest()


def _scorer_files(task: Task) -> list[Path]:
    if task.evaluator is not None:
        return [task.evaluator]
    scorer = task.scorer or ""
    file, sep, func = scorer.partition(":")
    if sep and file.endswith(".py") and func.isidentifier():
        return [task.root / file]
    candidates = (task.root / word for word in scorer.split() if "{" not in word)
    return [p for p in candidates if p.is_file()]


def _data_files(root: Path, paths: tuple[Path, ...]) -> Iterator[tuple[str, Path]]:
    """(readable name, file) for every data file; a folder is walked in sorted order."""
    for top in paths:
        files = sorted(p for p in top.rglob("*") if p.is_file()) if top.is_dir() else [top]
        for path in files:
            yield _name(root, top, path), path


def _name(root: Path, top: Path, path: Path) -> str:
    """The path relative to the task folder; for data kept elsewhere (a competition's cache), relative to the
    folder that holds the data entry."""
    for base in (root, top.parent):
        try:
            return path.relative_to(base).as_posix()
        except ValueError:
            continue
    return path.name


def _canonical_hash(value: Any) -> str:
    return _sha(json.dumps(_canonical(value), sort_keys=True, separators=(",", ":")).encode("utf-8"))


def _canonical(value: Any) -> Any:
    """Plain JSON of frozen task records: dataclasses by field, mappings by key, tuples as lists."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _canonical(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Path):
        return value.as_posix()
    return value


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = ["OVERRIDE", "Fingerprint", "file_hash", "refuse_changed", "stored_fingerprint", "task_fingerprint"]
