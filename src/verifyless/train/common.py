"""Shared pieces of the critic trainers: loading the base, logging, checkpoints, the adapter card.

Output layout of one training command (``--out DIR``)::

    DIR/adapter/          standard PEFT folder (adapter_config.json, adapter_model.safetensors,
                          tokenizer files, README.md card, verifyless_card.json)
    DIR/checkpoints/      Trainer checkpoints (checkpoint-<step>/), for --resume
    DIR/train_log.jsonl   one JSON object per logging step (loss, lr, reward, ...)
    DIR/checkpoints/runs/ TensorBoard events, when tensorboard is installed
"""

from __future__ import annotations

import importlib.util
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verifyless.errors import ConfigError
from verifyless.model.local import resolve_device, resolve_dtype
from verifyless.train.settings import LoRASettings

log = logging.getLogger(__name__)

CARD_JSON = "verifyless_card.json"


@dataclass(frozen=True)
class TrainResult:
    """What one training command produced."""

    adapter_dir: Path
    steps: int
    first_loss: float  # SFT: training loss; GRPO: mean reward (first and last logged values)
    last_loss: float
    seconds: float
    log_path: Path


def report_to() -> list[str]:
    return ["tensorboard"] if importlib.util.find_spec("tensorboard") is not None else []


def trainer_args(settings: Any, out: Path) -> dict[str, Any]:
    """TrainingArguments fields shared by SFT and GRPO."""
    device = resolve_device(settings.device)
    bf16 = str(resolve_dtype(settings.dtype, device)).endswith("bfloat16")
    return dict(
        output_dir=str(out / "checkpoints"),
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=settings.grad_accum,
        num_train_epochs=settings.epochs,
        learning_rate=settings.learning_rate,
        max_steps=settings.max_steps,
        logging_steps=1,
        save_strategy="steps",
        save_steps=settings.save_steps,
        save_total_limit=settings.save_total_limit,
        seed=settings.seed,
        data_seed=settings.seed,
        bf16=bf16,
        fp16=False,
        gradient_checkpointing=False,
        use_cpu=device == "cpu",
        report_to=report_to(),
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,
    )


def lora_config(settings: LoRASettings) -> Any:
    """The peft ``LoraConfig`` of a causal LM adapter shaped as ``settings`` says."""
    from peft import LoraConfig

    return LoraConfig(
        r=settings.lora_r,
        lora_alpha=settings.lora_alpha,
        lora_dropout=settings.lora_dropout,
        target_modules=settings.target_modules,
        task_type="CAUSAL_LM",
    )


def last_checkpoint(out: Path) -> str | None:
    folder = out / "checkpoints"
    found = sorted(folder.glob("checkpoint-*"), key=lambda p: int(p.name.rsplit("-", 1)[1])) if folder.is_dir() else []
    return str(found[-1]) if found else None


def resume_from(out: Path, resume: bool) -> str | None:
    if not resume:
        return None
    checkpoint = last_checkpoint(out)
    if checkpoint is None:
        raise ConfigError(f"--resume: no checkpoint under {out / 'checkpoints'}; run without --resume to start")
    return checkpoint


def start_training(out: Path, resume: bool) -> tuple[Path, str | None, float]:
    """Create ``out`` and find the checkpoint to resume from; (out, checkpoint or None, start time)."""
    started = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    return out, resume_from(out, resume), started


def finish_training(
    trainer: Any,
    tokenizer: Any,
    out: Path,
    *,
    metric: str,
    started: float,
    card: Mapping[str, Any],
    extra_stats: Mapping[str, Any] | None = None,
    save: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Save a trained adapter and its tokenizer in ``out/adapter``, write its card, and say what was trained.

    ``metric`` is the logged value reported first and last (``loss`` for SFT,
    ``reward`` for GRPO); ``card`` holds ``write_card``'s other keywords
    (kind, base, resolved, dataset, rows, settings); ``save`` is passed to the
    model's ``save_pretrained``.
    """
    adapter_dir = out / "adapter"
    trainer.model.save_pretrained(adapter_dir, **dict(save or {}))
    tokenizer.save_pretrained(adapter_dir)
    values = read_log(out / "train_log.jsonl", metric)
    first, last = (values[0], values[-1]) if values else (None, None)
    stats = {"steps": trainer.state.global_step, f"first_{metric}": first, f"last_{metric}": last}
    stats |= dict(extra_stats or {})
    stats["seconds"] = round(time.monotonic() - started, 1)
    write_card(adapter_dir, **card, stats=stats)
    nan = float("nan")
    return TrainResult(
        adapter_dir,
        trainer.state.global_step,
        nan if first is None else first,
        nan if last is None else last,
        time.monotonic() - started,
        out / "train_log.jsonl",
    )


def callbacks(out: Path, console: Any = None) -> list[Any]:
    from transformers import TrainerCallback

    class JsonlLog(TrainerCallback):
        """Append every logged dict, with step and wall time, to train_log.jsonl."""

        def __init__(self) -> None:
            self.path = out / "train_log.jsonl"
            self.start = time.monotonic()

        def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kw: Any) -> None:
            record = {"step": state.global_step, "epoch": state.epoch, "seconds": time.monotonic() - self.start}
            record.update({k: v for k, v in (logs or {}).items() if isinstance(v, (int, float, str))})
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(record) + "\n")

    class Progress(TrainerCallback):
        """One rich progress line per step on the given console."""

        def on_log(self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kw: Any) -> None:
            shown = {k: v for k, v in (logs or {}).items() if k in ("loss", "reward", "learning_rate", "kl")}
            text = " ".join(f"{k} {v:.4g}" for k, v in shown.items() if isinstance(v, (int, float)))
            console.print(f"step {state.global_step}/{state.max_steps} {text}", highlight=False)

    return [JsonlLog()] + ([Progress()] if console is not None else [])


def read_log(path: Path, key: str) -> list[float]:
    if not path.is_file():
        return []
    values = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if isinstance(record.get(key), (int, float)):
            values.append(float(record[key]))
    return values


def write_card(
    adapter_dir: Path,
    *,
    kind: str,
    base: str,
    resolved: str,
    dataset: str,
    rows: int,
    settings: Any,
    stats: Mapping[str, Any],
) -> None:
    """README.md (a model card people read) and verifyless_card.json (what code reads)."""
    card = {
        "kind": kind,
        "base_model": base,
        "base_model_path": resolved,
        "dataset": dataset,
        "rows": rows,
        "settings": settings.model_dump(),
        "stats": dict(stats),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (adapter_dir / CARD_JSON).write_text(json.dumps(card, indent=2))
    lines = [
        f"# verifyless critic adapter ({kind})",
        "",
        f"- Base model: `{base}` (loaded from `{resolved}`)",
        f"- Data: `{dataset}` ({rows} rows)",
        "- Settings: " + ", ".join(f"{k}={v}" for k, v in settings.model_dump().items()),
        "- Result: " + ", ".join(f"{k}={v}" for k, v in stats.items()),
        "",
        "A standard PEFT LoRA folder. Serve it in process with `provider: local, model: <base>, adapter: <this folder>`,",
        "or with vLLM: `vllm serve <base> --enable-lora --lora-modules critic=<this folder> --max-lora-rank "
        f"{settings.lora_r}` and `model: critic`.",
    ]
    (adapter_dir / "README.md").write_text("\n".join(lines) + "\n")


def read_card(folder: Path) -> dict[str, Any]:
    """The card of an adapter folder or of a training output folder (``DIR/adapter``)."""
    for candidate in (folder / CARD_JSON, folder / "adapter" / CARD_JSON):
        if candidate.is_file():
            return dict(json.loads(candidate.read_text()))
    raise ConfigError(f"{str(folder)!r} has no {CARD_JSON}; pass the output folder of `verifyless train critic-sft`")


def adapter_folder(folder: Path) -> Path:
    return folder / "adapter" if (folder / "adapter" / "adapter_config.json").is_file() else folder


__all__ = [
    "TrainResult",
    "adapter_folder",
    "callbacks",
    "last_checkpoint",
    "lora_config",
    "read_card",
    "read_log",
    "resume_from",
    "trainer_args",
    "write_card",
]
