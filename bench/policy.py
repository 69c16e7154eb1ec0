"""Opt-in benchmark: policy GRPO's three reward modes at one verification budget, then trained vs base.

    OMP_NUM_THREADS=1 python bench/policy.py [--policy tiny|smollm2-135m-instruct|DIR]
        [--task bench/tasks/policy_space] [--verifications 48] [--steps 30] [--parents 4] [--ideas 8]
        [--eval-verifications 8] [--eval-seeds 0,1,2] [--out runs/bench-policy]

Part 1 runs ``verify-all``, ``critic-in-loop`` and ``critic-only`` with the same hard cap of verifications
(baseline, repairs and parent checks included) and at most ``--steps`` steps each, and reports steps
completed, the share of ideas verified, ideas rewarded (by critic or verifier) per paid verification, the
critic/verifier agreement where both exist (routed ideas, plus audits with ``--audit-rate``), the mean reward
of the first and last three steps, and wall time.

The critic is a *scripted* rule critic (``--critic-rules``; default, for the default task: unanimous
"improve" when the child has W at three or four, unanimous "lose" when it has W or X at zero or Z at minus
one, split votes otherwise), so the numbers measure the routing and budget machinery with a critic of known,
imperfect quality, not a learned critic. The default task, ``bench/tasks/policy_space`` (score
3W + 2X + Y - |Z - 2|, five options per weight), is declared stochastic so every verification is charged: on
a deterministic task the pipeline reuses a program verified before, and a small space then costs almost
nothing to explore.

Part 2 compares the base policy with each mode's trained adapter under the matched-budget protocol of
``verifyless train policy-eval`` (same task, fresh runs, the same per-run budget and seeds).

``--policy tiny`` (default) builds the tiny random Llama of ``train.policy.tiny`` taught to answer the task's
prompt with one option line uniformly at random; ``smollm2-135m-instruct`` uses the packaged SmolLM2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

MODES = ("verify-all", "critic-in-loop", "critic-only")
CRITIC = """rules:
  - {match: 'Child[^#]*sets W to (three|four)', repeat: true,
     replies: ["[IMPROVEMENT] improve --- more W\\n[WINTIER] big --- b"]}
  - {match: 'Child[^#]*(sets W to zero|sets X to zero|sets Z to minus one)', repeat: true,
     replies: ["[IMPROVEMENT] lose --- worse\\n[WINTIER] NA --- n"]}
  - {match: '## Child', repeat: true, replies: ["[IMPROVEMENT] improve --- maybe\\n[WINTIER] small --- s",
                                                "[IMPROVEMENT] lose --- maybe not\\n[WINTIER] NA --- n"]}
"""
BENCH_TASK = str(Path(__file__).resolve().parent / "tasks" / "policy_space")


def tiny_policy(task: str, out: Path) -> str:
    from verifyless.task import load_task
    from verifyless.train.policy.tiny import build_tiny_policy_lm, space_answers
    from verifyless.train.policy.wiring import build_rewarder

    target = out / "tiny-policy"
    if not (target / "config.json").is_file():
        with build_rewarder([task], out / "probe.db", mode="verify-all", parents=2, ideas=2) as built:
            prompts = asyncio.run(built.rewarder.prompts(0))
        build_tiny_policy_lm(target, [p.messages for p in prompts], space_answers(load_task(task)))
    return str(target)


def train_mode(mode: str, args: argparse.Namespace, policy: str, critic: Path, settings: Any) -> dict[str, Any]:
    from verifyless.train.policy.events import PolicyIdea
    from verifyless.train.policy.trainer import PolicyTrainer
    from verifyless.train.policy.wiring import build_rewarder

    work = args.out / mode
    started = time.monotonic()
    with build_rewarder(
        [args.task], work / "rewards.db", mode=mode, parents=args.parents, ideas=args.ideas, votes=args.votes,
        verifications=args.verifications, audit_rate=0.0 if mode == "verify-all" else args.audit_rate,
        critic=None if mode == "verify-all" else f"scripted:{critic}", seed=args.seed,
    ) as built:  # fmt: skip
        trainer = PolicyTrainer(built.rewarder, base=policy, out=work / "train", settings=settings)
        result = asyncio.run(trainer.train(args.steps))
        ideas = [e.record.payload() for e in built.store.events(built.run_id, PolicyIdea)]
        paid = built.store.budget(built.run_id).verifications
    rewarded = sum(1 for p in ideas if p["source"] != "invalid")
    verified = sum(1 for p in ideas if p.get("improved") is not None)
    steps = [json.loads(line) for line in (work / "train" / "train_log.jsonl").read_text().splitlines()]
    audited = [s for s in steps if s.get("audited")]
    agree = (
        sum(s["agreement"] * s["audited"] for s in audited) / sum(s["audited"] for s in audited) if audited else None
    )
    r = result.rewards
    return {
        "mode": mode, "steps": result.steps, "stopped": result.stopped, "ideas": len(ideas), "paid": paid,
        "share_verified": verified / len(ideas) if ideas else 0.0, "rewarded_per_verification": rewarded / max(paid, 1),
        "agreement": agree, "first3": sum(r[:3]) / max(len(r[:3]), 1), "last3": sum(r[-3:]) / max(len(r[-3:]), 1),
        "seconds": time.monotonic() - started, "adapter": str(result.adapter_dir),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", default="tiny")
    parser.add_argument("--task", default=BENCH_TASK)
    parser.add_argument("--verifications", type=int, default=48)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--parents", type=int, default=4)
    parser.add_argument("--ideas", type=int, default=8)
    parser.add_argument("--votes", type=int, default=4)
    parser.add_argument("--audit-rate", type=float, default=0.0)
    parser.add_argument("--critic-rules", type=Path, default=None)
    parser.add_argument("--config", type=Path, default=None, help="policy GRPO settings YAML")
    parser.add_argument("--eval-verifications", type=int, default=8)
    parser.add_argument("--eval-seeds", default="0,1,2")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/bench-policy"))
    args = parser.parse_args()

    import torch

    from verifyless.train.policy.evaluate import evaluate_proposers
    from verifyless.train.policy.grpo_settings import load_policy_settings

    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    args.task = str(Path(args.task).resolve()) if Path(args.task).exists() else args.task
    policy = tiny_policy(args.task, args.out) if args.policy == "tiny" else args.policy
    critic = args.critic_rules or args.out / "critic.yaml"
    if args.critic_rules is None:
        critic.write_text(CRITIC)
    overrides = dict(learning_rate=2e-2, beta=0.1, lora_r=8, lora_alpha=16, max_completion_length=24)
    if args.policy != "tiny":
        overrides = dict(learning_rate=1e-5, beta=0.01, max_completion_length=64)
    settings = load_policy_settings(args.config, generations=args.ideas, temperature=1.0, **overrides)
    rows = [train_mode(mode, args, policy, critic, settings) for mode in MODES]
    print(f"\nPolicy GRPO, task {Path(args.task).name}, policy {args.policy}, cap {args.verifications} verifications, "
          f"{args.parents} parents x {args.ideas} ideas, {args.steps} steps at most, seed {args.seed}\n")  # fmt: skip
    print(
        "| mode | steps | stopped | ideas | paid verifications | share verified | rewarded / verification "
        "| agreement (audited) | reward first 3 -> last 3 | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        agree = "-" if r["agreement"] is None else f"{r['agreement']:.0%}"
        print(f"| {r['mode']} | {r['steps']} | {r['stopped']} | {r['ideas']} | {r['paid']} | {r['share_verified']:.1%} "
              f"| {r['rewarded_per_verification']:.2f} | {agree} | {r['first3']:+.2f} -> {r['last3']:+.2f} "
              f"| {r['seconds']:.0f} |")  # fmt: skip
    seeds = [int(s) for s in args.eval_seeds.split(",")]
    print(f"\nMatched budget: {args.eval_verifications} verifications per run, seeds {seeds}, same task\n")
    print(
        "| adapter | base gain | trained gain | base improved share | trained improved share | P(trained > base) "
        "| wall s |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        started = time.monotonic()
        summary = asyncio.run(
            evaluate_proposers(
                policy, Path(r["adapter"]), [args.task], out=args.out / f"eval-{r['mode']}",
                verifications=args.eval_verifications, seeds=seeds, parents=args.parents, settings=settings,
            )
        )  # fmt: skip
        print(f"| {r['mode']} | {summary.gain['base']} | {summary.gain['trained']} "
              f"| {summary.improved_share['base']:.1%} | {summary.improved_share['trained']:.1%} "
              f"| {summary.p_improvement} | {time.monotonic() - started:.0f} |")  # fmt: skip


if __name__ == "__main__":
    main()
