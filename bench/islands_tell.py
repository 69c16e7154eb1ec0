"""Islands strategy: time to tell N nodes (resume) and to ask, incremental archives vs the old rebuilds.

The baseline is the islands module as it was before incremental MAP-Elites
(loaded from git history, ``--old-rev``; it rebuilt an island's archive from
its members at every eviction and every ask). Both are told the same
synthetic stream: N nodes after a baseline, 45% usable with a random-walk
fitness, 10% failed, the rest screened out, program lengths 1000-3000
characters, islands taken in turn. Prints a markdown table.

Usage::

    python bench/islands_tell.py                 # 100k nodes
    python bench/islands_tell.py --nodes 20000
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from verifyless.node import Node, Operator, Status
from verifyless.search.islands import IslandsStrategy

ROOT = Path(__file__).resolve().parents[1]


def stream(n: int, seed: int = 0) -> list[Node]:
    rng = random.Random(seed)
    nodes = [Node("root", None, Operator.BASELINE, Status.OK, fitness=0.0, score=0.0, code_length=1500)]
    best = 0.0
    for i in range(n):
        ok = rng.random() < 0.45
        fitness = best + rng.gauss(-0.05, 0.05) if ok else None
        if fitness is not None and fitness > best:
            best = fitness
        status = Status.OK if ok else (Status.FAILED if rng.random() < 0.1 else Status.SCREENED_OUT)
        nodes.append(
            Node(
                f"n{i}",
                "root",
                Operator.IMPROVE,
                status,
                fitness=fitness,
                score=fitness,
                island=i % 3,
                code_length=1000 + rng.randrange(2000),
                idea="x" * rng.randrange(300),
            )
        )
    return nodes


def old_strategy(rev: str):
    source = subprocess.run(
        ["git", "show", f"{rev}:src/verifyless/search/islands.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_islands.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_islands", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_islands"] = module
    spec.loader.exec_module(module)
    return module.IslandsStrategy


def measure(cls, nodes: list[Node], asks: int = 200) -> tuple[float, float]:
    strategy = cls(random.Random(0))
    start = time.perf_counter()
    for node in nodes:
        strategy.tell(node)
    tell_s = time.perf_counter() - start
    times = []
    for _ in range(asks):
        t = time.perf_counter()
        strategy.ask(None, 1)
        times.append(time.perf_counter() - t)
    times.sort()
    return tell_s, times[len(times) // 2] * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--old-rev", default="6365d66", help="git revision holding the rebuilding islands module")
    args = ap.parse_args()
    nodes = stream(args.nodes)
    rows = [
        ("old: archive rebuilt per eviction and ask", old_strategy(args.old_rev)),
        ("new: incremental archives", IslandsStrategy),
    ]
    print("| islands | nodes | tell all s | ask p50 ms |")
    print("| --- | --- | --- | --- |")
    for name, cls in rows:
        tell_s, ask_ms = measure(cls, nodes)
        print(f"| {name} | {args.nodes} | {tell_s:.2f} | {ask_ms:.3f} |")


if __name__ == "__main__":
    main()
