"""OpenEvolve-style evaluator for the instant benchmark task.

evaluate(program_path) imports the candidate, reads score_value() and returns
{"combined_score": ..., "eval_seconds": ...}. ``eval_seconds`` is the time
spent inside this function, measured here, so a benchmark can subtract the
evaluator's own time from a framework's wall time.

The evaluator sleeps for the number of seconds written in ``eval_seconds.txt``
next to this file, when that file exists (bench/overhead.py writes it for its
``--eval-seconds`` mode); without it the evaluation is instant. A file rather
than an environment variable, because sandboxes scrub the environment but copy
the task folder.
"""

from __future__ import annotations

import importlib.util
import os
import time

DELAY_FILE = "eval_seconds.txt"


def _delay() -> float:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), DELAY_FILE)
    try:
        with open(path) as fh:
            return max(0.0, float(fh.read().strip() or 0))
    except FileNotFoundError:
        return 0.0


def evaluate(program_path: str) -> dict:
    started = time.perf_counter()
    delay = _delay()
    if delay:
        time.sleep(delay)
    try:
        spec = importlib.util.spec_from_file_location("instant_candidate", program_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        score = float(module.score_value())
    except Exception as exc:  # a broken candidate is a result, not an evaluator crash
        return {
            "combined_score": 0.0,
            "eval_seconds": time.perf_counter() - started,
            "error": f"{type(exc).__name__}: {exc}",
        }
    return {"combined_score": score, "eval_seconds": time.perf_counter() - started}
