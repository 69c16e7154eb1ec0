"""Opt-in benchmark: a local critic base vs SFT vs SFT+GRPO on a critic dataset's bench split.

    OMP_NUM_THREADS=1 python bench/critic_training.py --dataset DIR [--base smollm2-135m-instruct] \
        [--sft-steps 20] [--grpo-steps 4] [--out runs/bench-critic-training]

Without ``--dataset`` it builds the synthetic keyword dataset (``verifyless.train.critic_rows.keyword_dataset``:
the label is set by a keyword in the child summary; SFT critiques carry the true verdict). Each critic
writes one greedy critique per bench row; the table gives Improve accuracy, Dir-3, F1 (improve) and
5-Ladder over the parsed verdicts (an unparsed critique counts as wrong), the parse rate, and the wall
time of each step, plus "probe Dir-3": the three-way accuracy of the most probable verdict read right after
the prompt (the label-probability critic with no reasoning; it needs no parsing, so it scores a critic that
cannot yet write the format). Paper settings apply unless overridden (``--sft-lr``, ``--grpo-lr``); the paper's
SFT learning rate (1e-5) barely moves a fresh LoRA adapter in a benchmark-sized number of steps (see
docs/benchmarks.md), so short runs pass a larger one. ``--show`` prints each critic's first critique.

``--freestyle`` adds the paper's App. H ablation: a second GRPO from the same SFT adapter, trained and
scored with the freestyle critic prompt (``prompts/screen/freestyle.md``: the same inputs and verdict tags, no
criterion-by-criterion rubric) beside the soft-rubric row. "top verdict" is the share of the most common
parsed verdict: near 1.0 with a falling Dir-3 is a collapse onto one answer (what the paper found for
freestyle). ``--tiny`` uses the cached tiny Llama instead of ``--base`` (CPU-small: the whole bench in
minutes; a tiny model learns the format, not the task).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path
from typing import Any


def evaluate(
    base: str,
    adapter: Path | None,
    rows: list[dict[str, Any]],
    max_tokens: int,
    show: bool = False,
    prompt: str = "critic",
) -> dict[str, float]:
    from verifyless.model import Message, ModelRequest, build_model, make_config
    from verifyless.screen.critic import parse_verdict
    from verifyless.screen.verdicts import verdict_score
    from verifyless.train.critic_rows import messages_for

    model = build_model(
        make_config(
            provider="local",
            model=base,
            adapter=str(adapter) if adapter else None,
            max_tokens=max_tokens,
            temperature=0.0,
        )
    )
    hits = {"acc": 0, "dir3": 0, "ladder": 0, "parsed": 0, "tp": 0, "fp": 0, "fn": 0, "probe": 0}
    said_counts: dict[str, int] = {}
    for i, row in enumerate(rows):
        messages = tuple(Message(m["role"], m["content"]) for m in messages_for(row, prompt))  # type: ignore[arg-type]
        text = asyncio.run(model.generate(ModelRequest(messages=messages))).text
        if show and i == 0:
            print(f"  first critique ({'adapter' if adapter else 'base'}): {text[:300]!r}")
        probs = asyncio.run(verdict_score(model, messages)).probs
        hits["probe"] += max(probs, key=lambda k: probs[k]) == row["label3"]
        verdict = parse_verdict(text)
        said = verdict.improvement if verdict else None
        truth = row["label3"]
        if said is not None:
            said_counts[said] = said_counts.get(said, 0) + 1
        hits["parsed"] += verdict is not None
        hits["dir3"] += said == truth
        hits["acc"] += (said == "improve") == (truth == "improve") and said is not None
        hits["ladder"] += verdict is not None and verdict.label == row.get("label5")
        hits["tp"] += said == "improve" and truth == "improve"
        hits["fp"] += said == "improve" and truth != "improve"
        hits["fn"] += said != "improve" and truth == "improve"
    n = len(rows)
    f1 = 2 * hits["tp"] / max(1, 2 * hits["tp"] + hits["fp"] + hits["fn"])
    return {
        "Improve acc": hits["acc"] / n,
        "Dir-3": hits["dir3"] / n,
        "F1": f1,
        "5-Ladder": hits["ladder"] / n,
        "parsed": hits["parsed"] / n,
        "probe Dir-3": hits["probe"] / n,
        "top verdict": max(said_counts.values(), default=0) / max(1, sum(said_counts.values())),
    }


def main() -> None:
    import torch

    from verifyless.train.critic_rows import keyword_dataset, load_dataset
    from verifyless.train.grpo import train_critic_grpo
    from verifyless.train.settings import load_settings
    from verifyless.train.sft import train_critic_sft

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path)
    parser.add_argument("--base", default="smollm2-135m-instruct")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-critic-training"))
    parser.add_argument("--sft-steps", type=int, default=20)
    parser.add_argument("--grpo-steps", type=int, default=4)
    parser.add_argument("--sft-lr", type=float, default=1e-5)
    parser.add_argument("--grpo-lr", type=float, default=1e-6)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--bench-rows", type=int, default=24)
    parser.add_argument("--show", action="store_true", help="print each critic's first critique")
    parser.add_argument("--freestyle", action="store_true", help="add GRPO with the freestyle prompt (App. H)")
    parser.add_argument("--tiny", action="store_true", help="the cached tiny Llama instead of --base")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.tiny:
        from verifyless.train.tiny import cached_tiny_lm

        args.base = str(cached_tiny_lm(args.out / "tiny-lm"))
    dataset = args.dataset or keyword_dataset(args.out / "keyword-data", n={"sft": 48, "grpo": 16, "bench": 24})
    rows = [dict(r) for r in load_dataset(dataset)["bench"]][: args.bench_rows]
    timings: dict[str, float] = {}
    started = time.monotonic()
    sft = train_critic_sft(
        dataset,
        base=args.base,
        out=args.out / "sft",
        settings=load_settings("sft", None, max_steps=args.sft_steps, learning_rate=args.sft_lr, batch_size=4),
    )
    timings["SFT"] = time.monotonic() - started
    started = time.monotonic()

    def grpo_from_sft(folder: str, prompt: str = "critic") -> Any:
        """GRPO from the SFT adapter, CPU-sized: one prompt (8 completions) per step; the paper uses 256."""
        settings = load_settings(
            "grpo",
            None,
            max_steps=args.grpo_steps,
            learning_rate=args.grpo_lr,
            max_completion_length=args.max_tokens,
            prompts_per_step=1,
            prompt=prompt,
        )
        return train_critic_grpo(dataset, start=args.out / "sft", out=args.out / folder, settings=settings)

    grpo = grpo_from_sft("grpo")
    timings["SFT+GRPO"] = time.monotonic() - started
    critics: list[tuple[str, Path | None, str]] = [
        ("base", None, "critic"),
        ("SFT", sft.adapter_dir, "critic"),
        ("SFT+GRPO", grpo.adapter_dir, "critic"),
    ]
    if args.freestyle:
        started = time.monotonic()
        free = grpo_from_sft("grpo-freestyle", prompt="freestyle")
        timings["freestyle"] = time.monotonic() - started
        critics.append(("freestyle", free.adapter_dir, "freestyle"))
    print(f"dataset {dataset} ({len(rows)} bench rows), base {args.base}, torch threads {torch.get_num_threads()}")
    print(
        f"{'critic':10} {'Improve acc':>11} {'Dir-3':>6} {'F1':>6} {'5-Ladder':>8} {'parsed':>6} "
        f"{'probe Dir-3':>11} {'top verdict':>11} {'train s':>8} {'eval s':>7}"
    )
    for name, adapter, prompt in critics:
        t0 = time.monotonic()
        m = evaluate(args.base, adapter, rows, args.max_tokens, args.show, prompt)
        print(
            f"{name:10} {m['Improve acc']:11.3f} {m['Dir-3']:6.3f} {m['F1']:6.3f} {m['5-Ladder']:8.3f} "
            f"{m['parsed']:6.2f} {m['probe Dir-3']:11.3f} {m['top verdict']:11.2f} "
            f"{timings.get(name, 0.0):8.0f} {time.monotonic() - t0:7.0f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
