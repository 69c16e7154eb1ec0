"""Does refitting the returned program on every public row help its hidden test score? (issue 54, item 2)

Usage, from the repository root::

    .venv/bin/python bench/refit.py [--seeds 3] [--budget 6] [--json OUT.json]

``verifyless run TASK --out DIR --refit`` refits the returned program on every public training row (the rows a run
holds out for validation and for choosing the final node included) before it predicts the competition's
submission. For each dataset ``verifyless task new`` makes a folder (defaults: 20 % of the public rows held out
for validation and 20 % for the selection split); each seed runs ``verifyless run --budget B --seed S``, then the
returned node's program, and the distinct ``--top`` best verified programs by validation of every run, run twice
each, exactly as ``run --out`` runs them (``verify.produce``, ``task.tabular.deliver``): as verified (trained on
the rows the run showed it) and refitted. The table gives the hidden test score of each submission (means) and for
how many programs the refit was better. Nothing here is tuned; the rows that do not favour refitting are printed
the same way.

Datasets: the README's grunfeld (``--time year``: the hidden test is the latest years, and the held-out rows are
the latest of the rest), scikit-learn's diabetes (RMSE, lower is better) and breast cancer (AUC, higher is better),
both with seeded random splits.
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
from verifyless.sandbox.local import LocalSandbox  # noqa: E402
from verifyless.store import RunStore  # noqa: E402
from verifyless.task import load_task  # noqa: E402
from verifyless.task.tabular.deliver import competition_submission, full_data_task  # noqa: E402
from verifyless.verify import produce  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _datasets(work: Path) -> dict[str, tuple[Path, list[str]]]:
    from sklearn.datasets import load_breast_cancer, load_diabetes

    diabetes, cancer = work / "diabetes.csv", work / "breast_cancer.csv"
    load_diabetes(as_frame=True, scaled=False).frame.to_csv(diabetes, index=False)
    load_breast_cancer(as_frame=True).frame.to_csv(cancer, index=False)
    return {
        "grunfeld (--time year, RMSE)": (ROOT / "examples" / "data" / "grunfeld.csv", ["--target", "invest", "--time", "year"]),
        "diabetes (random split, RMSE)": (diabetes, ["--target", "target"]),
        "breast cancer (random split, AUC)": (cancer, ["--target", "target"]),
    }  # fmt: skip


def _test_score(task, program: str, refit: bool, work: Path) -> float | None:
    """The hidden test score of the submission ``run --out`` writes for ``program`` (``--refit`` or not)."""
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        produced, dest = Path(tmp) / "produced", Path(tmp) / "submission"
        ran = produce(full_data_task(task) if refit else task, program, LocalSandbox(), produced)
        if ran.status.value != "ok":
            return None
        return competition_submission(task, produced, dest).test_score


def _programs(store: Path, top: int) -> tuple[str, list[str]]:
    """The returned node's program and the ``top`` best verified programs by validation of the run in ``store``."""
    with RunStore(store) as st:
        run_id = st.runs()[0].run_id
        returned = final_view(st, run_id).node_id or "root"
        ok = sorted((r for r in st.node_rows(run_id) if r.get("fitness") is not None), key=lambda r: -r["fitness"])
        return st.candidate(run_id, returned).program, [st.candidate(run_id, r["node_id"]).program for r in ok[:top]]


def _mean(values: list) -> float:
    return statistics.fmean(v for v in values if v is not None)


def _measure(task, programs: list[str], work: Path) -> list[dict[str, float | None]]:
    return [
        {"verified": _test_score(task, p, False, work), "refit": _test_score(task, p, True, work)} for p in programs
    ]


def _better(scores: list[dict], maximize: bool) -> str:
    pairs = [(s["verified"], s["refit"]) for s in scores if s["verified"] is not None and s["refit"] is not None]
    sign = 1 if maximize else -1
    return f"{sum(sign * (r - v) > 0 for v, r in pairs)} of {len(pairs)}"


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=int, default=6)
    parser.add_argument(
        "--top", type=int, default=4, help="best verified programs per run measured besides the returned"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-refit-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "VERIFYLESS_CACHE_DIR": str(work / "cache"), "OMP_NUM_THREADS": "1"}
        os.environ["VERIFYLESS_CACHE_DIR"] = env["VERIFYLESS_CACHE_DIR"]  # load_task here finds the same split
        for name, (csv, flags) in _datasets(work).items():
            folder = work / csv.stem
            cli("task", "new", str(folder), "--data", str(csv), *flags, env=env)
            task = load_task(folder)
            returned, verified = [], {}
            for seed in range(args.seeds):
                store = work / f"{folder.name}-seed{seed}.db"
                cli("run", str(folder), "--budget", str(args.budget), "--seed", str(seed), "--store", str(store),
                     "--quiet", env=env)  # fmt: skip
                final, top = _programs(store, args.top)
                returned.append(final)
                verified.update({p: None for p in top})  # distinct programs, in order
            rows.append(
                {
                    "dataset": name,
                    "maximize": task.metric.direction == "maximize",
                    "returned": _measure(task, returned, work),
                    "programs": _measure(task, list(verified), work),
                }
            )
            print(f"done: {name}", file=sys.stderr, flush=True)
    print(
        f"hidden test score of the submission `run --out` writes, as verified and refitted; {args.seeds} seeds, budget "
        f"{args.budget}; programs: the distinct top {args.top} by validation of every run\n"
    )
    print("| dataset | returned node: as verified | refitted | refit better | programs | as verified (mean) | refitted (mean) | refit better |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        up, ret, progs = r["maximize"], r["returned"], r["programs"]
        cells = [
            f"{_mean([x['verified'] for x in ret]):.4g}",
            f"{_mean([x['refit'] for x in ret]):.4g}",
            _better(ret, up),
        ]
        cells += [
            str(len(progs)),
            f"{_mean([x['verified'] for x in progs]):.4g}",
            f"{_mean([x['refit'] for x in progs]):.4g}",
        ]
        cells += [_better(progs, up)]
        print(f"| {r['dataset']} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return rows


if __name__ == "__main__":
    main()
