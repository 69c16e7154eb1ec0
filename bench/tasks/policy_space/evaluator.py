"""Evaluator of the tiny data-collection test task: combined_score = run() of the program."""

import importlib.util


def evaluate(program_path: str) -> dict:
    spec = importlib.util.spec_from_file_location("candidate_program", program_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {"combined_score": float(module.run())}
