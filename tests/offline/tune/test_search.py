"""Screener prompt tuning: the search finds the better instructions on dev, never reads bench while searching,
and the saved prompt file loads through the screener option and reproduces its score."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
import yaml
from critic_data_rows import many
from typer.testing import CliRunner

from verifyless._cli.app import app
from verifyless.critic_data.dataset import card_data, save_dataset
from verifyless.errors import ConfigError
from verifyless.model.scripted import ScriptedModel, last_user_text, system_text
from verifyless.offline.benchmark import screen_rows
from verifyless.offline.tune.doc import PromptDoc, load_variants
from verifyless.offline.tune.evaluate import CountingModel, CriticTarget, PairwiseTarget, dev_rows, outcome_pairs
from verifyless.offline.tune.search import tune_prompt
from verifyless.offline.tune.writer import writer_variants
from verifyless.prompts import load_template, template_text
from verifyless.screen.registry import SCREENERS, build_screener

KEY_WORDING = "Start from the prior that the child ties"  # in variants/critic.md, section "How to reason"
VERDICT = {
    "improve": "[IMPROVEMENT] improve --- helps\n[WINTIER] medium --- some",
    "tie": "[IMPROVEMENT] tie --- same\n[WINTIER] NA --- none",
    "lose": "[IMPROVEMENT] lose --- hurts\n[WINTIER] NA --- none",
}
RANK = {"lose": 0, "tie": 1, "improve": 2}


def _splits() -> dict[str, list[dict]]:
    """sft: 6 parents x 3 children (labels cycle), grpo: 2 parents, bench: 3 other parents."""
    return {
        "sft": many("toy", 6, 3),
        "grpo": many("toy", 2, 3, source="collect-grpo", offset=20),
        "bench": many("toy", 3, 3, run_id="rb", offset=40),
    }


def _truth(splits) -> dict[str, str]:
    return {r["child_summary"]: r["label3"] for rows in splits.values() for r in rows}


def _critic_model(truth: dict[str, str]) -> ScriptedModel:
    """Answers the true label only when the prompt holds KEY_WORDING; otherwise always 'improve' (a biased critic)."""

    def answer(request) -> str:
        child = re.search(r"## Child \(proposed, not yet run\)\n(.+)", last_user_text(request)).group(1).strip()
        prompt = system_text(request) + last_user_text(request)
        return "Reasoning.\n" + VERDICT[truth[child] if KEY_WORDING in prompt else "improve"]

    return ScriptedModel(function=answer)


def _judge_model(truth: dict[str, str]) -> ScriptedModel:
    """Picks the better child only when both candidates come before the evaluated solutions; else always 'A'."""

    def answer(request) -> str:
        text = last_user_text(request)
        a = re.search(r"## Candidate A\n(.+)", text).group(1).strip()
        b = re.search(r"## Candidate B\n(.+)", text).group(1).strip()
        informed = text.index("## Candidate B") < text.index("## Solutions already evaluated")
        pick = "A" if not informed or RANK[truth[a]] >= RANK[truth[b]] else "B"
        return f"Thinking.\n[CHOICE] {pick} --- reasons"

    return ScriptedModel(function=answer)


def _loader(splits, seen: list[str]):
    def load(name: str) -> list[dict]:
        seen.append(name)
        return [dict(r) for r in splits[name]]

    return load


def test_critic_search_finds_the_better_wording_and_never_reads_bench_while_searching() -> None:
    splits = _splits()
    model = _critic_model(_truth(splits))
    target = CriticTarget(model, {"k": 2}, seed=0)
    seen: list[str] = []
    rep = asyncio.run(tune_prompt(target, _loader(splits, seen), list(splits), budget=40, seed=0))

    assert rep.baseline_dev == pytest.approx(1 / 3, abs=0.1) and rep.tuned_dev == 1.0
    assert any("skeptical-prior" in e for e in rep.edits) and KEY_WORDING in rep.template.text("user")
    assert rep.tuned_bench == 1.0 and rep.baseline_bench == pytest.approx(1 / 3)
    assert rep.stopped == "ceiling" and len({t.key for t in rep.trials}) == len(rep.trials)
    # bench is loaded last, after the search; the model saw only dev children until the search had finished
    assert seen[-1] == "bench" and seen.count("bench") == 1
    search_calls = sum(t.calls for t in rep.trials)
    assert rep.search_calls == search_calls and rep.bench_calls == 2 * 9 and rep.search_tokens > 0
    bench_children = {r["child_summary"] for r in splits["bench"]}
    dev = dev_rows({k: v for k, v in splits.items() if k != "bench"}, dev=None, fraction=0.25, seed=0)
    dev_children = {r["child_summary"] for r in dev}
    shown = [
        re.search(r"## Child \(proposed, not yet run\)\n(.+)", last_user_text(c.request)).group(1) for c in model.calls
    ]
    assert set(shown[:search_calls]) == dev_children and set(shown[search_calls:]) == bench_children
    # the dev slice is whole parents from sft/grpo
    parents = {r["parent_id"] for r in dev}
    assert all(r["parent_id"] not in parents for r in splits["bench"])
    assert len(dev) == 3 * len(parents)


def test_saved_prompt_file_loads_through_the_option_and_reproduces_the_tuned_score(tmp_path: Path) -> None:
    splits = _splits()
    truth = _truth(splits)
    rep = asyncio.run(
        tune_prompt(CriticTarget(_critic_model(truth), {"k": 2}), _loader(splits, []), list(splits), budget=40)
    )
    path = tmp_path / "tuned.md"
    path.write_text(template_text(rep.template))
    critic = build_screener(
        "critic",
        models={"critic": _critic_model(truth)},
        options=SCREENERS.validate("critic", {"prompt_file": str(path), "k": 2}),
    )
    dev = dev_rows({k: v for k, v in splits.items() if k != "bench"}, dev=None, fraction=0.25, seed=0)
    for rows, expected in ((dev, rep.tuned_dev), (splits["bench"], rep.tuned_bench)):
        records, none = asyncio.run(screen_rows(rows, critic, seed=0))
        assert none == 0 and sum(r.correct3 for r in records) / len(rows) == expected == 1.0


def test_tournament_search_improves_pairwise_accuracy_by_moving_a_section() -> None:
    splits = _splits()
    target = PairwiseTarget(_judge_model(_truth(splits)), seed=1)
    rep = asyncio.run(tune_prompt(target, _loader(splits, []), list(splits), budget=30, seed=1))
    assert rep.baseline_dev == 0.5  # a judge that always says "A" splits every match: settled by coin
    assert rep.tuned_dev == 1.0 and rep.tuned_bench == 1.0 and rep.baseline_bench == 0.5
    assert any(e.startswith("move ") for e in rep.edits)
    assert rep.dev_items >= 2 and rep.bench_items == 9  # 3 unequal sibling pairs per bench parent


def test_outcome_pairs_order_the_better_child_first() -> None:
    rows = many("toy", 2, 3)
    pairs = outcome_pairs(rows, __import__("random").Random(0))
    assert len(pairs) == 6 and all(RANK[a["label3"]] > RANK[b["label3"]] for a, b in pairs)
    assert all(a["parent_id"] == b["parent_id"] for a, b in pairs)
    assert len(outcome_pairs(rows, __import__("random").Random(0), max_pairs=2)) == 2


def test_package_variants_fit_the_built_in_prompts() -> None:
    context = "Solutions already evaluated on this task (validation scores and code)"
    for name, sections in (
        ("critic", {"Criteria you must cover", "How to reason", "system"}),
        ("pairwise", {context, "Instructions", "system"}),
    ):
        doc = PromptDoc.parse(load_template(f"screen/{name}"))
        assert doc.template().sections == load_template(f"screen/{name}").sections  # parsing loses nothing
        variants = load_variants(name, doc)
        assert {v.section for v in variants} == sections and len(variants) >= 4


def test_prompt_writer_rewrites_join_the_pool_and_bad_ones_are_dropped() -> None:
    doc = PromptDoc.parse(load_template("screen/critic"))
    writer = CountingModel(
        ScriptedModel(replies=["Sure.\n<section>\nWeigh each criterion, then decide.\n</section>", "{{task}} again"])
    )
    found = asyncio.run(writer_variants(writer, doc, ["How to reason", "Missing section"], n=2))
    assert [(v.section, v.text, v.source) for v in found] == [
        ("How to reason", "Weigh each criterion, then decide.", "writer")
    ]
    assert writer.calls == 1


def test_a_prompt_writer_rewrite_is_scored_and_kept_when_it_wins() -> None:
    splits = _splits()
    truth = _truth(splits)
    wording = "Compare only what the metric can feel."  # in no package variant: only the writer proposes it

    def critic(request) -> str:
        child = re.search(r"## Child \(proposed, not yet run\)\n(.+)", last_user_text(request)).group(1).strip()
        return VERDICT[truth[child] if wording in last_user_text(request) else "improve"]

    def write(request) -> str:
        return f"<section>\n{wording}\n</section>" if "Section: How to reason" in last_user_text(request) else "-"

    writer = CountingModel(ScriptedModel(function=write))
    target = CriticTarget(ScriptedModel(function=critic), {"k": 1})
    rep = asyncio.run(tune_prompt(target, _loader(splits, []), list(splits), budget=60, writer=writer, writer_n=1))
    assert rep.tuned_dev == 1.0 and rep.tuned_bench == 1.0 and wording in rep.template.text("user")
    assert any("writer-" in e for e in rep.edits) and rep.writer_calls == 3 and rep.writer_tokens > 0  # one per section


def test_bad_inputs_give_one_line_errors(tmp_path: Path) -> None:
    splits = _splits()
    target = CriticTarget(_critic_model(_truth(splits)), {"k": 1})
    only_bench = {"sft": [], "grpo": [], "bench": splits["bench"]}
    errors = []
    for call in (
        lambda: tune_prompt(target, _loader(only_bench, []), list(only_bench)),
        lambda: tune_prompt(target, _loader(splits, []), list(splits), dev="bench"),
        lambda: tune_prompt(target, _loader(splits, []), list(splits), budget=0),
    ):
        with pytest.raises(ConfigError) as exc:
            asyncio.run(call())
        errors.append(str(exc.value))
    assert "dev slice is empty" in errors[0] and "--dev bench" in errors[1] and "--budget" in errors[2]

    critic = load_template("screen/critic")
    system, user = critic.text("system"), critic.text("user")
    cases = {
        "no_child.md": template_text(critic.with_text("user", user.replace("{{child}}", "(child)"))),
        "extra.md": template_text(critic.with_text("user", user + "\n{{score}}")),
        "no_tag.md": template_text(critic.with_text("user", user.replace("[IMPROVEMENT]", "IMPROVEMENT"))),
        "no_split.md": system + "\n" + user,
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ConfigError) as exc:
            build_screener(
                "critic",
                models={"critic": target.model},
                options=SCREENERS.validate("critic", {"prompt_file": str(tmp_path / name)}),
            )
        errors.append(str(exc.value))
    with pytest.raises(ConfigError) as exc:
        build_screener(
            "tournament",
            models={"judge": target.model},
            options=SCREENERS.validate("tournament", {"prompt_file": str(tmp_path / "x.md")}),
        )
    errors.append(str(exc.value))
    assert "{{child}}" in errors[3] and "{{score}}" in errors[4] and "[IMPROVEMENT]" in errors[5]
    assert "<!-- section: user -->" in errors[6] and "does not exist" in errors[7]
    result = CliRunner().invoke(app, ["tune", "screener", "--dataset", str(tmp_path / "nope"), "--model", "x"])
    assert isinstance(result.exception, ConfigError)
    errors.append(str(result.exception))
    assert "no dataset at" in errors[-1]
    assert all("\n" not in e for e in errors)


def test_tune_command_writes_a_prompt_file_the_bench_command_loads(tmp_path: Path) -> None:
    splits = _splits()
    ds = save_dataset(splits, tmp_path / "ds", card_data(splits, settings={}))
    rules = [
        {"match": f"\\A(?=[\\s\\S]*{re.escape(child)})(?=[\\s\\S]*{KEY_WORDING})", "reply": VERDICT[label]}
        for child, label in _truth(splits).items()
    ] + [{"reply": VERDICT["improve"]}]
    script = tmp_path / "critic.yaml"
    script.write_text(yaml.safe_dump({"mode": "rules", "rules": rules}))
    out = tmp_path / "tuned" / "critic.md"
    args = ["tune", "screener", "--dataset", str(ds), "--model", f"scripted:{script}", "--budget", "40"]
    result = CliRunner().invoke(app, [*args, "--option", "k=1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "tuned" / "critic.md.json").read_text())
    assert report["tuned_dev"] == 1.0 and report["tuned_bench"] == 1.0 and report["baseline_bench"] < 0.5
    assert "prompt_file" in result.output and KEY_WORDING in out.read_text()
    bench = ["bench", "critic", "--dataset", str(ds), "--model", f"scripted:{script}", "--option", "k=1"]
    result = CliRunner().invoke(app, [*bench, "--option", f"prompt_file={out}"])
    assert result.exit_code == 0, result.output
    assert re.search(r"│ all\s+│[^\n]*100\.0", result.output), result.output


def test_the_command_line_prints_one_line_and_exits_2_on_bad_input(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "verifyless", "tune", "screener", "--dataset", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "no dataset at" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_tournament_tuning_over_real_http_counts_every_request(tmp_path: Path, monkeypatch) -> None:
    from verifyless.model.testserver import TestServer

    splits = _splits()
    ds = save_dataset(splits, tmp_path / "ds", card_data(splits, settings={}))
    out = tmp_path / "judge.md"
    with TestServer(_judge_model(_truth(splits)), models=["judge"]) as server:
        monkeypatch.setenv("VERIFYLESS_BASE_URL", server.base_url)  # no --model: the command uses env
        monkeypatch.setenv("VERIFYLESS_MODEL", "judge")
        args = ["tune", "screener", "--dataset", str(ds), "--screener", "tournament", "--budget", "30"]
        result = CliRunner().invoke(app, [*args, "--seed", "1", "--out", str(out)])
        served = len(server.requests)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "judge.md.json").read_text())
    assert report["baseline_dev"] == 0.5 and report["tuned_dev"] == 1.0 and report["tuned_bench"] == 1.0
    assert served == report["search_calls"] + report["bench_calls"] > 0
    judge = build_screener(
        "tournament",
        models={"judge": ScriptedModel(replies=["-"])},
        options=SCREENERS.validate("tournament", {"prompt_file": str(out)}),
    )
    assert judge.template.text("user").index("## Candidate B") < judge.template.text("user").index(
        "## Solutions already evaluated"
    )
