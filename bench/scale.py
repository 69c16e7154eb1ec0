"""Scale: the run store, parent selection and memory retrieval at 10k and 100k nodes.

For each size N a synthetic run is written to a real ``RunStore`` (with
``append_many``, in large transactions) with the same event kinds and payloads
the engine writes: ``round``, ``node`` (status inside, as after a
screening), ``verification`` and ``tell``. Each round makes 4 children of one parent (the best node with
probability 0.3, else a random working node): two are verified (90% ok, 10%
failed) and two are screened out. Idea texts are drawn from an ML vocabulary
so lexical and hashed retrieval see realistic term statistics.

Measured, per strategy (mcgs, greedy, islands):

* **full replay**: open the store and run ``Engine.resume.restore`` (``verifyless.engine.resume``)
  without a snapshot (apply every event, repeat every logged ``round`` ask and
  ``tell`` batch into a fresh strategy and the memory). Memory is the hashing
  embedder here; the MiniLM cost is estimated separately (``--minilm``).
* **snapshot resume**: the path ``--resume`` takes on a run with snapshots: the
  snapshot a live run would last have written (``--tail-rounds`` rounds before
  the end, default 50 = ``engine.snapshot_every``) is loaded and only the
  events after it are applied. Checked against the full replay: same nodes in
  the same order and the same next 20 asks ("same decisions"). Target: <= 2 s
  (wall clock; the CPU seconds of the process are shown too, since a machine
  shared with other work inflates the wall clock).
* **ask**: ``strategy.ask(view, 1)`` latency p50/p95 over ``--asks`` calls
  after the resume.

And per size: memory retrieval p50/p95 (``Memory(embedder="hashing")``, bulk
``extend`` of every verified record, then ``query_for`` + ``search(k=5)`` for
improve and debug queries), and the process's peak resident memory
(``getrusage`` maxrss, a running peak: sizes run in increasing order).

Usage::

    python bench/scale.py                    # 10k and 100k nodes
    python bench/scale.py --sizes 10000      # one size
    python bench/scale.py --minilm           # also time MiniLM retrieval (on --minilm-records records)
    python bench/scale.py --profile          # cProfile the 100k resume of mcgs and print the top entries
    python bench/scale.py --quick            # 1000 nodes, 20 asks (smoke)
    python bench/scale.py --sizes 100000 --resume-only   # only the two resume paths (issue #20's figure)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.config import load_config
from verifyless.engine import Engine
from verifyless.events import RoundStarted
from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.screen.baselines import RandomScreener
from verifyless.search.memory import Memory, MemoryRecord
from verifyless.search.registry import build_strategy
from verifyless.store import RunStore
from verifyless.testing import fake_engine

STRATEGIES = ("mcgs", "greedy", "islands")
NAN = float("nan")
CHILDREN, VERIFIED = 4, 2  # per round: children made, of which verified
CEILING = -60.0  # best reachable synthetic fitness (the root starts at -100)

_VERBS = ["replace", "add", "switch", "tune", "remove", "increase", "decrease", "normalise", "clip", "average"]
_THINGS = [
    "ridge regression",
    "gradient boosting",
    "random forest",
    "learning rate",
    "dropout",
    "batch size",
    "weight decay",
    "early stopping",
    "log target",
    "standard scaler",
    "quantile transform",
    "polynomial features",
    "feature selection",
    "k nearest neighbours",
    "huber loss",
    "lasso penalty",
    "cosine schedule",
    "warmup steps",
    "label smoothing",
    "data augmentation",
    "ensemble of seeds",
    "hidden layer width",
    "attention heads",
    "residual connections",
    "layer norm",
    "adam optimiser",
    "momentum",
    "gradient clipping",
    "cross validation folds",
    "target encoding",
    "lag features",
    "seasonal differencing",
    "fourier terms",
    "moving average",
    "exponential smoothing",
    "tree depth",
    "leaf size",
    "subsample ratio",
    "column sampling",
    "kernel width",
    "circle radii",
    "restart count",
]
_ERRORS = [
    "ValueError: Input contains NaN",
    "RuntimeError: shape mismatch in matmul",
    "MemoryError: unable to allocate array",
    "ConvergenceWarning: lbfgs failed to converge",
    "KeyError: 'target'",
    "ZeroDivisionError: float division by zero",
    "TimeoutError: step exceeded 60 s",
]


def idea_text(rng: random.Random) -> str:
    parts = [f"{rng.choice(_VERBS)} the {rng.choice(_THINGS)}" for _ in range(rng.randint(1, 3))]
    return " and ".join(parts) + f" with setting {rng.choice(['low', 'medium', 'high', str(rng.randint(1, 512))])}"


def write_run(store: RunStore, n_nodes: int, seed: int = 0, chunk: int = 20000) -> str:
    """Write a synthetic run of ``n_nodes`` nodes (root included) and return its id."""
    rng = random.Random(seed)
    cfg = load_config(overrides=["strategy.name=mcgs", "screener.name=random"])
    run_id = store.create_run("scale-synthetic", cfg.model_dump(mode="json"), seed=seed)
    events: list[tuple] = [("brief", {"understanding": "synthetic", "criteria": ["loss"]})]
    ok_ids: list[str] = ["root"]
    fitness: dict[str, float] = {"root": -100.0}
    best = "root"

    def add(cid: str, parent: str | None, op: Operator, r: int, verify: bool, ok: bool) -> None:
        nonlocal best
        text = idea_text(rng)
        h = content_hash(f"{cid}:{text}")
        cand = Candidate(
            id=cid,
            parent_id=parent,
            operator=op,
            idea=Idea(text),
            program="",
            program_hash=h,
            summary=f"program {cid}: {text}",
            round=r,
        )
        payload = cand.to_dict()
        payload.pop("program")
        payload.update(
            status=Status.IMPLEMENTED.value if verify else Status.SCREENED_OUT.value,
            reason="" if verify else "ranked low by random",
        )
        events.append(("node", payload, cid))
        if not verify:
            return
        if ok:
            # Children scatter around their parent with a slight downward drift and a ceiling,
            # so improvements get rare as the run matures (as in real searches) and the
            # best lineage stays a few hundred nodes deep instead of growing with N.
            fit = min(CEILING, round((fitness[parent] if parent else -100.0) + rng.gauss(-0.3, 1.0), 2))
            v = Verification(
                Status.OK,
                "",
                {"loss": -fit},
                {"test_loss": -fit + 0.1},
                -fit,
                -fit + 0.1,
                run_seconds=2.0,
                program_hash=h,
            )
            fitness[cid] = fit
            ok_ids.append(cid)
            if fit > fitness[best]:
                best = cid
        else:
            fit = None
            err = rng.choice(_ERRORS)
            v = Verification(Status.FAILED, err, run_seconds=1.0, stderr_tail=f"Traceback ...\n{err}", program_hash=h)
        events.append(("verification", {**v.to_dict(), "fitness": fit}, cid, True))

    add("root", None, Operator.BASELINE, 0, True, True)
    events.append(("tell", {"round": 0, "node_ids": ["root"]}))
    r, made = 0, 1
    while made < n_nodes:
        r += 1
        parent = best if rng.random() < 0.3 else rng.choice(ok_ids)
        events.append(("round", {"round": r, "expansions": [{"parent_id": parent, "operator": "improve"}]}))
        ids = []
        for j in range(min(CHILDREN, n_nodes - made)):
            cid = f"r{r}e0c{j}"
            add(cid, parent, Operator.IMPROVE, r, j < VERIFIED, rng.random() < 0.9)
            ids.append(cid)
            made += 1
        events.append(("tell", {"round": r, "node_ids": ids}))
        if len(events) >= chunk:
            store.append_many(run_id, events)
            events = []
    store.append_many(run_id, events)
    return run_id


def restore(
    path: Path, run_id: str, strategy: str, memory: bool | None = None, *, from_snapshot: bool = False
) -> tuple[Engine, float, RunStore]:
    """Open the store and rebuild the engine's state as ``--resume`` does; returns (engine, seconds, store).

    ``memory``: None follows the wiring (on for mcgs only, hashing embedder here).
    ``from_snapshot``: use the run's snapshot (see ``take_snapshot``) and replay only the events after it.
    """
    start = time.perf_counter()
    store = RunStore(path)
    engine = scale_engine(store, run_id, strategy, memory)
    engine.resume.restore(from_snapshot=from_snapshot)
    return engine, time.perf_counter() - start, store


def scale_engine(store: RunStore, run_id: str, strategy: str, memory: bool | None = None) -> Engine:
    """An engine over the package's fakes that only restores the synthetic run (nothing is proposed or run)."""
    memory = strategy == "mcgs" if memory is None else memory
    cfg = load_config(overrides=[f"strategy.name={strategy}", "screener.name=random"])
    engine = fake_engine(
        store,
        cfg,
        RandomScreener(),
        strategy=build_strategy(strategy, None, random.Random(cfg.seed)),
        memory=Memory(embedder="hashing") if memory else None,
    )
    engine.run_id = run_id
    return engine


def take_snapshot(path: Path, run_id: str, strategy: str, tail_rounds: int) -> tuple[float, int, int]:
    """Snapshot the run as it stood ``tail_rounds`` rounds before its end (what a live run's last periodic
    snapshot would hold); returns (seconds to pickle and store it, its size in bytes, events after it)."""
    with RunStore(path) as store:
        rounds = [ev.seq for ev in store.events(run_id, RoundStarted)]
        cutoff = rounds[-tail_rounds] - 1 if len(rounds) >= tail_rounds else 0
        engine = scale_engine(store, run_id, strategy)
        engine.resume.restore(from_snapshot=False, until_seq=cutoff)
        t = time.perf_counter()
        engine.snapshots.take()
        secs = time.perf_counter() - t
        found = store.latest_snapshot(run_id)
        assert found is not None
        tail = sum(1 for _ in store.events(run_id, after=cutoff))
    return secs, len(found[2]), tail


def same_decisions(a: Engine, b: Engine, asks: int = 20) -> bool:
    """Whether two restored engines hold the same nodes and their strategies ask the same next expansions."""
    if list(a.state.view.nodes) != list(b.state.view.nodes) or list(a.state.staged) != list(b.state.staged):
        return False
    return all(a.strategy.ask(a.state.view, 1) == b.strategy.ask(b.state.view, 1) for _ in range(asks))


def max_depth(view: Any) -> int:
    """Longest chain of primary edges from the root (MCGS backpropagates along it on every tell)."""
    depth: dict[str, int] = {}
    for nid in view.nodes:  # parents are told before children, so one pass in insertion order suffices
        parent = view.nodes[nid].parent_id
        depth[nid] = depth.get(parent, -1) + 1 if parent is not None else 0
    return max(depth.values(), default=0)


def pct(values: Sequence[float], q: float) -> float:
    xs = sorted(values)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def time_calls(fn, n: int) -> tuple[float, float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out), pct(out, 0.95)


def records_of(engine: Engine) -> list[MemoryRecord]:
    return [
        MemoryRecord(
            node_id=nid,
            plan=engine.state.ideas[nid].text,
            outcome=v.status.value,
            analysis=f"score {v.score}" if v.score is not None else v.reason,
            error=v.reason if v.status is not Status.OK else "",
            operator="improve",
        )
        for nid, v in engine.state.verifications.items()
    ]


def memory_latency(records: list[MemoryRecord], embedder: str, n_queries: int, seed: int = 1) -> dict[str, float]:
    rng = random.Random(seed)
    memory = Memory(embedder=embedder)
    t = time.perf_counter()
    memory.extend(records)
    build = time.perf_counter() - t
    improve = [Memory.query_for("improve", idea=idea_text(rng)) for _ in range(n_queries)]
    debug = [Memory.query_for("debug", error=f"Traceback ...\n{rng.choice(_ERRORS)}") for _ in range(n_queries)]
    memory.search(improve[0])  # warm caches (first bm25s call, lazy model load)
    lat = {"improve": [], "debug": []}
    for stage, queries in (("improve", improve), ("debug", debug)):
        for q in queries:
            t0 = time.perf_counter()
            memory.search(q, k=5, stage=stage)
            lat[stage].append(time.perf_counter() - t0)
    both = lat["improve"] + lat["debug"]
    return {
        "records": len(records),
        "build_s": build,
        "p50_ms": 1000 * statistics.median(both),
        "p95_ms": 1000 * pct(both, 0.95),
    }


def maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


@dataclass
class SizeResult:
    n: int
    events: int
    depth: int
    write_s: float
    resume: dict[str, float]  # full replay of every event
    snap_resume: dict[str, float]  # latest snapshot + the events after it
    snap_cpu: dict[str, float]  # the same, in CPU seconds of this process (less sensitive to a busy machine)
    snap_load: dict[str, float]  # the 1-minute load average when that resume ended
    first_search: dict[str, float]  # the restored memory's first search (it unpacks its index then), s
    snap: dict[str, tuple[float, int, int]]  # seconds to take, bytes, events replayed after it
    same: dict[str, bool]  # snapshot resume == full replay (nodes and the next asks)
    ask: dict[str, tuple[float, float]]
    memory: dict[str, dict[str, float]]
    rss_mb: float


def run_size(
    n: int,
    tmp: Path,
    asks: int,
    queries: int,
    minilm: int,
    profile: bool,
    tail_rounds: int = 50,
    resume_only: bool = False,
) -> SizeResult:
    """One size; ``resume_only``: only the two resume paths (no ask or retrieval timing), and the
    snapshot resume is checked against the one full replay (whose strategy was then not asked)."""
    path = tmp / f"scale-{n}.db"
    t = time.perf_counter()
    with RunStore(path) as store:
        run_id = write_run(store, n)
        n_events = sum(1 for _ in store.events(run_id))
    write_s = time.perf_counter() - t
    full: dict[str, float] = {}
    snap_resume: dict[str, float] = {}
    snap_cpu: dict[str, float] = {}
    snap_load: dict[str, float] = {}
    first_search: dict[str, float] = {}
    snap: dict[str, tuple[float, int, int]] = {}
    same: dict[str, bool] = {}
    ask: dict[str, tuple[float, float]] = {}
    records: list[MemoryRecord] = []
    for name in STRATEGIES:
        engine, full[name], store = restore(path, run_id, name)
        ask[name] = (NAN, NAN) if resume_only else time_calls(lambda e=engine: e.strategy.ask(e.state.view, 1), asks)
        if name == "mcgs":
            records = records_of(engine)
            depth = max_depth(engine.state.view)
        if not resume_only:
            store.close()
        snap[name] = take_snapshot(path, run_id, name, tail_rounds)
        prof = cProfile.Profile() if profile and name == "mcgs" else None
        if prof:
            prof.enable()
        cpu = time.process_time()
        fast, snap_resume[name], fast_store = restore(path, run_id, name, from_snapshot=True)
        snap_cpu[name] = time.process_time() - cpu
        snap_load[name] = os.getloadavg()[0]
        if prof:
            prof.disable()
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(18)
            print(f"cProfile of the {n}-node mcgs snapshot resume:\n{buf.getvalue()}", file=sys.stderr)
        if fast.memory is not None:
            t = time.perf_counter()
            fast.memory.search(Memory.query_for("improve", idea="tune the learning rate"), k=5)
            first_search[name] = time.perf_counter() - t
        if resume_only:
            slow, slow_store = engine, store
        else:
            slow, _, slow_store = restore(path, run_id, name)
        same[name] = same_decisions(fast, slow)
        fast_store.close()
        slow_store.close()
        del engine, fast, slow
    if resume_only:
        full["mcgs-no-memory"], memory = NAN, {}
    else:
        _, full["mcgs-no-memory"], store = restore(path, run_id, "mcgs", memory=False)
        store.close()
        memory = {"hashing": memory_latency(records, "hashing", queries)}
    if minilm and not resume_only:
        memory["minilm"] = memory_latency(records[:minilm], "minilm", queries)
    return SizeResult(
        n,
        n_events,
        depth,
        write_s,
        full,
        snap_resume,
        snap_cpu,
        snap_load,
        first_search,
        snap,
        same,
        ask,
        memory,
        maxrss_mb(),
    )


def tables(results: Sequence[SizeResult]) -> str:
    out = [
        "| nodes | events | max depth | write s | resume s (mcgs / greedy / islands / mcgs without memory) | "
        "ask p50 ms (mcgs / greedy / islands) | ask p95 ms (mcgs / greedy / islands) | peak RSS MB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = []
    for r in results:
        for name in STRATEGIES:
            took, size, tail = r.snap[name]
            rows.append(
                f"| {r.n} | {name} | {r.resume[name]:.2f} | {r.snap_resume[name]:.2f} | {r.snap_cpu[name]:.2f} | "
                f"{'met' if r.snap_resume[name] <= 2.0 else 'missed'} | {tail} | {took:.2f} | "
                f"{size / 1e6:.1f} | {'yes' if r.same[name] else 'NO'} | {r.snap_load[name]:.1f} | "
                f"{f'{r.first_search[name]:.2f}' if name in r.first_search else '-'} |"
            )
    out = [
        "| nodes | strategy | full replay s | snapshot resume s | snapshot resume CPU s | <= 2 s | "
        "events after snapshot | snapshot take s | snapshot MB | same decisions | load avg | first memory search s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        *out,
    ]
    for r in results:
        out.append(
            f"| {r.n} | {r.events} | {r.depth} | {r.write_s:.1f} | "
            + " / ".join(f"{r.resume[s]:.2f}" for s in (*STRATEGIES, "mcgs-no-memory"))
            + " | "
            + " / ".join(f"{1000 * r.ask[s][0]:.3f}" for s in STRATEGIES)
            + " | "
            + " / ".join(f"{1000 * r.ask[s][1]:.3f}" for s in STRATEGIES)
            + f" | {r.rss_mb:.0f} |"
        )
    if not any(r.memory for r in results):  # --resume-only
        return "\n".join(out) + "\n"
    out += [
        "",
        "| nodes | embedder | records | build s | retrieval p50 ms | retrieval p95 ms |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        for emb, m in r.memory.items():
            out.append(
                f"| {r.n} | {emb} | {int(m['records'])} | {m['build_s']:.2f} | {m['p50_ms']:.2f} | {m['p95_ms']:.2f} |"
            )
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> list[SizeResult]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--asks", type=int, default=200, help="ask() calls timed per strategy")
    ap.add_argument("--queries", type=int, default=100, help="retrieval queries per stage")
    ap.add_argument(
        "--minilm",
        type=int,
        nargs="?",
        const=2000,
        default=0,
        help="also time MiniLM retrieval over this many records (default 2000 when given)",
    )
    ap.add_argument("--profile", action="store_true", help="cProfile the largest mcgs snapshot resume (to stderr)")
    ap.add_argument("--tail-rounds", type=int, default=50, help="rounds between the snapshot and the end")
    ap.add_argument("--quick", action="store_true", help="smoke version: 1000 nodes, 20 asks, 20 queries")
    ap.add_argument(
        "--resume-only", action="store_true", help="time only full replay and snapshot resume (no asks, no retrieval)"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.asks, args.queries = [1000], 20, 20
    t = time.perf_counter()
    Memory(embedder="hashing").extend([MemoryRecord("warm", "warm up imports", "ok")] * 300)  # sklearn, bm25s
    print(
        f"one-time imports for memory (scikit-learn, bm25s): {time.perf_counter() - t:.2f} s, "
        "excluded from the resume times below\n"
    )
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sorted(args.sizes):
            results.append(
                run_size(
                    n,
                    Path(tmp),
                    args.asks,
                    args.queries,
                    args.minilm,
                    args.profile and n == max(args.sizes),
                    args.tail_rounds,
                    args.resume_only,
                )
            )
    print(tables(results))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
