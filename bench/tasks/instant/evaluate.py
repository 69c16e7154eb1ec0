"""ShinkaEvolve entry point for the instant task: ``python evaluate.py --program_path P --results_dir D``.

ShinkaEvolve runs its evaluation as this command and reads ``D/metrics.json``
and ``D/correct.json``; the scoring itself is the shared ``evaluator.evaluate``
so all frameworks measure the same thing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from evaluator import evaluate  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--program_path", required=True)
    parser.add_argument("--results_dir", required=True)
    args = parser.parse_args(argv)
    metrics = evaluate(args.program_path)
    error = metrics.pop("error", None)
    os.makedirs(args.results_dir, exist_ok=True)
    payload = {
        "combined_score": metrics["combined_score"],
        "public": {"value": metrics["combined_score"]},
        "private": {"eval_seconds": metrics["eval_seconds"]},
    }
    with open(os.path.join(args.results_dir, "metrics.json"), "w") as fh:
        json.dump(payload, fh)
    with open(os.path.join(args.results_dir, "correct.json"), "w") as fh:
        json.dump({"correct": error is None, "error": error}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
