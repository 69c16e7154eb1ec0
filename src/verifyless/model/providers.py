"""Providers by name, and ``build_model``: the one way to turn a spec into a ``Model``.

``PROVIDERS`` is a ``verifyless.registry.Registry`` from a ``ModelConfig.provider`` name to a
factory ``(config) -> Model`` (its settings are the ``ModelConfig`` fields, so a provider has no
options of its own). Built in: ``openai`` (any OpenAI-compatible endpoint), ``scripted`` (offline
fixtures) and ``local`` (in-process models, ``verifyless.model.local``, imported only when asked
for). Another provider registers itself, once, with ``register_provider``; an unknown name is a
one-line ``ConfigError`` listing the known ones.

Wrapping order: ``RecordedModel(CachedModel(provider))`` -- the recorder sits
outside the cache, so every call is recorded, cache hits included (with
``cached: true`` and no charge).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from verifyless.model.base import Model, ParseRecord
from verifyless.model.cache import CachedModel, RecordedModel, Recorder, ResponseCache
from verifyless.model.config import ModelConfig, parse_spec
from verifyless.model.local import LocalModel
from verifyless.model.openai_compat import OpenAIModel
from verifyless.model.scripted import ScriptedModel
from verifyless.registry import Component, Registry

__all__ = ["PROVIDERS", "build_model", "register_provider"]

ProviderFactory = Callable[[ModelConfig], Model]


def _openai(config: ModelConfig) -> Model:
    return OpenAIModel(config)


def _scripted(config: ModelConfig) -> Model:
    assert config.script is not None  # checked by ModelConfig's validator
    return ScriptedModel.from_file(config.script)


def _local(config: ModelConfig) -> Model:
    """In-process models (``LocalModel``); torch and transformers are imported when one loads."""
    return LocalModel.from_config(config)


PROVIDERS = Registry(
    "provider",
    [
        Component("openai", _openai, None, "any OpenAI-compatible endpoint (base_url, api_key, model)"),
        Component("scripted", _scripted, None, "offline fixtures: replies read from a script file"),
        Component("local", _local, None, "in-process transformers models, optionally with a LoRA adapter"),
    ],
    name_key="provider",
    options_key="roles.models.KEY",  # a provider's settings are its model spec's fields
)


def register_provider(name: str, factory: ProviderFactory, help: str = "a provider registered at run time") -> None:
    """Make ``provider: NAME`` build models with ``factory`` (replaces an earlier registration of NAME)."""
    PROVIDERS.register(Component(name, factory, None, help))


def build_model(
    spec: str | Mapping[str, Any] | ModelConfig,
    *,
    cache: ResponseCache | None = None,
    recorder: Recorder | None = None,
    cache_mode: Literal["readwrite", "replay"] = "readwrite",
    on_parse: Callable[[ParseRecord], None] | None = None,
) -> Model:
    """Build the ``Model`` for ``spec``, wrapped as ``RecordedModel(CachedModel(provider))``.

    ``cache`` is a ``ResponseCache`` (or None); ``recorder`` receives a
    ``CallRecord`` per call (cache hits and failures included), and ``on_parse`` the
    ``ParseRecord`` a role notes for each reply it read (``model.base.note_parse``).
    """
    config = parse_spec(spec)
    model: Model = PROVIDERS.get(config.provider).factory(config)
    if cache is not None:
        model = CachedModel(model, cache, mode=cache_mode)
    if recorder is not None:
        model = RecordedModel(model, recorder, on_parse)
    return model
