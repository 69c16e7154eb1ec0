"""Opt-in benchmark: how well does each critic's uncertainty u flag its own errors, and what does it cost?

    OMP_NUM_THREADS=1 python bench/critic_uncertainty.py --dataset DIR [--dataset DIR ...] \
        [--base MODEL] [--adapter DIR] [--k 4] [--rows 0] [--per-dataset 0] [--max-tokens 96] \
        [--splits sft,grpo,bench] [--only "k-vote k=4,probs r=0"]

For every row of the given critic datasets (the splits named, all by default) and one local critic model,
three screeners judge the row's child on its own (the critic benchmark's context, ``verifyless.critic_data.prompt``):

* ``k-vote``: the pointwise critic, k sampled critiques, u = 1 - max_y v_y, where v_y is the share of all k
  critiques voting y (an unparsed critique counts in the denominator as a vote for nothing);
* ``probs r=0``: the label-probability critic, one verdict probe right after the prompt;
* ``probs r=1``: one sampled critique, then a probe after its reasoning.

A critic *error* is a predicted three-way verdict (majority vote / most probable verdict) that differs from
the row's execution label, an unparsed critique included. The table gives accuracy (Dir-3), AUROC of u
for errors (0.5 = u says nothing; None when every row is right or every row wrong), mean u, critic tokens per
row (prompt + completion tokens the model read and wrote, as the call ledger counts them) and wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
from pathlib import Path
from typing import Any

from verifyless.screen.critic import CriticOptions
from verifyless.screen.probcritic import LabelProbOptions


def load_rows(datasets: list[Path], splits: list[str], limit: int, per_dataset: int = 0) -> list[dict[str, Any]]:
    from verifyless.critic_data import load_critic_dataset

    rows = []
    for folder in datasets:
        loaded = load_critic_dataset(folder)
        mine = [dict(r) for name in splits if name in loaded for r in loaded[name]]
        rows += mine[:per_dataset] if per_dataset else mine
    return rows[:limit] if limit else rows


def predicted(evidence: Any) -> str | None:
    votes = {k: v for k, v in (evidence.votes or {}).items() if v > 0}
    return max(sorted(votes), key=lambda k: votes[k]) if votes else None


async def judge(screener: Any, row: dict[str, Any], seed: int) -> tuple[str | None, float, int]:
    from verifyless.critic_data.prompt import row_candidate, screen_context

    ctx = screen_context(row, random.Random(f"{seed}:{row['example_id']}"))
    cand = row_candidate(row)
    ev = (await screener.screen(ctx, [cand])).evidence[cand.id]
    return predicted(ev), float(ev.uncertainty), int(ev.detail.get("tokens", 0))


def measure(name: str, screener: Any, rows: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    from verifyless.metrics.critic import auroc

    started = time.monotonic()
    found = [asyncio.run(judge(screener, row, seed)) for row in rows]
    wrong = [pred != row["label3"] for (pred, _, _), row in zip(found, rows, strict=True)]
    us = [u for _, u, _ in found]
    return {
        "critic": name,
        "rows": len(rows),
        "Dir-3": 1 - sum(wrong) / len(rows),
        "AUROC(u, error)": auroc(us, wrong),
        "mean u": sum(us) / len(us),
        "tokens/row": sum(t for _, _, t in found) / len(rows),
        "wall s": time.monotonic() - started,
    }


def critics(model: Any, k: int, max_tokens: int) -> list[tuple[str, Any]]:
    from verifyless.screen.critic import PointwiseCritic
    from verifyless.screen.probcritic import LabelProbCritic

    return [
        (f"k-vote k={k}", PointwiseCritic(model, CriticOptions(k=k, temperature=0.7, max_tokens=max_tokens))),
        ("probs r=0", LabelProbCritic(model, LabelProbOptions(reasoning_samples=0))),
        (
            "probs r=1",
            LabelProbCritic(model, LabelProbOptions(reasoning_samples=1, temperature=0.7, max_tokens=max_tokens)),
        ),
    ]


def main() -> None:
    import torch

    from verifyless.model import build_model, make_config

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, action="append", required=True)
    parser.add_argument("--base", default="smollm2-135m-instruct")
    parser.add_argument("--adapter", default=None)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--rows", type=int, default=0, help="first N rows only (0: all)")
    parser.add_argument("--per-dataset", type=int, default=0, help="first N rows of each dataset only (0: all)")
    parser.add_argument("--splits", default="sft,grpo,bench")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated critic names to run (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rows = load_rows(args.dataset, args.splits.split(","), args.rows, args.per_dataset)
    model = build_model(
        make_config(provider="local", model=args.base, adapter=args.adapter, seed=args.seed, device="cpu")
    )
    labels = {lab: sum(r["label3"] == lab for r in rows) for lab in ("improve", "tie", "lose")}
    print(f"{len(rows)} rows from {', '.join(str(d) for d in args.dataset)}; labels {labels}; base {args.base}")
    print("| critic | rows | Dir-3 | AUROC(u, error) | mean u | critic tokens/row | wall s |")
    print("|---|---|---|---|---|---|---|")
    wanted = set(filter(None, args.only.split(",")))
    for name, screener in critics(model, args.k, args.max_tokens):
        if wanted and name not in wanted:
            continue
        r = measure(name, screener, rows, args.seed)
        area = "None" if r["AUROC(u, error)"] is None else f"{r['AUROC(u, error)']:.3f}"
        print(
            f"| {name} | {r['rows']} | {r['Dir-3']:.3f} | {area} | {r['mean u']:.3f} | "
            f"{r['tokens/row']:.0f} | {r['wall s']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
