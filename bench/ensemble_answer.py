"""MLEvolve's answer: the top-K ensemble against the best single node, per built-in task (issue 56, item 3).

Usage, from the repository root::

    .venv/bin/python bench/ensemble_answer.py [--seeds 2] [--budget 8] [--tasks diabetes,sunspots] [--json OUT]

Each task is searched ``--seeds`` times with the product's command line, ``verifyless run TASK --preset mlevolve``
with the offline idea-space roles (``roles.kind=space``; the preset's LLM settings do not apply to them) and
hashed memory vectors, ``--budget`` verifications. The preset answers with the top-5 ensemble where the task's
outputs combine. Per task the table gives the means over seeds of the final node's and the ensemble's validation
and hidden test scores, how often the ensemble was better than the node on the hidden test, and what the
ensemble cost (evaluator seconds of its re-runs and scoring) against the search's own evaluator seconds. A task
whose outputs do not combine (circle_packing) shows its ``unsupported`` line. Nothing is tuned to favour the
ensemble; rows where it loses are printed the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _commands import cli  # noqa: E402
from verifyless.events import Submitted  # noqa: E402
from verifyless.report.views.final import final_view  # noqa: E402
from verifyless.store import RunStore  # noqa: E402
from verifyless.task import load_task  # noqa: E402

TASKS = (
    "diabetes",
    "diabetes_rmsle",
    "affairs_gbm",
    "breast_cancer",
    "sunspots",
    "moons_torch",
    "digits_torch",
    "circle_packing",
)


def _one_run(store: Path) -> dict[str, object]:
    with RunStore(store) as st:
        run_id = st.runs()[0].run_id
        final = final_view(st, run_id)
        subs = [(e.record, e.charge) for e in st.events(run_id, Submitted)]
        spent = st.budget(run_id).evaluator_seconds
    sub, charge = subs[-1] if subs else (None, None)
    ensemble_seconds = charge.evaluator_seconds if charge is not None else 0.0
    return {
        "node_val": final.score,
        "node_test": final.test_score,
        "status": sub.status if sub else "none",
        "reason": sub.reason if sub else "",
        "ensemble_val": sub.score if sub else None,
        "ensemble_test": sub.test_score if sub else None,
        "ensemble_seconds": ensemble_seconds,
        "search_seconds": spent - ensemble_seconds,
    }


def _mean(values: list) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-ensemble-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "VERIFYLESS_CACHE_DIR": str(work / "cache"), "OMP_NUM_THREADS": "1"}
        for name in args.tasks.split(","):
            higher = load_task(name).metric.direction == "maximize"
            runs = []
            for seed in range(args.seeds):
                store = work / f"{name}-{seed}.db"
                cli("run", name, "--preset", "mlevolve", "--budget", str(args.budget), "--seed", str(seed),
                    "--store", str(store), "--quiet", "roles.kind=space", "engine.memory_embedder=hashing",
                    env=env)  # fmt: skip
                runs.append(_one_run(store))
            better = [
                (r["ensemble_test"] > r["node_test"]) if higher else (r["ensemble_test"] < r["node_test"])
                for r in runs
                if r["ensemble_test"] is not None and r["node_test"] is not None
            ]
            rows.append({"task": name, "higher": higher, "better": sum(better), "scored": len(better), "runs": runs})
            print(f"done: {name}", file=sys.stderr, flush=True)
    print(f"means over {args.seeds} seeds, budget {args.budget} verifications, --preset mlevolve, idea-space roles\n")
    print(
        "| task | direction | node validation | ensemble validation | node hidden test | ensemble hidden test | "
        "ensemble better on test | ensemble s / search s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        runs = row["runs"]
        if all(r["status"] != "ok" for r in runs):
            print(f"| {row['task']} | | | | {_fmt(_mean([r['node_test'] for r in runs]))} | {runs[0]['status']}: "
                  f"{str(runs[0]['reason'])[:60]} | | |")  # fmt: skip
            continue
        seconds = (
            f"{_mean([r['ensemble_seconds'] for r in runs]):.1f} / {_mean([r['search_seconds'] for r in runs]):.1f}"
        )
        print(
            f"| {row['task']} | {'higher' if row['higher'] else 'lower'} | "
            f"{_fmt(_mean([r['node_val'] for r in runs]))} | {_fmt(_mean([r['ensemble_val'] for r in runs]))} | "
            f"{_fmt(_mean([r['node_test'] for r in runs]))} | {_fmt(_mean([r['ensemble_test'] for r in runs]))} | "
            f"{row['better']} of {row['scored']} | {seconds} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
