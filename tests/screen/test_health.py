"""Reply health: parsers accept unambiguous equivalent forms, screenings record parse rates, a screener whose
replies never parse warns and then stops the run with exit code 8, and `show --json` reports parse rates."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from scripted_runs import config, run_to_end, scripted_overrides

from verifyless.config import load_config
from verifyless.errors import UnparseableReplies
from verifyless.events import Screened
from verifyless.node import Evidence, Screening
from verifyless.screen.critic import parse_verdict
from verifyless.screen.health import ReplyHealth, health_by_screener, replies_detail, reply_stats
from verifyless.screen.prompting import parse_choice
from verifyless.store import RunStore
from verifyless.wiring import build_engine

AB = ("A", "B")
CHOICE_CASES = [
    # canonical and decorated tags
    ("Reasoning...\n[CHOICE] B --- safer", AB, "B"),
    # a final JSON object, bare or fenced, with any of the usual keys
    ('I compared both.\n{"choice": "A", "reason": "more data"}', AB, "A"),
    ('Thoughts.\n```json\n{"winner": "B"}\n```', AB, "B"),
    ('{"Winner": "Candidate B", "confidence": 0.7}', AB, "B"),
    ('{"answer": 2}', ("1", "2", "3"), "2"),
    ('{"reasoning": {"a": 1, "b": 2}, "pick": "A"}', AB, "A"),
    # a Winner-style last line
    ("A is simpler but B regularises.\nWinner: B", AB, "B"),
    ("Long analysis.\n\n**Winner: A**", AB, "A"),
    ("Analysis.\nFinal answer: Candidate B.", AB, "B"),
    ("Analysis.\nMy choice: A --- it keeps the data", AB, "A"),
    ("Analysis.\nDecision: 3", ("1", "2", "3"), "3"),
    ("Solutions compared.\nWinner: C", ("A", "B", "C"), "C"),
    ("<think>[CHOICE] A</think>\nWinner: B", AB, "B"),  # hidden reasoning is ignored
    # never guessed from the first letter mentioned, never from a hedge
    ("A looks good. B looks better. I pick B.", AB, None),
    ("Winner: A or B, hard to say", AB, None),
    ("[CHOICE] A or B", AB, None),
    ("[CHOICE] A/B", AB, None),
    ("Winner: B\nBut on reflection both are equal.", AB, None),  # the Winner line is not the last line
    ('{"choice": "A"} was my first thought, but I am unsure.', AB, None),  # JSON must end the reply
    ('{"choice": "C"}', AB, None),
    ('{"score_a": 1, "score_b": 2}', AB, None),
    ("Both look fine to me, I would try either of them.", AB, None),
    ('[CHOICE] B\n{"choice": "A"}', AB, "B"),  # a tag, when present, decides
    ("Winner: <A or B>", AB, None),
]


@pytest.mark.parametrize("text, options, expected", CHOICE_CASES, ids=[f"c{i}" for i in range(len(CHOICE_CASES))])
def test_parse_choice_equivalent_forms(text, options, expected) -> None:
    assert parse_choice(text, options) == expected


VERDICT_CASES = [
    ("Analysis...\nImprovement: lose --- it drops features\nWin tier: NA", "Lose"),
    ("Analysis...\nimprovement: improve\nwintier: medium", "MediumWin"),
    ("Analysis...\n**Improvement:** improve\n**Win_tier:** big", "BigWin"),
    ('Analysis.\n{"improvement": "improve", "wintier": "small", "reason": "x"}', "SmallWin"),
    ('Analysis.\n```json\n{"improvement": "tie", "win_tier": "NA"}\n```', "Tie"),
    ('{"verdict": "lose"}', "Lose"),
    ('{"improvement": "improve", "wintier": "NA"}', None),  # the NA rule holds in JSON too
    ('{"improvement": "better", "wintier": "big"}', None),
    ("The child is better, a big win.", None),
    ("Improvement: the child adds features.", None),
    ("<think>[IMPROVEMENT] lose</think>\n[IMPROVEMENT] improve\n[WINTIER] big", "BigWin"),
]


@pytest.mark.parametrize("text, label", VERDICT_CASES, ids=[f"v{i}" for i in range(len(VERDICT_CASES))])
def test_parse_verdict_equivalent_forms(text, label) -> None:
    verdict = parse_verdict(text)
    assert (verdict.label if verdict else None) == label


def screening(parsed: int, total: int, example: str = "junk") -> Screening:
    ev = {
        "a": Evidence(
            "a",
            1.0,
            detail={"replies": replies_detail(parsed, total, "[CHOICE] A or B", [example] if parsed < total else [])},
        ),
        "b": Evidence("b", 0.0, detail={"replies": replies_detail(0, 0, "[CHOICE] A or B")}),
    }
    return Screening("tournament", ("a", "b"), ("a",), ev)


def test_tracker_warns_below_the_rate_and_stops_after_three_silent_screenings(caplog) -> None:
    health = ReplyHealth("tournament", "judge-x", min_parse_rate=0.5, max_unparsed_screenings=3)
    with caplog.at_level(logging.WARNING, logger="verifyless.screen.health"):
        assert health.observe(screening(3, 4)).rate == 0.75
        assert not caplog.records
        health.observe(screening(1, 4, "I like both"))
        assert "'tournament'" in caplog.text and "judge-x" in caplog.text and "I like both" in caplog.text
        assert (
            "the screener 'tournament' (model judge-x) parsed only 1 of 4 replies (25%, below 50%; 4 of 8 so far)"
            in caplog.text
        )
        health.observe(screening(0, 4))
        health.observe(screening(0, 4))
        health.observe(Screening("tournament-unavailable", ("a",), ("a",)))  # no replies: neither counts nor resets
        with pytest.raises(UnparseableReplies) as err:
            health.observe(screening(0, 4, "Both look fine"))
    message = str(err.value)
    assert "[CHOICE] A or B" in message and "Both look fine" in message and "Fix:" in message
    assert err.value.exit_code == 8
    fresh = ReplyHealth("critic", max_unparsed_screenings=2)
    fresh.observe(screening(0, 4))
    fresh.observe(screening(1, 4))  # one parsed reply resets the streak
    fresh.observe(screening(0, 4))


def test_stats_read_stored_dicts_and_agentic_evidence() -> None:
    stored = Screening.from_dict(screening(2, 4).to_dict())  # as the store reads it back
    raw = screening(2, 4).to_dict()["evidence"]
    assert reply_stats(raw).parsed == 2 and reply_stats(raw).total == 4
    agentic = {
        "a": {"detail": {"choice_source": "random (unparseable final reply)", "final_reply": "hmm"}},
        "b": {"detail": {"chosen": False}},
    }
    assert (reply_stats(agentic).parsed, reply_stats(agentic).total, reply_stats(agentic).example) == (0, 1, "hmm")
    table = health_by_screener(
        [stored, stored, Screening("random", (), ())],
        [{"choice": "A"}, {"choice": None, "raw": "x"}],
    )
    assert table == {
        "tournament": {"parsed": 4, "total": 8, "rate": 0.5, "screenings": 2},
        "final": {"parsed": 1, "total": 2, "rate": 0.5, "screenings": 1},
    }


def judge_script(tmp_path: Path, reply: str) -> Path:
    path = tmp_path / "judge.json"
    path.write_text(json.dumps({"mode": "rules", "rules": [{"role": "judge", "reply": reply}]}))
    return path


def overrides(tmp_path: Path, judge: Path, budget: int) -> list[str]:
    common = scripted_overrides(tmp_path, "circle_packing", budget=budget, candidates=3)
    return [*common, "screener.name=tournament", f"roles.models.judge=scripted:{judge}"]


@pytest.mark.parametrize(
    "reply",
    ['Compared.\n{"choice": "B", "why": "regularised"}', "Compared both.\nWinner: B"],
    ids=["json", "winner-line"],
)
def test_judges_in_their_own_format_parse_in_a_whole_run(tmp_path, reply) -> None:
    cfg = load_config(overrides=overrides(tmp_path, judge_script(tmp_path, reply), budget=4))
    with RunStore(cfg.store) as store:
        result = run_to_end(cfg, store)
        payloads = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
        screenings = [e.record.screening for e in store.events(result.run_id, Screened)]
    health = health_by_screener(screenings)["tournament"]
    assert health["total"] > 0 and health["parsed"] == health["total"]
    samples = [
        s for p in payloads for ev in p["evidence"].values() for m in ev["detail"]["matches"] for s in m["samples"]
    ]
    assert samples and all(s["choice"] == "B" for s in samples)  # every reply read as the letter it names


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verifyless", *args], capture_output=True, text=True, timeout=300)


def test_a_nonsense_judge_warns_then_stops_the_run_with_exit_code_8(tmp_path) -> None:
    judge = judge_script(tmp_path, "Both look fine to me, I would try either of them.")
    args = [a for a in overrides(tmp_path, judge, budget=12) if not a.startswith(("store=", "task="))]
    out = cli("run", "circle_packing", *args, "--store", str(tmp_path / "s.db"))
    assert out.returncode == 8, out.stdout + out.stderr
    assert "only 0 of" in out.stderr and "below 50%" in out.stderr  # the warning came first
    assert "[CHOICE] A or [CHOICE] B" in out.stderr and "Both look fine to me" in out.stderr
    assert "Traceback" not in out.stderr
    with RunStore(tmp_path / "s.db") as store:
        (run,) = store.runs()
        screenings = list(store.events(run.run_id, kinds=["screening"]))
    assert len(screenings) == 3  # stopped within three screenings
    shown = cli("show", run.run_id, "--store", str(tmp_path / "s.db"), "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["reply_health"]["tournament"]["parsed"] == 0 and data["reply_health"]["tournament"]["rate"] == 0.0
    table = cli("show", run.run_id, "--store", str(tmp_path / "s.db"))
    assert "replies parsed: tournament 0/" in table.stdout


def test_a_critic_that_never_parses_stops_the_run_within_three_screenings(tmp_path) -> None:
    critic = tmp_path / "critic.json"
    critic.write_text(
        json.dumps(
            {
                "mode": "rules",
                "rules": [{"role": "critic", "reply": "The child seems promising overall; hard to be sure."}],
            }
        )
    )
    cfg = config(tmp_path, "circle_packing", "budget.verifications=12", f"roles.models.critic=scripted:{critic}")
    with RunStore(cfg.store) as store:
        engine = build_engine(cfg, store)
        try:
            with pytest.raises(UnparseableReplies, match=r"\[IMPROVEMENT\].*hard to be sure"):
                asyncio.run(engine.run())
        finally:
            engine.executor.close()
        (run,) = store.runs()
        screenings = [e.record.screening for e in store.events(run.run_id, Screened)]
    assert len(screenings) == 3 and health_by_screener(screenings)["critic"]["parsed"] == 0
