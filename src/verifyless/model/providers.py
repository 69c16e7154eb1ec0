"""Providers by name, and ``build_model``: the one way to turn a spec into a ``Model``.

``PROVIDERS`` maps a ``ModelConfig.provider`` name to a factory
``(config) -> Model``. Built in: ``openai`` (any OpenAI-compatible endpoint)
and ``scripted`` (offline fixtures). Another provider registers itself here,
once, with ``register_provider`` (e.g. ``local`` for in-process models, from
``verifyless.model.local``); an unknown name is a ``ConfigError`` listing the
known ones.

Wrapping order: ``RecordedModel(CachedModel(provider))`` -- the recorder sits
outside the cache, so every call is recorded, cache hits included (with
``cached: true`` and no charge).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from verifyless.errors import ConfigError
from verifyless.model.base import Model
from verifyless.model.cache import CachedModel, RecordedModel, Recorder, ResponseCache
from verifyless.model.config import ModelConfig, parse_spec
from verifyless.model.openai_compat import OpenAIModel
from verifyless.model.scripted import ScriptedModel

__all__ = ["PROVIDERS", "build_model", "register_provider"]

ProviderFactory = Callable[[ModelConfig], Model]


def _openai(config: ModelConfig) -> Model:
    return OpenAIModel(config)


def _scripted(config: ModelConfig) -> Model:
    assert config.script is not None  # checked by ModelConfig's validator
    return ScriptedModel.from_file(config.script)


def _local(config: ModelConfig) -> Model:
    """In-process models: ``verifyless.model.local.build_local(config)`` (imported only when asked for)."""

    try:
        from verifyless.model.local import LocalModel
    except ImportError as exc:
        raise ConfigError(f"provider 'local' is not available in this installation ({exc})") from None
    return LocalModel.from_config(config)


PROVIDERS: dict[str, ProviderFactory] = {"openai": _openai, "scripted": _scripted, "local": _local}


def register_provider(name: str, factory: ProviderFactory) -> None:
    """Make ``provider: NAME`` build models with ``factory`` (replaces an earlier registration of NAME)."""
    PROVIDERS[name] = factory


def build_model(
    spec: str | Mapping[str, Any] | ModelConfig,
    *,
    cache: ResponseCache | None = None,
    recorder: Recorder | None = None,
    cache_mode: Literal["readwrite", "replay"] = "readwrite",
) -> Model:
    """Build the ``Model`` for ``spec``, wrapped as ``RecordedModel(CachedModel(provider))``.

    ``cache`` is a ``ResponseCache`` (or None); ``recorder`` receives a
    ``CallRecord`` per call (cache hits and failures included).
    """
    config = parse_spec(spec)
    factory = PROVIDERS.get(config.provider)
    if factory is None:
        raise ConfigError(
            f"unknown model provider {config.provider!r}; known providers: {', '.join(sorted(PROVIDERS))}"
        )
    model: Model = factory(config)
    if cache is not None:
        model = CachedModel(model, cache, mode=cache_mode)
    if recorder is not None:
        model = RecordedModel(model, recorder)
    return model
