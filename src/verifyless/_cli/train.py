"""``verifyless train ...`` (critic SFT, critic GRPO) and ``verifyless models``.

Heavy imports (torch, transformers, trl, peft, datasets) happen inside the
commands, so ``verifyless --help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import typer
from rich.table import Table

from verifyless._cli.common import console, out_folder, quiet
from verifyless._cli.policy import register as _register_policy
from verifyless.config import DEFAULT_STORE
from verifyless.errors import ConfigError, StoreError, VerifylessError
from verifyless.model.local import local_models
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.task.identity import identity_of, same_task
from verifyless.train.grpo import train_critic_grpo
from verifyless.train.reward import HeadSettings, train_from_store, verdict
from verifyless.train.settings import load_settings
from verifyless.train.sft import train_critic_sft
from verifyless.train.warm import earlier_runs

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Train critics (SFT, GRPO) on critic datasets.")
# Options the two critic trainers share.
_CONFIG = typer.Option(None, "--config", help="YAML file overriding training settings")
_RESUME = typer.Option(False, "--resume", help="continue from the last checkpoint in --out")
_MAX_STEPS = typer.Option(None, "--max-steps", help="stop after this many optimizer steps")


def models_command() -> None:
    """List models you can run in process with `provider: local` (packaged ones included) and where they come from."""

    table = Table(box=None, header_style="bold")
    for col in ("name", "available", "where", "origin"):
        table.add_column(col, overflow="fold")
    for info in local_models():
        table.add_row(info.name, "yes" if info.available else f"no ({info.note})", info.where, info.origin)
    console.print(table)
    console.print(
        "Use one as `provider: local, model: NAME` (add `adapter: DIR` for a trained critic), "
        "or any save_pretrained folder."
    )


def _settings(kind: Literal["sft", "grpo"], config: Path | None, max_steps: int | None) -> Any:
    """Quiet the training libraries' logs and load the ``kind`` settings (``train.settings.load_settings``)."""

    quiet()
    return load_settings(kind, config, max_steps=max_steps)


@app.command("critic-sft")
def critic_sft(
    dataset: Path = typer.Argument(..., help="critic dataset folder (DatasetDict with an 'sft' split)"),
    base: str = typer.Option(
        ..., "--base", help="base model: folder, cached hub id, or a name from `verifyless models`"
    ),
    out: Path = typer.Option(
        ..., "--out", callback=out_folder, help="output folder for the adapter, checkpoints and logs"
    ),
    config: Path | None = _CONFIG,
    resume: bool = _RESUME,
    max_steps: int | None = _MAX_STEPS,
) -> None:
    """Supervised fine-tuning of a LoRA critic on the dataset's kept critiques (paper: r=32, lr 1e-5, 3 epochs)."""

    settings = _settings("sft", config, max_steps)
    result = train_critic_sft(dataset, base=base, out=out, settings=settings, resume=resume, console=console)
    console.print(
        f"adapter saved to [bold]{result.adapter_dir}[/] ({result.steps} steps, "
        f"loss {result.first_loss:.4g} -> {result.last_loss:.4g}, {result.seconds:.0f} s)"
    )


@app.command("critic-grpo")
def critic_grpo(
    dataset: Path = typer.Argument(..., help="critic dataset folder (DatasetDict with a 'grpo' split)"),
    from_dir: Path = typer.Option(..., "--from", help="SFT output folder (or adapter folder) to start from"),
    out: Path | None = typer.Option(None, "--out", callback=out_folder, help="output folder (default: FROM-grpo)"),
    config: Path | None = _CONFIG,
    resume: bool = _RESUME,
    max_steps: int | None = _MAX_STEPS,
) -> None:
    """GRPO on the 'grpo' split from an SFT adapter: +1 when the parsed verdict matches the label, else -1."""

    settings = _settings("grpo", config, max_steps)
    out = out or from_dir.with_name(from_dir.name + "-grpo")
    result = train_critic_grpo(dataset, start=from_dir, out=out, settings=settings, resume=resume, console=console)
    console.print(
        f"adapter saved to [bold]{result.adapter_dir}[/] ({result.steps} steps, mean reward "
        f"{result.first_loss:.3g} -> {result.last_loss:.3g}, {result.seconds:.0f} s)"
    )


@app.command("critic-rm")
def critic_rm(
    task: str = typer.Argument(..., help="task whose earlier runs in --store become the critic's data"),
    store: Path = typer.Option(DEFAULT_STORE, "--store", help="run store holding the earlier runs"),
    out: Path = typer.Option(
        ..., "--out", callback=out_folder, help="folder for the trained critic (head.npz, card.json)"
    ),
    runs: str | None = typer.Option(None, "--runs", help="comma-separated run ids (default: every run of TASK)"),
    tie_tolerance: float | None = typer.Option(
        None, "--tie-tolerance", help="relabel every run with this tie tolerance (default: each run's own)"
    ),
    c: float = typer.Option(0.1, "--C", help="inverse L2 strength of the logistic head"),
    encoder: str = typer.Option("minilm", "--encoder", help="text encoder: minilm (default) or hashing (no torch)"),
    force: bool = typer.Option(False, "--force", help="train on --runs of another task (heads do not transfer)"),
) -> None:
    """Warm start: a reward-model critic (frozen MiniLM + logistic head) from TASK's earlier runs; use it with
    `verifyless run TASK --screener critic-rm screener.options.path=OUT`. (A plain `verifyless run TASK` already
    warm-starts from the store's earlier runs of TASK, without this command.) Ends with a verdict on the head's
    held-out pairs: helps, no better than random, or too little data to tell."""

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not store.is_file():
        raise StoreError(f"no run store at {store}; pass --store with the file your runs wrote")
    with (
        RunStore(store) as st,
        Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as bar,
    ):
        ids: dict[str, Any] = {}

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in ids:
                ids[stage] = bar.add_task(stage, total=total)
            bar.update(ids[stage], completed=done, total=total)

        settings = HeadSettings(C=c, encoder=encoder)
        chosen = runs.split(",") if runs else None
        loaded = _loaded_task(task)
        if chosen and loaded is not None:
            _check_runs(st, [st.resolve_run(r) for r in chosen], loaded, force)
        elif loaded is not None:  # every run of this task (task.identity.same_task), not every run of its name
            chosen = earlier_runs(st, loaded) or None
        identity = identity_of(loaded).to_dict() if loaded is not None else None
        result = train_from_store(
            st, task, out, runs=chosen, tie=tie_tolerance, settings=settings, progress=progress, task_identity=identity
        )
    console.print(
        f"critic saved to [bold]{result.out}[/] as {result.tag} ({result.rows} pairs from "
        f"{len(result.runs)} runs, {result.seconds:.0f} s)"
    )
    console.print(_held_out_line(result.held_out), highlight=False)
    judged = verdict(result.held_out, result.rows)
    if judged.warning:
        console.print(f"[yellow]warning:[/] {judged.warning}", highlight=False)
    colour = {"helps": "green"}.get(judged.word, "yellow" if judged.word.startswith("too little") else "red")
    said = judged.line.replace(judged.word, f"[bold {colour}]{judged.word}[/]", 1)
    console.print(f"verdict: {said}", highlight=False, soft_wrap=True)


def _loaded_task(task: str) -> Any:
    """TASK loaded, for its identity (None when it no longer loads: the card then records its name only)."""
    try:
        return load_task(task)
    except VerifylessError:
        return None


def _check_runs(st: Any, run_ids: list[str], task: Any, force: bool) -> None:
    """``--runs`` of another task (``task.identity.same_task``) are refused unless ``--force``."""
    other = [r for r in run_ids if not same_task(st, st.run(r), task)]
    if other and not force:
        names = ", ".join(f"{r} ({st.run(r).task})" for r in other)
        raise ConfigError(
            f"runs {names} are not runs of task {task.name!r}: a critic trained on another task ranked worse than "
            "random (docs/benchmarks.md); leave them out, or pass --force to train on them anyway"
        )


def _held_out_line(check: dict[str, Any] | None) -> str:
    if check is None:
        return "held-out check: none (one run with one parent: train on more runs to bench on the newest)"
    if "trained" not in check:
        return f"held-out check ({check['split']}): {check['note']} ({check['dropped']} pairs dropped as seen)"
    t, b = check["trained"], check["base"]
    pw = "-" if t["pairwise"] is None else f"{t['pairwise']:.3f} over {t['pairs']} sibling pairs"
    return (
        f"held-out check ({check['split']}, {check['bench_rows']} pairs, {check['dropped']} dropped as seen): "
        f"Dir-3 {t['dir3']:.3f} (base {b['dir3']:.3f}), pairwise {pw} (base 0.5)"
    )


_register_policy(app)

__all__ = ["app", "models_command"]
