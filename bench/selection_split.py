"""Does choosing the final node on a selection split make the returned node transfer? (issue 46 item 3)

Usage, from the repository root::

    .venv/bin/python bench/selection_split.py [--seeds 5] [--budget 12] [--json OUT.json]

For each dataset, ``verifyless task new`` makes two folders from the same CSV: one with the default selection
split (20 % of the public rows held out apart from validation) and one with ``--selection 0`` (the split of
before). Each is searched ``--seeds`` times with ``verifyless run --budget B --seed S`` (the product's command
line, offline idea-space roles, the default screener). Per arm the table gives the means over seeds of the
baseline's hidden test score, the hidden test score of the strategy's pick (the best validation node), and of
the node the run returned, and how often the returned node was worse than its own baseline on the hidden test.

Datasets: the README's grunfeld (``--time year``: the hidden test is the latest years) and scikit-learn's
diabetes (a seeded random split). Lower is better for both (RMSE). Nothing here is tuned to favour the
selection split; the rows that do not favour it are printed the same way.
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
from verifyless.report.views.final import final_view  # noqa: E402
from verifyless.store import RunStore  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _datasets(work: Path) -> dict[str, tuple[Path, list[str]]]:
    from sklearn.datasets import load_diabetes

    diabetes = work / "diabetes.csv"
    load_diabetes(as_frame=True, scaled=False).frame.to_csv(diabetes, index=False)
    return {
        "grunfeld (--time year)": (
            ROOT / "examples" / "data" / "grunfeld.csv",
            ["--target", "invest", "--time", "year"],
        ),
        "diabetes (random split)": (diabetes, ["--target", "target"]),
    }


def _one_run(store: Path) -> dict[str, float | bool | None]:
    with RunStore(store) as st:
        run_id = st.runs()[0].run_id
        final = final_view(st, run_id)
        rows = {r["node_id"]: r for r in st.node_rows(run_id)}
    pick = (final.held_out.strategy_best if final.held_out else None) or final.node_id
    return {
        "baseline": final.baseline_test_score,
        "pick": rows[pick]["test_score"] if pick in rows else None,
        "returned": final.test_score,
        "worse": (final.test_score or 0.0) > (final.baseline_test_score or 0.0),
        "overruled": pick != final.node_id,
    }


def _mean(values: list) -> float:
    return statistics.fmean(v for v in values if v is not None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--budget", type=int, default=12)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-selection-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "VERIFYLESS_CACHE_DIR": str(work / "cache"), "OMP_NUM_THREADS": "1"}
        for name, (csv, flags) in _datasets(work).items():
            for share in ("0", "0.2"):
                folder = work / f"{csv.stem}-{share}"
                cli("task", "new", str(folder), "--data", str(csv), *flags, "--selection", share, env=env)
                runs = []
                for seed in range(args.seeds):
                    store = work / f"{folder.name}-seed{seed}.db"  # not with_suffix: "x-0.2" has one
                    cli("run", str(folder), "--budget", str(args.budget), "--seed", str(seed), "--store", str(store),
                         "--quiet", env=env)  # fmt: skip
                    runs.append(_one_run(store))
                rows.append(
                    {
                        "dataset": name,
                        "selection": float(share),
                        "baseline_test": _mean([r["baseline"] for r in runs]),
                        "pick_test": _mean([r["pick"] for r in runs]),
                        "returned_test": _mean([r["returned"] for r in runs]),
                        "returned_worse": sum(bool(r["worse"]) for r in runs),
                        "overruled": sum(bool(r["overruled"]) for r in runs),
                        "runs": runs,
                    }
                )
                print(f"done: {name}, selection {share}", file=sys.stderr, flush=True)
    print(f"hidden test RMSE, means over {args.seeds} seeds, budget {args.budget} (lower is better)\n")
    print(
        "| dataset | selection split | baseline | strategy's pick | returned | returned worse than baseline | pick overruled |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['dataset']} | {r['selection']:g} | {r['baseline_test']:.1f} | {r['pick_test']:.1f} | "
            f"{r['returned_test']:.1f} | {r['returned_worse']} of {args.seeds} | {r['overruled']} of {args.seeds} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
