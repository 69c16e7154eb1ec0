"""Training settings: the critic paper's values as defaults, overridable from a YAML file.

SFT (Appendix G.1): LoRA rank 32, learning rate 1e-5, 3 epochs.
GRPO (Appendix G.2): 300 rollout steps of 256 idea prompts each, 8 generations
per prompt, temperature 0.7, learning rate 1e-6, weight decay 0.1, KL
coefficient 0.01, groups whose rewards are all equal skipped. The batch is
stated as prompts per optimizer step (``prompts_per_step``); ``batch_size`` is
only how many completions fit on the device at once, and gradient accumulation
makes up the rest. Settings the paper does not give (alpha, lengths, device
batch) are ours and named as such in the docstrings below. On a CPU, pass small
``prompts_per_step`` and ``max_steps`` (the tests and benchmarks do).

SFT memory: the default is one example per device step with 4 accumulated
steps (effective batch 4, as before), so a 24 GB machine trains SmolLM2-135M
on prompts of ~2,200 tokens (batch 1: 7.7 GB peak; batch 4 was killed for
memory above 24 GB). Activation memory grows with batch x max_length, and
attention with max_length squared: raise ``batch_size`` (and lower
``grad_accum`` to keep the effective batch) only where memory allows. Peak
resident memory per batch size and length is in the README ("Training a
critic").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from verifyless.errors import ConfigError
from verifyless.registry import StrictOptions, error_text
from verifyless.yamlfile import read_yaml


class LoRASettings(StrictOptions):
    """The shape of a trained LoRA adapter (``train.common.lora_config``); the policy's settings share it."""

    lora_r: int = Field(32, ge=1, description="LoRA rank (paper: 32)")
    lora_alpha: int = Field(64, ge=1, description="LoRA alpha (ours: 2 x rank)")
    lora_dropout: float = Field(0.05, ge=0, lt=1, description="LoRA dropout (ours)")
    target_modules: str | list[str] = Field("all-linear", description="modules that get LoRA (ours: all linear)")


class RunSettings(StrictOptions):
    """Where a training run runs, how it is seeded and how many checkpoints it keeps (critics and policy alike)."""

    save_total_limit: int = Field(2, ge=1, description="checkpoints kept")
    seed: int = Field(0, description="seed of the data order, the LoRA initialisation and the sampling")
    device: str = Field("auto", description="auto | cpu | cuda")
    dtype: str = Field("auto", description="auto (bf16 on cuda, fp32 on cpu) | float32 | bfloat16")


class CommonSettings(LoRASettings, RunSettings):
    batch_size: int = Field(4, ge=1, description="examples per device step (ours)")
    grad_accum: int = Field(1, ge=1, description="gradient accumulation steps (ours)")
    max_steps: int = Field(-1, description="stop after this many optimizer steps; -1 = run all epochs")
    save_steps: int = Field(50, ge=1, description="checkpoint every this many steps")
    max_prompt_tokens: int | None = Field(None, ge=16, description="drop examples whose prompt is longer")


class SFTSettings(CommonSettings):
    batch_size: int = Field(1, ge=1, description="examples per device step (ours: 1, to fit 24 GB; see above)")
    grad_accum: int = Field(4, ge=1, description="gradient accumulation steps (ours: 4, effective batch 4)")
    learning_rate: float = Field(1e-5, gt=0, description="paper: 1e-5")
    epochs: float = Field(3.0, gt=0, description="paper: 3")
    max_length: int = Field(4096, ge=16, description="prompt + critique tokens kept (ours)")
    warmup_steps: float = Field(0, ge=0, description="warmup steps, or a fraction of all steps when < 1")


class GRPOSettings(CommonSettings):
    learning_rate: float = Field(1e-6, gt=0, description="paper: 1e-6")
    weight_decay: float = Field(0.1, ge=0, description="paper: 0.1")
    beta: float = Field(0.01, ge=0, description="KL coefficient (paper: 0.01)")
    num_generations: int = Field(8, ge=2, description="responses per prompt (paper: 8)")
    temperature: float = Field(0.7, gt=0, description="paper: 0.7")
    max_completion_length: int = Field(512, ge=4, description="critique tokens sampled (ours)")
    epochs: float = Field(1.0, gt=0)
    skip_equal_reward_groups: bool = Field(True, description="paper: groups with all-equal rewards are dropped")
    batch_size: int = Field(8, ge=1, description="completions per device step, a multiple of num_generations (ours)")
    prompts_per_step: int | None = Field(
        256,
        ge=1,
        description="prompts per optimizer step (paper: 256), each with num_generations completions; "
        "gradient accumulation covers what batch_size does not; None: one device batch per step",
    )
    max_steps: int = Field(300, description="optimizer (rollout) steps (paper: 300); -1 = run the epochs")
    top_entropy_quantile: float = Field(
        1.0, gt=0, le=1, description="train only on this top fraction of completion tokens by entropy (1: all)"
    )
    shuffle: bool = Field(True, description="shuffle the grpo split; off: prompts are taken in the split's order")
    prompt: str = Field(
        "critic",
        description="critic prompt template under prompts/screen/: critic (soft rubric, the paper's) or freestyle "
        "(free reasoning, the paper's App. H ablation)",
    )


def grpo_accumulation(settings: GRPOSettings) -> int:
    """Gradient-accumulation steps that make one optimizer step cover ``prompts_per_step`` prompts.

    ``ConfigError`` when the completions of a step (prompts x generations) do not split into whole
    device batches; with ``prompts_per_step`` None it is ``grad_accum`` as given.
    """
    if settings.batch_size % settings.num_generations:
        raise ConfigError(
            f"batch_size {settings.batch_size} must be a multiple of num_generations "
            f"{settings.num_generations} (each prompt's group is scored together)"
        )
    if settings.prompts_per_step is None:
        return settings.grad_accum
    completions = settings.prompts_per_step * settings.num_generations
    if completions % settings.batch_size:
        raise ConfigError(
            f"prompts_per_step {settings.prompts_per_step} x num_generations {settings.num_generations} = "
            f"{completions} completions do not split into device batches of {settings.batch_size}; choose a "
            "batch_size that divides it"
        )
    return completions // settings.batch_size


_KINDS: dict[str, type[CommonSettings]] = {"sft": SFTSettings, "grpo": GRPOSettings}


def load_settings(kind: Literal["sft", "grpo"], path: Path | None = None, **overrides: Any) -> Any:
    """Defaults, then the YAML file at ``path`` (a flat mapping), then non-None ``overrides``."""
    return settings_from(_KINDS[kind], kind, path, overrides)


def settings_from(cls: type[BaseModel], what: str, path: Path | None, overrides: dict[str, Any]) -> Any:
    """``cls`` from its defaults, then the YAML file at ``path`` (a flat mapping), then non-None ``overrides``;
    every problem is one ``ConfigError`` naming the ``what`` settings."""

    values: dict[str, Any] = {}
    if path is not None:
        if not Path(path).is_file():
            raise ConfigError(f"training config {str(path)!r} does not exist")
        loaded = read_yaml(Path(path), "training config") or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"training config {str(path)!r} must be a mapping of setting: value")
        values.update(loaded)
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return cls(**values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {error_text(e)}" for e in exc.errors())
        raise ConfigError(f"invalid {what} training settings: {problems}") from None


__all__ = [
    "CommonSettings",
    "GRPOSettings",
    "LoRASettings",
    "RunSettings",
    "SFTSettings",
    "grpo_accumulation",
    "load_settings",
    "settings_from",
]
