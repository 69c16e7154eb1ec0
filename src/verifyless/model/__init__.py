"""Models: the ``Model`` protocol, providers, the response cache and call records.

``build_model(spec, cache=..., recorder=...)`` is the entry point; see
``docs/design/models.md`` for the contract, retry policy and cache key.
"""

from verifyless.model.base import Choice, Message, Model, ModelReply, ModelRequest, Tool, ToolCall, Usage
from verifyless.model.cache import (
    CachedModel,
    CallRecord,
    RecordedModel,
    Recorder,
    ResponseCache,
    prompt_hash,
    request_identity,
    sample_key,
)
from verifyless.model.config import ModelConfig, Prices, make_config, parse_spec
from verifyless.model.openai_compat import OpenAIModel
from verifyless.model.providers import PROVIDERS, build_model, register_provider
from verifyless.model.scripted import Rule, ScriptedCall, ScriptedModel

__all__ = [
    "PROVIDERS",
    "CachedModel",
    "CallRecord",
    "Choice",
    "Message",
    "Model",
    "ModelConfig",
    "ModelReply",
    "ModelRequest",
    "OpenAIModel",
    "Prices",
    "RecordedModel",
    "Recorder",
    "ResponseCache",
    "Rule",
    "ScriptedCall",
    "ScriptedModel",
    "Tool",
    "ToolCall",
    "Usage",
    "build_model",
    "make_config",
    "parse_spec",
    "prompt_hash",
    "register_provider",
    "request_identity",
    "sample_key",
]
