"""Collect pool worlds: verify a large uniform sample of a task's idea space once, for offline replays.

Usage::

    python bench/pools.py TASK [--n 400] [--seed 0] [--out FILE.jsonl | --force] [--minutes M]

Each configuration is rendered by the task's template and verified with the
real verifier in the local sandbox (one thread), then appended to the world
file at once (an interrupted collection resumes where it stopped). Format and
contract: ``verifyless.offline.worlds``. The shipped worlds (package data,
``verifyless.builtin.worlds_dir()``) were made with the seeds and sizes in
docs/benchmarks.md; writing to one of them (the default without ``--out``)
needs ``--force``, so a quick try never changes a shipped world (exit 2).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from verifyless.builtin import worlds_dir
from verifyless.offline.worlds import collect_world


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("task")
    ap.add_argument("--n", type=int, default=400, help="configurations to verify (baseline included)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed")
    ap.add_argument("--out", type=Path, default=None, help="world file (default: the shipped world of TASK)")
    ap.add_argument("--force", action="store_true", help="write to the shipped world file when it exists")
    ap.add_argument("--minutes", type=float, default=None, help="stop after this many minutes, keeping the points")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    logging.basicConfig(level=logging.INFO)
    out = args.out or worlds_dir() / f"{Path(args.task).name}.jsonl"
    if args.out is None and out.exists() and not args.force:
        ap.error(f"{out} is a shipped world: pass --out FILE.jsonl for a new one, or --force to write to it")
    deadline = time.monotonic() + 60 * args.minutes if args.minutes else None
    started = time.monotonic()
    world = collect_world(
        args.task,
        out,
        n=args.n,
        seed=args.seed,
        deadline=deadline,
        progress=lambda msg: print(msg, file=sys.stderr, flush=True),
    )
    ok = sum(p.status == "ok" for p in world.points)
    print(f"{world.task}: {len(world)} points ({ok} ok) in {out}; {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
