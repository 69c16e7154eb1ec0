"""``verifyless train policy-grpo`` and ``verifyless train policy-eval`` (mounted by ``_cli/train.py``).

Heavy imports happen inside the commands. A training folder ``--out`` holds
``rewards.db`` (the reward run's store: children, verifications, rewards),
``run.json`` (the reward run's id, for ``--resume``) and the trainer's files
(``train_log.jsonl``, ``checkpoints/``, ``adapter/``).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import typer

from verifyless._cli.common import console, out_folder, quiet
from verifyless.errors import ConfigError
from verifyless.train.policy.evaluate import evaluate_proposers
from verifyless.train.policy.grpo_settings import load_policy_settings
from verifyless.train.policy.trainer import PolicyTrainer
from verifyless.train.policy.wiring import build_rewarder


def _tasks(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ConfigError("--tasks needs at least one task name or folder, comma separated (e.g. --tasks a,b)")
    return names


def _line(record: dict[str, Any]) -> str:
    agree = record.get("agreement")
    loss = record.get("loss")
    return (
        f"step {record['step']}: reward {record['mean_reward']:+.3f}, verified {record['verified']}/{record['ideas']} "
        f"({record['share_verified']:.0%}), rewarded/verification {record['rewarded_per_verification']:.2f}, "
        f"agreement {'-' if agree is None else f'{agree:.0%}'}, loss {'-' if loss is None else f'{loss:.3g}'}, "
        f"left {record['verifications_left']}, {record['seconds']:.1f} s"
    )


_POLICY = typer.Option(..., "--policy", help="base model of the proposer: folder, cached hub id or name")
_MODELS = typer.Option([], "--models", help="child-role model specs (default: idea-space roles)")


def policy_grpo(
    tasks: str = typer.Option(..., "--tasks", help="training tasks, comma separated (names or folders)"),
    policy: str = _POLICY,
    out: Path = typer.Option(
        ..., "--out", callback=out_folder, help="folder for the reward store, log, checkpoints and adapter"
    ),
    verifications: int = typer.Option(10_000, "--verifications", help="hard cap on paid verifications (paper: 10,000)"),
    mode: str = typer.Option("critic-in-loop", "--mode", help="verify-all | critic-in-loop | critic-only"),
    critic: str | None = typer.Option(None, "--critic", help="critic model spec (scripted:FILE, openai:M, local:..)"),
    steps: int = typer.Option(100, "--steps", help="GRPO steps to run in total"),
    parents: int = typer.Option(16, "--parents", help="groups (parents) per step (paper: 16)"),
    ideas: int = typer.Option(16, "--ideas", help="ideas per parent, G (paper: 16)"),
    votes: int = typer.Option(16, "--votes", help="critic votes per idea, k (paper: 16)"),
    threshold: float = typer.Option(0.25, "--threshold", help="verify when the critic's u >= this (paper: 0.25)"),
    adapter: Path | None = typer.Option(None, "--adapter", help="start from this proposer adapter"),
    model: list[str] = _MODELS,
    executor: str | None = typer.Option(None, "--executor", help="verification executor (default: local)"),
    config: Path | None = typer.Option(None, "--config", help="YAML file overriding policy GRPO settings"),
    seed: int = typer.Option(0, "--seed", help="seed of the idea sampling and of the reward run"),
    resume: bool = typer.Option(False, "--resume", help="continue the run in --out from its last checkpoint"),
) -> None:
    """Policy GRPO: LoRA on the proposer, rewards from verification and/or a critic (critic paper, Section 5)."""

    quiet()
    settings = load_policy_settings(config, generations=ideas, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    run_file = out / "run.json"
    run_id = json.loads(run_file.read_text())["run_id"] if resume and run_file.is_file() else None
    if resume and run_id is None:
        raise ConfigError(f"--resume: {run_file} does not exist; run without --resume to start")
    if not resume and run_file.is_file():
        raise ConfigError(f"{out} already holds a policy training run; pass --resume or use a new --out")
    with build_rewarder(
        _tasks(tasks), out / "rewards.db", mode=mode, parents=parents, ideas=ideas, votes=votes, threshold=threshold,
        verifications=verifications, seed=seed, models=model, critic=critic, executor=executor, resume=run_id,
    ) as built:  # fmt: skip
        run_file.write_text(json.dumps({"run_id": built.run_id}))
        trainer = PolicyTrainer(built.rewarder, base=policy, out=out, settings=settings, init_adapter=adapter)
        result = asyncio.run(trainer.train(steps, resume=resume, on_step=lambda r: console.print(_line(dict(r)))))
    console.print(
        f"adapter saved to [bold]{result.adapter_dir}[/] after {result.steps} steps "
        f"(stopped: {result.stopped}; {result.seconds:.0f} s; log {result.log_path})"
    )


def policy_eval(
    tasks: str = typer.Option(..., "--tasks", help="held-out tasks, comma separated"),
    policy: str = _POLICY,
    adapter: Path = typer.Option(..., "--adapter", help="trained proposer adapter (policy-grpo's OUT/adapter)"),
    out: Path = typer.Option(
        ..., "--out", callback=out_folder, help="folder for the evaluation stores and results.json"
    ),
    verifications: int = typer.Option(..., "--verifications", help="verification budget per run (both arms)"),
    seeds: str = typer.Option("0,1,2", "--seeds", help="seeds, comma separated"),
    parents: int = typer.Option(4, "--parents", help="groups per step"),
    ideas: int = typer.Option(8, "--ideas", help="ideas per group"),
    model: list[str] = _MODELS,
    config: Path | None = typer.Option(None, "--config", help="YAML file with sampling settings"),
) -> None:
    """Base vs trained proposer on held-out tasks under the same verification budget (matched-budget protocol)."""

    quiet()
    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds must be integers separated by commas, got {seeds!r}") from None
    settings = load_policy_settings(config, generations=ideas)
    summary = asyncio.run(
        evaluate_proposers(
            policy, adapter, _tasks(tasks), out=out, verifications=verifications, seeds=seed_list,
            parents=parents, settings=settings, models=model,
            on_run=lambda r: console.print(
                f"{r.arm:<8} {r.task} seed {r.seed}: gain {r.gain:+.4g}, improved {r.improved}/{r.verified} "
                f"verified, invalid {r.invalid}/{r.ideas}, {r.steps} steps, {r.seconds:.0f} s"
            ),
        )
    )  # fmt: skip
    for arm, est in summary.gain.items():
        console.print(f"{arm}: mean gain {est}  improved share {summary.improved_share[arm]:.1%}")
    if summary.p_improvement is not None:
        console.print(f"P(trained beats base): {summary.p_improvement}")
    results = {
        "runs": [dict(r.__dict__, gain=r.gain) for r in summary.runs],
        "gain": {a: e.__dict__ for a, e in summary.gain.items()},
        "improved_share": summary.improved_share,
        "p_improvement": summary.p_improvement.__dict__ if summary.p_improvement is not None else None,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2))


def register(app: typer.Typer) -> None:
    """Add the policy commands to the ``train`` app."""
    app.command("policy-grpo")(policy_grpo)
    app.command("policy-eval")(policy_eval)


__all__ = ["policy_eval", "policy_grpo", "register"]
