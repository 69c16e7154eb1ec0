"""OpenEvolve 0.4.0 itself against the same served model and the same scorer (issue 53's last arm).

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/openevolve_peer.py [--model qwen2.5-coder-1.5b] [--task diabetes] [--iterations 11]
                                              [--seed 0] [--keep DIR]

OpenEvolve is installed from the package index, once, into a virtualenv of its own
(``$VERIFYLESS_HOME/peers/openevolve-0.4.0``), never into verifyless's. It evolves the built-in task's program (its
EVOLVE-BLOCK markers are OpenEvolve's) with the model ``verifyless serve`` serves, one iteration at a time
(``parallel_evaluations: 1``: the server has one slot). Its evaluator is a four-line file that runs
``verifyless verify TASK PROGRAM --json``: the same sandbox, data split and scorer as a verifyless run, so the
scores are comparable, and appends each result to a JSON-lines file in evaluation order. The initial program
is evaluation 1, as the baseline is a verifyless run's verification 1.

Prints one table: OpenEvolve's best validation score after 1/3, 2/3 and all of its evaluations, the evaluations
that parsed into a program that ran (status ok), and the wall seconds. LLM calls are one per iteration (OpenEvolve
counts no tokens); its default prompts, database and diff-based evolution are kept: this is OpenEvolve as a
user would run it, pointed at a small local model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

from verifyless.model import served
from verifyless.task import load_task

VERSION = "0.4.0"


def peer_python() -> Path:
    """OpenEvolve's own virtualenv (made and installed once); its Python."""
    venv = served.home() / "peers" / f"openevolve-{VERSION}"
    ready = venv / ".ready"
    if not ready.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin/python"), "-m", "pip", "install", "-q", f"openevolve=={VERSION}"], check=True)
        ready.touch()
    return venv / "bin/python"


EVALUATOR = """\
import json, os, subprocess

def evaluate(program_path):
    done = subprocess.run([os.environ["PEER_VERIFYLESS"], "verify", os.environ["PEER_TASK"], program_path, "--json"],
                          capture_output=True, text=True, timeout=600)
    result = json.loads(done.stdout)
    with open(os.environ["PEER_LOG"], "a") as log:
        log.write(json.dumps(result) + "\\n")
    score = (result.get("metrics") or {}).get(os.environ["PEER_METRIC"])
    if result.get("status") != "ok" or score is None:
        return {"combined_score": -1e9, "error": 1.0}
    return {"combined_score": float(os.environ["PEER_SIGN"]) * score, os.environ["PEER_METRIC"]: score}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", choices=sorted(served.CATALOG))
    parser.add_argument("--task", default="diabetes")
    parser.add_argument("--iterations", type=int, default=11, help="LLM iterations (evaluations = iterations + 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="keep OpenEvolve's folder and output here")
    args = parser.parse_args()
    task = load_task(args.task)
    python = peer_python()
    with tempfile.TemporaryDirectory() as tmp, served.serving(args.model, say=print) as server:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        log = folder / "evaluations.jsonl"
        log.unlink(missing_ok=True)
        (folder / "evaluator.py").write_text(EVALUATOR)
        program = folder / "initial_program.py"
        program.write_text(task.baseline_program)
        env = server.env()
        config = {
            "max_iterations": args.iterations,
            "random_seed": args.seed,
            "checkpoint_interval": 1000,
            "llm": {
                "api_base": env["VERIFYLESS_BASE_URL"],
                "api_key": "unused",
                "models": [{"name": env["VERIFYLESS_MODEL"], "weight": 1.0}],
                "temperature": 0.7,
                "max_tokens": int(env["VERIFYLESS_MAX_TOKENS"]),
                "timeout": int(float(env["VERIFYLESS_TIMEOUT_S"])),
                "retries": 1,
            },
            "database": {"population_size": 50, "num_islands": 2, "random_seed": args.seed},
            "evaluator": {"timeout": 600, "cascade_evaluation": False, "parallel_evaluations": 1},
        }
        (folder / "config.yaml").write_text(yaml.safe_dump(config))
        sign = -1.0 if task.metric.direction == "minimize" else 1.0
        started = time.monotonic()
        done = subprocess.run(
            [str(python), "-m", "openevolve.cli", str(program), str(folder / "evaluator.py")]
            + ["--config", str(folder / "config.yaml"), "--output", str(folder / "out")],
            cwd=folder,
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("VERIFYLESS_")},
                "PEER_VERIFYLESS": str(Path(sys.executable).with_name("verifyless")),
                "PEER_TASK": args.task,
                "PEER_LOG": str(log),
                "PEER_METRIC": task.metric.name,
                "PEER_SIGN": str(sign),
                "OMP_NUM_THREADS": "1",
            },
            capture_output=True,
            text=True,
        )
        wall = time.monotonic() - started
        (folder / "openevolve.log").write_text(done.stdout + done.stderr)
        results = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    scores = [(r.get("metrics") or {}).get(task.metric.name) if r.get("status") == "ok" else None for r in results]
    best, marks = [], sorted({max(1, round(len(scores) * f)) for f in (1 / 3, 2 / 3, 1)}) if scores else []
    for m in marks:
        seen = [s for s in scores[:m] if s is not None]
        best.append(f"{(min if sign < 0 else max)(seen):.4g}" if seen else "-")
    print(f"\nOpenEvolve {VERSION} on {args.model}, task {args.task}, seed {args.seed} (exit {done.returncode}):\n")
    print("| evaluations | " + " | ".join(f"best@{m}" for m in marks) + " | status ok | wall s |")
    print("|---|" + "---|" * len(marks) + "---|---|")
    ok = sum(s is not None for s in scores)
    print(f"| {len(scores)} | " + " | ".join(best) + f" | {ok} | {wall:.0f} |")
    if done.returncode != 0:
        print(textwrap.indent((done.stdout + done.stderr)[-2000:], "    "))


if __name__ == "__main__":
    main()
