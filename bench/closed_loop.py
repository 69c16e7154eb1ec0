"""The learning loop closed: runs -> data -> SFT -> GRPO -> a run screened by the trained critic -> critic-ttl.

    OMP_NUM_THREADS=1 python bench/closed_loop.py --quick [--out runs/bench-closed-loop]

Stages, each printed:

1. ordinary runs on ``tests/data_task``: one search run (greedy, random screener, as a user would have
   lying around) and two outcome collections (two-stage ``sft`` and the improvement-driven ``grpo`` pool);
   offline idea-space roles, the real sandbox;
2. ``data from-runs`` (``build_from_runs``): examples and the label3 distribution per split;
3. critiques: a *scripted* teacher writes, per sft/bench row, a critique in the critic's format that
   ends in the row's true verdict (``train.data.critique_text``); teacher synthesis needs an LLM, so the
   quick loop stands in for it;
4. SFT, then GRPO, on the cached tiny Llama (``train.tiny.cached_tiny_lm``), CPU-sized settings;
5. Dir-3 / F1 / 5-Ladder on the bench split for base, SFT and SFT+GRPO (``bench critic``'s metrics with
   bootstrap 95% CIs over rows);
6. a run on the task screened by ``critic`` with the SFT+GRPO adapter, and one screened by ``critic-ttl``
   starting from it: each run's audited accuracy (Dir-3 of its screenings against the verified outcomes);
7. the adapter's identity (``<folder>@<sha256 prefix of its weights>``) at each hand-over: the end of
   training, the screening run (read back from its stored config, as ``show`` does) and the test-time run
   (the ``adapter_origin`` of its ``screener_learn`` events). The script exits 1 if they differ.

A tiny model learns the format, not the task, so the accuracies say nothing about critic quality; the
point is that every hand-over runs and is recorded. ``main`` returns the result for tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from verifyless.events import ScreenerLearned
from verifyless.screen.critic import CriticOptions

ROOT = Path(__file__).resolve().parents[1]
TASK = str(ROOT / "tests" / "data_task")


def collect(out: Path, quick: bool) -> tuple[Path, list[str]]:
    """An ordinary search run (greedy, random screener: what a user has lying around) and two collections."""
    from verifyless.config import load_config
    from verifyless.critic_data.collect import CollectSettings
    from verifyless.critic_data.pipeline import run_collection
    from verifyless.store import RunStore
    from verifyless.wiring import build_engine

    db = out / "runs.db"
    size = (3, 4) if quick else (6, 8)
    search = [f"task={TASK}", "roles.kind=space", "screener.name=random", "strategy.name=greedy", f"store={db}"]
    search += ["engine.candidates=3", f"budget.verifications={6 if quick else 16}", "engine.data_report=false"]
    cfg = load_config(overrides=search)
    with RunStore(db) as store:
        searched = asyncio.run(build_engine(cfg, store).run()).run_id
    runs = [
        searched,
        run_collection(TASK, db, CollectSettings(parents=size[0], children=size[1])).run_id,
        run_collection(TASK, db, CollectSettings(parents=size[0], children=size[1], mode="grpo", seed=1)).run_id,
    ]
    return db, runs


def dataset_from(db: Path, runs: list[str], out: Path) -> Path:
    from verifyless.critic_data.build import build_from_runs
    from verifyless.critic_data.dataset import load_critic_dataset, read_card, save_dataset, splits_of
    from verifyless.store import RunStore
    from verifyless.train.critic_rows import critique_text

    with RunStore(db) as store:
        build_from_runs(store, runs, out / "data", bench_fraction=0.3)
    splits = splits_of(load_critic_dataset(out / "data"))
    for name in ("sft", "bench"):  # the scripted teacher (module docstring, stage 3)
        tier = {"BigWin": "big", "MediumWin": "medium", "SmallWin": "small"}
        splits[name] = [
            {**r, "critique": critique_text(r["label3"], tier.get(str(r.get("label5")))), "stratum": "sampled"}
            for r in splits[name]
        ]
    save_dataset(splits, out / "data-critiques", read_card(out / "data"))
    for name, rows in splits.items():
        labels = Counter(str(r["label3"]) for r in rows)
        print(
            f"  {name:5} {len(rows):3} examples  " + "  ".join(f"{k} {labels[k]}" for k in ("improve", "tie", "lose"))
        )
    return out / "data-critiques"


def train(dataset: Path, tiny: Path, out: Path, quick: bool) -> tuple[Path, Path]:
    from verifyless.train.grpo import train_critic_grpo
    from verifyless.train.settings import load_settings
    from verifyless.train.sft import train_critic_sft

    sft = train_critic_sft(
        dataset,
        base=str(tiny),
        out=out / "sft",
        settings=load_settings("sft", None, max_steps=8 if quick else 40, learning_rate=3e-3, batch_size=4),
    )
    grpo = train_critic_grpo(
        dataset,
        start=out / "sft",
        out=out / "grpo",
        settings=load_settings(
            "grpo", None, max_steps=2 if quick else 8, learning_rate=1e-4, max_completion_length=24, prompts_per_step=1
        ),
    )
    return sft.adapter_dir, grpo.adapter_dir


def bench_row(tiny: Path, adapter: Path | None, rows: list[dict[str, Any]]) -> dict[str, str]:
    import numpy as np

    from verifyless.metrics.critic import critic_metrics
    from verifyless.model import build_model, make_config
    from verifyless.offline.benchmark import run_critic_bench
    from verifyless.offline.compare import bootstrap_ci
    from verifyless.screen.critic import PointwiseCritic

    config = make_config(provider="local", model=str(tiny), device="cpu", adapter=str(adapter) if adapter else None)
    critic = PointwiseCritic(build_model(config), CriticOptions(k=2, max_tokens=24))
    records = run_critic_bench(rows, critic, repeats=1).records

    def cell(metric: str) -> str:
        def stat(picks: np.ndarray) -> float:
            value = getattr(critic_metrics([records[int(i)] for i in picks]), metric)
            return float("nan") if value is None else float(value)

        whole = getattr(critic_metrics(records), metric) if records else None
        if whole is None or np.isnan(whole):
            return "N/A"
        ci = bootstrap_ci([float(i) for i in range(len(records))], stat, n_boot=300)
        if ci.low is None or ci.high is None:  # every resample gives the same value
            return f"{whole:.2f} [{whole:.2f}, {whole:.2f}]"
        return f"{whole:.2f} [{ci.low:.2f}, {ci.high:.2f}]"

    return {"n": str(len(records)), "Dir-3": cell("dir3"), "F1": cell("f1"), "5-Ladder": cell("ladder5")}


def screened_run(tiny: Path, adapter: Path, out: Path, screener: str) -> dict[str, Any]:
    from verifyless.config import load_config
    from verifyless.metrics.critic import critic_metrics, critic_records_from_store
    from verifyless.screen.ttl import run_adapters
    from verifyless.store import RunStore
    from verifyless.wiring import build_engine

    overrides = [
        f"task={TASK}",
        f"screener.name={screener}",
        "screener.options.k=2",
        "screener.options.max_tokens=24",
        "screener.options.max_unparsed_screenings=100",
        "strategy.name=greedy",
        "engine.candidates=2",
        "budget.verifications=5",
        f"store={out / f'{screener}.db'}",
        f"roles.models.critic={{provider: local, model: {tiny}, device: cpu, adapter: {adapter}}}",
    ]
    if screener == "critic-ttl":
        overrides += [f"screener.options.adapter_root={out / 'ttl-adapters'}", "screener.options.learning_rate=1e-4"]
    cfg = load_config(overrides=overrides)
    with RunStore(cfg.store) as store:
        result = asyncio.run(build_engine(cfg, store).run())
        records = critic_records_from_store(store, result.run_id)
        learned = [e.record.learned for e in store.events(result.run_id, ScreenerLearned)]
        adapters = run_adapters(store.run(result.run_id).config, learned)
    return {"run_id": result.run_id, "audited": critic_metrics(records), "adapters": adapters}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    import torch

    from verifyless.critic_data.dataset import load_critic_dataset, read_card, splits_of
    from verifyless.model.local import adapter_tag
    from verifyless.train.tiny import cached_tiny_lm

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the smallest loop (the tests run it)")
    parser.add_argument("--out", type=Path, default=Path("runs/bench-closed-loop"))
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    args.out.mkdir(parents=True, exist_ok=True)
    print("1. ordinary runs")
    db, runs = collect(args.out, args.quick)
    print(f"  {len(runs)} runs in {db}")
    print("2-3. data from-runs, scripted critiques")
    dataset = dataset_from(db, runs, args.out)
    sources = sorted({str(r.get("source")) for r in read_card(args.out / "data").get("runs", [])})
    print(f"  examples from: {', '.join(sources)}")
    print("4. SFT -> GRPO on the tiny Llama")
    tiny = cached_tiny_lm(args.out / "tiny-lm")
    sft, grpo = train(dataset, tiny, args.out, args.quick)
    trained = adapter_tag(grpo)
    print(f"  adapter at the end of training: {trained}")
    print("5. bench split (bootstrap 95% CIs)")
    rows = splits_of(load_critic_dataset(dataset))["bench"]
    table = {name: bench_row(tiny, a, rows) for name, a in (("base", None), ("SFT", sft), ("SFT+GRPO", grpo))}
    for name, row in table.items():
        print(f"  {name:9} n {row['n']:>3}  Dir-3 {row['Dir-3']:18}  F1 {row['F1']:18}  5-Ladder {row['5-Ladder']}")
    print("6. runs screened by the trained critic")
    screened = {name: screened_run(tiny, grpo, args.out, name) for name in ("critic", "critic-ttl")}
    hashes = {"training": trained}
    for name, run in screened.items():
        audited = run["audited"]
        print(
            f"  {name:10} run {run['run_id'][:12]}  audited Dir-3 {audited.dir3:.2f} over {audited.n} screened children"
        )
        for a in run["adapters"]:
            print(f"    adapter {a}")
        configured = [a["tag"] for a in run["adapters"] if "folder" in a]
        hashes[f"{name} run"] = configured[0] if configured else None
        if name == "critic-ttl":
            origins = [a["origin"] for a in run["adapters"] if "origin" in a]
            hashes["critic-ttl origin"] = origins[0] if origins else trained  # no learn event: nothing chained yet
    print("7. adapter hash at each hand-over")
    for where, tag in hashes.items():
        print(f"  {where:18} {tag}")
    same = len(set(hashes.values())) == 1
    print("  the same adapter throughout" if same else "  MISMATCH: the adapter changed between hand-overs")
    return {"hashes": hashes, "same": same, "bench": table, "screened": screened, "sources": sources}


if __name__ == "__main__":
    sys.exit(0 if main()["same"] else 1)
