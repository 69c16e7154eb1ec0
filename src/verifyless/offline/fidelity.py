"""Two-fidelity pool worlds: a committed world's points, each also verified once at one cheaper fidelity level.

A *level world* belongs to one pool world (``offline/worlds.py``) and one of
its task's fidelity levels (``task.fidelity``, docs/design/task-format.md).
It holds, for every point of that world and in the world's order, the result
of one real verification at that level (``verify(..., level=LEVEL)``, the
local sandbox). With it, a replay can charge a pilot its measured
low-fidelity seconds and rank by its measured low-fidelity score, exactly as
the full-fidelity world lets it charge and read full verifications.

File format (JSON lines, UTF-8; package data in
``verifyless.builtin.worlds_dir() / "fidelity" / "TASK.LEVEL.jsonl"``, a
subfolder so ``world_paths`` never mistakes it for a world):

* line 1, the header: ``{"kind": "level_world", "version": 1, "task": str,
  "level": str, "world_seed": int, "world_points": int}``;
* every further line, one point: ``{"program_hash": str, "status": str,
  "score": float|null, "seconds": float, "reason": str}`` -- the program
  hash of the world point it measures (the world's own), the status, raw
  validation score and seconds at the level. No hidden-test score: a
  low-fidelity run is never measured against the test split here;
* calibration lines, ``{"program_hash": str, "run": "calibration",
  "full_seconds": float, "level_seconds": float}``: a few world points run
  at full fidelity and then at the level, back to back on the machine that
  collected the level world (``calibrate_level``). The world's own seconds
  came from another machine (or load); ``LevelWorld.machine_factor`` turns
  this machine's level seconds into the world's seconds, so a replay charges
  pilots and full verifications on one clock.

Collection appends each point as it is verified and resumes (points already
in the file are skipped by program hash). ``attach`` aligns a level world to
its world and refuses one whose points do not match.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.builtin import worlds_dir
from verifyless.node import content_hash
from verifyless.offline.worlds import World, make_program, read_jsonl
from verifyless.sandbox.local import LocalSandbox
from verifyless.task.base import Task
from verifyless.verify import verify

__all__ = [
    "LevelPoint",
    "LevelWorld",
    "attach",
    "calibrate_level",
    "collect_level",
    "level_path",
    "load_calibration",
    "load_level",
]

LEVEL_WORLD_VERSION = 1


@dataclass(frozen=True)
class LevelPoint:
    """One world point verified at a cheaper level: status, raw validation score, seconds."""

    program_hash: str
    status: str
    score: float | None = None
    seconds: float = 0.0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "program_hash": self.program_hash,
            "status": self.status,
            "score": self.score,
            "seconds": round(self.seconds, 3),
            "reason": self.reason[:300],
        }


@dataclass(frozen=True)
class LevelWorld:
    """A world's points at one level, aligned with the world: ``points[i]`` measures ``world.points[i]``."""

    world: World
    level: str
    points: tuple[LevelPoint, ...]
    calibration: tuple[tuple[int, float, float], ...] = ()  # (world index, full seconds, level seconds) here

    @property
    def machine_factor(self) -> float:
        """World seconds per second of this machine: sum of the world's full seconds / this machine's (1.0 uncalibrated)."""
        here = sum(full for _, full, _ in self.calibration)
        there = sum(self.world.points[i].seconds for i, _, _ in self.calibration)
        return there / here if here > 0 and there > 0 else 1.0

    @property
    def cost_ratio(self) -> float | None:
        """Level seconds / full seconds, both measured back to back here (None uncalibrated)."""
        full = sum(f for _, f, _ in self.calibration)
        return sum(lv for _, _, lv in self.calibration) / full if full > 0 else None

    def cost(self, i: int) -> float:
        """The pilot of world point ``i`` in the world's seconds (its level seconds x ``machine_factor``)."""
        return self.points[i].seconds * self.machine_factor

    def fitness(self, i: int) -> float | None:
        """Oriented low-fidelity score of world point ``i`` (higher is better); None when the run failed."""
        p = self.points[i]
        return self.world.orient(p.score) if p.status == "ok" else None

    def seconds(self, i: int) -> float:
        return self.points[i].seconds


def level_path(task: str, level: str, directory: str | Path | None = None) -> Path:
    """Where the level world of ``task`` at ``level`` lives (default: the package's ``worlds/fidelity/``)."""
    if directory is None:
        directory = worlds_dir() / "fidelity"
    return Path(directory) / f"{task}.{level}.jsonl"


def load_level(path: str | Path) -> tuple[dict[str, Any], list[LevelPoint]]:
    """The header and points of a level-world file (calibration lines left out: ``load_calibration``)."""
    head, points, _ = _read(path)
    return head, points


def load_calibration(path: str | Path) -> dict[str, tuple[float, float]]:
    """Program hash -> (full seconds, level seconds) of the file's calibration lines."""
    return _read(path)[2]


def _read(path: str | Path) -> tuple[dict[str, Any], list[LevelPoint], dict[str, tuple[float, float]]]:
    """Header, points and calibration of a level-world file; a malformed line raises ValueError naming it."""
    head, rows = read_jsonl(path, "level_world")
    points, calibration = [], {}
    for i, row in rows:
        try:
            if row.get("run") == "calibration":
                calibration[str(row["program_hash"])] = (float(row["full_seconds"]), float(row["level_seconds"]))
            else:
                points.append(LevelPoint(**row))
        except (TypeError, KeyError) as exc:
            raise ValueError(f"{path}:{i}: not a level-world line ({exc})") from exc
    return head, points, calibration


def attach(world: World, path: str | Path) -> LevelWorld:
    """The level world at ``path`` aligned to ``world``; ValueError unless it measures exactly its points."""
    head, points, calibration = _read(path)
    if head.get("task") != world.task or int(head.get("world_seed", -1)) != world.seed:
        raise ValueError(f"{path}: a level world of {head.get('task')} seed {head.get('world_seed')}, not {world.task}")
    by_hash = {p.program_hash: p for p in points}
    missing = [i for i, wp in enumerate(world.points) if wp.program_hash not in by_hash]
    if missing or len(by_hash) != len(world):
        raise ValueError(
            f"{path}: measures {len(by_hash)} programs, the world has {len(world)} ({len(missing)} missing); "
            "finish it with collect_level"
        )
    index = {wp.program_hash: i for i, wp in enumerate(world.points)}
    calib = tuple((index[h], full, lv) for h, (full, lv) in calibration.items() if h in index)
    return LevelWorld(world, str(head["level"]), tuple(by_hash[wp.program_hash] for wp in world.points), calib)


def collect_level(
    task: Task,
    world: World,
    level: str,
    path: str | Path,
    *,
    sandbox: Any = None,
    progress: Callable[[str], None] | None = None,
    deadline: float | None = None,
) -> int:
    """Verify every point of ``world`` at ``level`` into ``path`` (resumable); how many points are stored.

    Each point's program is made again from its assignment (``make_program``);
    a program whose hash differs from the world's raises ValueError (the task
    changed since the world was collected: the two would not measure the same
    program). ``deadline`` (a ``time.monotonic()`` value) stops early.
    """

    levels = [lv.name for lv in task.fidelity.levels]
    if level not in levels:
        raise ValueError(f"task {task.name} has no cheaper fidelity level {level!r} (levels: {levels})")
    if sandbox is None:
        sandbox = LocalSandbox()
    out = Path(path)
    done: set[str] = set()
    if out.exists() and out.stat().st_size:
        head, points = load_level(out)
        if (head.get("task"), head.get("level"), head.get("world_seed")) != (task.name, level, world.seed):
            raise ValueError(f"{out} holds another level world ({head}); use another path")
        done = {p.program_hash for p in points}
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        header = {"kind": "level_world", "version": LEVEL_WORLD_VERSION, "task": task.name, "level": level}
        header |= {"world_seed": world.seed, "world_points": len(world)}
        out.write_text(json.dumps(header) + "\n", encoding="utf-8")
    say = progress or (lambda msg: None)
    for k, wp in enumerate(world.points):
        if wp.program_hash in done:
            continue
        if deadline is not None and time.monotonic() > deadline:
            say(f"deadline reached at point {k}")
            break
        program = make_program(task, wp.assignment)
        if content_hash(program) != wp.program_hash:
            raise ValueError(f"world point {k} of {task.name}: its program no longer matches the world's hash")
        v = verify(task, program, sandbox, level=level)
        point = LevelPoint(wp.program_hash, v.status.value, v.score, v.seconds, v.reason)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(point.to_dict()) + "\n")
        done.add(wp.program_hash)
        say(f"{len(done)}/{len(world)} {v.status.value} score={v.score} {v.seconds:.1f}s")
    return len(done)


def calibrate_level(
    task: Task, world: World, level: str, path: str | Path, *, points: int = 6, sandbox: Any = None
) -> int:
    """Run ``points`` world points (evenly spaced, resumable) at full fidelity then at ``level``, back to back.

    Appends one calibration line each to the level world at ``path`` (which
    must exist); returns how many calibration lines it holds.
    """

    if sandbox is None:
        sandbox = LocalSandbox()
    done = load_calibration(path)
    step = max(1, len(world) // max(1, points))
    for k in range(0, len(world), step)[:points]:
        wp = world.points[k]
        if wp.program_hash in done:
            continue
        program = make_program(task, wp.assignment)
        full = verify(task, program, sandbox).seconds
        low = verify(task, program, sandbox, level=level).seconds
        row = {"program_hash": wp.program_hash, "run": "calibration", "full_seconds": round(full, 3)}
        row["level_seconds"] = round(low, 3)
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")
        done[wp.program_hash] = (full, low)
    return len(done)
