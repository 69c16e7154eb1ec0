"""ModelConfig (one per role) and spec parsing; ``verifyless.model.providers.build_model`` builds the ``Model``.

Spec strings accepted by ``parse_spec`` (and so by ``build_model``):

* ``"scripted:<path.yaml|json>"`` -- a ``ScriptedModel`` loaded from the file;
* ``"local:<model>"`` -- a transformers model in this process (``verifyless.model.local``);
* ``"openai:<model>"`` -- an OpenAI-compatible endpoint; base URL from
  ``VERIFYLESS_BASE_URL`` (default: api.openai.com), key from
  ``VERIFYLESS_API_KEY`` or ``OPENAI_API_KEY``;
* ``"env"`` -- base URL, key and model all from ``VERIFYLESS_BASE_URL``,
  ``VERIFYLESS_API_KEY``, ``VERIFYLESS_MODEL``; optionally the settings in ``ENV_SETTINGS``
  (``VERIFYLESS_CONTEXT_TOKENS``, ``VERIFYLESS_LABEL_PROBE``, ``VERIFYLESS_CONCURRENCY``, ``VERIFYLESS_TIMEOUT_S``;
  ``verifyless serve`` prints the ones its server needs).

The config holds the *name* of the key's env var, never the key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from verifyless.errors import ConfigError
from verifyless.registry import StrictOptions, error_text

DEFAULT_KEY_ENV = "VERIFYLESS_API_KEY"
FALLBACK_KEY_ENV = "OPENAI_API_KEY"
ENV_BASE_URL = "VERIFYLESS_BASE_URL"
ENV_MODEL = "VERIFYLESS_MODEL"
# Optional settings of the 'env' spec, read with it (``verifyless serve`` prints the ones its server needs).
ENV_SETTINGS = {
    "VERIFYLESS_CONTEXT_TOKENS": "context_tokens",  # the server's context window
    "VERIFYLESS_LABEL_PROBE": "label_probe",  # chat | completions
    "VERIFYLESS_CONCURRENCY": "concurrency",  # requests in flight (1 for a one-slot llama.cpp server)
    "VERIFYLESS_TIMEOUT_S": "timeout_s",  # per request (a CPU-served model takes minutes per reply)
    "VERIFYLESS_MAX_TOKENS": "max_tokens",  # the ceiling of every reply (config.cap_tokens)
}
OPENAI_URL = "https://api.openai.com/v1"  # the endpoint of an openai spec without base_url


class Prices(StrictOptions):
    """US dollars per million tokens."""

    prompt_per_mtok: float = Field(0.0, ge=0)
    completion_per_mtok: float = Field(0.0, ge=0)


class ModelConfig(StrictOptions):
    """How one role reaches one model. Validated on construction; errors name the field."""

    provider: str = Field(
        "openai", description="provider name registered in verifyless.model.providers (openai, scripted, ...)"
    )
    model: str = Field("", description="model name sent to the endpoint (e.g. Qwen/Qwen3-8B)")
    base_url: str | None = Field(None, description="OpenAI-compatible base URL ending in /v1; None = api.openai.com")
    api_key_env: str = Field(DEFAULT_KEY_ENV, description="name of the env var holding the key (not the key)")
    script: str | None = Field(None, description="scripted provider: path to the YAML/JSON script")
    adapter: str | list[str] | None = Field(None, description="local provider: PEFT adapter folder(s), all active")
    device: str = Field("auto", description="local provider: auto | cpu | cuda | cuda:N")
    dtype: str = Field("auto", description="local provider: auto (bf16 on cuda, fp32 on cpu) | float32 | bfloat16")
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    max_tokens: int | None = Field(
        None,
        ge=1,
        description="reply length cap of every call to this model: the default where a role sets none, and the "
        "ceiling of a role's own cap (see cap_tokens)",
    )
    context_tokens: int | None = Field(
        None, ge=1, description="the model's context window in tokens (the pre-flight warns when a prompt exceeds it)"
    )
    seed: int | None = None
    label_probe: Literal["chat", "completions"] = Field(
        "chat",
        description="how label probes reach the server: chat (a prefilled assistant turn continued, vLLM/SGLang) "
        "or completions (the chat rendered with probe_template and sent raw to /v1/completions, for servers "
        "that ignore continue_final_message: llama.cpp, llama-cpp-python)",
    )
    probe_template: str = Field(
        "chatml",
        description="label_probe: completions: 'chatml' (Qwen, SmolLM2, ...) or a Jinja chat-template file "
        "(Hugging Face style: messages, add_generation_prompt)",
    )
    extra_body: dict[str, Any] = Field(default_factory=dict, description="extra JSON fields sent with each request")
    max_n: int | None = Field(None, ge=1, description="largest n the endpoint accepts (1 for servers that reject n>1)")
    concurrency: int = Field(8, ge=1, description="max requests in flight per endpoint")
    timeout_s: float = Field(120.0, gt=0, description="per-request timeout")
    max_retries: int = Field(6, ge=0, description="retries after the first attempt")
    retry_budget_s: float = Field(300.0, gt=0, description="total seconds one call may spend retrying")
    backoff_base_s: float = Field(1.0, gt=0, description="first backoff ceiling; doubles each retry (full jitter)")
    backoff_max_s: float = Field(60.0, gt=0, description="largest backoff ceiling")
    prices: dict[str, Prices] = Field(
        default_factory=dict,
        description="model name -> prices; '*' matches any; a bare {prompt_per_mtok, completion_per_mtok} means '*'",
    )

    @field_validator("prices", mode="before")
    @classmethod
    def _bare_prices(cls, value: Any) -> Any:
        if isinstance(value, Prices):
            return {"*": value}
        if isinstance(value, dict) and set(value) & {"prompt_per_mtok", "completion_per_mtok"}:
            return {"*": value}
        return value

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"base_url {value!r} must start with http:// or https:// (e.g. http://localhost:8000/v1)")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _check_env_name(cls, value: str) -> str:
        # Catch the common mistake of pasting the key itself here.
        if not value.replace("_", "").isalnum() or value.startswith("sk-"):
            raise ValueError("api_key_env must be the NAME of an env var (e.g. VERIFYLESS_API_KEY), not the key")
        return value

    @model_validator(mode="after")
    def _check_provider(self) -> ModelConfig:
        if self.provider == "scripted" and not self.script:
            raise ValueError("provider 'scripted' needs script: <path to .yaml or .json>")
        if self.provider == "local" and not self.model:
            raise ValueError("provider 'local' needs model: <folder, cached hub id or a name from `verifyless models`>")
        if self.provider == "openai" and not self.model:
            raise ValueError(f"provider 'openai' needs model: <name> (or set {ENV_MODEL} and use 'env')")
        return self

    def resolved_key_env(self) -> str:
        """The env var the key is read from: ``api_key_env``, or OPENAI_API_KEY when the default is unset."""
        if (
            self.api_key_env == DEFAULT_KEY_ENV
            and not os.environ.get(DEFAULT_KEY_ENV)
            and os.environ.get(FALLBACK_KEY_ENV)
        ):
            return FALLBACK_KEY_ENV
        return self.api_key_env

    def price_for(self, model: str) -> Prices:
        """Prices for ``model``: exact name, then the configured model name, then '*', else free."""
        return self.prices.get(model) or self.prices.get(self.model) or self.prices.get("*") or Prices()

    @classmethod
    def from_env(cls, **overrides: Any) -> ModelConfig:
        """Base URL and model from VERIFYLESS_BASE_URL / VERIFYLESS_MODEL; the key stays in VERIFYLESS_API_KEY."""
        missing = [name for name in (ENV_BASE_URL, ENV_MODEL) if not os.environ.get(name)]
        if missing:
            raise ConfigError(
                f"model spec 'env' needs {' and '.join(missing)}; e.g. export {ENV_BASE_URL}=http://localhost:8000/v1 "
                f"{ENV_MODEL}=Qwen/Qwen3-8B (and {DEFAULT_KEY_ENV} if the server wants a key)"
            )
        settings = {name: os.environ[var] for var, name in ENV_SETTINGS.items() if os.environ.get(var)}
        return make_config(
            provider="openai",
            base_url=os.environ[ENV_BASE_URL],
            model=os.environ[ENV_MODEL],
            **(settings | overrides),
        )


def cap_tokens(requested: int | None, configured: int | None) -> int | None:
    """The reply cap a call is sent with: the smaller of the role's (``requested``) and the model's
    (``configured``), whichever is set. A model's ``max_tokens`` is a ceiling, so a server that must answer
    short (a CPU-served model) caps every role, while a role's own smaller cap still applies."""
    caps = [c for c in (requested, configured) if c is not None]
    return min(caps) if caps else None


def make_config(**fields: Any) -> ModelConfig:
    """``ModelConfig(**fields)`` with pydantic errors turned into a ``ConfigError`` that names each field."""
    try:
        return ModelConfig(**fields)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'model'}: {error_text(e)}" for e in exc.errors())
        raise ConfigError(f"invalid model config: {problems}") from None


def parse_spec(spec: str | Mapping[str, Any] | ModelConfig) -> ModelConfig:
    """Turn a spec string (see the module docstring), a mapping of settings, or a config into a ``ModelConfig``.

    A mapping without ``base_url`` takes it from the environment, like ``openai:<model>``.
    """
    if isinstance(spec, ModelConfig):
        return spec
    if isinstance(spec, Mapping):
        fields = dict(spec)
        fields.setdefault("provider", "openai")
        if fields["provider"] == "openai" and not fields.get("base_url"):
            fields["base_url"] = os.environ.get(ENV_BASE_URL) or None
        return make_config(**fields)
    if not isinstance(spec, str):
        raise ConfigError(f"model spec must be a string or a mapping of settings, got {type(spec).__name__}")
    if spec == "env":
        return ModelConfig.from_env()
    kind, _, rest = spec.partition(":")
    if kind == "scripted" and rest:
        return make_config(provider="scripted", script=rest, model="scripted")
    if kind == "openai" and rest:
        return make_config(provider="openai", model=rest, base_url=os.environ.get(ENV_BASE_URL) or None)
    if kind == "local" and rest:
        return make_config(provider="local", model=rest)
    raise ConfigError(
        f"unknown model spec {spec!r}; use 'scripted:<path.yaml>', 'openai:<model name>' or 'env' "
        f"(reads {ENV_BASE_URL}, {DEFAULT_KEY_ENV}, {ENV_MODEL}), or 'local:<folder or name>' for a model in process"
    )
