"""Opt-in benchmark: does a SmolLM2-135M critic learn anything from free pool-world outcome data? (issue #21.3)

    OMP_NUM_THREADS=1 python bench/critic_learning.py [--steps 0,25,50,100,200] [--out /tmp/critic-learning]
    python bench/critic_learning.py --quick        # the tiny Llama of train/tiny.py, < 60 s
    OMP_NUM_THREADS=1 python bench/critic_learning.py --backbone minilm [--search]   # the reward-model critic

``--backbone minilm`` is the reward-model critic (``critic-rm``: frozen MiniLM + a logistic head), per shipped
world and per split (by run, by region, across tasks); see ``bench/_critic_rm.py``. The rest of this docstring
is the SmolLM2 backbone (the default, ``--backbone smollm2``).

Data (``verifyless.offline.world_pairs``): parent -> child pairs (1..3 dimensions apart) of the built-in pool
worlds, the child written from its option descriptions, labelled by ``outcome.label3`` at ``--tie``, balanced
per label; split by world (train on every world but ``--bench-world``, bench on it: no configuration of the
bench world is seen in training).

Training: one LoRA adapter (``--lora-r``) trained by plain teacher forcing (AdamW, ``--lr``, batch ``--batch``)
on a verdict-first target: the assistant turn is ``[IMPROVEMENT] <label>`` and the loss covers the label
tokens only, so a step costs one forward/backward of a ~150-token prompt. The LoRA B matrices start at zero,
so step 0 is the base model exactly.

Evaluation: probe Dir-3, the three-way accuracy of the most probable verdict read right after
``[IMPROVEMENT]`` (``model.local.next_label_probs``: what the label-probability critic reads with no reasoning),
at each step of ``--steps`` (a learning curve), with a paired bootstrap CI of trained-minus-base over bench
rows. Search: greedy replays on the bench world (``offline.replay.replay_run``: N ``--pool`` candidates per
expansion, ``--budget`` verifications, ``--seeds`` seeds) where the pick is the candidate with the highest
2 P(improve) + P(tie) (the label-probability critic's rank value), base vs trained, against random: final
validation metric, verifications to reach random's mean final, and P(improve) (share of verified children
that beat their parent under ``label3``); ``--arms`` runs a subset (e.g. ``random,base`` with ``--steps 0``).
Writes ``curve.json`` (before the search) and ``result.json`` under ``--out`` and prints markdown tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verifyless.node import Candidate, Screening
from verifyless.offline.compare import bootstrap_ci
from verifyless.offline.replay import RandomArm, pick_screening, point_index, replay_run
from verifyless.offline.world_pairs import CriticData, CriticRow, by_world, compact_prompt, pair_label
from verifyless.offline.worlds import World, load_worlds, world_paths
from verifyless.outcome import THREE
from verifyless.screen.base import ScreenContext, Screener

WORLDS = Path(__file__).resolve().parents[1] / "src" / "verifyless" / "builtin" / "worlds"


# ------------------------------------------------------------------ model


@dataclass
class Critic:
    """Tokenizer + LoRA-wrapped model; ``base()`` is a context in which the adapter is off."""

    tokenizer: Any
    model: Any
    source: str

    def base(self) -> Any:
        return self.model.disable_adapter()

    def loaded(self) -> Any:
        from verifyless.model.local import LoadedLM

        return LoadedLM(self.tokenizer, self.model, "cpu", self.source, "float32")


def load_critic(source: str, *, lora_r: int, layers: int, seed: int) -> Critic:
    """The base model from ``source`` with a fresh LoRA adapter on every linear layer of its last ``layers`` blocks.

    Adapting only the top blocks keeps the backward pass short (autograd stops below the lowest adapted
    block): on one CPU thread that is most of a step's cost.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verifyless.model.local import resolve_source

    torch.manual_seed(seed)
    where = resolve_source(source)
    tokenizer = AutoTokenizer.from_pretrained(where)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    base = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32)
    depth = int(base.config.num_hidden_layers)
    config = LoraConfig(
        r=lora_r,
        lora_alpha=2 * lora_r,
        lora_dropout=0.0,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
        layers_to_transform=list(range(max(0, depth - layers), depth)),
    )
    return Critic(tokenizer, get_peft_model(base, config), source)


def encoded(critic: Critic, row: CriticRow) -> tuple[list[int], list[int]]:
    """(prompt + ``[IMPROVEMENT]`` ids, label ids): exactly the sequence the probe reads."""
    from verifyless.model.local import chat_prompt, encode
    from verifyless.model.scores import prefill_text
    from verifyless.screen.verdicts import VERDICT_TAG

    tok = critic.tokenizer
    head = encode(tok, chat_prompt(tok, row.messages())) + encode(tok, prefill_text("", VERDICT_TAG))
    return head, encode(tok, " " + row.label)


def train_steps(
    critic: Critic, rows: Sequence[CriticRow], optimizer: Any, steps: int, batch: int, start: int
) -> list[float]:
    """``steps`` teacher-forcing steps over ``rows`` (cycled from position ``start * batch``); the losses."""
    import torch

    model, pad = critic.model, critic.tokenizer.pad_token_id
    model.train()
    losses = []
    for step in range(start, start + steps):
        chunk = [rows[(step * batch + i) % len(rows)] for i in range(batch)]
        pairs = [encoded(critic, r) for r in chunk]
        width = max(len(h) + len(t) for h, t in pairs)
        ids = torch.full((batch, width), pad, dtype=torch.long)
        labels = torch.full((batch, width), -100, dtype=torch.long)
        mask = torch.zeros((batch, width), dtype=torch.long)
        for i, (head, tail) in enumerate(pairs):
            seq = head + tail
            ids[i, : len(seq)] = torch.tensor(seq)
            labels[i, len(head) : len(seq)] = torch.tensor(tail)
            mask[i, : len(seq)] = 1
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


def probe(critic: Critic, row: CriticRow) -> dict[str, float]:
    """The verdict distribution after ``[IMPROVEMENT]`` (the label-probability critic's one forward pass)."""
    from verifyless.model.local import chat_prompt, encode, next_label_probs
    from verifyless.screen.verdicts import VERDICT_TAG, VERDICTS

    tok = critic.tokenizer
    prompt = encode(tok, chat_prompt(tok, row.messages()))
    return next_label_probs(critic.loaded(), prompt, "", tag=VERDICT_TAG, labels=VERDICTS)


def top(probs: dict[str, float]) -> str:
    return max(THREE, key=lambda v: probs.get(v, 0.0))


# ------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class Point:
    """One point of the learning curve: probe Dir-3 on the bench rows and what the critic said."""

    step: int
    loss: float | None
    dir3: float
    said: dict[str, int]
    hits: tuple[int, ...] = field(repr=False)
    train_dir3: float | None = None
    auc: float | None = None


def rank_auc(values: Sequence[float], rows: Sequence[CriticRow]) -> float | None:
    """P(rank value of an ``improve`` row > that of a ``lose`` row), ties half: 0.5 is chance, < 0.5 inverted."""
    wins = [v for v, r in zip(values, rows, strict=True) if r.label == "improve"]
    losses = [v for v, r in zip(values, rows, strict=True) if r.label == "lose"]
    if not wins or not losses:
        return None
    return sum((w > lo) + 0.5 * (w == lo) for w in wins for lo in losses) / (len(wins) * len(losses))


def evaluate(critic: Critic, rows: Sequence[CriticRow]) -> tuple[tuple[int, ...], dict[str, int], float | None]:
    """Per-row hit (top verdict == label), the count of each top verdict, and the rank value's ``rank_auc``."""
    probs = [probe(critic, r) for r in rows]
    said = [top(p) for p in probs]
    auc = rank_auc([2 * p["improve"] + p["tie"] for p in probs], rows)
    return tuple(int(s == r.label) for s, r in zip(said, rows, strict=True)), {v: said.count(v) for v in THREE}, auc


def paired_ci(trained: Sequence[int], base: Sequence[int], seed: int = 0) -> tuple[float, float | None, float | None]:
    """Trained-minus-base Dir-3 with a 95% percentile bootstrap CI, paired over rows."""
    est = bootstrap_ci([t - b for t, b in zip(trained, base, strict=True)], seed=seed)
    return est.value, est.low, est.high


def learning_curve(
    critic: Critic, data: CriticData, steps: Sequence[int], *, lr: float, batch: int, train_probe: int
) -> tuple[list[Point], float]:
    """Train up to ``max(steps)``, evaluating at each listed step; returns the curve and seconds per step."""
    import torch

    params = [p for p in critic.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    train_rows, seen = list(data.train), list(data.train[:train_probe])
    curve, done, train_seconds, loss = [], 0, 0.0, None
    for target in sorted(set(steps)):
        started = time.monotonic()
        losses = train_steps(critic, train_rows, optimizer, target - done, batch, done)
        train_seconds += time.monotonic() - started
        loss = statistics.fmean(losses[-5:]) if losses else loss
        done = target
        hits, said, auc = evaluate(critic, data.bench)
        train_hits = evaluate(critic, seen)[0] if seen else ()
        train_dir3 = sum(train_hits) / len(train_hits) if train_hits else None
        curve.append(Point(target, loss, sum(hits) / len(hits), said, hits, train_dir3, auc))
        print(
            f"step {target}: loss {loss}, bench Dir-3 {curve[-1].dir3:.3f} said {said}, AUC {auc}, train Dir-3 {train_dir3}",
            flush=True,
        )
    return curve, train_seconds / max(1, done)


# ------------------------------------------------------------------ search


class ProbScreener:
    """A replay ``Screener``: picks the candidate with the highest 2 P(improve) + P(tie) (probs cached per
    parent -> child pair; first of equals)."""

    def __init__(
        self, critic: Critic, world: World, descriptions: Any, *, trained: bool, words: int, cache: dict[Any, float]
    ) -> None:
        self.critic, self.world, self.descriptions, self.trained, self.words = (
            critic,
            world,
            descriptions,
            trained,
            words,
        )
        self.name = "critic (trained)" if trained else "critic (base)"
        self.cache = cache  # shared by the arm's runs: a probe is a pure function of (adapter state, pair)

    def value(self, parent: int, child: int) -> float:
        if (parent, child) not in self.cache:
            prompt = compact_prompt(self.world, self.descriptions, parent, child, self.words)
            row = CriticRow(self.world.task, parent, child, 0, 0.0, "tie", prompt)
            with contextlib.nullcontext() if self.trained else self.critic.base():
                probs = probe(self.critic, row)
            self.cache[(parent, child)] = 2 * probs["improve"] + probs["tie"]
        return self.cache[(parent, child)]

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        parent = point_index(str(ctx.parent.id))
        values = [self.value(parent, point_index(c.id)) for c in candidates]
        j = max(range(len(values)), key=lambda t: (values[t], -t))
        return pick_screening(self.name, candidates, j, ctx, started, values)


def improved_share(world: World, runs: Sequence[Any], tie: float) -> float:
    """Share of verified children (after the baseline) that beat the incumbent they were drawn around."""
    wins = total = 0
    for run in runs:
        best = run.verified[0]
        for child in run.verified[1:]:
            labelled = pair_label(world, best, child, tie)
            wins += labelled is not None and labelled[1] == "improve"
            total += 1
            fit, best_fit = world.fitness(child), world.fitness(best)
            if fit is not None and (best_fit is None or fit > best_fit):
                best = child
    return wins / max(1, total)


def search_table(
    world: World, arms: dict[str, Callable[[int], Screener]], *, seeds: int, budget: int, pool: int, tie: float
) -> list[dict[str, Any]]:
    """Final raw metric (mean, 95% CI), verifications to reach random's mean final, P(improve), per arm."""
    sign = 1.0 if world.direction == "maximize" else -1.0
    runs: dict[str, list[Any]] = {name: [] for name in arms}
    for s in range(seeds):  # seed-major, so a cut-short run still has every arm on the same seeds
        for name, make in arms.items():
            runs[name].append(replay_run(world, make(s), budget=budget, n_candidates=pool, seed=s))
        print(f"search seed {s}: " + ", ".join(f"{n} {runs[n][-1].final:.3f}" for n in arms), flush=True)
    target = statistics.fmean(r.final for r in runs["random"])
    table = []
    for name, arm in runs.items():
        est = bootstrap_ci([sign * r.final for r in arm])
        reach = [r.reach(target) for r in arm]
        got = [x for x in reach if x is not None]
        table.append(
            {
                "arm": name,
                "final": est.value,
                "lo": est.low,
                "hi": est.high,
                "reached": f"{len(got)}/{len(arm)}",
                "median_reach": statistics.median(got) if got else None,
                "p_improve": improved_share(world, arm, tie),
            }
        )
    return table


# ------------------------------------------------------------------ main


def build_data(args: argparse.Namespace) -> tuple[CriticData, dict[str, World], dict[str, Any]]:
    from verifyless.offline.world_pairs import space_descriptions
    from verifyless.task import load_task

    worlds = load_worlds(world_paths(WORLDS))
    descriptions = {name: space_descriptions(load_task(name).idea_space) for name in worlds}
    data = by_world(
        worlds,
        descriptions,
        args.bench_world,
        tie=args.tie,
        max_moves=args.max_moves,
        train_per_label=args.train_per_label,
        bench_per_label=args.bench_per_label,
        seed=args.seed,
        words=args.words,
    )
    return data, worlds, descriptions


def fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def report(result: dict[str, Any]) -> str:
    """The markdown tables of one run (curve with CIs, then the search)."""
    lines = [
        "| step | train loss (last 5) | bench probe Dir-3 | trained - base [95% CI] | said improve/tie/lose | rank AUC | train-rows Dir-3 |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for p in result["curve"]:
        said = "/".join(str(p["said"][v]) for v in THREE)
        ci = f"{fmt(p['diff'])} [{fmt(p['lo'])}, {fmt(p['hi'])}]"
        lines.append(
            f"| {p['step']} | {fmt(p['loss'])} | {fmt(p['dir3'])} | {ci} | {said} | {fmt(p['auc'])} | {fmt(p['train_dir3'])} |"
        )
    lines += [
        "",
        "| arm | final metric [95% CI] | reached random's mean final | median verifications to reach | P(improve) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for row in result["search"]:
        final = f"{fmt(row['final'])} [{fmt(row['lo'])}, {fmt(row['hi'])}]"
        lines.append(f"| {row['arm']} | {final} | {row['reached']} | {row['median_reach']} | {fmt(row['p_improve'])} |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Data, learning curve and search for one configuration; the result as a JSON-ready dict."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    random.seed(args.seed)
    data, worlds, descriptions = build_data(args)
    print(
        f"data: train {len(data.train)} rows from {data.train_worlds}, bench {len(data.bench)} rows from {data.bench_world}"
    )
    critic = load_critic(args.base, lora_r=args.lora_r, layers=args.lora_layers, seed=args.seed)
    steps = [int(s) for s in args.steps.split(",")]
    curve, per_step = learning_curve(critic, data, steps, lr=args.lr, batch=args.batch, train_probe=args.train_probe)
    base_hits = curve[0].hits if curve[0].step == 0 else evaluate_base(critic, data.bench)
    points = []
    for p in curve:
        diff, lo, hi = paired_ci(p.hits, base_hits, seed=args.seed)
        points.append(
            {
                "step": p.step,
                "loss": p.loss,
                "dir3": p.dir3,
                "said": p.said,
                "train_dir3": p.train_dir3,
                "auc": p.auc,
                "diff": diff,
                "lo": lo,
                "hi": hi,
            }
        )
    (args.out / "curve.json").write_text(json.dumps(points, indent=2))
    world, desc = worlds[data.bench_world], descriptions[data.bench_world]
    caches: tuple[dict[Any, float], dict[Any, float]] = ({}, {})
    arms: dict[str, Callable[[int], Screener]] = {
        "random": lambda s: RandomArm(),
        "critic (base)": lambda s: ProbScreener(critic, world, desc, trained=False, words=args.words, cache=caches[0]),
        "critic (trained)": lambda s: ProbScreener(
            critic, world, desc, trained=True, words=args.words, cache=caches[1]
        ),
    }
    arms = {name: make for name, make in arms.items() if name.split(" ")[-1].strip("()") in args.arms.split(",")}
    started = time.monotonic()
    search = search_table(world, arms, seeds=args.seeds, budget=args.budget, pool=args.pool, tie=args.tie)
    return {
        "base": args.base,
        "train_rows": len(data.train),
        "bench_rows": len(data.bench),
        "train_worlds": list(data.train_worlds),
        "bench_world": data.bench_world,
        "tie": data.tie,
        "max_moves": data.max_moves,
        "labels_match": all(pair_label(worlds[r.world], r.parent, r.child, data.tie)[1] == r.label for r in data.bench),  # type: ignore[index]
        "seconds_per_step": per_step,
        "batch": args.batch,
        "lr": args.lr,
        "lora_layers": args.lora_layers,
        "curve": points,
        "search": search,
        "search_seconds": time.monotonic() - started,
        "settings": {k: str(v) for k, v in vars(args).items()},
    }


def evaluate_base(critic: Critic, rows: Sequence[CriticRow]) -> tuple[int, ...]:
    with critic.base():
        return evaluate(critic, rows)[0]


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", default="smollm2-135m-instruct")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-critic-learning"))
    parser.add_argument("--steps", default="0,25,50,100,200", help="comma-separated steps at which to evaluate")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--lora-r", type=int, default=16)
    parser.add_argument("--lora-layers", type=int, default=6, help="adapt only the last N transformer blocks")
    parser.add_argument("--words", type=int, default=10, help="words of each option description in the prompt")
    parser.add_argument("--tie", type=float, default=0.01, help="tie tolerance of label3 (relative Delta)")
    parser.add_argument("--max-moves", type=int, default=3)
    parser.add_argument("--bench-world", default="diabetes")
    parser.add_argument("--train-per-label", type=int, default=400, help="train rows per label, split over worlds")
    parser.add_argument("--bench-per-label", type=int, default=60)
    parser.add_argument("--train-probe", type=int, default=60, help="train rows also probed (does it fit them?)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=int, default=16)
    parser.add_argument("--pool", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--arms", default="random,base,trained", help="search arms to run (random must be one)")
    parser.add_argument("--quick", action="store_true", help="tiny Llama, a few steps and rows (< 60 s)")
    parser.add_argument("--backbone", default="smollm2", help="smollm2 (LoRA, label probe) or minilm (critic-rm)")
    args = parser.parse_args(argv)
    if args.quick:
        from verifyless.train.tiny import cached_tiny_lm

        args.out.mkdir(parents=True, exist_ok=True)
        args.base = str(cached_tiny_lm(args.out / "tiny"))
        args.steps, args.bench_per_label, args.train_per_label, args.train_probe = "0,4,8", 5, 24, 6
        args.seeds, args.budget, args.lora_r, args.batch = 2, 5, 4, 4
    return args


def parse_minilm(argv: Sequence[str]) -> argparse.Namespace:
    """Options of ``--backbone minilm`` (the reward-model critic; ``bench/_critic_rm.py``)."""
    parser = argparse.ArgumentParser(description="reward-model critic (frozen MiniLM + logistic head)")
    parser.add_argument("--backbone", default="minilm")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-critic-learning-minilm"))
    parser.add_argument("--tie", type=float, default=0.01, help="tie tolerance of label3 (relative Delta)")
    parser.add_argument("--max-moves", type=int, default=3)
    parser.add_argument("--C", type=float, default=0.1)
    parser.add_argument("--earlier-runs", type=int, default=10, help="random-pick replays that are the earlier runs")
    parser.add_argument("--later-runs", type=int, default=10, help="later replays benched in the by-run split")
    parser.add_argument("--run-budget", type=int, default=24, help="verifications per replayed earlier/later run")
    parser.add_argument("--sizes", default="50,100,200", help="learning-curve train sizes (all rows is added)")
    parser.add_argument("--search", action="store_true", help="also the search replay (budgets, seeds below)")
    parser.add_argument("--budgets", default="12,24")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--pool", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.sizes = [int(x) for x in args.sizes.split(",") if x]
    args.budgets = [int(x) for x in args.budgets.split(",") if x]
    return args


def main_minilm(argv: Sequence[str]) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import _critic_rm

    args = parse_minilm(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = _critic_rm.run(args)
    text = _critic_rm.report(result)
    (args.out / "result.json").write_text(json.dumps(_critic_rm.summary_json(result), indent=2, default=str))
    (args.out / "report.md").write_text(text)
    print(text)
    print(
        f"total: {result['wall_s']:.0f} s wall, {result['cpu_s']:.0f} CPU-s (MiniLM encoding {result['encode_cpu_s']:.1f})"
    )
    return result


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--backbone" in argv and argv[argv.index("--backbone") + 1] == "minilm":
        return main_minilm(argv)
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = run(args)
    result["seconds"] = time.monotonic() - started
    (args.out / "result.json").write_text(json.dumps(result, indent=2))
    print(report(result))
    print(f"seconds per step {result['seconds_per_step']:.2f}, total {result['seconds']:.0f} s")
    return result


if __name__ == "__main__":
    main()
