"""Adaptive screening (screen/adaptive.py) and the online screener audit (screen/audit.py) on the real engine."""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import replace

import pytest

from engine_fakes import FakeExecutor, fake_roles, fake_task, value
from verifyless.config import load_config
from verifyless.engine import Engine, resume
from verifyless.errors import ConfigError
from verifyless.node import Evidence, Screening
from verifyless.screen.adaptive import (
    AdaptiveOptions,
    AdaptiveScreener,
    Pairs,
    Verdicts,
    concordance,
    p_better,
    p_combined,
)
from verifyless.screen.audit import (
    SiblingOutcome,
    audit_from_store,
    audit_line,
    audit_segment,
    pairwise_hits,
    selection_advantages,
)
from verifyless.screen.baselines import RandomScreener
from verifyless.screen.registry import build_screener
from verifyless.search.registry import build_strategy
from verifyless.store import RunStore


class Counting(RandomScreener):
    """A critic at chance (a uniform shuffle) that counts its calls."""

    def __init__(self):
        super().__init__(name="chance")
        self.calls = 0

    async def screen(self, ctx, candidates):
        self.calls += 1
        return await super().screen(ctx, candidates)


class Perfect:
    """Ranks by the true validation loss of the fake task ((a - 13)^2, a = 3 crashes and goes last)."""

    name = "perfect"

    async def screen(self, ctx, candidates):
        def loss(c):
            a = value(c.program)
            return float("inf") if a == 3 else (a - 13) ** 2

        ranking = tuple(c.id for c in sorted(candidates, key=loss))
        evidence = {cid: Evidence(cid, float(-i)) for i, cid in enumerate(ranking)}
        return Screening(self.name, ranking, ranking[: ctx.n_verify], evidence, 0.0)


class Unbounded(FakeExecutor):
    """The fake task with no optimum: the loss is -a, so a larger a is always better (improvements never run out)."""

    async def verify(self, task, program):
        v = await super().verify(task, program)
        if v.score is None:
            return v
        loss = -float(value(program))
        return replace(v, score=loss, test_score=loss, metrics={"loss": loss}, test_metrics={"test_loss": loss})


class PerfectUp(Perfect):
    """Ranks by the true loss of ``Unbounded`` (-a; a = 3 crashes and goes last)."""

    name = "perfect-up"

    async def screen(self, ctx, candidates):
        def loss(c):
            a = value(c.program)
            return float("inf") if a == 3 else -a

        ranking = tuple(c.id for c in sorted(candidates, key=loss))
        evidence = {cid: Evidence(cid, float(-i)) for i, cid in enumerate(ranking)}
        return Screening(self.name, ranking, ranking[: ctx.n_verify], evidence, 0.0)


class Voting(PerfectUp):
    """``PerfectUp`` with votes and a ``k`` the adaptive rule may set: unanimous for even a, split for odd a."""

    name = "voting"

    def __init__(self, k=3):
        self.k = k
        self.ks = []  # k at each screening

    async def screen(self, ctx, candidates):
        self.ks.append(self.k)
        done = await super().screen(ctx, candidates)
        by_id = {c.id: value(c.program) for c in candidates}
        votes = {cid: {"improve": 1.0} if by_id[cid] % 2 == 0 else {"improve": 2 / 3, "lose": 1 / 3} for cid in by_id}
        return replace(done, evidence={cid: replace(ev, votes=votes[cid]) for cid, ev in done.evidence.items()})


def _engine(store, screener, budget=40, executor=None, progress=None, **over):
    overrides = ["strategy.name=greedy", f"budget.verifications={budget}", "engine.candidates=6"]
    cfg = load_config(overrides=overrides + [f"{k}={v}" for k, v in over.items()])
    return Engine(
        task=fake_task(),
        roles=fake_roles(),
        screener=screener,
        strategy=build_strategy("greedy", {}, random.Random(cfg.seed)),
        executor=executor or FakeExecutor(),
        store=store,
        config=cfg,
        progress=progress,
    )


def _adaptive(inner, **over):
    return AdaptiveScreener(inner, AdaptiveOptions(trial=5, explore=0.5, confidence=0.8, audit=0.1, **over))


def _voting():
    """A voting screener whose k the rule chooses in [1, 5]."""
    return _adaptive(Voting(), k_min=1, k_max=5)


def _notes(store, run_id):
    return [
        next(iter(e.payload["evidence"].values()))["detail"]["adaptive"]
        for e in store.events(run_id, kinds=["screening"])
    ]


def test_the_posterior_test_reads_the_win_rate_of_audited_pairs():
    prior = (1.0, 1.0)
    assert p_better(Pairs(8, 2), prior) > 0.95
    assert p_better(Pairs(2, 8), prior) < 0.05
    assert p_better(Pairs(5, 5), prior) == pytest.approx(0.5)
    assert p_better(Pairs(), (1.2, 0.8)) > 0.5  # the stated prior alone leans as stated


def test_a_critic_at_chance_is_switched_off_with_its_reason_and_stays_random(tmp_path):
    chance = Counting()
    screener = _adaptive(chance)
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        notes = _notes(store, result.run_id)
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        learned = [e.payload for e in store.events(result.run_id, kinds=["screener_learn"])]
        assert store.budget(result.run_id).verifications == 40
    assert screener.state == "off" and "switched off" in screener.reason
    assert screener.decisions and screener.decisions[-1]["state"] == "off"
    off_at = next(i for i, n in enumerate(notes) if n["state"] == "off")
    assert off_at < len(notes) - 1 and chance.calls == off_at  # never asked again once off
    assert all(
        not n["audited"] and len(s["chosen"]) == 1 for n, s in zip(notes[off_at:], screenings[off_at:], strict=True)
    )
    assert all(len(s["chosen"]) == 2 for n, s in zip(notes, screenings, strict=True) if n["audited"])
    decision = [rec["adaptive"]["decision"] for rec in learned if "decision" in rec["adaptive"]]
    assert decision == screener.decisions and decision[-1]["units"] >= 5  # decided after its trial's evidence
    # once off, the engine makes one child per expansion (picks are random; more would only cost LLM calls)
    assert decision[-1]["candidates"] == 1 and "1 candidate per expansion" in decision[-1]["reason"]
    assert max(len(s["ranking"]) for s in screenings[:off_at]) == 6
    assert {len(s["ranking"]) for s in screenings[off_at:]} == {1}


def test_switched_off_keeps_n_when_candidates_off_is_null(tmp_path):
    screener = _adaptive(Counting(), candidates_off=None)
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
    assert screener.state == "off" and "candidates" not in screener.decisions[-1]
    assert max(len(s["ranking"]) for s in screenings[-5:]) == 6  # still whole pools after it went off


def test_a_perfect_critic_keeps_screening(tmp_path):
    screener = _adaptive(PerfectUp())
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        notes = _notes(store, result.run_id)
    assert screener.state == "on" and "screening helps" in screener.reason
    evidence = screener.rule.evidence()
    assert screener.pairs.losses == 0 and evidence["concordance"] > 0.9 and evidence["units"] >= 5
    after = [n["audited"] for n in notes if n["state"] == "on"]
    assert after and sum(after) / len(after) <= 0.3  # audits fall to the on-rate


@pytest.mark.parametrize("make", [lambda: _adaptive(Counting()), _voting, lambda: _adaptive(Counting(), rule="pairs")])
def test_the_decisions_replay_exactly_from_the_store(tmp_path, make):
    live = make()
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, live, executor=Unbounded()).run())
        again = make()
        resumed = _engine(store, again, executor=Unbounded())
        resumed.run_id = result.run_id
        resume.restore(resumed)
    assert live.decisions and (again.state, again.reason, again.pairs, again.decisions) == (
        live.state,
        live.reason,
        live.pairs,
        live.decisions,
    )
    assert (again.rule.verdicts, again.rule.k, again.rule.evidence()) == (
        live.rule.verdicts,
        live.rule.k,
        live.rule.evidence(),
    )


def test_a_shadow_trial_picks_uniformly_unaudited_and_lets_a_perfect_critic_on(tmp_path):
    screener = _adaptive(PerfectUp(), trial_picks="random")
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        notes = _notes(store, result.run_id)
    trial = [s for s, n in zip(screenings, notes, strict=True) if n["state"] == "trial"]
    assert trial and not any(n["audited"] for n in notes if n["state"] == "trial")
    assert all(len(s["chosen"]) == 1 for s in trial) and any(s["chosen"][0] != s["ranking"][0] for s in trial)
    assert screener.state == "on" and screener.pairs.n == 0  # decided on the verdicts of uniform picks alone
    on = [s for s, n in zip(screenings, notes, strict=True) if n["state"] == "on"]
    assert on and all(s["chosen"][0] == s["ranking"][0] for s in on)


def test_k_falls_while_the_picks_votes_agree_and_rises_when_they_split(tmp_path):
    screener = _voting()
    with RunStore(tmp_path / "s.db") as store:
        asyncio.run(_engine(store, screener, executor=Unbounded()).run())
    ks = screener.inner.ks
    changes = [d for d in screener.decisions if d.get("knob") == "k"]
    assert ks[0] == 5 and changes and all(1 <= k <= 5 for k in ks)
    assert all(("unanimous" in d["reason"]) == (d["value"] < int(d["reason"].split()[1])) for d in changes)
    assert all((d["unanimous"] == d["screenings"]) == (d["value"] < int(d["reason"].split()[1])) for d in changes)
    seen = [k for k, prev in zip(ks[1:], ks, strict=False) if k != prev]  # the k the next screenings used
    values = [d["value"] for d in changes]
    assert values[: len(seen)] == seen and len(values) - len(seen) <= 1  # a last choice may follow the last screening


def test_a_k_outside_the_bounds_is_refused():
    with pytest.raises(ValueError, match="k_min"):
        AdaptiveOptions(k_min=0, k_max=3)


def test_the_verdict_concordance_is_chance_for_ties_and_exact_otherwise():
    assert concordance(Verdicts((3.0, 2.0), (1.0, 0.0))).value == 1.0
    assert concordance(Verdicts((1.0,), (1.0, 2.0))).value == 0.25  # one tie (a half), one loss
    tied = concordance(Verdicts((1.0, 1.0), (1.0, 1.0)))
    assert tied.value == 0.5 and tied.units == 0.0 and tied.z == 0.0  # a rank-only screener: no verdict evidence
    assert concordance(Verdicts((1.0,), ())).value is None
    strong = concordance(Verdicts(tuple(range(10, 20)), tuple(range(10))))
    assert strong.z > 3 and strong.units == 10
    assert p_combined(Pairs(), strong, (1.0, 1.0)) > 0.99 and p_combined(Pairs(), tied, (1.0, 1.0)) == 0.5


def test_adaptive_is_built_from_config_and_its_inner_options_are_checked():
    built = build_screener("adaptive", models={}, options={"screener": "random", "trial": 3}, seed=0)
    assert isinstance(built, AdaptiveScreener) and built.inner.name == "random" and built.options.trial == 3
    with pytest.raises(ConfigError, match=r"screener.options.options.bogus|bogus"):
        build_screener("adaptive", models={}, options={"screener": "random", "options": {"bogus": 1}}, seed=0)
    with pytest.raises(ConfigError, match="explore"):
        build_screener("adaptive", models={}, options={"screener": "random", "explore": 1.5}, seed=0)


# ---------------------------------------------------------------------- the audit


def test_audits_are_charged_and_labelled_and_a_perfect_screener_audits_perfectly(tmp_path):
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, Perfect(), budget=24, **{"engine.audit_rate": 1}).run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        verified = {e.node_id for e in store.events(result.run_id, kinds=["verification"])}
        audited = [a for s in screenings for a in s["audited"]]
        assert audited and set(audited) <= verified  # verified, hence charged
        assert store.budget(result.run_id).verifications == len(verified) == 24
        audit = audit_from_store(store, result.run_id, resamples=200)
    assert audit.audits == len(audited) and audit.verified == len(verified - {"root"}) == 23  # the root is not screened
    assert audit.pairwise.value == 1.0 and audit.pairwise.n > 0
    assert audit.advantage.value is not None and audit.advantage.value > 0
    assert audit.advantage.low is not None and audit.advantage.low <= audit.advantage.value <= audit.advantage.high
    assert audit.dir3.n == 0  # no verdicts: the perfect ranker gives no votes
    assert "audits" in audit_line(audit) and "pairwise 1.00" in audit_line(audit.row())


def _round_descriptions(events):
    """The progress bar's description after each ``round`` event, as ``verifyless run`` draws it."""
    import io

    from rich.console import Console

    from verifyless._cli.app import _LiveProgress

    live = _LiveProgress(Console(file=io.StringIO(), width=200), cap=40)
    descriptions = []
    for kind, data in events:
        live(kind, data)
        if kind == "round":
            descriptions.append(live.bar.tasks[0].description)
    live.close()
    return descriptions


def test_the_live_progress_line_shows_the_adaptive_audit(tmp_path):
    import re

    events = []
    with RunStore(tmp_path / "s.db") as store:
        run = _engine(store, _voting(), executor=Unbounded(), progress=lambda k, d: events.append((k, d)))
        asyncio.run(run.run())
    descriptions = _round_descriptions(events)
    last = descriptions[-1]
    assert re.fullmatch(
        r"round \d+ · audit: verdicts 0\.\d\d \[0\.\d\d, [01]\.\d\d\] n=\d+ · adaptive on, k [1-5]", last
    ), last
    assert len(last.split(" · audit: ")[1]) < 60  # one short segment
    assert any("adaptive trial" in d for d in descriptions)


def test_the_live_progress_line_audits_a_plain_screener_from_its_events(tmp_path):
    import re

    events = []
    with RunStore(tmp_path / "s.db") as store:
        run = _engine(store, PerfectUp(), executor=Unbounded(), progress=lambda k, d: events.append((k, d)))
        asyncio.run(run.run())
    verifications = [d for k, d in events if k == "verification"]
    assert all("fitness" in d and "parent_fitness" in d for d in verifications)
    descriptions = _round_descriptions(events)
    last = descriptions[-1]
    assert re.fullmatch(r"round \d+ · audit: verdicts [01]\.\d\d \[[01]\.\d\d, [01]\.\d\d\] n=\d+", last), last


def test_the_live_audit_scores_paid_picks_against_their_parents():
    from verifyless.screen.audit import LiveAudit

    live = LiveAudit()
    evidence = {c: {"rank_value": v} for c, v in (("a", 3.0), ("b", 1.0), ("c", 2.0), ("d", 0.5))}
    live.screening({"to_verify": ["a", "b", "c", "d"], "evidence": evidence})
    assert live.segment() == ""  # nothing paid yet
    live.verification({"node_id": "a", "fitness": 2.0, "parent_fitness": 1.0})  # improved, high score
    live.verification({"node_id": "b", "fitness": 0.5, "parent_fitness": 1.0})  # worse, low score
    live.verification({"node_id": "c", "fitness": None, "parent_fitness": 1.0})  # failed: not improved
    live.verification({"node_id": "d", "fitness": 9.0, "parent_fitness": None})  # a root's child: no label
    live.verification({"node_id": "zz", "fitness": 9.0, "parent_fitness": 1.0})  # not a remembered pick
    assert live.verdicts.improved == (3.0,) and live.verdicts.other == (1.0, 2.0)
    assert live.segment().startswith(" · audit: verdicts 1.00 [") and live.segment().endswith("n=3")


def test_the_audit_segment_says_what_it_knows():
    note = {"rule": "verdicts", "state": "trial", "concordance": 0.7, "concordance_sd": 0.1, "verdicts": 21}
    assert audit_segment(note) == " · audit: verdicts 0.70 [0.50, 0.90] n=21 · adaptive trial"
    assert audit_segment({**note, "concordance": None, "verdicts": 3}) == " · audit: verdicts - n=3 · adaptive trial"
    pairs = {"rule": "pairs", "state": "off", "wins": 1, "losses": 5, "k": None}
    assert audit_segment(pairs) == " · audit: pairs won 1 of 6 · adaptive off"
    assert audit_segment(None) == ""


def test_pairwise_and_advantage_count_what_the_docstring_says():
    sib = [
        SiblingOutcome(1, "a", 0, "chosen", 2.0, True),
        SiblingOutcome(1, "b", 3, "audited", 1.0, False),
        SiblingOutcome(1, "c", 4, "routed", None, False),
        SiblingOutcome(2, "d", 0, "chosen", 1.0, False),
        SiblingOutcome(2, "e", 2, "audited", 5.0, True),
        SiblingOutcome(3, "f", 0, "chosen", None, False),
        SiblingOutcome(3, "g", 1, "audited", None, False),
    ]
    assert sorted(pairwise_hits(sib)) == [0.0, 1.0, 1.0, 1.0]  # (a,b) (a,c) (b,c) right, (d,e) wrong, (f,g) no pair
    assert sorted(selection_advantages(sib)) == [-1.0, 0.0, 1.0]


def test_show_prints_the_audit_and_its_json_carries_it(tmp_path):
    import json
    import subprocess
    import sys

    db = tmp_path / "s.db"
    with RunStore(db) as store:
        run_id = asyncio.run(_engine(store, Perfect(), budget=12, **{"engine.audit_rate": 1}).run()).run_id
    shown = subprocess.run(
        [sys.executable, "-m", "verifyless", "show", run_id, "--store", str(db)], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.startswith("screener audit"))
    assert "pairwise 1.00" in line and "audits" in line
    as_json = subprocess.run(
        [sys.executable, "-m", "verifyless", "show", run_id, "--store", str(db), "--json"],
        capture_output=True,
        text=True,
    )
    audit = json.loads(as_json.stdout)["screener_audit"]
    assert audit["pairwise"]["value"] == 1.0 and audit["audits"] >= 1 and audit["verified"] == 11


def test_the_report_shows_the_audit_panel(tmp_path):
    from verifyless.report.render import write_report

    with RunStore(tmp_path / "s.db") as store:
        run_id = asyncio.run(_engine(store, Perfect(), budget=12, **{"engine.audit_rate": 1}).run()).run_id
        html = write_report(store, run_id, tmp_path / "out", figures=False).html.read_text()
    panel = html.split('id="audit"')[1].split('id="critic"')[0]
    assert "audits (screened out, verified anyway" in panel and "selection advantage" in panel


# ---------------------------------------------------------------------- a critic of known accuracy over HTTP


def _truth(request):
    """improve / lose for the fake task of ``Unbounded``: the child's a against the parent's (a = 3 crashes)."""
    import re

    text = "\n".join(m.content or "" for m in request.messages if m.role == "user")
    if "## Child" not in text:
        return None
    parent, child = text.split("## Child", 1)
    a = [int(x) for x in re.findall(r"sets a to (-?\d+)", child)]
    p = [int(x) for x in re.findall(r"sets a to (-?\d+)", parent)]
    if not a or not p:
        return None
    return "improve" if a[0] != 3 and a[0] > p[-1] else "tie" if a[0] == p[-1] else "lose"


@pytest.mark.parametrize(("accuracy", "state"), [(1.0, "on"), (1 / 3, "off")])
def test_a_critic_of_known_accuracy_over_http_is_kept_or_switched_off(tmp_path, accuracy, state):
    from verifyless.model.config import make_config
    from verifyless.model.providers import build_model
    from verifyless.model.testserver import CriticAtAccuracy, TestServer
    from verifyless.screen.critic import PointwiseCritic

    critic = CriticAtAccuracy(_truth, accuracy, seed=1)
    with TestServer(critic) as server:
        model = build_model(make_config(model="critic", base_url=server.base_url))
        screener = _adaptive(PointwiseCritic(model, k=3))
        with RunStore(tmp_path / "s.db") as store:
            asyncio.run(_engine(store, screener, budget=40, executor=Unbounded()).run())
    assert critic.calls > 0
    assert screener.state == state, screener.reason


def test_the_demo_says_no_win_plainly():
    from verifyless._cli.demo import _matched
    from verifyless.task.base import Metric

    up = Metric("auc", "maximize")
    assert _matched(0.74, 0.75, 16, 16, up).endswith("no win (random is better)")
    assert _matched(0.75, 0.75, 16, 16, up).endswith(": no win")
    assert _matched(0.76, 0.75, 16, 16, up).endswith("adaptive wins")
    assert _matched(0.1, 0.2, 16, 16, Metric("loss", "minimize")).endswith("adaptive wins")


def test_the_audit_counts_the_adaptive_screeners_own_audits(tmp_path):
    screener = _adaptive(PerfectUp())
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        audit = audit_from_store(store, result.run_id, resamples=100)
        pairs = [n for n in _notes(store, result.run_id) if n["audited"]]
    assert pairs and audit.audits == len(pairs)
    assert audit.advantage.n == len(pairs) and audit.advantage.value is not None and audit.advantage.value >= 0


KILL_SCRIPT = r"""
import asyncio, sys
sys.path.insert(0, {tests!r})
from test_adaptive import Counting, Unbounded, _adaptive, _engine, _voting
from verifyless.store import RunStore
store = RunStore({db!r})
asyncio.run(_engine(store, {make}, budget=80, executor=Unbounded(delay=0.05)).run())
"""


MAKERS = {"_adaptive(Counting())": lambda: _adaptive(Counting()), "_voting()": _voting}


@pytest.mark.parametrize("make", list(MAKERS))
def test_the_decision_survives_kill_minus_nine_and_the_resumed_run_continues_from_it(tmp_path, make):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    db, script = tmp_path / "s.db", tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT.format(tests=str(Path(__file__).parent), db=str(db), make=make))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline, decided = time.monotonic() + 90, False
    with RunStore(db) as probe:
        while time.monotonic() < deadline and proc.poll() is None and not decided:
            runs = probe.runs() if db.exists() else []
            learned = [e.payload for e in probe.events(runs[0].run_id, kinds=["screener_learn"])] if runs else []
            decided = any("decision" in rec.get("adaptive", {}) for rec in learned)
            time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL and decided, (proc.stderr.read() if proc.stderr else b"")[-2000:]
    with RunStore(db) as store:
        run_id = store.runs()[0].run_id
        stored = [e.payload["adaptive"] for e in store.events(run_id, kinds=["screener_learn"])]
        assert store.budget(run_id).verifications < 80  # killed mid-run
        again = MAKERS[make]()
        engine = _engine(store, again, budget=80, executor=Unbounded())
        engine.run_id = run_id
        resume.restore(engine)
        assert (again.state, again.reason, again.rule.k) == (stored[-1]["state"], stored[-1]["reason"], stored[-1]["k"])
        assert again.decisions == [d for rec in stored for d in rec.get("decisions", ())]
        assert [d for d in again.decisions if "state" in d] == [rec["decision"] for rec in stored if "decision" in rec]
        assert again.rule.verdicts.n == sum(len(rec["new_verdicts"]) for rec in stored)
        assert again.rule.evidence()["concordance"] == stored[-1]["concordance"]
        kept = list(again.decisions)
        assert make != "_voting()" or any(d.get("knob") == "k" for d in kept)  # the k choices survive too
        resumed = _engine(store, MAKERS[make](), budget=80, executor=Unbounded())
        result = asyncio.run(resumed.run(run_id))
        assert result.verifications == 80 and resumed.screener.decisions[: len(kept)] == kept
