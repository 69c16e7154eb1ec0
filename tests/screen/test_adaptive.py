"""Adaptive screening (screen/adaptive.py) and the online screener audit (screen/audit.py) on the real engine."""

from __future__ import annotations

import asyncio
import math
import random
import re
import time

import pytest
from adaptive_world import Inverted, Perfect, PerfectUp, Unbounded, _adaptive, _engine, _voting

from verifyless.errors import ConfigError
from verifyless.node import Evidence, Screening
from verifyless.screen.adaptive import AdaptiveOptions, AdaptiveScreener
from verifyless.screen.audit import (
    SiblingOutcome,
    Verdicts,
    adaptive_state,
    audit_from_store,
    audit_line,
    audit_segment,
    concordance,
    pairwise_hits,
    selection_advantages,
)
from verifyless.screen.baselines import RandomOptions, RandomScreener
from verifyless.screen.bets import Bets
from verifyless.screen.critic import CriticOptions
from verifyless.screen.registry import SCREENERS, build_screener
from verifyless.store import RunStore


class Counting(RandomScreener):
    """A critic at chance (a uniform shuffle) that counts its calls."""

    def __init__(self):
        super().__init__(RandomOptions(name="chance"))
        self.calls = 0

    async def screen(self, ctx, candidates):
        self.calls += 1
        return await super().screen(ctx, candidates)


def _notes(store, run_id):
    return [
        next(iter(e.payload["evidence"].values()))["detail"]["adaptive"]
        for e in store.events(run_id, kinds=["screening"])
    ]


# ---------------------------------------------------------------------- the bets


def _stream(mean, n, rng):
    """n units in {-1, +1} with the given mean."""
    return [1.0 if rng.random() < (1 + mean) / 2 else -1.0 for _ in range(n)]


def _crossings(mean, margin, alpha=0.1, runs=400, n=150, seed=0):
    """Shares of streams whose help / harm wealth ever reached 1 / alpha."""
    rng, threshold = random.Random(seed), math.log(1 / alpha)
    helped = harmed = 0
    for _ in range(runs):
        bets = Bets(margin)
        for x in _stream(mean, n, rng):
            bets = bets.add(x)
        helped += bets.help.peak >= threshold
        harmed += bets.harm.peak >= threshold
    return helped / runs, harmed / runs


def test_each_bet_keeps_its_error_rate_however_often_it_is_looked_at():
    # under "no better than random" (mean 0) the help bet rarely crosses; under "helps by the margin" the harm bet
    helped, _ = _crossings(0.0, 0.2)
    _, harmed = _crossings(0.2, 0.2)
    assert helped <= 0.1 + 0.03 and harmed <= 0.1 + 0.03
    # and each has power against its alternative
    assert _crossings(0.6, 0.2)[0] > 0.95 and _crossings(-0.4, 0.2)[1] > 0.95


def test_the_bets_read_every_unit_and_give_anytime_p_values():
    up, down, flat = Bets(0.2), Bets(0.2), Bets(0.2)
    for _ in range(12):
        up, down, flat = up.add(1.0), down.add(-1.0), flat.add(0.0)
    assert up.help.log > math.log(10) and up.harm.log < 0 and up.mean == 1.0  # its first, skeptical bet lost
    assert down.harm.log > math.log(10) and down.help.log == 0.0  # it never bets on help it has not seen
    assert flat.harm.log > 0 and flat.help.log == 0.0  # a screener that cannot tell two programs apart does not help
    p_help, p_harm = up.p_values()
    assert p_help < 0.1 and p_harm == 1.0
    assert Bets(0.2).add(7.0).total == 1.0  # units are clipped to [-1, 1]


# ---------------------------------------------------------------------- the screener on the real engine


def test_an_inverted_critic_is_switched_off_with_its_evidence_and_stays_random(tmp_path):
    inverted = Inverted()
    screener = _adaptive(inverted)
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        notes = _notes(store, result.run_id)
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        learned = [e.payload for e in store.events(result.run_id, kinds=["screener_learn"])]
        assert store.budget(result.run_id).verifications == 40
        assert adaptive_state(store, result.run_id)["state"] == "off"
    assert screener.state == "off" and re.search(
        "screening is (hurting|not helping and looks harmful)", screener.reason
    )
    assert "switched off at verification" in screener.reason
    decision = [rec["adaptive"]["decision"] for rec in learned if "decision" in rec["adaptive"]]
    assert decision == screener.decisions and decision[-1]["state"] == "off"
    # the design states it: an always-wrong screener is caught in a handful of units (about 4-6 at alpha 0.1)
    assert decision[-1]["verifications"] <= 12 and decision[-1]["mean"] < -0.5
    assert decision[-1]["p_helps"] <= 0.1 and decision[-1]["units"] >= 3
    off_at = next(i for i, n in enumerate(notes) if n["state"] == "off")
    calls = inverted.calls
    assert off_at < len(notes) - 1 and all(not n["audited"] for n in notes[off_at:])
    assert {len(s["ranking"]) for s in screenings[off_at:]} == {1}  # one child per expansion once off
    assert decision[-1]["candidates"] == 1 and "1 candidate per expansion" in decision[-1]["reason"]
    assert calls == inverted.calls  # never asked again once off (screenings nor canaries)


def test_switched_off_keeps_n_when_candidates_off_is_null(tmp_path):
    screener = _adaptive(Inverted(), candidates_off=None)
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
    assert screener.state == "off" and "candidates" not in screener.decisions[-1]
    assert max(len(s["ranking"]) for s in screenings[-5:]) == 6  # still whole pools after it went off


def test_a_critic_at_chance_is_switched_off_as_not_helping(tmp_path):
    screener = _adaptive(Counting(), canaries=4)
    with RunStore(tmp_path / "s.db") as store:
        asyncio.run(_engine(store, screener, budget=60, executor=Unbounded()).run())
    assert screener.state == "off" and "not helping" in screener.reason, screener.reason
    assert abs(screener.rule.bets.mean) < 0.3


def test_a_perfect_critic_keeps_screening(tmp_path):
    screener = _adaptive(PerfectUp())
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        notes = _notes(store, result.run_id)
    assert screener.state == "on" and "screening is helping" in screener.reason
    evidence = screener.rule.evidence()
    assert evidence["mean"] == 1.0 and evidence["units"] >= 10 and evidence["canaries"] > evidence["pairs"]
    assert screener.rule.decided_at is not None and screener.rule.decided_at <= 12
    after = [n["audited"] for n in notes if n["state"] == "on"]
    assert after and sum(after) / len(after) <= 0.2  # audited at the on-rate (audit_on), not the trial's


def test_canaries_are_fresh_triples_that_straddle_their_parent_and_never_its_true_child(tmp_path):
    screener = _adaptive(PerfectUp(), canaries=3)
    with RunStore(tmp_path / "s.db") as store:
        asyncio.run(_engine(store, screener, executor=Unbounded()).run())
    triples = [tuple(t) for t in screener.used]
    assert triples and len(triples) == len(set(triples)) == screener.rule.kinds["canary"]
    for p, a, b in triples:
        known = screener.known
        assert known[a].fitness > known[p].fitness and (known[b].fitness is None or known[b].fitness < known[p].fitness)
        assert known[a].candidate.parent_id != p and known[b].candidate.parent_id != p


@pytest.mark.parametrize("make", [lambda: _adaptive(Counting()), _voting, lambda: _adaptive(Inverted())])
def test_the_decisions_replay_exactly_from_the_store(tmp_path, make):
    live = make()
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, live, executor=Unbounded()).run())
        again = make()
        resumed = _engine(store, again, executor=Unbounded())
        resumed.run_id = result.run_id
        resumed.resume.restore()
    assert (again.state, again.reason, again.decisions) == (live.state, live.reason, live.decisions)
    assert (again.rule.bets, again.rule.k, again.rule.evidence()) == (live.rule.bets, live.rule.k, live.rule.evidence())
    assert again.used == live.used and set(again.known) == set(live.known)


def test_the_first_rules_are_refused_with_a_reason():
    with pytest.raises(ConfigError, match="betting"):
        build_screener(
            "adaptive",
            models={},
            options=SCREENERS.validate("adaptive", {"screener": "random", "rule": "verdicts"}),
            seed=0,
        )


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


def test_adaptive_is_built_from_config_and_its_inner_options_are_checked():
    built = build_screener(
        "adaptive", models={}, options=SCREENERS.validate("adaptive", {"screener": "random", "canaries": 3}), seed=0
    )
    assert isinstance(built, AdaptiveScreener) and built.inner.name == "random" and built.options.canaries == 3
    with pytest.raises(ConfigError, match=r"screener.options.options.bogus|bogus"):
        build_screener(
            "adaptive",
            models={},
            options=SCREENERS.validate("adaptive", {"screener": "random", "options": {"bogus": 1}}),
            seed=0,
        )
    with pytest.raises(ConfigError, match="audit"):
        build_screener(
            "adaptive", models={}, options=SCREENERS.validate("adaptive", {"screener": "random", "audit": 1.5}), seed=0
        )


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

    from verifyless._cli.progress import LiveProgress

    live = LiveProgress(Console(file=io.StringIO(), width=200), cap=40)
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
    assert re.fullmatch(r"round \d+ · adaptive on: \+1\.00 on \d+ units \(p 0\.\d\d / 1\.00\), k [1-5]", last), last
    assert len(last.split(" · adaptive ")[1]) < 60  # one short segment
    assert any(re.search(r"adaptive trial: .* needs ~\d+ more", d) for d in descriptions), descriptions


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
    note = {"state": "trial", "mean": 0.4, "units": 12, "p_no_help": 0.21, "p_helps": 0.64, "needs": 8}
    assert audit_segment(note) == " · adaptive trial: +0.40 on 12 units (p 0.21 / 0.64), needs ~8 more"
    assert audit_segment({**note, "mean": None, "units": 0, "needs": None}) == (
        " · adaptive trial: - on 0 units (p 0.21 / 0.64)"
    )
    off = {**note, "state": "off", "mean": -0.9, "k": 3}
    assert audit_segment(off) == " · adaptive off: -0.90 on 12 units (p 0.21 / 0.64), k 3"
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


@pytest.mark.parametrize(("accuracy", "invert", "state"), [(1.0, False, "on"), (0.9, True, "off"), (1.0, True, "off")])
def test_a_critic_of_known_accuracy_over_http_is_kept_or_switched_off(tmp_path, accuracy, invert, state):
    from verifyless.model.config import make_config
    from verifyless.model.providers import build_model
    from verifyless.model.testserver import CriticAtAccuracy, TestServer
    from verifyless.screen.critic import PointwiseCritic

    critic = CriticAtAccuracy(_truth, accuracy, seed=1, invert=invert)
    with TestServer(critic) as server:
        model = build_model(make_config(model="critic", base_url=server.base_url))
        screener = _adaptive(PointwiseCritic(model, CriticOptions(k=3)))
        with RunStore(tmp_path / "s.db") as store:
            asyncio.run(_engine(store, screener, budget=40, executor=Unbounded()).run())
    assert critic.calls > 0
    assert screener.state == state, screener.reason
    assert state == "on" or (screener.rule.decided_at or 99) <= 24, screener.reason  # a harmful critic caught early


def test_the_demo_names_its_one_seed_result_an_anecdote():
    from verifyless._cli.demo import _matched
    from verifyless.task.base import Metric

    up = Metric("auc", "maximize")
    assert _matched(0.74, 0.75, 16, 16, up).startswith("one seed per arm, an anecdote (part 2 below weighs many)")
    assert _matched(0.74, 0.75, 16, 16, up).endswith(
        "adaptive reached 0.74, random 0.75: random ended higher on this seed"
    )
    assert _matched(0.75, 0.75, 16, 16, up).endswith(": a tie on this seed")
    assert _matched(0.76, 0.75, 16, 16, up).endswith("adaptive ended higher on this seed")
    assert _matched(0.1, 0.2, 16, 16, Metric("loss", "minimize")).endswith("adaptive ended higher on this seed")
    assert "win" not in _matched(0.74, 0.75, 16, 16, up)


def test_the_audit_counts_the_adaptive_screeners_own_audits(tmp_path):
    screener = _adaptive(PerfectUp(), audit=0.5, audit_on=0.5)
    with RunStore(tmp_path / "s.db") as store:
        result = asyncio.run(_engine(store, screener, executor=Unbounded()).run())
        audit = audit_from_store(store, result.run_id, resamples=100)
        pairs = [n for n in _notes(store, result.run_id) if n["audited"]]
    assert pairs and audit.audits == len(pairs)
    assert audit.advantage.n == len(pairs) and audit.advantage.value is not None and audit.advantage.value >= 0


KILL_SCRIPT = r"""
import asyncio, sys
sys.path.insert(0, {tests!r})
from adaptive_world import Inverted, Unbounded, _adaptive, _engine, _voting
from verifyless.store import RunStore
store = RunStore({db!r})
asyncio.run(_engine(store, {make}, budget=80, executor=Unbounded(delay=0.05)).run())
"""


MAKERS = {"_adaptive(Inverted())": lambda: _adaptive(Inverted()), "_voting()": _voting}


@pytest.mark.parametrize("make", list(MAKERS))
def test_the_decision_survives_kill_minus_nine_and_the_resumed_run_continues_from_it(tmp_path, make):
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    db, script = tmp_path / "s.db", tmp_path / "kill.py"
    script.write_text(KILL_SCRIPT.format(tests=str(Path(__file__).parents[1] / "support"), db=str(db), make=make))
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
        engine.resume.restore()
        assert (again.state, again.reason, again.rule.k) == (stored[-1]["state"], stored[-1]["reason"], stored[-1]["k"])
        assert again.decisions == [d for rec in stored for d in rec.get("decisions", ())]
        assert [d for d in again.decisions if "state" in d] == [rec["decision"] for rec in stored if "decision" in rec]
        assert again.rule.bets.n == sum(len(rec["new_units"]) for rec in stored) == stored[-1]["units"]
        assert again.rule.evidence()["mean"] == stored[-1]["mean"]
        kept = list(again.decisions)
        assert make != "_voting()" or any(d.get("knob") == "k" for d in kept)  # the k choices survive too
        resumed = _engine(store, MAKERS[make](), budget=80, executor=Unbounded())
        result = asyncio.run(resumed.run(run_id))
        assert result.verifications == 80 and resumed.screener.decisions[: len(kept)] == kept


def test_show_the_report_and_the_dashboard_say_what_adaptive_screening_decided(tmp_path):
    import json
    import subprocess
    import sys

    from verifyless.report.render import write_report

    db = tmp_path / "s.db"
    with RunStore(db) as store:
        run_id = asyncio.run(_engine(store, _adaptive(Inverted()), executor=Unbounded()).run()).run_id
        html = write_report(store, run_id, tmp_path / "out", figures=False).html.read_text()
    assert 'id="adaptive-state"' in html and "switched off at verification" in html
    shown = subprocess.run(
        [sys.executable, "-m", "verifyless", "show", run_id, "--store", str(db)], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    line = next(x for x in shown.stdout.splitlines() if x.startswith("adaptive screening"))
    assert line.startswith("adaptive screening off: screening is") and "switched off at verification" in line
    as_json = subprocess.run(
        [sys.executable, "-m", "verifyless", "show", run_id, "--store", str(db), "--json"],
        capture_output=True,
        text=True,
    )
    state = json.loads(as_json.stdout)["screener_audit"]["adaptive"]
    assert state["state"] == "off" and state["decided_at"] <= 12 and state["p_helps"] <= 0.1


class Memoriser(Counting):
    """A learner at chance on new programs that remembers every outcome it was told (ranks those by it)."""

    def __init__(self):
        super().__init__()
        self.told = {}

    def observe(self, outcome):
        self.told[outcome.child_id] = -1e9 if outcome.failed else outcome.child_fitness

    async def screen(self, ctx, candidates):
        done = await super().screen(ctx, candidates)
        if not all(c.id in self.told for c in candidates):
            return done  # a pool with a new program: a shuffle, as at chance
        ranking = tuple(c.id for c in sorted(candidates, key=lambda c: -self.told[c.id]))
        evidence = {cid: Evidence(cid, float(-i)) for i, cid in enumerate(ranking)}
        return Screening(self.name, ranking, ranking[: ctx.n_verify], evidence, 0.0)


def test_canaries_show_a_learning_screener_only_outcomes_it_was_never_told():
    memorised, honest = _adaptive(Memoriser(), holdout=0.0), _adaptive(Memoriser())
    for screener in (memorised, honest):
        with _tmp_store() as store:
            asyncio.run(_engine(store, screener, executor=Unbounded()).run())
    assert memorised.state == "on" and memorised.rule.bets.mean > 0.9  # canaries it had memorised: flattering
    assert honest.state != "on" and abs(honest.rule.bets.mean) < 0.5, honest.reason
    assert all(not honest.known[a].told and not honest.known[b].told for _, a, b in honest.used)
    assert set(honest.inner.told) and not set(honest.inner.told) & {a for _, a, _ in honest.used}


def _tmp_store():
    import tempfile
    from pathlib import Path

    return RunStore(Path(tempfile.mkdtemp(prefix="adaptive-holdout-")) / "s.db")
