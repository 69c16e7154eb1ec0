"""The reward-model critic (``critic-rm``) on tiny data: honest splits, a head that learns, the weights tag from
training through the run record to ``show``, and a warm start from a store's earlier runs.

The encoder here is the package's ``hashing`` text encoder (no torch), so these tests are fast; MiniLM is the
same code path with another ``TextEncoder`` (the benchmark uses it).
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import numpy as np
import pytest

from verifyless._cli.show import show_data
from verifyless.config import RunConfig, load_config, stored_config
from verifyless.errors import ConfigError
from verifyless.node import Candidate, Idea, Operator
from verifyless.offline.replay import RandomArm, replay_run
from verifyless.offline.world_pairs import (
    TextPair,
    leaks,
    point_key,
    region_split_of,
    run_pairs,
    split_by_region,
    split_by_run,
    world_pairs,
)
from verifyless.offline.worlds import synthetic_world
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import ScreenContext
from verifyless.screen.features import HashingTextEncoder
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.screen.reward import PairFeaturizer, head_tag, load_head, save_head, sentences
from verifyless.store import RunStore
from verifyless.train.reward import HeadSettings, fit_head, head_arrays, score, sibling_pairs, train_from_store
from verifyless.wiring import build_engine

DATA_TASK = Path(__file__).resolve().parents[1] / "data_task"
HASHING = HeadSettings(encoder="hashing", C=1.0)


def world_texts(world):
    return [" ".join(f"{d.capitalize()} is {p.assignment[d]}." for d in world.dimensions) for p in world.points]


def test_a_split_by_run_drops_every_later_pair_whose_parent_or_child_an_earlier_run_holds():
    def pair(parent, child, run, label="improve"):
        return TextPair("t", parent, child, label, 0.1, parent, child, run)

    pairs = [pair("base", "a", "r1"), pair("a", "b", "r1", "lose"), pair("base", "c", "r2"), pair("c", "d", "r2")]
    pairs += [pair("e", "a", "r2", "lose"), pair("e", "f", "r2", "tie")]
    split = split_by_run(pairs, ["r2"])
    assert [(p.parent_key, p.child_key) for p in split.bench] == [("c", "d"), ("e", "f")]
    assert split.dropped == 2 and not leaks(split)
    assert leaks(split.__class__(split.train, (pair("a", "z", "r2"),), 0, "leaky")) == {"a"}


def test_world_splits_by_run_and_by_region_share_no_configuration():
    world = synthetic_world(seed=3)
    texts = world_texts(world)
    earlier = [p for s in range(4) for p in run_pairs(world, _verified(world, s), texts, group=f"r{s}", tie=0.0)]
    later = [p for s in (10, 11) for p in run_pairs(world, _verified(world, s), texts, group=f"r{s}", tie=0.0)]
    assert earlier and later and all(p.label in ("improve", "tie", "lose") for p in earlier)
    by_run = split_by_run(earlier + later, ["r10", "r11"])
    assert not leaks(by_run) and by_run.dropped > 0  # every later run starts from the same baseline
    pairs = world_pairs(world, texts, max_moves=2)
    dim, options = region_split_of(world)
    where = {point_key(world, i): str(p.assignment[dim] in options) for i, p in enumerate(world.points)}
    by_region = split_by_region(pairs, where.__getitem__, ["True"])
    assert by_region.train and by_region.bench and not leaks(by_region)
    assert all(where[p.parent_key] == where[p.child_key] == "True" for p in by_region.bench)
    assert len(by_region.train) + len(by_region.bench) + by_region.dropped == len(pairs)


def _verified(world, seed):
    return replay_run(world, RandomArm(), budget=10, n_candidates=4, seed=seed).verified


def keyword_pairs(n=60, seed=0):
    """Children that add 'more trees' improve, 'fewer trees' lose, 'other trees' tie (one changed sentence)."""
    rng = random.Random(seed)
    words = {"improve": "It grows more trees.", "lose": "It grows fewer trees.", "tie": "It grows other trees."}
    out = []
    for i in range(n):
        label = rng.choice(sorted(words))
        parent = f"Program {i}. It reads the data."
        out.append(
            TextPair(
                "t",
                parent,
                f"{parent} {words[label]}",
                label,
                {"improve": 0.2, "tie": 0.0, "lose": -0.2}[label],
                f"p{i}",
                f"c{i}",
            )
        )
    return out


def test_a_head_learns_the_changed_sentence_and_scores_it():
    pairs = keyword_pairs()
    featurizer = PairFeaturizer(HashingTextEncoder(), "sentence-diff")
    head = fit_head(featurizer, pairs[:40], HASHING)
    probs = head.probs(featurizer.transform([(p.parent_text, p.child_text) for p in pairs[40:]]))
    assert np.allclose(probs.sum(axis=1), 1.0)
    s = score(probs, pairs[40:])
    assert s.dir3 == 1.0, "the changed sentence names the label"
    assert sentences("A b. C d! E?") == ["A b.", "C d!", "E?"]


def test_pairwise_accuracy_counts_only_siblings_apart_by_the_gap():
    def child(key, delta):
        return TextPair("t", "p", key, "improve", delta, "p", key)

    pairs = [child("a", 0.3), child("b", 0.1), child("c", 0.105), TextPair("t", "q", "d", "lose", -0.5, "q", "d")]
    assert sorted(sibling_pairs(pairs, 0.01)) == [(0, 1), (0, 2)]


def saved(tmp_path, pairs, name="rm", C=1.0):
    featurizer = PairFeaturizer(HashingTextEncoder(), "sentence-diff")
    head = fit_head(featurizer, pairs, HeadSettings(encoder="hashing", C=C))
    return save_head(tmp_path / name, head_arrays(head), {"features": "sentence-diff", "encoder": "hashing"})


def test_the_screener_ranks_by_the_heads_probabilities_and_records_its_tag(tmp_path):
    tag = saved(tmp_path, keyword_pairs())
    assert tag == head_tag(tmp_path / "rm") and tag.startswith("rm@")
    screener = build_screener(
        "critic-rm", models={}, options=SCREENERS.validate("critic-rm", {"path": str(tmp_path / "rm")}), threshold=0.25
    )
    parent = "Program 99. It reads the data."
    cands = [
        Candidate(cid, "root", Operator.IMPROVE, Idea(cid), "", cid, f"{parent} {text}")
        for cid, text in (
            ("bad", "It grows fewer trees."),
            ("good", "It grows more trees."),
            ("same", "It grows other trees."),
        )
    ]
    ctx = ScreenContext(task=None, parent=ParentInfo("root", "", 1.0, parent), rng=random.Random(0))  # type: ignore[arg-type]
    screening = asyncio.run(screener.screen(ctx, cands))
    assert screening.ranking == ("good", "same", "bad") and screening.chosen == ("good",)
    ev = screening.evidence["good"]
    assert ev.detail["weights"] == tag and ev.detail["scoring"] == "reward-model"
    assert abs(sum(ev.votes.values()) - 1.0) < 1e-9 and ev.uncertainty == pytest.approx(1 - max(ev.votes.values()))
    assert screener.pins == {"weights": tag}


def test_a_missing_artifact_or_a_changed_one_is_a_config_error_naming_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="train critic-rm"):
        build_screener(
            "critic-rm", models={}, options=SCREENERS.validate("critic-rm", {"path": str(tmp_path / "nothing")})
        )
    saved(tmp_path, keyword_pairs())
    with pytest.raises(ConfigError, match="recorded"):
        build_screener(
            "critic-rm",
            models={},
            options=SCREENERS.validate("critic-rm", {"path": str(tmp_path / "rm"), "weights": "rm@0000"}),
        )
    with pytest.raises(ConfigError, match="exclude each other"):  # a folder's head, or one learnt in the run
        SCREENERS.validate("critic-rm", {"path": str(tmp_path / "rm"), "warm": "ab" * 32})


def run_data_task(tmp_path, seed, *extra):
    cfg = load_config(
        overrides=[
            f"task={DATA_TASK}",
            "strategy.name=greedy",
            "budget.verifications=8",
            "engine.candidates=4",
            f"seed={seed}",
            f"store={tmp_path / 'runs.db'}",
            *(extra or ("screener.name=random",)),
        ]
    )
    return run_config(cfg)


def run_config(cfg: RunConfig, run_id: str | None = None):
    with RunStore(cfg.store) as store:
        engine = build_engine(cfg, store)
        try:
            return asyncio.run(engine.run(run_id))
        finally:
            engine.executor.close()


def test_a_warm_started_critic_loads_in_a_run_its_tag_is_recorded_and_shown_and_a_changed_one_stops_a_resume(tmp_path):
    first, second = run_data_task(tmp_path, 0), run_data_task(tmp_path, 1)
    stages = []
    with RunStore(tmp_path / "runs.db") as store:
        result = train_from_store(
            store, str(DATA_TASK), tmp_path / "rm", settings=HASHING, progress=lambda *a: stages.append(a[0])
        )
    assert result.runs == (first.run_id, second.run_id) and result.rows > 0
    assert {"harvest runs", "encode texts", "fit head"} <= set(stages)
    assert load_head(tmp_path / "rm").card["held_out"]  # by run, or why there was nothing to bench
    third = run_data_task(tmp_path, 2, "screener.name=critic-rm", f"screener.options.path={tmp_path / 'rm'}")
    with RunStore(tmp_path / "runs.db") as store:
        config = stored_config(store, third.run_id)
        assert config["screener"]["options"]["weights"] == result.tag
        screenings = [e.payload for e in store.events(third.run_id, kinds=["screening"])]
        assert screenings and all(
            ev["detail"]["weights"] == result.tag for s in screenings for ev in s["evidence"].values()
        )
        shown = show_data(store, third.run_id, 3)["adapters"]
        assert {
            "role": "screener critic-rm",
            "folder": str(tmp_path / "rm"),
            "tag": result.tag,
            "now": result.tag,
        } in shown
    saved(tmp_path, keyword_pairs(), name="rm", C=0.01)  # the artifact changes under the stored run
    with RunStore(tmp_path / "runs.db") as store:
        cfg = RunConfig.model_validate(stored_config(store, third.run_id))
    with pytest.raises(ConfigError, match="recorded"):
        run_config(cfg, third.run_id)
