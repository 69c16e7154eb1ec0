"""Critic datasets: splits without leakage, class balancing, round trip, card, schema versions, prompts."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
import yaml
from critic_data_rows import many, row

from verifyless.critic_data import critic_messages, load_critic_dataset
from verifyless.critic_data.dataset import balance, balance_bench, card_data, save_dataset, split_rows, splits_of
from verifyless.errors import ConfigError


def _groups(rows, key):
    return {(r["task"], r[key]) for r in rows}


def test_no_parent_in_two_splits_and_bench_takes_its_share() -> None:
    rows = many("t1", 10, 5) + many("t2", 6, 5) + many("t1", 3, 8, source="collect-grpo", run_id="g", offset=100)
    # a grpo run that starts from the same baseline program as the sft run: its rows must not leak into grpo
    rows += [
        row("t1", "root", f"g{i}", "lose", source="collect-grpo", run_id="g2", parent_hash="h-t1-p0") for i in range(4)
    ]
    splits, report = split_rows(rows, seed=1, bench_fraction=0.25)
    seen: dict[tuple, str] = {}
    for name, part in splits.items():
        for key in _groups(part, "parent_hash"):
            assert seen.setdefault(key, name) == name, f"parent {key} in {seen[key]} and {name}"
    assert report["grpo_dropped_shared_parent"] == 4
    main = len(splits["sft"]) + len(splits["bench"])
    assert main == 80 and 0.25 * main <= len(splits["bench"]) < 0.25 * main + 5
    assert splits == split_rows(rows, seed=1, bench_fraction=0.25)[0]  # seeded


def test_split_by_task_keeps_each_task_in_one_split() -> None:
    rows = many("t1", 4, 3) + many("t2", 4, 3) + many("t3", 4, 3)
    splits, _ = split_rows(rows, seed=0, bench_fraction=0.3, by="task")
    tasks = {name: {r["task"] for r in part} for name, part in splits.items()}
    assert not tasks["sft"] & tasks["bench"] and tasks["bench"]
    with pytest.raises(ConfigError):
        split_rows(rows, by="run")


def test_balanced_downsampling_is_seeded_and_reports_counts() -> None:
    rows = [row("t", "p", f"c{i}", lab) for i, lab in enumerate(["improve"] * 7 + ["tie"] * 3 + ["lose"] * 12)]
    kept, counts = balance(rows, random.Random(5))
    assert counts == {
        "before": {"improve": 7, "tie": 3, "lose": 12},
        "after": {"improve": 3, "tie": 3, "lose": 3},
        "absent": [],
    }
    assert [r["example_id"] for r in kept] == [r["example_id"] for r in balance(rows, random.Random(5))[0]]
    assert [r["example_id"] for r in kept] != [r["example_id"] for r in balance(rows, random.Random(6))[0]]
    assert all(r["label3"] == "tie" for r in kept if r["child_id"] in {"c7", "c8", "c9"})
    # no ties at all (a continuous metric): the other classes are balanced among themselves, tie reported absent
    no_ties, counts = balance([r for r in rows if r["label3"] != "tie"], random.Random(0))
    assert counts["after"] == {"improve": 7, "tie": 0, "lose": 7} and counts["absent"] == ["tie"]
    assert Counter(r["label3"] for r in no_ties) == {"improve": 7, "lose": 7}


def test_bench_is_balanced_across_strata_once_they_exist() -> None:
    bench = [
        row("t", f"p{i % 3}", f"c{i}", "tie", stratum=s)
        for i, s in enumerate(["sampled"] * 6 + ["revised"] * 4 + ["guided"] * 2 + [None] * 2)
    ]
    splits, report = balance_bench({"sft": [], "grpo": [], "bench": bench}, seed=0)
    assert report["before"] == {"sampled": 6, "revised": 4, "guided": 2}
    assert sorted(r["stratum"] for r in splits["bench"]) == ["guided"] * 2 + ["revised"] * 2 + ["sampled"] * 2
    assert balance_bench({"bench": [row("t", "p", "c", "tie")]})[1] is None
    two = [row("t", "p", f"c{i}", "tie", stratum=s) for i, s in enumerate(["sampled", "sampled", "guided"])]
    assert [r["stratum"] for r in balance_bench({"bench": two}, seed=0)[0]["bench"]].count("sampled") == 1


def test_round_trip_parquet_card_and_schema_check(tmp_path: Path) -> None:
    rows = many("t1", 4, 3)
    rows[0] |= {
        "label5": "BigWin",
        "critique": "[IMPROVEMENT] improve --- x\n[WINTIER] big --- y",
        "stratum": "sampled",
    }
    splits, report = split_rows(rows, seed=2, bench_fraction=0.3)
    card = card_data(
        splits,
        settings={"seed": 2},
        runs=[{"run_id": "r1"}],
        models=["default=scripted:x"],
        extra={"split_report": report},
    )
    out = save_dataset(splits, tmp_path / "ds", card)
    loaded = splits_of(load_critic_dataset(out))
    for name in ("sft", "grpo", "bench"):
        assert loaded[name] == splits[name]
    assert loaded["grpo"] == []
    import pyarrow.parquet as pq

    assert pq.read_table(out / "parquet" / "sft.parquet").num_rows == len(splits["sft"])
    written = json.loads((out / "card.json").read_text())
    assert written["schema_version"] == 1 and written["run_ids"] == ["r1"] and written["tasks"] == {"t1": 12}
    assert written["splits"]["sft"]["rows"] + written["splits"]["bench"]["rows"] == 12
    readme = (out / "README.md").read_text()
    assert readme.startswith("---\n") and not (out / "card.md").exists()
    _, block, md = readme.split("---\n", 2)
    meta = yaml.safe_load(block)
    assert meta["size_categories"] == ["n<1K"] and "verifyless" in meta["tags"]
    files = {f["split"]: f["path"] for f in meta["configs"][0]["data_files"]}
    assert files == {name: f"parquet/{name}.parquet" for name in written["splits"]}
    assert all((out / path).is_file() for path in files.values())
    assert "| bench |" in md and "## Settings" in md and "example_id" in md
    (out / "README.md").rename(out / "card.md")  # a folder written before README.md cards still loads
    assert splits_of(load_critic_dataset(out)) == splits_of(loaded)

    older = dict(written, schema_version=0)
    (out / "card.json").write_text(json.dumps(older))
    with pytest.raises(ConfigError, match="schema version 0.*reads version 1.*Rebuild"):
        load_critic_dataset(out)
    with pytest.raises(ConfigError, match="not a critic dataset"):
        load_critic_dataset(tmp_path)
    bad = dict(rows[1], label3="better")
    with pytest.raises(ValueError, match="label3"):
        save_dataset({"sft": [bad]}, tmp_path / "bad", card)


def test_critic_messages_are_the_pointwise_critics_own_prompt() -> None:
    from verifyless.critic_data.prompt import row_candidate, screen_context
    from verifyless.screen.critic import PointwiseCritic

    r = row("diabetes", "root", "c1", "improve")
    msgs = critic_messages(r)
    ref = PointwiseCritic(None).messages(screen_context(r), row_candidate(r))  # type: ignore[arg-type]
    assert msgs == [{"role": m.role, "content": m.content} for m in ref]
    user = msgs[-1]["content"]
    assert "parent root of diabetes" in user and "c1: a changed model" in user and "1. model capacity" in user
    assert "[IMPROVEMENT]" in user and "(lower is better)" in user  # the loaded task (rmse) supplies the metric line
    unknown = critic_messages(row("no-such-task", "p", "c", "tie"))[-1]["content"]
    assert "Maximise the score of no-such-task." in unknown
