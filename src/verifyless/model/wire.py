"""The wire format of chat requests and the hashes built on it (no I/O, no other model module imported).

``messages_to_wire`` / ``tools_to_wire`` give the OpenAI-compatible JSON form;
``canonical_json`` of it is what cache keys and ``prompt_hash`` are computed
over, so a request hashes the same whichever provider serves it.
``tool_calls_in_text`` reads tool calls a server left in the reply's text.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Collection, Sequence
from typing import Any

from verifyless.model.base import Message, ModelRequest, Tool, ToolCall

__all__ = ["canonical_json", "messages_to_wire", "prompt_hash", "sha256", "tool_calls_in_text", "tools_to_wire"]

# Qwen2.5, Hermes and the other models whose chat templates describe tools ask for each call as a JSON object in
# these tags. A server without a tool-call parser for the model (llama-cpp-python's server; vLLM without
# --tool-call-parser) returns them as text.
_TAGGED_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


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


def tool_calls_in_text(text: str, names: Collection[str]) -> tuple[str, tuple[ToolCall, ...]]:
    """The ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks in ``text`` as tool calls, and the
    text without them.

    Only a block holding a JSON object whose ``name`` is one of ``names`` counts (its ``arguments`` an object,
    or a string of one); any other block stays in the text as the model wrote it, so a reply with none is
    returned unchanged. A last block cut off by the token cap without its closing tag is read as well. Ids are
    ``text-call-I`` in reply order (the server gave none).
    """
    calls: list[ToolCall] = []
    kept: list[str] = []
    end = 0
    for match in _TAGGED_CALL.finditer(text):
        try:
            obj = json.loads(match.group(1))
        except ValueError:
            continue
        if not isinstance(obj, dict) or obj.get("name") not in names:
            continue
        args = obj.get("arguments", obj.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if not isinstance(args, dict):
            continue
        kept.append(text[end : match.start()])
        end = match.end()
        calls.append(ToolCall(id=f"text-call-{len(calls)}", name=obj["name"], arguments=json.dumps(args)))
    if not calls:
        return text, ()
    kept.append(text[end:])
    return "\n".join(part.strip() for part in kept if part.strip()), tuple(calls)
