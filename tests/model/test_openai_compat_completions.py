"""Label probes through ``/v1/completions`` (issue 53): for servers that ignore ``continue_final_message``.

llama.cpp's servers answer a chat request with a prefilled assistant turn by *closing* that turn and starting a
new one, so the chat probe would read the wrong position. ``label_probe: completions`` renders the chat with a
template (ChatML by default), leaves the prefill open, and reads the legacy ``top_logprobs`` mapping.
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path

import pytest

from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.model import Message, ResponseCache, build_model, make_config
from verifyless.model.scripted import ScriptedModel
from verifyless.model.templates import render_raw_prompt
from verifyless.model.testserver import TestServer
from verifyless.screen.verdicts import VERDICTS, verdict_score

USER = (Message("system", "You review ideas."), Message("user", "Compare A and B."))


def test_chatml_leaves_the_prefill_open() -> None:
    text = render_raw_prompt((*USER, Message("assistant", "Reasoning.\n[IMPROVEMENT]")))
    assert text == (
        "<|im_start|>system\nYou review ideas.<|im_end|>\n<|im_start|>user\nCompare A and B.<|im_end|>\n"
        "<|im_start|>assistant\nReasoning.\n[IMPROVEMENT]"
    )


def test_a_template_file_is_rendered_in_the_sandbox(tmp_path: Path) -> None:
    path = tmp_path / "t.jinja"
    path.write_text(
        "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}"
    )
    assert render_raw_prompt((*USER, Message("assistant", "X")), str(path)) == (
        "<system>You review ideas.<user>Compare A and B.<a>X"
    )
    path.write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(Exception, match="unsafe|access"):
        render_raw_prompt((*USER, Message("assistant", "X")), str(path))
    with pytest.raises(ConfigError, match="neither 'chatml' nor a template file"):
        render_raw_prompt((*USER, Message("assistant", "X")), str(tmp_path / "absent.jinja"))


def test_the_completions_probe_reads_legacy_top_logprobs_and_caches_apart(tmp_path: Path) -> None:
    prompts: list[str] = []

    def raw(prompt: str, k: int) -> tuple[list[tuple[str, float]], int]:
        prompts.append(prompt)
        return [(" improve", math.log(0.6)), (" tie", math.log(0.2)), ("\n", math.log(0.2))], 42

    with TestServer(ScriptedModel(replies=[]), raw_logprobs=raw) as srv:
        config = make_config(
            provider="openai", model="m", base_url=srv.base_url, max_retries=0, label_probe="completions"
        )
        model = build_model(config, cache=ResponseCache(tmp_path / "c.db"))
        score = asyncio.run(verdict_score(model, USER, "I think it helps."))
        again = asyncio.run(verdict_score(model, USER, "I think it helps."))
        body = srv.requests[-1]
        chat = make_config(provider="openai", model="m", base_url=srv.base_url, max_retries=0)
        with pytest.raises(ModelUnavailable):  # the chat probe is another cache row: it reaches the server
            asyncio.run(
                verdict_score(build_model(chat, cache=ResponseCache(tmp_path / "c.db")), USER, "I think it helps.")
            )
        assert "messages" in srv.requests[-1]
    assert len(prompts) == 1 and again.cached and again.probs == score.probs
    assert prompts[0].endswith("<|im_start|>assistant\nI think it helps.\n[IMPROVEMENT]")
    assert body["max_tokens"] == 1 and body["logprobs"] == 20 and "messages" not in body
    assert score.probs == pytest.approx({"improve": 0.75, "lose": 0.0, "tie": 0.25})
    assert set(score.probs) == set(VERDICTS) and score.usage.prompt_tokens == 42
