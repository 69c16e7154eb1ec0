"""Policy GRPO (``verifyless.train.policy``) on a tiny random Llama, one torch thread.

Before the real reward pipeline, the loop is checked against ``tests/policy_world.WorldRewarder``:
a real, budgeted, durable rewarder over an idea-space-like world (an idea that names the good
option is rewarded +1, any other named option -1, no option: invalid).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("peft")

from policy_world import GOOD, OPTIONS, WorldRewarder, answers, world_messages  # noqa: E402
from verifyless.errors import ConfigError  # noqa: E402
from verifyless.train.policy.loss import group_advantages, grpo_terms  # noqa: E402
from verifyless.train.policy.grpo_settings import load_policy_settings  # noqa: E402
from verifyless.train.policy.trainer import PolicyTrainer  # noqa: E402

TESTS = Path(__file__).parent
FAST = dict(generations=8, lora_r=8, lora_alpha=16, max_completion_length=16, temperature=1.0)


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
        tmp.rename(target)
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


def test_policy_grpo_raises_the_share_of_good_ideas(policy_lm: Path, tmp_path: Path) -> None:
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


@pytest.mark.slow
def test_kill_9_mid_run_resumes_from_the_last_checkpoint(policy_lm: Path, tmp_path: Path) -> None:
    script = TESTS / "policy_world_run.py"
    env = {**os.environ, "PYTHONPATH": f"{TESTS.parent / 'src'}{os.pathsep}{TESTS}", "OMP_NUM_THREADS": "1"}
    args = [sys.executable, str(script), str(policy_lm), str(tmp_path), "40"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = tmp_path / "out" / "train_log.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not log.is_file() or len(log.read_text().splitlines()) < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    stored_before = len((tmp_path / "rewards.jsonl").read_text().splitlines())
    done = [r["step"] for r in records(log)]
    assert 2 <= len(done) < 40
    subprocess.run([*args[:-1], "6", "--resume"], env=env, check=True, timeout=300)
    lines = (tmp_path / "rewards.jsonl").read_text().splitlines()
    keys = [(r["key"], r["index"]) for r in map(json.loads, lines)]
    assert len(keys) == len(set(keys)), "a stored reward was paid for again"
    assert len(lines) >= stored_before
    assert [r["step"] for r in records(log) if "event" not in r] == list(range(6))
