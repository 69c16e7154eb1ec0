"""The wire format of chat requests and the hashes built on it (no I/O, no other model module imported).

``messages_to_wire`` / ``tools_to_wire`` give the OpenAI-compatible JSON form;
``canonical_json`` of it is what cache keys and ``prompt_hash`` are computed
over, so a request hashes the same whichever provider serves it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from verifyless.model.base import Message, ModelRequest, Tool

__all__ = ["canonical_json", "messages_to_wire", "prompt_hash", "sha256", "tools_to_wire"]


def messages_to_wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        wire: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            wire["tool_calls"] = [
                {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
                for t in m.tool_calls
            ]
        if m.tool_call_id is not None:
            wire["tool_call_id"] = m.tool_call_id
        if m.name is not None:
            wire["name"] = m.name
        out.append(wire)
    return out


def tools_to_wire(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
        }
        for t in tools
    ]


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, ASCII only."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def prompt_hash(request: ModelRequest) -> str:
    """Hash of what the model reads (messages and tools), independent of sampling settings."""
    return sha256(
        canonical_json({"messages": messages_to_wire(request.messages), "tools": tools_to_wire(request.tools)})
    )
