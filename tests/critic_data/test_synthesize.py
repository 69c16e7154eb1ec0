"""Teacher critique synthesis with scripted teachers: each stratum is reached and recorded."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from critic_data_rows import row

from verifyless.critic_data import critic_messages, load_critic_dataset
from verifyless.critic_data.build import synthesize_dataset
from verifyless.critic_data.dataset import card_data, save_dataset
from verifyless.critic_data.synthesize import SynthesisSettings, strata_report, synthesize_rows
from verifyless.errors import ModelUnavailable
from verifyless.model.cache import CachedModel, ResponseCache
from verifyless.model.scripted import ScriptedModel, last_user_text
from verifyless.outcome import to_three
from verifyless.screen.critic import parse_verdict

# the win tier a teacher writes for each label; every other label is written with tier NA
TIER = {"BigWin": "big", "MediumWin": "medium", "SmallWin": "small", "improve": "small"}


def critique(label: str) -> str:
    imp, tier = to_three(label), TIER.get(label, "NA")
    return (
        "Criterion 1 (model capacity): the child is better on this criterion.\n"
        "Criterion 2 (regularisation): about equal.\nWeights: capacity high, regularisation low.\n"
        f"Combining them, the forecast follows.\n[IMPROVEMENT] {imp} --- capacity dominates\n"
        f"[WINTIER] {tier} --- size of the expected change"
    )


# child id -> (target label, behaviour)
PLAN = {
    "easy": ("MediumWin", "easy"),
    "hint": ("SmallWin", "hint"),
    "told": ("Tie", "told"),
    "never": ("Lose", "never"),
    "three": ("tie", "told"),
}


def make_teacher() -> tuple[ScriptedModel, list]:
    counter: Counter[str] = Counter()

    def answer(request) -> str:
        text = last_user_text(request)
        child = re.search(r"(\w+): a changed model", text).group(1)
        target, mode = PLAN[child]
        hinted, told = "An earlier look at this same pair" in text, "The measured outcome" in text
        counter[child] += 1
        if mode == "easy" and counter[child] % 3 == 0 or mode == "hint" and hinted or mode == "told" and told:
            return critique(target)
        if mode == "never":
            return "I cannot decide."
        wrong = "Lose" if counter[child] % 8 < 5 else "BigWin"  # Lose is the most frequent wrong label
        return critique("lose" if target == "tie" and wrong == "Lose" else wrong if target != "Lose" else "Tie")

    model = ScriptedModel(function=answer)
    return model, model.calls


def rows():
    out = []
    for child, (target, _) in PLAN.items():
        five = target if target[0].isupper() else None
        three = {"MediumWin": "improve", "SmallWin": "improve", "Tie": "tie", "Lose": "lose"}.get(target, target)
        out.append(row("toy", "p0", child, three, label5=five))
    return out


def test_each_stratum_is_reached_and_recorded(tmp_path: Path) -> None:
    teacher, calls = make_teacher()
    results, synth = asyncio.run(
        synthesize_rows(rows(), teacher, SynthesisSettings(seed=1), journal=tmp_path / "j.jsonl")
    )
    got = {eid.split("/")[1]: r for eid, r in results.items()}
    assert {k: r.stratum for k, r in got.items()} == {
        "easy": "sampled",
        "hint": "revised",
        "told": "guided",
        "never": None,
        "three": "guided",
    }
    assert got["hint"].ruled_out == "Lose"  # the most frequent wrong label is the one ruled out
    assert got["three"].target == "tie" and got["told"].target == "Tie"
    for r in got.values():
        if r.critique is not None:
            verdict = parse_verdict(r.critique)
            assert verdict is not None and r.critique.rstrip().splitlines()[-2].startswith("[IMPROVEMENT]")
            assert (verdict.label if r.target[0].isupper() else verdict.improvement) == r.target
    assert got["never"].critique is None and got["never"].predicted["sampled"] == [None] * 8
    # the unlabelled stage sends exactly the critic's prompt; the hint and the label only in later stages
    first = next(c for c in calls if "easy: a changed model" in last_user_text(c.request))
    assert [{"role": m.role, "content": m.content} for m in first.request.messages] == critic_messages(rows()[0])
    hinted = [c for c in calls if "An earlier look" in last_user_text(c.request)]
    assert hinted and all("worse than the parent" in last_user_text(c.request) for c in hinted)
    assert all(c.request.role == "teacher" and c.request.temperature == 0.7 for c in calls)
    report = strata_report(results)
    assert report["counts"] == {"sampled": 1, "revised": 1, "guided": 2, "failed": 1}
    assert report["shares_percent"]["guided"] == 40.0 and report["paper_shares_percent"]["sampled"] == 44.4

    def broken(request):
        raise ModelUnavailable("a resumed synthesis must not ask again")

    again, _ = asyncio.run(synthesize_rows(rows(), ScriptedModel(function=broken), journal=tmp_path / "j.jsonl"))
    assert {k: (v.stratum, v.critique) for k, v in again.items()} == {
        k: (v.stratum, v.critique) for k, v in results.items()
    }


def test_teacher_calls_are_cached_and_costed(tmp_path: Path) -> None:
    teacher, calls = make_teacher()
    with ResponseCache(tmp_path / "c.db") as cache:
        first, synth = asyncio.run(synthesize_rows(rows()[:2], CachedModel(teacher, cache)))
        n = len(calls)
        assert synth.usage.prompt_tokens > 0 and synth.calls == 3  # sampled; sampled + revised
        second, synth2 = asyncio.run(synthesize_rows(rows()[:2], CachedModel(teacher, cache)))
    assert len(calls) == n and synth2.usage.prompt_tokens == 0  # every request answered from the cache
    assert {k: v.critique for k, v in second.items()} == {k: v.critique for k, v in first.items()}


def test_synthesize_dataset_writes_critiques_strata_and_card(tmp_path: Path) -> None:
    data = rows()
    splits = {"sft": data[:3], "grpo": [], "bench": data[3:]}
    src = save_dataset(splits, tmp_path / "ds", card_data(splits, settings={"seed": 0}))
    teacher, _ = make_teacher()
    card = synthesize_dataset(src, tmp_path / "out", teacher, teacher="scripted:test")
    dd = load_critic_dataset(tmp_path / "out")
    sft = {r["child_id"]: r for r in dd["sft"]}
    assert sft["easy"]["stratum"] == "sampled" and parse_verdict(sft["easy"]["critique"]).label == "MediumWin"
    assert sft["told"]["stratum"] == "guided"
    # bench held "never" (no stratum) and "three" (guided): balanced over the strata present, the failed one leaves
    assert [r["child_id"] for r in dd["bench"]] == ["three"]
    assert card["bench_balance"]["before"] == {"sampled": 0, "revised": 0, "guided": 1}
    assert card["bench_balance"]["absent"] == ["sampled", "revised"]
    assert card["synthesis"]["counts"]["failed"] == 1 and "teacher=scripted:test" in card["models"]
    assert json.loads((tmp_path / "out" / "card.json").read_text())["synthesis"]["teacher"] == "scripted:test"
    with pytest.raises(ValueError, match="new folder"):
        synthesize_dataset(src, src, teacher, teacher="x")
