"""The novelty gate and model ensembles wired into real engine runs (scripted models, the fake task)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import yaml

from verifyless.config import load_config
from verifyless.node import Status
from verifyless.report.peers import model_shares, novelty_rates
from verifyless.report.render import run_views
from verifyless.store import RunStore
from verifyless.testing import FakeExecutor, fake_task
from verifyless.wiring import build_engine

BRIEF = "## Task understanding\nPick a.\n\n[CRITERIA]\n1. closeness of a to the optimum\n2. simplicity\n3. robustness\n4. runtime\n"
APPROACHES = [f"## Approach\nChange the constant a (variant {i}) to a value closer to the optimum." for i in range(40)]
SUMMARY = "The program sets a constant and prints it."


def band(a: str) -> str:
    return f"```python\n{a}\n```"


def script(path: Path, implementer: list[str], name: str = "scripted") -> Path:
    rules = [
        {"role": "brief", "reply": BRIEF},
        {"role": "proposer", "replies": APPROACHES},  # distinct ideas, so no implementer request hits the cache
        {"role": "implementer", "replies": [band(a) for a in implementer]},
        {"role": "summarizer", "reply": SUMMARY},
    ]
    path.write_text(yaml.safe_dump({"mode": "rules", "name": name, "rules": rules}))
    return path


def run(store: RunStore, overrides: list[str], *, replay: bool = False):
    cfg = load_config(overrides=["strategy.name=greedy", "screener.name=random", "roles.kind=llm", *overrides])
    engine = build_engine(cfg, store, task=fake_task(), replay_executor=FakeExecutor(), replay=replay)
    return engine, asyncio.run(engine.run())


def test_a_near_duplicate_candidate_is_rejected_before_screening_with_its_reason(tmp_path):
    # The second reply is the first but for whitespace; words, because the hashing encoder skips 1-letter tokens.
    replies = ["a = 15  # fifteen steps", "a  =  15  #  fifteen  steps", "a = 19  # nineteen steps"]
    model = script(tmp_path / "m.yaml", replies)
    overrides = [
        f"roles.models.default=scripted:{model}",
        f"store={tmp_path / 's.db'}",
        "budget.verifications=2",
        "engine.candidates=3",
        "engine.max_rounds=1",
        "novelty.enabled=true",
        "novelty.embedder=hashing",
        "novelty.audit_rate=0",
    ]
    with RunStore(tmp_path / "s.db") as store:
        engine, result = run(store, overrides)
        verdicts = [e.payload for e in store.events(result.run_id, kinds=["novelty"])]
        screened = {cid for e in store.events(result.run_id, kinds=["screening"]) for cid in e.payload["ranking"]}
        verified = {e.node_id for e in store.events(result.run_id, kinds=["verification"])}
        nodes = engine.state.view.nodes
        rates = novelty_rates(store, result.run_id)
        page = run_views(store, result.run_id, str)["peers"]
    rejected = [v for v in verdicts if v["outcome"] == "rejected"]
    assert len(verdicts) == 3 and len(rejected) == 1, verdicts
    cid = rejected[0]["candidate_id"]
    assert nodes[cid].status is Status.NOT_NOVEL
    assert "cosine 1.0000" in nodes[cid].reason and ">= threshold 0.99" in nodes[cid].reason
    assert cid not in screened and cid not in verified
    assert len(screened) == 2
    assert (rates.checked, rates.rejected, rates.audited, rates.verifications_saved) == (3, 1, 0, 1)
    assert page == ["novelty gate: 3 checked, 1 rejected (33%), 0 audited, false rejections n/a, 1 verifications saved"]


def test_the_bandit_shifts_calls_to_the_model_whose_children_improve_and_replays_identically(tmp_path):
    # good: a climbs towards the optimum 13, so every child beats the best so far; bad: a falls away from it.
    default = script(tmp_path / "default.yaml", ["a = 99"])  # its implementer is never asked
    good = script(tmp_path / "good.yaml", [f"a = {v}" for v in (1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)], "good")
    bad = script(tmp_path / "bad.yaml", [f"a = {-40 - v}" for v in range(40)], "bad")
    overrides = [
        f"roles.models.default=scripted:{default}",
        f"roles.models.implementer=[scripted:{good}, scripted:{bad}]",
        f"store={tmp_path / 's.db'}",
        "budget.verifications=12",
        "engine.candidates=2",
        "engine.verify_per_expansion=2",
    ]
    with RunStore(tmp_path / "s.db") as store:
        engine, first = run(store, overrides)
        choices = [e.payload for e in store.events(first.run_id, kinds=["model_choice"])]
        _, again = run(store, overrides, replay=True)
        replayed = [e.payload for e in store.events(again.run_id, kinds=["model_choice"])]
        shares = {m.model: m for m in model_shares(store, first.run_id)}
        fresh = build_engine(load_config(overrides=["roles.kind=llm", *overrides]), store, task=fake_task())
        fresh.run_id = first.run_id  # as a resume of the run: its choice recorder is live
        fresh.peers.restore(store, first.run_id, {n.id: n for n in store.nodes(first.run_id)}, 0.0)
        # restoring re-makes every stored choice without storing it a second time
        assert len(list(store.events(first.run_id, kinds=["model_choice"]))) == len(choices)
    stats = {s.model: s for s in engine.peers.ensembles["implementer"].stats()}
    assert set(stats) == {"good", "bad"}
    assert stats["good"].improved == stats["good"].observed > 0 and stats["bad"].improved == 0
    assert stats["good"].calls > 2 * stats["bad"].calls
    assert shares["good"].share > 0.5 and shares["good"].improved == shares["good"].observed > 0
    assert shares["bad"].improved == 0 and shares["good"].calls + shares["bad"].calls == len(choices)
    late = [c["model"] for c in choices[len(choices) // 2 :]]
    assert late.count("good") > late.count("bad")
    assert all(c["owner"].startswith("r") and c["reason"] for c in choices)
    restored = fresh.peers.ensembles["implementer"]  # what a resume rebuilds from the stored events
    assert restored.stats() == engine.peers.ensembles["implementer"].stats()
    assert restored.choices == engine.peers.ensembles["implementer"].choices
    assert [(c["owner"], c["model"], c["reason"]) for c in replayed] == [
        (c["owner"], c["model"], c["reason"]) for c in choices
    ]
