"""Chat templates for raw-prompt calls: a conversation whose last turn is a prefilled assistant text, as one string.

Servers that ignore ``continue_final_message`` (llama.cpp's, llama-cpp-python's) cannot continue a prefilled
assistant turn through the chat endpoint, so a label probe sends the rendered text to ``/v1/completions``
instead. The turns before the prefill are rendered with the template and ``add_generation_prompt`` (the opening
of an assistant turn), then the prefill is appended unclosed, so the next token is the model's continuation.

``template`` is ``"chatml"`` (Qwen2.5, SmolLM2 and most open instruct models) or the path of a Hugging Face
style Jinja chat template (variables ``messages``, ``add_generation_prompt``, ``bos_token``, ``eos_token``).
Templates render in Jinja's sandbox.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verifyless.errors import ConfigError
from verifyless.model.base import Message

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
BUILTIN = {"chatml": CHATML}


def _template_text(template: str) -> str:
    if template in BUILTIN:
        return BUILTIN[template]
    path = Path(template)
    if not path.is_file():
        raise ConfigError(
            f"probe_template {template!r} is neither {' nor '.join(map(repr, BUILTIN))} nor a template file"
        )
    return path.read_text()


def _raise(message: str) -> None:
    raise ConfigError(f"chat template: {message}")


@functools.cache
def _compiled(text: str) -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = _raise
    return env.from_string(text)


def render_raw_prompt(messages: Sequence[Message], template: str = "chatml") -> str:
    """The text a completions endpoint continues: ``messages[:-1]`` rendered with ``template`` and an open
    assistant turn, then ``messages[-1].content`` (the prefill), which must be an assistant message."""
    if not messages or messages[-1].role != "assistant":
        raise ValueError("a raw prompt ends with the prefilled assistant message")
    turns = [{"role": m.role, "content": m.content} for m in messages[:-1]]
    head = _compiled(_template_text(template)).render(
        messages=turns, add_generation_prompt=True, bos_token="", eos_token=""
    )
    return head + messages[-1].content
