"""Policy GRPO (``verifyless.train.policy``) on a tiny random Llama, one torch thread.

Two rewarders: ``tests/policy_world.WorldRewarder`` (a small, real, budgeted and durable rewarder over an
idea-space-like world: the good option +1, another option -1, none: invalid) checks the loop on its own; the
real pipeline (``build_rewarder`` on ``tests/data_task``, score 2A + B - C, real sandboxed verification) checks
training, the three modes, the CLI and a kill -9 resume end to end.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("peft")

from policy_world import GOOD, OPTIONS, WorldRewarder, answers, world_messages  # noqa: E402

from verifyless.errors import ConfigError  # noqa: E402
from verifyless.screen.ttl import group_advantages  # noqa: E402
from verifyless.train.policy.grpo_settings import load_policy_settings  # noqa: E402
from verifyless.train.policy.loss import grpo_terms  # noqa: E402
from verifyless.train.policy.trainer import PolicyTrainer  # noqa: E402

TESTS = Path(__file__).parents[2]  # tests/
TASK = str(TESTS / "data_task")
CONFIG = "learning_rate: 0.02\nbeta: 0.1\nlora_r: 8\nlora_alpha: 16\nmax_completion_length: 24\ntemperature: 1.0\n"
CRITIC = """rules:
  - {match: 'Child[^#]*sets A to three', repeat: true, replies: ["[IMPROVEMENT] improve --- more A\\n[WINTIER] big --- b"]}
  - {match: 'Child[^#]*sets A to zero', repeat: true, replies: ["[IMPROVEMENT] lose --- less A\\n[WINTIER] NA --- n"]}
  - {match: '## Child', repeat: true, replies: ["[IMPROVEMENT] improve --- maybe\\n[WINTIER] small --- s",
                                                "[IMPROVEMENT] lose --- maybe not\\n[WINTIER] NA --- n"]}
"""
FAST = dict(generations=8, lora_r=8, lora_alpha=16, max_completion_length=16, temperature=1.0)


def _publish(tmp: Path, target: Path) -> None:
    """Move a freshly built model into the shared cache; a process that got there first wins (its copy is the same)."""
    try:
        tmp.rename(target)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def policy_lm(request: pytest.FixtureRequest) -> Path:
    import torch

    from verifyless.train.policy.tiny import build_tiny_policy_lm

    torch.set_num_threads(1)
    root = Path(request.config.cache.mkdir("verifyless-tiny-policy"))
    target = root / "world-v1"
    if not (target / "config.json").is_file():
        tmp = root / f".world.{os.getpid()}"
        build_tiny_policy_lm(tmp, [world_messages(f"p{j}") for j in range(4)], answers())
        _publish(tmp, target)
    return target


@pytest.fixture(scope="module")
def task_lm(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny policy LM taught to answer the data task's real proposer prompt with one option line."""
    import torch

    from verifyless.task import load_task
    from verifyless.train.policy.tiny import build_tiny_policy_lm, space_answers
    from verifyless.train.policy.wiring import build_rewarder

    torch.set_num_threads(1)
    root = Path(request.config.cache.mkdir("verifyless-tiny-policy"))
    target = root / "data-task-v1"
    if not (target / "config.json").is_file():
        probe = tmp_path_factory.mktemp("probe") / "probe.db"
        with build_rewarder([TASK], probe, mode="verify-all", parents=2, ideas=2) as built:
            prompts = asyncio.run(built.rewarder.prompts(0))
        tmp = root / f".data-task.{os.getpid()}"
        build_tiny_policy_lm(tmp, [p.messages for p in prompts], space_answers(load_task(TASK)))
        _publish(tmp, target)
    return target


def good_share(model: object, tokenizer: object) -> float:
    """P(the good answer) / P(any answer) for parent p0, read exactly with teacher forcing."""
    import torch

    from verifyless.model.local import chat_prompt, encode
    from verifyless.train.policy.loss import Sequenced, token_logps

    head = tuple(encode(tokenizer, chat_prompt(tokenizer, list(world_messages("p0")))))
    eos = tokenizer.eos_token_id  # type: ignore[attr-defined]
    seqs = [Sequenced(head, tuple(encode(tokenizer, a) + [eos]), 0.0) for a in answers()]
    with torch.no_grad():
        logp, mask = token_logps(model, seqs, tokenizer.pad_token_id, 1.0)  # type: ignore[attr-defined]
    p = (logp * mask).sum(1).exp()
    good = sum(float(p[i]) for i, o in enumerate(OPTIONS) if o in GOOD)
    return good / float(p.sum())


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_group_advantages_and_loss_direction() -> None:
    import torch

    assert group_advantages([1.0, 1.0, 1.0]) is None
    adv = group_advantages([1.0, -1.0, -1.0, -1.0])
    assert adv is not None and adv[0] > 0 > adv[1] and abs(sum(adv)) < 1e-6
    logp = torch.tensor([[-1.0, -2.0], [-1.0, -2.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    ref = torch.tensor([[-1.5, -2.0], [-1.0, -2.0]])
    loss, kl = grpo_terms(logp, logp.detach(), ref, mask, torch.tensor([1.0, -1.0]), beta=0.1, clip_epsilon=0.2)
    loss.sum().backward()
    assert logp.grad is not None
    assert logp.grad[0, 0] < 0 and logp.grad[1, 0] > 0  # descending raises the good one, lowers the bad one
    assert logp.grad[1, 1] == 0  # masked token
    assert kl[0] > 0 and kl[1] == 0


def test_policy_grpo_raises_the_share_of_good_ideas_in_the_world(policy_lm: Path, tmp_path: Path) -> None:
    settings = load_policy_settings(None, learning_rate=2e-2, beta=0.1, **FAST)
    rewarder = WorldRewarder(tmp_path / "rewards.jsonl", parents=4)
    trainer = PolicyTrainer(rewarder, base=str(policy_lm), out=tmp_path / "out", settings=settings)
    result = asyncio.run(trainer.train(10))
    assert result.stopped == "steps" and result.steps == 10
    first, last = sum(result.rewards[:3]) / 3, sum(result.rewards[-3:]) / 3
    assert last > first, result.rewards
    tok = trainer.loaded.tokenizer
    trained = good_share(trainer.model, tok)
    with trainer.model.disable_adapter():
        base = good_share(trainer.model, tok)
    assert trained > base + 0.03, (base, trained)
    log = records(result.log_path)
    steps = [r for r in log if "event" not in r]
    assert [r["step"] for r in steps] == list(range(10)) and log[-1] == {
        "event": "stopped",
        "reason": "steps",
        "steps": 10,
    }
    for key in ("mean_reward", "share_verified", "rewarded_per_verification", "agreement", "tokens", "verify_seconds",
                "loss", "kl", "seconds", "policy_tokens", "verifications_left"):  # fmt: skip
        assert key in steps[0], key
    card = json.loads((result.adapter_dir / "verifyless_card.json").read_text())
    assert card["kind"] == "policy-grpo" and card["steps"] == 10
    assert (result.adapter_dir / "adapter_model.safetensors").is_file()


def test_budget_stops_before_the_update_and_resume_pays_nothing_twice(policy_lm: Path, tmp_path: Path) -> None:
    settings = load_policy_settings(None, learning_rate=1e-2, **FAST)
    out = tmp_path / "out"
    first = WorldRewarder(tmp_path / "rewards.jsonl", parents=4, budget=70)  # 32 per step: the 3rd step runs out
    result = asyncio.run(PolicyTrainer(first, base=str(policy_lm), out=out, settings=settings).train(5))
    assert result.stopped == "budget" and result.steps == 2
    assert sorted(p.name for p in (out / "checkpoints").glob("step-*")) == ["step-000001", "step-000002"]
    assert records(out / "train_log.jsonl")[-1]["reason"] == "budget"
    with pytest.raises(ConfigError, match="--resume"):
        asyncio.run(PolicyTrainer(first, base=str(policy_lm), out=out, settings=settings).train(5))
    # More budget: resume re-reads the stored rewards of the interrupted step instead of paying for them.
    second = WorldRewarder(tmp_path / "rewards.jsonl", parents=4, budget=1000)
    result = asyncio.run(PolicyTrainer(second, base=str(policy_lm), out=out, settings=settings).train(4, resume=True))
    assert result.stopped == "steps" and result.steps == 4
    paid_first = {k for k in first.paid}
    assert not paid_first & set(second.paid)
    assert {k.split("/")[0] for k, _ in second.paid} <= {"s2", "s3"}
    steps = [r["step"] for r in records(out / "train_log.jsonl") if "event" not in r]
    assert steps == [0, 1, 2, 3]


def test_verify_all_raises_the_share_of_improving_ideas_on_a_real_task(task_lm: Path, tmp_path: Path) -> None:
    from verifyless.train.policy.wiring import build_rewarder

    (tmp_path / "c.yaml").write_text(CONFIG)
    settings = load_policy_settings(tmp_path / "c.yaml", generations=8)
    with build_rewarder([TASK], tmp_path / "r.db", mode="verify-all", parents=4, ideas=8, verifications=300) as built:
        trainer = PolicyTrainer(built.rewarder, base=str(task_lm), out=tmp_path / "out", settings=settings)
        result = asyncio.run(trainer.train(12))
    # every reward is +1 (improve) or -1, so the share of improving ideas is (mean reward + 1) / 2
    first, last = sum(result.rewards[:4]) / 4, sum(result.rewards[-4:]) / 4
    assert result.steps == 12 and last > first + 0.1, result.rewards


def _cli(args: list[str]) -> None:
    from typer.testing import CliRunner

    from verifyless._cli.app import app

    outcome = CliRunner().invoke(app, ["train", *args])
    assert outcome.exit_code == 0, outcome.output


@pytest.mark.parametrize("mode", ["verify-all", "critic-in-loop", "critic-only"])
def test_each_mode_trains_from_the_cli_and_logs_the_step_fields(mode: str, task_lm: Path, tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CONFIG)
    (tmp_path / "critic.yaml").write_text(CRITIC)
    out = tmp_path / "out"
    args = ["policy-grpo", "--tasks", TASK, "--policy", str(task_lm), "--out", str(out), "--mode", mode,
            "--steps", "2", "--parents", "2", "--ideas", "4", "--votes", "2", "--verifications", "100",
            "--config", str(tmp_path / "c.yaml")]  # fmt: skip
    if mode != "verify-all":
        args += ["--critic", f"scripted:{tmp_path / 'critic.yaml'}"]
    _cli(args)
    steps = [r for r in records(out / "train_log.jsonl") if "event" not in r]
    assert [r["step"] for r in steps] == [0, 1]
    fields = ("mean_reward", "share_verified", "rewarded_per_verification", "audited", "agreement", "tokens",
              "verify_seconds", "loss", "seconds", "verifications_left")  # fmt: skip
    assert all(k in r for r in steps for k in fields)
    share = sum(r["verified"] for r in steps) / sum(r["ideas"] for r in steps)
    if mode == "verify-all":
        assert share > 0.3
    elif mode == "critic-only":
        assert share == 0 and steps[-1]["tokens"] > 0
    else:
        assert 0 < share < 1
    assert (out / "adapter" / "adapter_model.safetensors").is_file()


@pytest.mark.slow
def test_kill_9_mid_run_resumes_from_the_last_checkpoint_without_paying_twice(task_lm: Path, tmp_path: Path) -> None:
    from collections import Counter

    from verifyless.store import RunStore

    (tmp_path / "c.yaml").write_text(CONFIG)
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent / "src"), "OMP_NUM_THREADS": "1"}
    base = [sys.executable, "-m", "verifyless", "train", "policy-grpo", "--tasks", TASK, "--policy", str(task_lm),
            "--out", str(out), "--mode", "verify-all", "--parents", "3", "--ideas", "6",
            "--config", str(tmp_path / "c.yaml")]  # fmt: skip
    proc = subprocess.Popen([*base, "--steps", "50"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = out / "train_log.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and (not log.is_file() or len(log.read_text().splitlines()) < 3):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = len(records(log))
    assert 3 <= killed_at < 50
    subprocess.run([*base, "--steps", str(killed_at + 2), "--resume"], env=env, check=True, timeout=300)
    assert [r["step"] for r in records(log) if "event" not in r] == list(range(killed_at + 2))
    with RunStore(out / "rewards.db") as store:
        run_id = json.loads((out / "run.json").read_text())["run_id"]
        paid = Counter(e.node_id for e in store.events(run_id, kinds=["verification"]) if e.charge is not None)
    assert paid and max(paid.values()) == 1, paid


@pytest.fixture(scope="module")
def trained(task_lm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A proposer adapter from 3 verify-all steps of policy-grpo on the data task (through the CLI)."""
    work = tmp_path_factory.mktemp("trained")
    (work / "c.yaml").write_text(CONFIG)
    _cli(["policy-grpo", "--tasks", TASK, "--policy", str(task_lm), "--out", str(work / "out"), "--mode", "verify-all",
          "--steps", "3", "--parents", "2", "--ideas", "4", "--config", str(work / "c.yaml")])  # fmt: skip
    return work / "out" / "adapter"


def test_a_trained_proposer_proposes_in_a_normal_run(task_lm: Path, trained: Path, tmp_path: Path) -> None:
    from verifyless._cli.app import app
    from verifyless.store import RunStore

    spec = {"provider": "local", "model": str(task_lm), "adapter": str(trained), "max_tokens": 24, "device": "cpu"}
    (tmp_path / "run.yaml").write_text(json.dumps({"roles": {"kind": "space", "models": {"proposer": spec}}}))
    from typer.testing import CliRunner

    db = tmp_path / "run.db"
    args = ["run", TASK, "--config", str(tmp_path / "run.yaml"), "--budget", "4", "--store", str(db), "-q"]
    outcome = CliRunner().invoke(app, [*args, "--screener", "random"])
    assert outcome.exit_code == 0, outcome.output
    with RunStore(db) as store:
        run = store.runs()[0]
        calls = [e.payload for e in store.events(run.run_id, kinds=["llm_call"])]
        nodes = store.nodes(run.run_id)
    assert calls and {c["role"] for c in calls} == {"proposer"}
    children = [n for n in nodes if n.parent_id is not None]
    made = [n for n in children if n.idea and n.status.value != "parse-error"]
    assert made, f"no child came from the trained proposer's ideas: {children}"


def test_policy_eval_compares_base_and_trained_under_the_same_budget(
    task_lm: Path, trained: Path, tmp_path: Path
) -> None:
    (tmp_path / "c.yaml").write_text(CONFIG)
    out = tmp_path / "eval"
    _cli(["policy-eval", "--tasks", TASK, "--policy", str(task_lm), "--adapter", str(trained), "--out", str(out),
          "--verifications", "5", "--seeds", "0,1", "--parents", "2", "--ideas", "4",
          "--config", str(tmp_path / "c.yaml")])  # fmt: skip
    results = json.loads((out / "results.json").read_text())
    runs = results["runs"]
    assert sorted((r["arm"], r["seed"]) for r in runs) == [("base", 0), ("base", 1), ("trained", 0), ("trained", 1)]
    assert all(r["verified"] > 0 and r["best"] >= r["baseline"] for r in runs)
    assert 0.0 <= results["p_improvement"]["value"] <= 1.0 and set(results["gain"]) == {"base", "trained"}


def test_a_run_started_from_an_adapter_keeps_its_kl_to_that_adapter(policy_lm: Path, tmp_path: Path) -> None:
    """The KL reference is the starting policy: at step 0 the policy and the reference agree exactly."""
    import torch

    from verifyless.train.policy.loss import Sequenced, token_logps

    settings = load_policy_settings(None, learning_rate=2e-2, beta=0.1, **FAST)
    first = PolicyTrainer(
        WorldRewarder(tmp_path / "r1.jsonl", parents=4), base=str(policy_lm), out=tmp_path / "a", settings=settings
    )
    start = asyncio.run(first.train(3)).adapter_dir
    trainer = PolicyTrainer(
        WorldRewarder(tmp_path / "r2.jsonl", parents=4), base=str(policy_lm), out=tmp_path / "b", settings=settings,
        init_adapter=start,
    )  # fmt: skip
    trainer.load()
    tok = trainer.loaded.tokenizer
    text = tok.apply_chat_template(list(world_messages("p0")), add_generation_prompt=True, tokenize=False)
    prompt, completion = tok(text)["input_ids"], tok("Use bravo for the model.")["input_ids"]
    chunk = [Sequenced(tuple(prompt), tuple(completion), 1.0)]
    with torch.no_grad():
        policy = token_logps(trainer.model, chunk, tok.pad_token_id, settings.temperature)[0]
        reference = trainer._ref_logps(chunk)
        with trainer.model.disable_adapter():
            base = token_logps(trainer.model, chunk, tok.pad_token_id, settings.temperature)[0]
    assert torch.allclose(policy, reference), "the reference is not the starting adapter"
    assert not torch.allclose(policy, base), "the starting adapter equals the base: the test cannot tell them apart"
    assert any(p.requires_grad for n, p in trainer.model.named_parameters() if "lora" in n and ".default." in n)
    assert not any(p.requires_grad for n, p in trainer.model.named_parameters() if ".reference." in n)
    result = asyncio.run(trainer.train(1))
    saved = sorted(p.name for p in result.adapter_dir.iterdir())
    assert "reference" not in saved, saved  # only the policy's adapter is saved
