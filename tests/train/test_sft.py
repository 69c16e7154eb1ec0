"""Critic SFT and GRPO with TRL + LoRA on a tiny Llama (one torch thread), through the library and the CLI.

The tiny model is taught the critique format with random verdicts when it is built (``verifyless.train.tiny``),
so it writes parseable critiques but does not know which verdict is right.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tiny_lm import tiny_lm

pytest.importorskip("trl")
pytest.importorskip("peft")

from verifyless.errors import ConfigError  # noqa: E402
from verifyless.train.critic_rows import keyword_dataset, load_dataset, messages_for  # noqa: E402
from verifyless.train.grpo import train_critic_grpo, verdict_reward  # noqa: E402
from verifyless.train.settings import grpo_accumulation, load_settings  # noqa: E402
from verifyless.train.sft import train_critic_sft  # noqa: E402

SMALL = dict(lora_r=8, lora_alpha=16, save_steps=3, grad_accum=1)  # one step per batch, as these tests count


@pytest.fixture(scope="module")
def tiny(request: pytest.FixtureRequest) -> Path:
    return tiny_lm(request.config)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Labels follow the child-summary keyword; 'improve' rows dominate the grpo split, so the fast GRPO test below
    # checks the mechanism (reward up, adapter changed); the slow balanced test checks that it reads the keyword.
    return keyword_dataset(
        tmp_path_factory.mktemp("data") / "critic",
        n={"sft": 12, "grpo": 16, "bench": 4},
        critique_labels="random",
        label_weights={"improve": 0.95, "lose": 0.05},
    )


@pytest.fixture(scope="module")
def sft_out(tiny: Path, dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sft") / "critic"
    settings = load_settings("sft", None, learning_rate=1e-2, epochs=10, max_steps=6, batch_size=4, **SMALL)
    train_critic_sft(dataset, base=str(tiny), out=out, settings=settings)
    return out


@pytest.fixture(scope="module")
def sft_light(tiny: Path, dataset: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small SFT step: the GRPO start stays close to the format-taught model (verdicts still mixed)."""
    out = tmp_path_factory.mktemp("sft-light") / "critic"
    settings = load_settings("sft", None, learning_rate=1e-4, max_steps=1, batch_size=4, **SMALL)
    train_critic_sft(dataset, base=str(tiny), out=out, settings=settings)
    return out


def log_values(path: Path, key: str) -> list[float]:
    return [r[key] for r in map(json.loads, path.read_text().splitlines()) if key in r]


def test_sft_loss_falls_and_leaves_a_peft_adapter_with_a_card(sft_out: Path, tiny: Path) -> None:
    losses = log_values(sft_out / "train_log.jsonl", "loss")
    assert len(losses) == 6 and losses[-1] < losses[0]
    adapter = sft_out / "adapter"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["r"] == 8 and config["peft_type"] == "LORA"
    card = json.loads((adapter / "verifyless_card.json").read_text())
    assert card["base_model"] == str(tiny) and card["kind"] == "sft" and card["rows"] == 12
    assert card["settings"]["learning_rate"] == 1e-2 and card["stats"]["steps"] == 6
    readme = (adapter / "README.md").read_text()
    assert "--enable-lora --lora-modules critic=" in readme and str(tiny) in readme
    assert sorted(p.name for p in (sft_out / "checkpoints").glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-6"]


def test_sft_resumes_from_its_checkpoint_through_the_cli(
    sft_out: Path, dataset: Path, tiny: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from verifyless._cli.app import app

    config = tmp_path / "sft.yaml"
    config.write_text(
        "learning_rate: 0.01\nepochs: 10\nbatch_size: 4\ngrad_accum: 1\nlora_r: 8\nlora_alpha: 16\nsave_steps: 3\n"
    )
    args = [
        "train",
        "critic-sft",
        str(dataset),
        "--base",
        str(tiny),
        "--out",
        str(sft_out),
        "--config",
        str(config),
        "--max-steps",
        "8",
        "--resume",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    steps = [r["step"] for r in map(json.loads, (sft_out / "train_log.jsonl").read_text().splitlines()) if "loss" in r]
    assert steps[6:] == [7, 8]  # continued after checkpoint-6 instead of starting over
    assert "adapter saved to" in result.output


def test_settings_come_from_the_paper_and_yaml(tmp_path: Path) -> None:
    sft, grpo = load_settings("sft"), load_settings("grpo")
    assert (sft.lora_r, sft.learning_rate, sft.epochs) == (32, 1e-5, 3.0)
    # one example per step fits a 24 GB machine; accumulation keeps the effective batch of 4
    assert (sft.batch_size, sft.grad_accum) == (1, 4) and grpo.grad_accum == 1
    assert (grpo.num_generations, grpo.temperature, grpo.learning_rate, grpo.weight_decay, grpo.beta) == (
        8,
        0.7,
        1e-6,
        0.1,
        0.01,
    )
    # Appendix G.2: 300 rollout steps, 256 idea prompts each; the device batch is ours, accumulation makes up the rest
    assert (grpo.max_steps, grpo.prompts_per_step) == (300, 256)
    assert grpo_accumulation(grpo) * grpo.batch_size == 256 * grpo.num_generations
    with pytest.raises(ConfigError, match="do not split into device batches"):
        grpo_accumulation(load_settings("grpo", None, prompts_per_step=3, batch_size=16))
    path = tmp_path / "c.yaml"
    path.write_text("lora_r: 16\nlearning_rate: 2.0e-5\n")
    assert load_settings("sft", path).lora_r == 16
    path.write_text("lora_rank: 16\n")
    with pytest.raises(ConfigError, match="lora_rank"):
        load_settings("sft", path)
    path.write_text("lora_r: [16\n")  # a typo is one ConfigError naming the file, line and column
    with pytest.raises(ConfigError, match=r"training config .*c.yaml is not valid YAML: line 2, column 1"):
        load_settings("sft", path)


def test_verdict_reward_matches_the_screening_parser() -> None:
    completions = [
        [{"role": "assistant", "content": "x\n[IMPROVEMENT] improve --- y\n[WINTIER] big --- z"}],
        [{"role": "assistant", "content": "x\n[IMPROVEMENT] tie --- y\n[WINTIER] NA --- z"}],
        [{"role": "assistant", "content": "x\n[IMPROVEMENT] improve --- y\n[WINTIER] NA --- z"}],  # invalid: NA
        [{"role": "assistant", "content": "no verdict at all"}],
    ]
    assert verdict_reward(completions, ["improve", "improve", "improve", "tie"]) == [1.0, -1.0, -1.0, -1.0]


def mean_reward(tiny: Path, adapter: Path, dataset: Path) -> float:
    from verifyless.model import Message, ModelRequest, build_model, make_config

    model = build_model(
        make_config(
            provider="local", model=str(tiny), adapter=str(adapter), max_tokens=28, temperature=0.7, device="cpu"
        )
    )
    rows = list(load_dataset(dataset)["grpo"])
    total = []
    for row in rows:
        messages = tuple(Message(m["role"], m["content"]) for m in messages_for(row))  # type: ignore[arg-type]
        reply = asyncio.run(model.generate(ModelRequest(messages=messages, n=8)))
        total += verdict_reward([c.text for c in reply.choices], [row["label3"]] * 8)
    return sum(total) / len(total)


def test_grpo_raises_mean_reward_and_changes_the_adapter(
    sft_light: Path, dataset: Path, tiny: Path, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    settings = load_settings(
        "grpo",
        None,
        learning_rate=8e-3,
        max_steps=8,
        batch_size=16,
        prompts_per_step=2,  # 16 completions per optimizer step, one device batch (CPU-sized)
        num_generations=8,
        max_completion_length=28,
        weight_decay=0.0,
        **SMALL,
    )
    result = train_critic_grpo(dataset, start=sft_light, out=tmp_path / "grpo", settings=settings)
    before = load_file(str(sft_light / "adapter" / "adapter_model.safetensors"))
    after = load_file(str(result.adapter_dir / "adapter_model.safetensors"))
    assert before.keys() == after.keys()
    assert any(not (before[k] == after[k]).all() for k in before)
    start, end = mean_reward(tiny, sft_light / "adapter", dataset), mean_reward(tiny, result.adapter_dir, dataset)
    assert end > start + 0.2, (start, end)
    card = json.loads((result.adapter_dir / "verifyless_card.json").read_text())
    assert card["kind"] == "sft+grpo" and card["base_model"] == str(tiny)
    assert not (result.adapter_dir / "ref").exists()  # only the trained adapter is saved
    logged = [r for r in map(json.loads, result.log_path.read_text().splitlines()) if "reward" in r]
    assert len(logged) == 8 and all(0 <= r["frac_groups_skipped"] <= 1 for r in logged)


def verdict_accuracy(tiny: Path, adapter: Path, dataset: Path) -> dict[str, float]:
    """Mean P(true verdict) per label on the bench split, read at the verdict position of the critique
    the reading tiny model writes (``Criterion 1: the child will <keyword>.``), over its three verdict tokens."""
    import torch

    from verifyless.model import build_model, make_config
    from verifyless.model.local import activate, chat_prompt, encode
    from verifyless.train.critic_rows import KEYWORDS

    model = build_model(make_config(provider="local", model=str(tiny), adapter=str(adapter), device="cpu"))
    tok = model.loaded.tokenizer
    # The tiny tokenizer merges across words: the verdict token right after "] " is "improv" / "los" / "ti".
    token = {label: tok.convert_tokens_to_ids(tok.tokenize(label[:-1]))[0] for label in ("improve", "lose", "tie")}
    labels = list(token)
    found: dict[str, list[float]] = {}
    with activate(model.loaded, model.adapter_names), torch.no_grad():
        for row in load_dataset(dataset)["bench"]:
            reasoning = f"Criterion 1: the child will {KEYWORDS[row['label3']]}.\n[IMPROVEMENT] "
            ids = encode(tok, chat_prompt(tok, messages_for(row))) + encode(tok, reasoning)
            logits = model.loaded.model(input_ids=torch.tensor([ids])).logits[0, -1]
            probs = torch.softmax(torch.stack([logits[token[label]] for label in labels]), 0)
            found.setdefault(row["label3"], []).append(float(probs[labels.index(row["label3"])]))
    return {label: sum(v) / len(v) for label, v in found.items()}


@pytest.mark.slow
def test_grpo_learns_the_keyword_on_a_balanced_split(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Half the rows improve, half lose, decided by the child-summary keyword; the rise must show on both.

    The reading tiny model names the change before a random verdict, so the verdict can depend on the keyword.
    Each step's prompts alternate improve/lose (``shuffle: false`` on a balanced split) and only the
    highest-entropy tenth of the completion tokens is trained (the verdict): with unbalanced steps or all
    tokens trained, the tiny LoRA moved the verdict bias (or broke the format) instead (measured). About 60 s.
    """
    tiny = tiny_lm(request.config, reads=True)
    data = keyword_dataset(
        tmp_path / "balanced",
        n={"sft": 4, "grpo": 32, "bench": 16},
        seed=1,
        critique_labels="random",
        label_weights={"improve": 0.5, "lose": 0.5},
        name_keyword=True,
        balanced=True,
    )
    sft = tmp_path / "sft"
    light = load_settings("sft", None, learning_rate=1e-4, max_steps=1, **SMALL)  # GRPO starts from an SFT folder
    train_critic_sft(data, base=str(tiny), out=sft, settings=light)
    settings = load_settings(
        "grpo",
        None,
        learning_rate=5e-3,
        max_steps=40,
        batch_size=16,
        prompts_per_step=2,  # 16 completions per optimizer step, one device batch (CPU-sized)
        num_generations=8,
        max_completion_length=24,
        weight_decay=0.0,
        shuffle=False,
        top_entropy_quantile=0.1,
        **SMALL,
    )
    result = train_critic_grpo(data, start=sft, out=tmp_path / "grpo", settings=settings)
    before, after = verdict_accuracy(tiny, sft / "adapter", data), verdict_accuracy(tiny, result.adapter_dir, data)
    assert sorted(before) == ["improve", "lose"]
    assert all(after[label] > before[label] + 0.03 for label in before), (before, after)
    assert sum(after.values()) / 2 > sum(before.values()) / 2 + 0.05, (before, after)


def test_equal_reward_groups_are_masked_out_of_the_loss() -> None:
    """Groups whose rewards are all equal (zero advantages) lose every token; the others keep theirs."""
    import torch

    from verifyless.train.grpo import mask_equal_reward_groups

    advantages = torch.tensor([0.0, 0.0, 0.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.5])  # 3 groups of 3
    mask = torch.tensor([[1, 1], [1, 0], [1, 1], [1, 1], [1, 1], [1, 0], [1, 1], [1, 1], [0, 1]])
    kept, skipped = mask_equal_reward_groups(advantages, mask, 3)
    assert skipped == pytest.approx(1 / 3)
    assert kept[:3].sum() == 0  # the all-zero group is dropped
    assert torch.equal(kept[3:], mask[3:])  # a zero inside a group with signal is kept
    assert kept.dtype == mask.dtype
