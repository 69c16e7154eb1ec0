"""Dataset-level operations used by the CLI: build from runs, add teacher critiques.

``build_from_runs`` harvests runs (``verifyless.critic_data.harvest``), splits them
(``verifyless.critic_data.dataset.split_rows``) and writes the dataset with its card.
``synthesize_dataset`` reads a dataset, adds teacher critiques to the chosen
splits (``verifyless.critic_data.synthesize``), balances the bench split across
strata and writes the result (with the same card, extended) to a new folder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from verifyless.critic_data.dataset import (
    balance_bench,
    card_data,
    load_critic_dataset,
    read_card,
    save_dataset,
    split_rows,
    splits_of,
)
from verifyless.critic_data.harvest import harvest_runs
from verifyless.critic_data.labels import MIN_IMPROVING, label_table
from verifyless.critic_data.synthesize import (
    SynthesisSettings,
    Synthesized,
    apply_results,
    strata_report,
    synthesize_rows,
)


def build_from_runs(
    store: Any,
    run_ids: Sequence[str],
    out: Path,
    *,
    seed: int = 0,
    bench_fraction: float = 0.12,
    by: str = "parent",
    tolerance: float | None = None,
    min_improving: int = MIN_IMPROVING,
    balance_grpo: bool = True,
) -> dict[str, Any]:
    """Harvest ``run_ids`` from ``store`` into a dataset at ``out``; returns the card (incl. the label table)."""
    harvest = harvest_runs(store, run_ids, tolerance=tolerance, min_improving=min_improving)
    splits, report = split_rows(
        harvest.rows, seed=seed, bench_fraction=bench_fraction, by=by, balance_grpo=balance_grpo
    )
    settings = {
        "seed": seed,
        "bench_fraction": bench_fraction,
        "split_by": by,
        "tie_tolerance": tolerance,
        "min_improving": min_improving,
        "balance_grpo": balance_grpo,
    }
    runs = [asdict(r) for r in harvest.runs]
    models = sorted({m for r in harvest.runs for m in r.config.get("wiring", {}).get("models", [])})
    table = label_table(harvest.rows, harvest.infeasible)
    card = card_data(
        splits,
        settings=settings,
        runs=runs,
        models=models,
        extra={
            "grpo_balance": report.get("grpo_balance"),
            "split_report": report,
            "label_table": table,
            "infeasible_excluded": sum(harvest.infeasible.values()),
        },
    )
    save_dataset(splits, out, card)
    return card


def synthesize_dataset(
    src: Path,
    out: Path,
    model: Any,
    *,
    teacher: str,
    settings: SynthesisSettings = SynthesisSettings(),
    splits: Sequence[str] = ("sft", "bench"),
    progress: Callable[[Synthesized], None] | None = None,
) -> dict[str, Any]:
    """Add teacher critiques to ``splits`` of the dataset at ``src`` and write it to ``out``; returns the card.

    The journal ``out/synthesis.jsonl`` makes a rerun skip finished examples.
    """
    if Path(src).resolve() == Path(out).resolve():
        raise ValueError("write the synthesised dataset to a new folder (--out), not over its source")
    card = read_card(src)
    parts = splits_of(load_critic_dataset(src))
    out.mkdir(parents=True, exist_ok=True)
    rows = [r for name in splits for r in parts.get(name, [])]
    results, synth = asyncio.run(
        synthesize_rows(rows, model, settings, journal=out / "synthesis.jsonl", progress=progress)
    )
    parts = {name: apply_results(part, results) if name in splits else part for name, part in parts.items()}
    parts, bench_report = balance_bench(parts, seed=settings.seed)
    synthesis = {
        "teacher": teacher,
        "settings": asdict(settings),
        "splits": list(splits),
        "calls_this_session": synth.calls,
        "prompt_tokens_paid": synth.usage.prompt_tokens,
        "completion_tokens_paid": synth.usage.completion_tokens,
        "cost_paid": synth.usage.cost,
        **strata_report({k: v for k, v in results.items() if k in {str(r["example_id"]) for r in rows}}),
    }
    new = card_data(
        parts,
        settings=card.get("settings", {}),
        runs=card.get("runs", []),
        models=list(card.get("models", [])) + [f"teacher={teacher}"],
        extra={k: card.get(k) for k in ("grpo_balance", "split_report", "label_table", "infeasible_excluded")}
        | {"synthesis": synthesis, "bench_balance": bench_report, "source_dataset": str(src)},
    )
    save_dataset(parts, out, new)
    return new


__all__ = ["build_from_runs", "synthesize_dataset"]
