"""Runner for OpenEvolve-style evaluators, copied into the workspace and run in the sandbox.

Usage: ``python _verifyless_oe_runner.py EVALUATOR PROGRAM OUT_JSON [STAGE ...]``

Loads ``EVALUATOR`` (an ``evaluator.py``), then either runs the cascade
``evaluate_stage1`` .. ``evaluate_stage3`` (the given STAGE names, or those the
module defines) or ``evaluate(program_path)``. A stage whose
``combined_score`` is <= 0, or that raises, stops the cascade; the metrics
gathered so far are kept (an error in the first stage fails the run).
Results may be dicts or objects with a ``.metrics`` dict. Numeric values are
kept; other values are dropped, except ``combined_score`` which is passed
through as-is so that the trusted side can say what was wrong with it.
Writes ``{"metrics": {...}, "stages_run": n, "note": "..."}`` to OUT_JSON.
Standard library only: it runs with whatever the candidate's interpreter has.
"""

from __future__ import annotations

import importlib.util
import json
import numbers
import os
import sys

STAGES = ("evaluate_stage1", "evaluate_stage2", "evaluate_stage3")
MAIN = "combined_score"


def _metrics(result: object) -> dict:
    data = getattr(result, "metrics", result)
    if not isinstance(data, dict):
        raise TypeError(f"the evaluator returned {type(result).__name__}, expected a dict of metrics")
    kept: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            kept[str(key)] = float(value)
        elif key == MAIN:
            kept[MAIN] = value if isinstance(value, (str, bool, type(None))) else repr(value)
    return kept


def main(argv: list[str]) -> int:
    evaluator_path, program_path, out_path, *stages = argv[1:]
    sys.path.insert(0, os.path.dirname(os.path.abspath(evaluator_path)))
    spec = importlib.util.spec_from_file_location("evaluator", evaluator_path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load the evaluator {evaluator_path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["evaluator"] = module
    spec.loader.exec_module(module)

    names = stages or [s for s in STAGES if callable(getattr(module, s, None))]
    metrics: dict = {}
    note, ran = "", 0
    if not names:
        metrics = _metrics(module.evaluate(program_path))
        ran = 1
    for i, name in enumerate(names):
        try:
            stage_metrics = _metrics(getattr(module, name)(program_path))
        except Exception as exc:
            if i == 0:
                raise
            note = f"cascade stopped at {name}: {type(exc).__name__}: {exc}"
            break
        metrics.update(stage_metrics)
        ran += 1
        score = stage_metrics.get(MAIN)
        if isinstance(score, float) and score <= 0 and i + 1 < len(names):
            note = f"cascade stopped after {name}: {MAIN} = {score:g}"
            break
    with open(out_path, "w") as fh:
        json.dump({"metrics": metrics, "stages_run": ran, "note": note}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
