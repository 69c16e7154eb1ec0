"""Cost and behaviour of ``verifyless tune screener`` on a critic dataset, with scripted screener models.

Usage (from the repository root)::

    .venv/bin/python bench/prompt_tuning.py --dataset DIR [--budget 24] [--seeds 0,1] [--work /tmp/tune-bench]

For each (screener, scripted model, seed) the command runs in its own
subprocess (``python -m verifyless tune screener``), timed from the outside;
its JSON report gives the scores and the calls and tokens spent. Models, all
offline ``scripted:`` rule files written into ``--work``:

* ``teacher`` (critic): ``examples/scripted/teacher.yaml``, whose verdicts do
  not depend on the instructions. The honest expectation is no gain: the
  search spends its budget and keeps the baseline.
* ``wording`` (critic): answers each row's true label only when the prompt
  holds one of our alternative wordings (variant ``skeptical-prior``), and
  ``improve`` otherwise. A constructed prompt-sensitive critic: it shows that
  the search finds a one-edit effect and what that costs, nothing about real
  LLMs.
* ``always-A`` (tournament): answers ``[CHOICE] A`` (position-biased,
  instruction-insensitive): pairwise accuracy 0.5 whatever the prompt.
* ``order`` (tournament): picks the better child when both candidates come
  before the evaluated-solutions section, else ``A``: finding it needs a
  section move.

Prints one markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
KEY_WORDING = "Start from the prior that the child ties"
VERDICT = {
    "improve": "Reasons.\n[IMPROVEMENT] improve --- helps\n[WINTIER] medium --- some",
    "tie": "Reasons.\n[IMPROVEMENT] tie --- same\n[WINTIER] NA --- none",
    "lose": "Reasons.\n[IMPROVEMENT] lose --- hurts\n[WINTIER] NA --- none",
}
RANK = {"lose": 0, "tie": 1, "improve": 2}


def _rows(dataset: Path) -> list[dict]:
    sys.path.insert(0, str(ROOT / "src"))
    from verifyless.critic_data.dataset import load_critic_dataset

    dd = load_critic_dataset(dataset)
    return [dict(r) for name in dd for r in dd[name]]


def _child(row: dict) -> str:
    return str(row.get("child_summary") or row.get("idea") or "").strip()


def _wording_rules(rows: list[dict]) -> dict:
    rules = [
        {
            "match": rf"\A(?=[\s\S]*\#\# Child \(proposed, not yet run\)\n{re.escape(_child(r))})(?=[\s\S]*{KEY_WORDING})",
            "reply": VERDICT[r["label3"]],
        }
        for r in rows
    ]
    return {"mode": "rules", "rules": [*rules, {"reply": VERDICT["improve"]}]}


def _order_rules(rows: list[dict]) -> dict:
    rules = []
    for a in rows:
        for b in rows:
            if a is b or a["parent_id"] != b["parent_id"] or a["label3"] == b["label3"]:
                continue
            pick = "A" if RANK[a["label3"]] > RANK[b["label3"]] else "B"
            pattern = (
                rf"## Candidate A\n{re.escape(_child(a))}\s*## Candidate B\n{re.escape(_child(b))}"
                r"[\s\S]*## Solutions already evaluated"
            )
            rules.append({"match": pattern, "reply": f"Reasons.\n[CHOICE] {pick} --- evidence"})
    return {"mode": "rules", "rules": [*rules, {"reply": "[CHOICE] A --- first"}]}


def _run(dataset: Path, screener: str, model: Path, seed: int, budget: int, out: Path, extra: list[str]) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "verifyless",
        "tune",
        "screener",
        "--dataset",
        str(dataset),
        "--screener",
        screener,
        "--model",
        f"scripted:{model}",
        "--budget",
        str(budget),
        "--seed",
        str(seed),
        "--out",
        str(out),
        *extra,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    wall = time.monotonic() - started
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:], "wall": wall}
    report = json.loads(out.with_name(out.name + ".json").read_text())
    return {**report, "wall": wall}


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", type=Path, required=True)
    ap.add_argument("--budget", type=int, default=24)
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--work", type=Path, default=Path("/tmp/tune-bench"))
    ap.add_argument("--dev-fraction", default="0.5")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    rows = _rows(args.dataset)
    files = {"teacher": ROOT / "examples" / "scripted" / "teacher.yaml"}
    for name, script in (("wording", _wording_rules(rows)), ("order", _order_rules(rows))):
        files[name] = args.work / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump(script, sort_keys=False))
    files["always-A"] = args.work / "always-a.yaml"
    files["always-A"].write_text(yaml.safe_dump({"mode": "rules", "rules": [{"reply": "[CHOICE] A --- first"}]}))
    configs = [
        ("critic", "teacher", ["--option", "k=4"]),
        ("critic", "wording", ["--option", "k=4"]),
        ("tournament", "always-A", []),
        ("tournament", "order", []),
    ]
    print(f"dataset {args.dataset}: {len(rows)} rows; budget {args.budget}; dev fraction {args.dev_fraction}\n")
    print(
        "| screener | model | seed | dev items | bench items | dev base | dev tuned | bench base | bench tuned | "
        "prompts | stopped | search calls | search tokens | bench calls | wall s |"
    )
    print("|" + "---|" * 15)
    for seed in (int(s) for s in args.seeds.split(",")):
        for screener, model, extra in configs:
            out = args.work / f"{screener}-{model}-{seed}.md"
            r = _run(
                args.dataset,
                screener,
                files[model],
                seed,
                args.budget,
                out,
                [*extra, "--dev-fraction", args.dev_fraction],
            )
            if "error" in r:
                print(f"| {screener} | {model} | {seed} | error: {r['error']} |" + " |" * 11 + f" {r['wall']:.1f} |")
                continue
            print(
                f"| {screener} | {model} | {seed} | {r['dev_items']} | {r['bench_items']} | {_pct(r['baseline_dev'])} "
                f"| {_pct(r['tuned_dev'])} | {_pct(r['baseline_bench'])} | {_pct(r['tuned_bench'])} | "
                f"{len(r['trials'])} | {r['stopped']} | {r['search_calls']} | {r['search_tokens']} | "
                f"{r['bench_calls']} | {r['wall']:.1f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
