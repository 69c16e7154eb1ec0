"""Pool worlds: a large sample of an idea space, each configuration verified once, replayable offline.

A *world* is a task's idea space sampled uniformly (the baseline assignment
first, then distinct random assignments from ``random.Random(seed)``), every
sampled configuration rendered by the task's own template and verified once
with the real verifier (``verifyless.verify``, the local sandbox). Because the
built-in tasks are deterministic (``stochastic: false``), one verification is
the exact outcome of that configuration: a search over the world can be
replayed thousands of times in seconds, with any screener, and the best-of-N
oracle is exact.

File format (JSON lines, UTF-8, one object per line, documented here so a
later step can convert it to a dataset):

* line 1, the header: ``{"kind": "world", "version": 1, "task": str,
  "seed": int, "metric": str, "direction": "maximize"|"minimize",
  "baseline": {dim: option}, "dimensions": {dim: [option, ...]}}``;
* every further line, one verified configuration: ``{"assignment": {dim:
  option}, "status": str, "score": float|null, "test_score": float|null,
  "seconds": float, "reason": str, "program_hash": str}`` (``score`` is the
  raw validation metric, ``test_score`` the raw hidden-test metric; both
  null unless ``status == "ok"``).

Collection appends each point as soon as it is verified (a paid result is
never lost) and resumes: configurations already in the file are skipped, so
an interrupted ``collect_world`` continues where it stopped. Verifications go
through the kernel (``verifyless.ledger.Ledger``): with ``store=`` each is
recorded there, charged, before its line is written, and a program the store
already holds is written from it without verifying it again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from verifyless.ledger import BudgetConfig, Ledger
from verifyless.node import Candidate, Idea, Operator, Status, content_hash
from verifyless.offline.scores import best_scheme, normalize
from verifyless.program import split
from verifyless.sandbox.local import LocalSandbox
from verifyless.store import RunStore
from verifyless.store.protocol import RunStoreProtocol
from verifyless.task.base import Task
from verifyless.task.loader import load_task
from verifyless.task.space import render
from verifyless.verify import verify

log = logging.getLogger(__name__)
_T = TypeVar("_T")

Assignment = Mapping[str, str]
WORLD_VERSION = 1


@dataclass(frozen=True)
class WorldPoint:
    """One verified configuration of the idea space."""

    assignment: Mapping[str, str]
    status: str
    score: float | None = None
    test_score: float | None = None
    seconds: float = 0.0
    reason: str = ""
    program_hash: str = ""

    @property
    def key(self) -> tuple[tuple[str, str], ...]:
        return assignment_key(self.assignment)

    def to_dict(self) -> dict[str, Any]:
        return {
            "assignment": dict(self.assignment),
            "status": self.status,
            "score": self.score,
            "test_score": self.test_score,
            "seconds": round(self.seconds, 3),
            "reason": self.reason[:300],
            "program_hash": self.program_hash,
        }


@dataclass(frozen=True)
class World:
    """A task's sampled idea space with one verified outcome per configuration.

    ``points[0]`` is the baseline when the collection included it (it always
    does). ``fitness(i)`` is the oriented validation score (higher is better;
    None for a failed verification), ``test_fitness(i)`` the oriented hidden
    test score (measurement only).
    """

    task: str
    direction: str
    dimensions: Mapping[str, tuple[str, ...]]
    baseline: Mapping[str, str]
    points: tuple[WorldPoint, ...]
    seed: int = 0
    metric: str = ""
    _index: dict[tuple[tuple[str, str], ...], int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._index.update({p.key: i for i, p in enumerate(self.points)})

    def __len__(self) -> int:
        return len(self.points)

    def orient(self, value: float | None) -> float | None:
        if value is None or not math.isfinite(value):
            return None
        return float(value) if self.direction == "maximize" else -float(value)

    def fitness(self, i: int) -> float | None:
        p = self.points[i]
        return self.orient(p.score) if p.status == "ok" else None

    def test_fitness(self, i: int) -> float | None:
        p = self.points[i]
        return self.orient(p.test_score) if p.status == "ok" else None

    def find(self, assignment: Assignment) -> int | None:
        return self._index.get(assignment_key(assignment))

    @property
    def baseline_index(self) -> int:
        i = self.find(self.baseline)
        if i is None:
            raise ValueError(f"world of {self.task} does not contain its baseline; recollect it with collect_world")
        return i


def assignment_key(assignment: Assignment) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(assignment.items()))


# ---------------------------------------------------------------------- files


def _header(task: Task, seed: int) -> dict[str, Any]:
    space = task.idea_space
    assert space is not None
    return {
        "kind": "world",
        "version": WORLD_VERSION,
        "task": task.name,
        "seed": seed,
        "metric": task.metric.name,
        "direction": task.metric.direction,
        "baseline": dict(space.baseline),
        "dimensions": {d: [o.name for o in opts] for d, opts in space.dimensions.items()},
    }


def read_jsonl(path: str | Path, kind: str, hint: str = "") -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
    """The header of a JSON-lines file whose first line has ``"kind": kind``, and its other lines as
    ``(line number, object)``; ValueError naming the file (and ``hint``, how to make one) when it is empty or
    its header is of another kind, and naming the line when a line is not JSON."""
    lines = [(i, ln) for i, ln in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1) if ln.strip()]
    label = kind.replace("_", "-")
    if not lines:
        raise ValueError(f"{path}: empty {label} file{hint}")
    head = json.loads(lines[0][1])
    if head.get("kind") != kind:
        raise ValueError(f"{path}:{lines[0][0]}: not a {label} header (kind={head.get('kind')!r})")
    rows = []
    for i, line in lines[1:]:
        try:
            rows.append((i, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{i}: not a {label} line ({exc})") from exc
    return head, rows


def load_world(path: str | Path) -> World:
    """Read a world file (see module docstring); a malformed line raises ValueError naming the line."""
    head, rows = read_jsonl(path, "world", "; collect one with `python bench/pools.py world TASK`")
    points = []
    for i, row in rows:
        try:
            points.append(WorldPoint(**row))
        except TypeError as exc:
            raise ValueError(f"{path}:{i}: not a world point ({exc})") from exc
    return World(
        task=head["task"],
        direction=head["direction"],
        dimensions={d: tuple(o) for d, o in head["dimensions"].items()},
        baseline=head["baseline"],
        points=tuple(points),
        seed=int(head.get("seed", 0)),
        metric=head.get("metric", ""),
    )


def sample_assignments(
    dimensions: Mapping[str, Sequence[str]], baseline: Assignment, n: int, rng: random.Random
) -> list[dict[str, str]]:
    """The baseline, then distinct uniform random assignments (``n`` in all, fewer if the space is smaller)."""
    total = math.prod(len(o) for o in dimensions.values())
    out = [dict(baseline)]
    seen = {assignment_key(baseline)}
    while len(out) < min(n, total):
        a = {d: rng.choice(list(opts)) for d, opts in dimensions.items()}
        if assignment_key(a) not in seen:
            seen.add(assignment_key(a))
            out.append(a)
    return out


def collect_world(
    task: Task | str,
    path: str | Path,
    *,
    n: int = 400,
    seed: int = 0,
    sandbox: Any = None,
    progress: Callable[[str], None] | None = None,
    deadline: float | None = None,
    store: RunStoreProtocol | None = None,
) -> World:
    """Verify ``n`` sampled configurations of ``task``'s idea space into ``path`` (resumable; see module doc).

    ``deadline`` (a ``time.monotonic()`` value) stops early, keeping what was
    verified. An existing file for another task or seed raises ValueError.
    Paid work goes through the kernel (``verifyless.ledger``): each
    verification is recorded with its charge in ``store`` (run
    ``world-<task>-s<seed>``) before its line is appended, and a program whose
    result the store holds is written from it, never verified again, so a
    kill -9 between the two pays nothing twice. ``store=None``: a temporary
    store (reuse within this call only; the file alone resumes).
    """

    if isinstance(task, str):
        task = load_task(task)
    if task.idea_space is None:
        raise ValueError(f"task {task.name} has no idea_space; a world samples one")
    if sandbox is None:
        sandbox = LocalSandbox()
    out = Path(path)
    header = _header(task, seed)
    done: set[tuple[tuple[str, str], ...]] = set()
    if out.exists() and out.stat().st_size:
        existing = load_world(out)
        if existing.task != task.name or existing.seed != seed:
            raise ValueError(f"{out} holds a world of {existing.task} seed {existing.seed}; use another path")
        done = {p.key for p in existing.points}
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(header) + "\n", encoding="utf-8")
    space = task.idea_space
    todo = [
        a
        for a in sample_assignments(header["dimensions"], space.baseline, n, random.Random(seed))
        if assignment_key(a) not in done
    ]
    say = progress or (lambda msg: None)
    with _world_ledger(store, task, seed) as ledger:
        for k, a in enumerate(todo):
            if deadline is not None and time.monotonic() > deadline:
                say(f"deadline reached after {k} new points")
                break
            program = make_program(task, a)
            digest = content_hash(program)
            known = ledger.state.known_result(digest)
            if known is None:
                nid = f"w{digest[:16]}"
                ledger.record_candidate(
                    Candidate(nid, None, Operator.DRAFT, Idea(json.dumps(dict(a), sort_keys=True)), program, digest),
                    Status.IMPLEMENTED,
                )
                v = verify(task, program, sandbox)
                ledger.record_verification(nid, v)
            else:
                v = known[1]
            point = WorldPoint(a, v.status.value, v.score, v.test_score, v.seconds, v.reason, digest)
            with out.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(point.to_dict()) + "\n")
            say(f"{len(done) + k + 1}/{n} {v.status.value} score={v.score} {v.seconds:.1f}s")
    return load_world(out)


@contextlib.contextmanager
def _world_ledger(store: RunStoreProtocol | None, task: Task, seed: int) -> Iterator[Ledger]:
    """The kernel ledger of a world collection: run ``world-<task>-s<seed>`` of ``store`` (created on
    first use, folded from its events on a later one), or of a temporary store when ``store`` is None."""
    with contextlib.ExitStack() as stack:
        if store is None:
            folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="verifyless-world-"))
            store = stack.enter_context(RunStore(Path(folder) / "world.db"))
        ledger = Ledger(store, BudgetConfig(), task.metric)
        run_id = f"world-{task.name}-s{seed}"
        if any(r.run_id == run_id for r in store.runs()):
            for ev in store.events(run_id):
                ledger.state.apply(ev)
        else:
            store.create_run(task.name, {"kind": "world", "seed": seed}, run_id=run_id, seed=seed)
        ledger.run_id = run_id
        yield ledger


def make_program(task: Task, assignment: Assignment) -> str:
    """The child program of one assignment: the template's band between the baseline's fixed regions.

    The only place a world makes a child (kept small so a shared child-making unit can replace it).
    """

    assert task.idea_space is not None
    return split(task.baseline_program, task.band).join(render(task.idea_space, assignment))


def world_paths(directory: str | Path) -> list[Path]:
    """World files (``*.jsonl``) in ``directory``, sorted by name."""
    return sorted(Path(directory).glob("*.jsonl"))


def load_worlds(paths: Iterable[str | Path]) -> dict[str, World]:
    """Worlds keyed by task name; several files of one task (other seeds) are merged with ``merge_worlds``."""
    by_task: dict[str, list[World]] = {}
    for p in paths:
        w = load_world(p)
        by_task.setdefault(w.task, []).append(w)
    return {t: merge_worlds(ws) for t, ws in by_task.items()}


def merge_worlds(worlds: Sequence[World]) -> World:
    """One world from several samples of the same task: the first world's points, then new configurations of the
    others (a union of uniform samples is a uniform sample; the baseline stays first)."""
    first = worlds[0]
    if any(w.task != first.task or dict(w.dimensions) != dict(first.dimensions) for w in worlds[1:]):
        raise ValueError("merge_worlds needs worlds of the same task and idea space")
    seen: set[tuple[tuple[str, str], ...]] = set()
    points = []
    for w in worlds:
        for p in w.points:
            if p.key not in seen:
                seen.add(p.key)
                points.append(p)
    return World(
        task=first.task,
        direction=first.direction,
        dimensions=first.dimensions,
        baseline=first.baseline,
        points=tuple(points),
        seed=first.seed,
        metric=first.metric,
    )


def world_best(world: World) -> float:
    """The best validation fitness in the world (the ceiling of any search on it)."""
    fits = [f for f in (world.fitness(i) for i in range(len(world))) if f is not None]
    return max(fits) if fits else -math.inf


def normalizer(world: World, task: Task | None = None) -> Callable[[float], float]:
    """Fitness -> the task's normalised score (``bench.scores.best_scheme``); identity without anchors."""

    if task is None:
        try:
            task = load_task(world.task)
        except Exception:  # noqa: BLE001 - a world of an unknown task (tests) reports raw fitness
            return lambda f: f
    scheme = best_scheme(task.anchors)
    metric = task.metric
    return lambda f: float(normalize(None if not math.isfinite(f) else metric.orient(f), metric, task.anchors, scheme))


def synthetic_world(
    *,
    n_dims: int = 5,
    n_options: int = 3,
    n_points: int = 120,
    seed: int = 0,
    interaction: float = 1.0,
    fail_rate: float = 0.05,
    noise: float = 0.0,
) -> World:
    """A small world with a known landscape, for tests and examples (never evidence about real tasks).

    Fitness = sum of per-option main effects + ``interaction`` x effects of
    adjacent dimension pairs (+ optional noise); a ``fail_rate`` share of
    points fail. Dimensions are ``d0..``, options ``o0..``; the baseline is all
    ``o0``. Everything derives from ``random.Random(seed)``.
    """
    rng = random.Random(seed)
    dims = {f"d{i}": tuple(f"o{j}" for j in range(n_options)) for i in range(n_dims)}
    main = {(d, o): rng.gauss(0, 1) for d in dims for o in dims[d]}
    names = list(dims)
    pair = {
        (a, b, oa, ob): rng.gauss(0, 1)
        for a, b in zip(names, names[1:], strict=False)
        for oa in dims[a]
        for ob in dims[b]
    }
    baseline = {d: opts[0] for d, opts in dims.items()}
    points = []
    for a in sample_assignments(dims, baseline, n_points, rng):
        f = sum(main[(d, o)] for d, o in a.items())
        f += interaction * sum(pair[(x, y, a[x], a[y])] for x, y in zip(names, names[1:], strict=False))
        f += rng.gauss(0, noise) if noise else 0.0
        failed = a != baseline and rng.random() < fail_rate
        points.append(
            WorldPoint(
                a, "failed" if failed else "ok", None if failed else f, None if failed else f + rng.gauss(0, 0.1), 1.0
            )
        )
    return World(
        task=f"synthetic-{seed}",
        direction="maximize",
        dimensions=dims,
        baseline=baseline,
        points=tuple(points),
        seed=seed,
        metric="fitness",
    )
