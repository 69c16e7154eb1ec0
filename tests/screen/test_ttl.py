"""Test-time learning (critic-ttl) and the label-probability critic on a tiny Llama.

Most tests call the screener's learn() and restore() directly (the fast kill -9 test kills a process that
learns and stores its records, then restores in this one); two drive them through the real engine: a run
that adapts and resumes, and (slow) a run killed with kill -9 mid-run whose resume screens with the stored
adapter version.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tiny_lm import tiny_lm

pytest.importorskip("peft")

from ttl_pool import candidate, context

from verifyless.model import build_model, make_config  # noqa: E402
from verifyless.node import Status, Verification  # noqa: E402
from verifyless.outcome import Outcome, label3, verified_outcome  # noqa: E402
from verifyless.screen.registry import SCREENERS  # noqa: E402
from verifyless.screen.registry import build_screener as registry_build  # noqa: E402
from verifyless.screen.ttl import TestTimeCritic, group_advantages  # noqa: E402
from verifyless.screen.verdicts import five_way_probs, verdict_score  # noqa: E402
from verifyless.train.ttl_learner import LoRALearner, reverse_kl  # noqa: E402


def build_screener(name: str, **kwargs: object) -> object:
    """The registry's screener with critic-ttl's torch learner injected (as the composition root does)."""
    return registry_build(name, learner=LoRALearner, **kwargs)  # type: ignore[arg-type]


OPTIONS = dict(k=2, max_tokens=12, lora_r=4, lora_alpha=8, learning_rate=1e-2, rollouts=4)


@pytest.fixture(scope="module")
def tiny(request: pytest.FixtureRequest) -> Path:
    return tiny_lm(request.config)


def outcome(i: int, keyword: str, child_score: float) -> Outcome:
    return verified_outcome(
        "p0",
        0.5,
        f"n{i}",
        Verification(Status.OK, score=child_score),
        higher_is_better=True,
        round=1,
        parent_summary="The parent model.",
        child_summary=f"The child will {keyword} it.",
        idea=keyword,
    )


def ttl(tiny: Path, root: Path, mode: str = "sdft") -> TestTimeCritic:
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
    screener = build_screener(
        "critic-ttl",
        models={"critic": model},
        options=SCREENERS.validate("critic-ttl", {"mode": mode, "adapter_root": str(root), **OPTIONS}),
    )
    assert isinstance(screener, TestTimeCritic)
    asyncio.run(screener.screen(context(), [candidate(0, "ensemble"), candidate(1, "delete")]))
    return screener


def lora_state(screener: TestTimeCritic) -> dict:
    return {n: p.detach().clone() for n, p in screener.learner.local.loaded.model.named_parameters() if "lora_" in n}


def test_reverse_kl_equals_a_hand_computed_value() -> None:
    import torch

    student = torch.tensor([[[1.0, 0.0, -1.0], [0.5, 0.5, 0.0]]])
    teacher = torch.tensor([[[0.0, 1.0, 0.0], [2.0, 0.0, 0.0]]])

    def kl(s: list[float], t: list[float]) -> float:
        zs, zt = sum(math.exp(x) for x in s), sum(math.exp(x) for x in t)
        ps, pt = [math.exp(x) / zs for x in s], [math.exp(x) / zt for x in t]
        return sum(a * math.log(a / b) for a, b in zip(ps, pt, strict=False))

    both = (kl([1, 0, -1], [0, 1, 0]) + kl([0.5, 0.5, 0], [2, 0, 0])) / 2
    assert float(reverse_kl(student, teacher, torch.ones(1, 2))) == pytest.approx(both, rel=1e-6)
    first_only = float(reverse_kl(student, teacher, torch.tensor([[1.0, 0.0]])))
    assert first_only == pytest.approx(kl([1, 0, -1], [0, 1, 0]), rel=1e-6)
    assert group_advantages([1, 1, 1]) is None and group_advantages([1, -1]) == [1.0, -1.0]
    assert label3(outcome(0, "x", 0.6)) == "improve" and label3(outcome(0, "x", 0.5)) == "tie"


def test_sdft_loss_is_the_reverse_kl_along_the_students_own_critique(tiny: Path, tmp_path: Path) -> None:
    import torch

    screener = ttl(tiny, tmp_path / "adapters")
    pair = outcome(1, "ensemble", 0.7)
    student_ids, teacher_ids, critique = screener.learner.sdft_pair(screener.lesson(pair), random.Random(5))
    assert critique and teacher_ids != student_ids  # the teacher sees the measured scores
    teacher_text = screener.learner.local.loaded.tokenizer.decode(teacher_ids)
    assert "Child score: 0.7" in teacher_text and "Outcome: improve" in teacher_text
    model = screener.learner.local.loaded.model
    model.eval()
    with torch.no_grad():
        s = torch.log_softmax(model(input_ids=torch.tensor([student_ids + critique])).logits[0], -1)
        t = torch.log_softmax(model(input_ids=torch.tensor([teacher_ids + critique])).logits[0], -1)
    by_hand = 0.0
    for j in range(len(critique)):  # position predicting critique token j
        ps, pt = s[len(student_ids) - 1 + j].exp(), t[len(teacher_ids) - 1 + j].exp()
        by_hand += sum(
            float(a) * (math.log(float(a)) - math.log(float(b))) for a, b in zip(ps, pt, strict=False) if a > 0
        )
    by_hand /= len(critique)
    loss = screener.learner.sdft_loss(screener.lesson(pair), random.Random(5))
    assert float(loss) == pytest.approx(by_hand, rel=1e-4, abs=1e-6)


def test_sdft_learn_stores_versions_and_restore_reloads_them(tiny: Path, tmp_path: Path) -> None:
    root = tmp_path / "adapters"
    screener = ttl(tiny, root)
    before = lora_state(screener)
    record = asyncio.run(screener.learn([outcome(1, "ensemble", 0.7), outcome(2, "delete", 0.3)], round=1))
    assert record["adapter_version"] == 1 and record["mode"] == "sdft" and record["pairs"] == 2
    assert record["loss"] >= 0 and Path(record["adapter_dir"]) == root / "v0001"
    assert (root / "v0001" / "ttl" / "adapter_model.safetensors").is_file()
    after = lora_state(screener)
    assert any(not torch_equal(before[k], after[k]) for k in before)
    assert screener.learner.local.version == "ttl-v1"  # part of the response-cache identity
    assert asyncio.run(screener.learn([], round=2)) is None  # nothing new: nothing stored
    fresh = ttl(tiny, tmp_path / "elsewhere")
    fresh.restore([record])
    assert fresh.version == 1 and fresh.learner.local.version == "ttl-v1" and fresh.learner.root == root
    restored = lora_state(fresh)
    assert all(torch_equal(after[k], restored[k]) for k in after)
    second = asyncio.run(fresh.learn([outcome(3, "rename", 0.5)], round=3))
    assert second["adapter_version"] == 2 and Path(second["adapter_dir"]) == root / "v0002"


def torch_equal(a, b) -> bool:
    import torch

    return bool(torch.equal(a, b))


def test_grpo_mode_updates_every_second_round_and_keeps_pending_pairs(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import verifyless.screen.ttl as ttl_module

    # The tiny critic's critiques never parse, so every group would have equal rewards and be skipped;
    # a verdict reader that alternates gives each group both rewards, so the update must happen.
    calls = iter(range(10_000))
    monkeypatch.setattr(ttl_module, "_verdict_word", lambda text: ("improve", "lose")[next(calls) % 2])
    screener = ttl(tiny, tmp_path / "adapters", mode="grpo")
    first = asyncio.run(screener.learn([outcome(1, "ensemble", 0.7)], round=1))
    assert first["adapter_version"] == 0 and len(first["pending"]) == 1 and first["adapter_dir"] is None
    other = ttl(tiny, tmp_path / "other", mode="grpo")
    other.restore([first])
    assert len(other.pending) == 1 and other.pending[0].child_summary == "The child will ensemble it."
    before = lora_state(screener)
    second = asyncio.run(screener.learn([outcome(2, "delete", 0.3)], round=2))
    assert second["pairs"] == 2 and second["pending"] == []
    assert second["adapter_version"] == 1 and second["loss"] != 0.0  # one policy-gradient step was taken
    after = lora_state(screener)
    assert any(not torch_equal(before[k], after[k]) for k in before)
    assert (tmp_path / "adapters" / "v0001" / "ttl" / "adapter_model.safetensors").is_file()


def test_label_probability_critic_ranks_by_the_verdict_distribution(tiny: Path) -> None:
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
    screener = build_screener(
        "critic-probs", models={"critic": model}, options=SCREENERS.validate("critic-probs", {"n_verify": 1})
    )
    screening = asyncio.run(screener.screen(context(), [candidate(0, "ensemble"), candidate(1, "delete")]))
    for ev in screening.evidence.values():
        probs = ev.detail["label_probs"]
        assert set(probs) == {"improve", "tie", "lose"} and sum(probs.values()) == pytest.approx(1.0, abs=1e-6)
        assert ev.rank_value == pytest.approx(2 * probs["improve"] + probs["tie"])
        assert ev.uncertainty == pytest.approx(1 - max(probs.values()))
    best = max(screening.evidence.values(), key=lambda e: e.rank_value)
    assert screening.ranking[0] == best.candidate_id and len(screening.chosen) == 1
    five = asyncio.run(five_way_probs(model.probe_labels, screener.messages(context(), candidate(0, "ensemble"))))  # type: ignore[attr-defined]
    assert set(five) == {"Lose", "Tie", "SmallWin", "MediumWin", "BigWin"}
    assert sum(five.values()) == pytest.approx(1.0, abs=1e-6)


CHILD = textwrap.dedent("""
    import asyncio, json, os, sys, torch
    torch.set_num_threads(1)
    sys.path[:0] = [{tests!r}, {support!r}]
    import test_ttl as t
    from pathlib import Path
    from safetensors.torch import save_file
    screener = t.ttl(Path({tiny!r}), Path({root!r}))
    with open({records!r}, "a") as fh:
        for r, pairs in ((1, [t.outcome(1, "ensemble", 0.7)]), (2, [t.outcome(2, "delete", 0.3)])):
            record = asyncio.run(screener.learn(pairs, round=r))
            fh.write(json.dumps(record) + "\\n"); fh.flush(); os.fsync(fh.fileno())
    save_file({{k: v.contiguous() for k, v in t.lora_state(screener).items()}}, {state!r})
    print("READY", flush=True)
    import time; time.sleep(600)
""")


def test_resume_after_kill_minus_nine_uses_the_same_adapter_version(tiny: Path, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    records, state, root = tmp_path / "records.jsonl", tmp_path / "state.safetensors", tmp_path / "adapters"
    script = CHILD.format(
        tests=str(Path(__file__).parent),
        support=str(Path(__file__).parents[1] / "support"),
        tiny=str(tiny),
        root=str(root),
        records=str(records),
        state=str(state),
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    stored = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["adapter_version"] for r in stored] == [1, 2]
    resumed = ttl(tiny, tmp_path / "unused")
    resumed.restore(stored)
    assert resumed.version == 2 and resumed.learner.local.version == "ttl-v2"
    killed = load_file(str(state))
    mine = lora_state(resumed)
    assert killed.keys() == mine.keys() and all(torch_equal(killed[k], mine[k]) for k in mine)


def test_learning_right_after_a_resume_uses_the_task_it_was_built_with(tiny: Path, tmp_path: Path) -> None:
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
    screener = build_screener(
        "critic-ttl",
        models={"critic": model},
        task=context().task,
        options=SCREENERS.validate("critic-ttl", {"adapter_root": str(tmp_path / "a"), **OPTIONS}),
    )
    record = asyncio.run(screener.learn([outcome(1, "ensemble", 0.7)], round=4))  # no screening yet
    assert record["adapter_version"] == 1


def test_a_run_with_test_time_learning_adapts_its_critic_and_resume_reloads_the_version(
    tiny: Path, tmp_path: Path
) -> None:
    """The real engine drives ``critic-ttl``: one adapter version per round with new pairs, restored on resume."""
    from verifyless.config import load_config
    from verifyless.engine import Engine
    from verifyless.store import RunStore
    from verifyless.testing import fake_engine, fake_task

    def engine(store: RunStore) -> Engine:
        model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
        options = {"mode": "sdft", "adapter_root": str(tmp_path / "adapters"), **OPTIONS}
        screener = build_screener(
            "critic-ttl", models={"critic": model}, options=SCREENERS.validate("critic-ttl", options), task=fake_task()
        )
        cfg = load_config(overrides=["budget.verifications=4", "engine.candidates=2", "strategy.name=greedy"])
        return fake_engine(store, cfg, screener)

    with RunStore(tmp_path / "s.db") as store:
        first = engine(store)
        result = asyncio.run(first.run())
        learned = [e.payload for e in store.events(result.run_id, kinds=["screener_learn"])]
        assert learned, "no round with verified pairs produced an adapter version"
        versions = [p["adapter_version"] for p in learned]
        assert versions == sorted(versions) and len(set(versions)) == len(versions)
        again = engine(store)
        again.run_id = result.run_id
        again.resume.restore()
        assert again.screener.version == first.screener.version == versions[-1]  # type: ignore[attr-defined]
        from verifyless._cli.show import show_data

        shown = show_data(store, result.run_id, 5)["adapters"]
        assert shown == [{"role": "critic-ttl", "origin": None, "version": versions[-1]}]  # a fresh LoRA's chain
        from verifyless.report.views.runs import run_summary

        assert run_summary(store, result.run_id).adapters == (f"critic-ttl: v{versions[-1]} from a fresh LoRA",)


TTL_RUN = r"""
import asyncio, random, sys, torch
torch.set_num_threads(1)
sys.path[:0] = [{tests!r}, {support!r}]
from test_ttl import ttl_engine
from verifyless.store import RunStore
asyncio.run(ttl_engine(RunStore({db!r}), {tiny!r}, {root!r}).run())
"""


def ttl_engine(store: object, tiny: str, root: str) -> object:
    """A real engine run (fake task, roles and executor; verification takes 0.3 s) screened by critic-ttl."""
    from verifyless.config import load_config
    from verifyless.engine import Engine
    from verifyless.search.registry import build_strategy
    from verifyless.testing import FakeExecutor, fake_roles, fake_task

    model = build_model(make_config(provider="local", model=tiny, device="cpu"))
    # The tiny critic forgets the format as it learns; this test is about versions, not verdicts.
    options = {"mode": "sdft", "adapter_root": root, **OPTIONS, "max_unparsed_screenings": 100}
    screener = build_screener(
        "critic-ttl", models={"critic": model}, options=SCREENERS.validate("critic-ttl", options), task=fake_task()
    )
    cfg = load_config(overrides=["budget.verifications=12", "engine.candidates=2", "strategy.name=greedy"])
    return Engine(
        task=fake_task(),
        roles=fake_roles(),
        screener=screener,
        strategy=build_strategy("greedy", None, random.Random(0)),
        executor=FakeExecutor(delay=0.3),
        store=store,  # type: ignore[arg-type]
        config=cfg,
    )


@pytest.mark.slow
def test_a_ttl_run_killed_with_kill_minus_nine_resumes_with_the_stored_adapter_version(
    tiny: Path, tmp_path: Path
) -> None:
    """kill -9 a real engine run once it has stored an adapter version; the resumed run's next screening uses it."""
    import time

    from safetensors.torch import load_file

    from verifyless.store import RunStore

    db, root = tmp_path / "s.db", tmp_path / "adapters"
    script = TTL_RUN.format(
        tests=str(Path(__file__).parent),
        support=str(Path(__file__).parents[1] / "support"),
        db=str(db),
        tiny=str(tiny),
        root=str(root),
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 120
    learned: list[dict] = []
    with RunStore(db) as probe:
        while time.monotonic() < deadline and proc.poll() is None and not learned:
            runs = probe.runs() if db.exists() else []
            learned = [e.payload for e in probe.events(runs[0].run_id, kinds=["screener_learn"])] if runs else []
            time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, (proc.stderr.read() if proc.stderr else b"")[-2000:]
    with RunStore(db) as store:
        run_id = store.runs()[0].run_id
        stored = [e.payload for e in store.events(run_id, kinds=["screener_learn"])]
        assert stored and store.budget(run_id).verifications < 12  # killed mid-run
        engine = ttl_engine(store, str(tiny), str(root))
        screener = engine.screener  # type: ignore[attr-defined]
        calls: list[tuple[str, int, str, dict]] = []  # (what, version after, model version, adapter weights)
        restore, learn, screen = screener.restore, screener.learn, screener.screen

        def note(what: str) -> None:
            from peft import get_peft_model_state_dict

            state = get_peft_model_state_dict(screener.learner.local.loaded.model, adapter_name="ttl")
            weights = {k: v.detach().clone() for k, v in state.items()}
            calls.append((what, screener.version, screener.learner.local.version, weights))

        def restoring(records: object) -> None:
            restore(records)
            note("restore")

        async def learning(outcomes: object, round: int) -> object:
            record = await learn(outcomes, round)
            note("learn")
            return record

        async def screening(ctx: object, candidates: object) -> object:
            if not any(what == "screen" for what, *_ in calls):
                note("screen")
            return await screen(ctx, candidates)

        screener.restore, screener.learn, screener.screen = restoring, learning, screening
        result = asyncio.run(engine.run(run_id))  # type: ignore[attr-defined]
        after = [e.payload for e in store.events(run_id, kinds=["screener_learn"])]
    version = stored[-1]["adapter_version"]
    assert calls[0][:3] == ("restore", version, f"ttl-v{version}")  # reloaded what the killed run stored last
    first = next(i for i, c in enumerate(calls) if c[0] == "screen")
    _, used, model_version, weights = calls[first]
    learned_before = [c for c in calls[1:first] if c[0] == "learn"]  # the round the kill interrupted, if any
    assert used == version + len(learned_before) and model_version == f"ttl-v{used}"
    saved = load_file(str(root / f"v{used:04d}" / "ttl" / "adapter_model.safetensors"))
    assert saved.keys() == weights.keys() and all(torch_equal(saved[k], weights[k]) for k in saved)
    versions = [p["adapter_version"] for p in after]
    assert versions == list(range(1, len(versions) + 1)) and after[: len(stored)] == stored
    assert result.verifications == 12  # type: ignore[attr-defined]


def test_ttl_trains_the_local_model_under_the_run_cache_and_recorder(tiny: Path, tmp_path: Path) -> None:
    """A run wraps the critic in CachedModel/RecordedModel; critic-ttl still finds the weights it trains."""
    from verifyless.model import ResponseCache

    records: list = []
    config = make_config(provider="local", model=str(tiny), device="cpu")
    model = build_model(config, cache=ResponseCache(tmp_path / "c.db"), recorder=records.append)
    options = {"mode": "sdft", "adapter_root": str(tmp_path / "a"), **OPTIONS}
    screener = build_screener("critic-ttl", models={"critic": model}, options=SCREENERS.validate("critic-ttl", options))
    asyncio.run(screener.screen(context(), [candidate(0, "ensemble")]))
    record = asyncio.run(screener.learn([outcome(1, "ensemble", 0.7)], round=1))
    assert record["adapter_version"] == 1 and screener.learner.local.version == "ttl-v1"  # type: ignore[attr-defined]
    assert records and records[0].role == "critic"


def saved_adapter(tiny: Path, folder: Path) -> Path:
    """A LoRA adapter on the tiny LM with non-zero B (so it differs from the base), saved as a PEFT folder."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(3)
    config = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules="all-linear", task_type="CAUSAL_LM")
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny)), config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    model.save_pretrained(folder)
    return folder


def ttl_weights(screener: TestTimeCritic, adapter: str = "ttl") -> dict:
    from peft import get_peft_model_state_dict

    state = get_peft_model_state_dict(screener.learner.local.loaded.model, adapter_name=adapter)
    return {k: v.detach().clone() for k, v in state.items()}


@pytest.mark.parametrize("where", ["model adapter", "init_adapter"])
def test_ttl_starts_from_the_trained_critic_adapter(tiny: Path, tmp_path: Path, where: str) -> None:
    """Paper §4.2: test-time learning starts from the trained critic -- the model's adapter unless init_adapter."""
    from safetensors.torch import load_file

    from verifyless.model.local import adapter_tag

    folder = saved_adapter(tiny, tmp_path / "critic-adapter")
    adapter = str(folder) if where == "model adapter" else None
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu", adapter=adapter))
    options = {"adapter_root": str(tmp_path / "a"), **OPTIONS}
    if where == "init_adapter":
        options["init_adapter"] = str(folder)
    screener = build_screener(
        "critic-ttl", models={"critic": model}, options=SCREENERS.validate("critic-ttl", options), task=context().task
    )
    saved = load_file(str(folder / "adapter_model.safetensors"))
    mine = ttl_weights(screener)
    assert saved.keys() == mine.keys() and all(torch_equal(saved[k], mine[k]) for k in saved)
    tag = adapter_tag(folder)
    assert screener.learner.origin == tag and screener.learner.local.adapter_tags == (tag,)
    record = asyncio.run(screener.learn([outcome(1, "ensemble", 0.7)], round=1))
    assert record["adapter_origin"] == tag and record["adapter_version"] == 1
    assert load_file(str(folder / "adapter_model.safetensors")).keys() == saved.keys()  # the folder is not written
    fresh = ttl(tiny, tmp_path / "fresh")
    assert fresh.learner.origin is None and all(not v.any() for k, v in ttl_weights(fresh).items() if "lora_B" in k)


def teacher_logits(screener: TestTimeCritic, lesson: object) -> object:
    import torch

    learner = screener.learner
    ids = learner._prompt_ids(lesson.teacher)  # type: ignore[attr-defined]
    with torch.no_grad(), learner.teacher_weights():
        return learner._logits(ids[:-3], ids[-3:])


@pytest.mark.parametrize("start", ["fresh", "adapter"])
def test_the_sdft_teacher_is_frozen_by_default_and_drifts_only_when_asked(
    tiny: Path, tmp_path: Path, start: str
) -> None:
    """Paper Table 14: the SDFT teacher is the frozen starting critic; ``teacher: current`` follows the student."""
    import torch

    adapter = str(saved_adapter(tiny, tmp_path / "critic-adapter")) if start == "adapter" else None
    lesson_of = outcome(1, "ensemble", 0.7)
    seen = {}
    for teacher in ("frozen", "current"):
        model = build_model(make_config(provider="local", model=str(tiny), device="cpu", adapter=adapter))
        options = {"adapter_root": str(tmp_path / teacher), **OPTIONS, "learning_rate": 0.1, "teacher": teacher}
        screener = build_screener(
            "critic-ttl",
            models={"critic": model},
            options=SCREENERS.validate("critic-ttl", options),
            task=context().task,
        )
        lesson = screener.lesson(lesson_of)
        before = teacher_logits(screener, lesson)
        for r in (1, 2):
            asyncio.run(screener.learn([outcome(r, "ensemble", 0.7), outcome(r + 10, "delete", 0.3)], round=r))
        assert screener.version == 2
        seen[teacher] = bool(torch.allclose(before, teacher_logits(screener, lesson)))
        if start == "adapter" and teacher == "frozen":
            assert all(p.requires_grad for n, p in screener.learner.local.loaded.model.named_parameters()
                       if ".ttl." in n)  # fmt: skip
    assert seen == {"frozen": True, "current": False}


def test_ttl_learns_per_pairs_per_update_and_islands_set_it_to_one_pair_per_island(tiny: Path, tmp_path: Path) -> None:
    """One SDFT update per island-round (3 new pairs), one TT-GRPO update per 2 island-rounds (6 pairs)."""
    from verifyless.config import load_config

    model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
    options = {"adapter_root": str(tmp_path / "a"), **OPTIONS, "pairs_per_update": 3}
    screener = build_screener(
        "critic-ttl", models={"critic": model}, options=SCREENERS.validate("critic-ttl", options), task=context().task
    )
    records = [asyncio.run(screener.learn([outcome(r, "ensemble", 0.5 + r / 10)], round=r)) for r in range(1, 7)]
    assert [r["adapter_version"] for r in records] == [0, 0, 1, 1, 1, 2]
    assert [r["pairs"] for r in records] == [0, 0, 3, 0, 0, 3] and len(records[1]["pending"]) == 2
    other = build_screener(
        "critic-ttl", models={"critic": model}, options=SCREENERS.validate("critic-ttl", options), task=context().task
    )
    other.restore(records[:2])
    assert len(other.pending) == 2  # a resumed run keeps the pairs still waiting
    islands = load_config(overrides=["screener.name=critic-ttl", "strategy.name=islands"])
    assert islands.screener.options.pairs_per_update == 3  # derived when the configuration loads
    five = load_config(overrides=["screener.name=critic-ttl", "strategy.name=islands", "strategy.options.n_islands=5"])
    assert five.screener.options.pairs_per_update == 5
    assert "pairs_per_update" not in islands.model_dump()["screener"]["options"]  # derived, not given: not stored
    assert load_config(overrides=["screener.name=critic-ttl"]).screener.options.pairs_per_update is None


def test_label_probability_critic_with_reasoning_reads_after_each_critique_cut_before_its_verdict(tiny: Path) -> None:
    """reasoning_samples > 0: the distribution is the mean of the probes read after each critique's reasoning."""
    from verifyless.screen.probcritic import reasoning_prefix

    assert reasoning_prefix("why\n[IMPROVEMENT] lose --- x\nmore\n[IMPROVEMENT] improve --- y") == (
        "why\n[IMPROVEMENT] lose --- x\nmore\n"
    )  # cut before the last verdict tag
    assert reasoning_prefix("no verdict at all") == "no verdict at all"
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
    screener = build_screener(
        "critic-probs", models={"critic": model}, options=SCREENERS.validate("critic-probs", {"reasoning_samples": 2})
    )
    screener.max_tokens = 12  # type: ignore[attr-defined]
    ev = asyncio.run(screener.screen(context(), [candidate(0, "ensemble")])).evidence["c0"]
    critiques = ev.detail["critiques"]
    assert len(critiques) == 2
    messages = screener.messages(context(), candidate(0, "ensemble"))  # type: ignore[attr-defined]
    probes = [asyncio.run(verdict_score(screener.scorer, messages, reasoning_prefix(c))) for c in critiques]  # type: ignore[attr-defined]
    for word in ("improve", "tie", "lose"):
        assert ev.detail["label_probs"][word] == pytest.approx(sum(p.probs[word] for p in probes) / 2, abs=1e-6)
    bare = asyncio.run(verdict_score(screener.scorer, messages, ""))  # type: ignore[attr-defined]
    assert any(abs(bare.probs[w] - ev.detail["label_probs"][w]) > 1e-6 for w in bare.probs)  # the reasoning counts


def test_the_critic_benchmark_scores_critic_probs_on_its_probabilities_and_its_5_ladder_is_na(tiny: Path) -> None:
    """bench critic on critic-probs: predictions are the argmax of label_probs, not the sampled critiques."""
    from critic_data_rows import row

    from verifyless.metrics.critic import record_from_evidence
    from verifyless.node import Evidence
    from verifyless.offline.benchmark import run_critic_bench

    probs = {"improve": 0.2, "tie": 0.1, "lose": 0.7}
    ev = Evidence("c", 0.5, ("BigWin", "BigWin"), probs, 0.3, 2, 0, {"label_probs": probs, "scoring": "label-probs"})
    record = record_from_evidence(ev.to_dict(), "lose", "Lose")
    assert record is not None and record.pred3 == "lose" and record.pred5 is None and not record.five_way
    assert record.uncertainty == pytest.approx(0.3)
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu"))
    screener = build_screener(
        "critic-probs", models={"critic": model}, options=SCREENERS.validate("critic-probs", {"reasoning_samples": 1})
    )
    screener.max_tokens = 12  # type: ignore[attr-defined]
    rows = [
        {**row("keyword", "p0", f"c{i}", label, label5=five, delta=d), "task": "keyword"}
        for i, (label, five, d) in enumerate([("improve", "BigWin", 0.5), ("lose", "Lose", -0.5)])
    ]
    rep = run_critic_bench(rows, screener, repeats=1)
    assert len(rep.records) == 2
    for rec in rep.records:
        assert rec.pred3 == max(rec.votes, key=lambda w: (rec.votes[w], -("improve", "tie", "lose").index(w)))
    assert rep.groups["all"].ladder5 is None and rep.groups["all"].n_ladder == 0  # N/A, not 0


def test_a_trained_adapter_keeps_its_hash_from_training_to_the_ttl_run_that_starts_from_it(
    tiny: Path, tmp_path: Path
) -> None:
    """The hand-over: the configured adapter's tag, the learner's origin and every record's origin agree."""
    from verifyless.model.local import adapter_tag
    from verifyless.screen.ttl import run_adapters

    folder = saved_adapter(tiny, tmp_path / "trained")
    trained = adapter_tag(folder)  # what training left
    model = build_model(make_config(provider="local", model=str(tiny), device="cpu", adapter=str(folder)))
    options = {"adapter_root": str(tmp_path / "a"), **OPTIONS}
    screener = build_screener(
        "critic-ttl", models={"critic": model}, options=SCREENERS.validate("critic-ttl", options), task=context().task
    )
    records = [asyncio.run(screener.learn([outcome(r, "ensemble", 0.7)], round=r)) for r in (1, 2)]
    assert {r["adapter_origin"] for r in records} == {trained}
    config = {"roles": {"models": {"critic": {"provider": "local", "model": str(tiny), "adapter": str(folder)}}}}
    assert run_adapters(config, records) == [
        {"role": "critic", "folder": str(folder), "tag": trained},
        {"role": "critic-ttl", "origin": trained, "version": 2},
    ]
    assert run_adapters({"roles": {"models": {"critic": {"adapter": str(tmp_path / "gone")}}}}, [])[0]["tag"] is None
