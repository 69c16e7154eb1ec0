"""The data behind every report/dashboard view, from stores written by the real engine and the real RunStore."""

from __future__ import annotations

import math
import re

import pytest
from report_fixtures import (
    PAYLOADS,
    SECRET,
    _candidate,
    _verify,
    _with_submission,
)

from verifyless.errors import StoreError
from verifyless.report import text, views
from verifyless.store import RunStore
from verifyless.store.readonly import open_readonly


def test_runs_list_newest_first_with_budget_and_best(fx):
    built, st = fx
    rows = views.runs.runs_list(st)
    assert [r.run_id for r in rows] == [built["secret"], built["hostile"], built["plain"]]
    plain = rows[-1]
    assert (plain.verifications, plain.cap, plain.screener, plain.strategy) == (3, 3, "critic", "greedy")
    best = max((r for r in st.node_rows(plain.run_id) if r["fitness"] is not None), key=lambda r: r["fitness"])
    assert (plain.best_node, plain.best_score) == (best["node_id"], best["score"])


def test_budget_by_kind_and_tokens_by_role_add_up(fx):
    built, st = fx
    b = views.runs.budget_view(st, built["plain"])
    kinds = {r.kind: r for r in b.by_kind}
    assert kinds["verification"].verifications == b.total["verifications"] == 3
    assert math.isclose(kinds["verification"].evaluator_seconds, b.total["evaluator_seconds"])
    assert {"proposer", "implementer", "summarizer", "critic"} <= {u.role for u in b.by_role}
    assert sum(u.prompt_tokens for u in b.by_role) == b.total["tokens_in"] == kinds["llm_call"].tokens_in
    assert b.caps["verifications"] == 3


def test_best_curve_is_monotone_in_the_metric_direction_with_the_baseline(fx):
    built, st = fx
    c = views.curves.best_curve(st, built["plain"])
    assert [p.x for p in c.points] == [1, 2, 3] and c.points[0].node_id == "root"
    assert c.direction == "maximize" and c.metric == "combined_score"
    root = next(r for r in st.node_rows(built["plain"]) if r["node_id"] == "root")
    assert c.baseline == root["score"]
    bests = [p.best_score for p in c.points]
    assert bests == sorted(bests) and c.final == max(p.score for p in c.points if p.status == "ok")
    assert c.ceiling is not None and c.ceiling >= c.final  # circle_packing's bound anchor


def test_graph_has_every_node_with_primary_edges_and_a_tidy_layout(fx):
    built, st = fx
    rows = st.node_rows(built["plain"])
    g = views.nodes.graph_view(st, built["plain"], final_id="root")
    assert {n.id for n in g.nodes} == {r["node_id"] for r in rows}
    assert {(e.source, e.target) for e in g.edges if e.kind == "primary"} == {
        (r["parent_id"], r["node_id"]) for r in rows if r["parent_id"]
    }
    pos = {n.id: n for n in g.nodes}
    kids = [n.x for n in g.nodes if n.parent_id == "root"]
    assert pos["root"].depth == 0 and min(kids) <= pos["root"].x <= max(kids) and pos["root"].final
    assert len({(n.x, n.depth) for n in g.nodes}) == len(g.nodes)  # no two nodes drawn on the same spot


def test_rounds_carry_the_screeners_evidence_and_the_outcome(fx):
    built, st = fx
    rounds = views.nodes.rounds_view(st, built["plain"])
    screenings = [e.payload for e in st.events(built["plain"], kinds=["screening"])]
    assert len(rounds) == len(screenings) >= 2
    for r, p in zip(rounds, screenings, strict=False):
        assert [c.id for c in r.candidates] == p["ranking"] and r.screener == "critic" and r.parent_id == "root"
        for c in r.candidates:
            assert len(c.critiques) == 4 and c.n_valid + c.n_invalid == 4
            assert math.isclose(sum(c.votes.values()), 1.0) and 0.0 <= c.uncertainty <= 1.0
        verified = [c for c in r.candidates if c.verified]
        assert [c.id for c in verified] == p["to_verify"] and all(c.status == "ok" for c in verified)
        assert all(c.status == "screened-out" and c.score is None for c in r.candidates if not c.chosen)


def test_node_detail_has_diff_critiques_logs_and_keeps_the_hidden_test_apart(fx):
    built, st = fx
    chosen = next(e.payload["to_verify"][0] for e in st.events(built["plain"], kinds=["screening"]))
    d = views.nodes.node_detail(st, built["plain"], chosen)
    kinds = {cls for cls, _ in d.diff}
    assert {"add", "del", "hunk"} <= kinds and d.parent_id == "root"
    new = "\n".join(line[1:] for cls, line in d.diff if cls == "add")
    assert new and all(line in d.program for line in new.splitlines())
    assert len(d.critiques) == 4 and "chosen" in d.screened_in
    assert len(d.logs) == 1 and d.logs[0].status == "ok" and d.score == d.logs[0].score
    assert "combined_score" in d.metrics and d.test_metrics == {}
    assert [k for _, k, _ in d.events][:1] == ["node"]
    with pytest.raises(StoreError):
        views.nodes.node_detail(st, built["plain"], "no-such-node")


def test_critic_view_joins_verdicts_with_outcomes(fx):
    built, st = fx
    cv = views.critic.critic_view(st, built["plain"])
    assert cv is not None and cv.n == 2  # the two verified children of the root
    assert sum(map(sum, cv.confusion3)) == cv.n and sum(b[2] for b in cv.bins) == cv.n
    assert cv.by_screener["critic"]["n"] == cv.n


def test_final_view_and_progress(fx):
    built, st = fx
    f = views.final.final_view(st, built["plain"])
    final = next(e.payload for e in st.events(built["plain"], kinds=["final"]))
    assert f.node_id == final["node_id"] and f.stopped == final["stopped"] and f.score is not None
    p = views.progress.progress(st, built["plain"])
    assert p.status == "finished" and p.verifications == 3
    assert p.last_seq == max(e.seq for e in st.events(built["plain"])) and p.recent[0][1] == "run_status"


def test_hostile_text_is_kept_verbatim_in_the_data(fx):
    built, st = fx
    rows = [r for r in st.node_rows(built["hostile"]) if r["status"] == "ok" and r["node_id"] != "root"]
    d = views.nodes.node_detail(st, built["hostile"], rows[0]["node_id"])
    assert PAYLOADS[0] in d.idea and PAYLOADS[1] in d.logs[0].stdout_tail and PAYLOADS[2] in d.logs[0].stderr_tail


def test_secrets_are_redacted(fx):
    built, st = fx
    s = views.runs.run_summary(st, built["secret"])
    assert SECRET not in s.config_json and text.REDACTED in s.config_json
    assert text.redact({"API_KEY": "x", "tokens": 5, "list": ["Bearer abcdefghijklmnop"]}) == {
        "API_KEY": text.REDACTED,
        "tokens": 5,
        "list": [text.REDACTED],
    }
    assert text.redact({"api_key_env": "VERIFYLESS_API_KEY"})["api_key_env"] == text.REDACTED


# ---------------------------------------------------------------------- synthetic events through the real store


@pytest.fixture()
def synthetic(tmp_path):
    path = tmp_path / "s.db"
    with RunStore(path) as st:
        rid = st.create_run("not-a-task", {"screener": {"name": "tournament"}})
        _candidate(st, rid, "root", None, "a = 0\n")
        _verify(st, rid, "root", 1.0, "a = 0\n")
        for cid, prog in (("c1", "a = 1\n"), ("c2", "a = 2\n"), ("c3", "a = 3\n")):
            _candidate(st, rid, cid, "root", prog, refs=("c1",) if cid == "c3" else ())
        match = {
            "round": 1,
            "pair": ["c1", "c2"],
            "votes": {"c1": 2},
            "winner": "c1",
            "decided_by": "votes",
            "samples": [],
        }
        st.append(
            rid,
            "screening",
            {
                "screener": "tournament",
                "ranking": ["c1", "c2", "c3"],
                "chosen": ["c1"],
                "to_verify": ["c1", "c3"],
                "audited": ["c3"],
                "round": 1,
                "parse_health": {"ok": 5, "bad": 1},
                "evidence": {
                    "c1": {
                        "candidate_id": "c1",
                        "rank_value": 2.0,
                        "votes": {"improve": 1.0, "tie": 0.0, "lose": 0.0},
                        "labels": ["BigWin"],
                        "n_valid": 1,
                        "detail": {"matches": [match], "new_key": [1, 2]},
                    },
                    "c2": {
                        "candidate_id": "c2",
                        "rank_value": 1.0,
                        "detail": {
                            "matches": [match],
                            "critic": {
                                "candidate_id": "c2",
                                "rank_value": 0.5,
                                "detail": {"critiques": ["nested critique"]},
                            },
                        },
                    },
                    "c3": {
                        "candidate_id": "c3",
                        "rank_value": 0.0,
                        "votes": {"improve": 0.0, "tie": 0.0, "lose": 1.0},
                        "labels": ["Lose"],
                        "n_valid": 1,
                        "detail": {"findings": ["pilot says c3 overfits"]},
                    },
                },
            },
        )
        st.append(rid, "pilot", {"round": 1, "seconds": 3.0, "note": "pilot of c3"}, charge=True)
        st.append(rid, "learn", {"examples": 3, "weights": {"w": [0.1, float("nan")]}})
        st.append(rid, "snapshot", {"api_key": SECRET, "size": 10})
        _verify(st, rid, "c1", 2.0, "a = 1\n")
        _verify(st, rid, "c3", 0.5, "a = 3\n")
        st.set_status(rid, "finished")
    with open_readonly(path) as ro:
        yield ro, rid


def test_bracket_pilots_and_unknown_keys(synthetic):
    st, rid = synthetic
    (r,) = views.nodes.rounds_view(st, rid)
    assert len(r.bracket) == 1 and r.bracket[0]["winner"] == "c1"  # the same match from two candidates, once
    assert r.findings == ("pilot says c3 overfits",)
    assert [p.get("note") for p in r.pilots] == ["pilot of c3"]  # the round's `pilot` event
    assert "parse_health" in r.extra
    c1, c2, c3 = r.candidates
    assert "new_key" in c1.extra and c3.audited and c3.verified and not c2.verified
    # evidence nested in evidence (cascade stages, ensemble members): critiques drawn, numbers kept as extra
    assert c2.critiques == ("nested critique",) and '"critic"' in c2.extra and "nested critique" not in c2.extra
    assert views.nodes.node_detail(st, rid, "c2").critiques == ("nested critique",)
    assert views.runs.budget_view(st, rid).total["pilot_seconds"] == 3.0


def test_unknown_event_kinds_are_listed_generically_and_redacted(synthetic):
    st, rid = synthetic
    others = views.runs.other_events(st, rid)
    assert [e.kind for e in others] == ["pilot", "learn", "snapshot"]
    assert SECRET not in others[2].text and "NaN" in others[1].text


def test_reference_edges_audits_and_a_task_that_cannot_be_loaded(synthetic):
    st, rid = synthetic
    g = views.nodes.graph_view(st, rid)
    assert ("c1", "c3", "reference") in {(e.source, e.target, e.kind) for e in g.edges}
    cv = views.critic.critic_view(st, rid)
    assert cv is not None and [(a.candidate_id, a.predicted, a.truth) for a in cv.audits] == [("c3", "lose", "lose")]
    c = views.curves.best_curve(st, rid)
    assert c.ceiling is None and c.metric == "score" and [p.best_score for p in c.points] == [1.0, 2.0, 2.0]
    f = views.final.final_view(st, rid)  # no final event: the best so far
    assert f.node_id == "c1" and f.test_score == 1.0 and f.baseline_test_score == 0.0


def test_svg_figures_escape_every_string(synthetic):
    from verifyless.report import svg

    st, rid = synthetic
    curve = views.curves.best_curve(st, rid, label=PAYLOADS[0])
    out = str(svg.curves_svg([curve], title=PAYLOADS[1]))
    assert "<script" not in out and "<img" not in out and "&lt;script&gt;" in out
    g = views.nodes.graph_view(st, rid)
    hostile = g.nodes[1].__class__(**{**g.nodes[1].__dict__, "idea": PAYLOADS[2]})
    tree = str(
        svg.graph_svg(
            g.__class__(**{**g.__dict__, "nodes": (g.nodes[0], hostile, *g.nodes[2:])}), lambda nid: f"#node-{nid}"
        )
    )
    assert "<svg onload" not in tree and "&lt;svg onload" in tree and tree.count("<a href=") == len(g.nodes)


def test_a_peek_oracle_run_of_the_same_task_and_seed_is_the_ceiling(tmp_path):
    path = tmp_path / "o.db"
    budget, roles = {"verifications": 8}, {"models": {"default": "scripted:x.yaml"}}
    with RunStore(path) as st:
        runs = {}
        for key, name, score, seed, b in (
            ("critic", "critic", 2.0, 0, budget),
            ("oracle", "peek", 5.0, 0, budget),
            ("charged", "oracle", 6.0, 0, budget),  # charges all N: about budget / N expansions, no ceiling
            ("random", "random", 9.0, 1, budget),
            ("bigger", "peek", 7.0, 0, {"verifications": 40}),  # same task and seed, another budget: not comparable
        ):
            cfg = {"screener": {"name": name}, "budget": b, "roles": roles}
            rid = runs[key] = st.create_run("not-a-task", cfg, seed=seed)
            _candidate(st, rid, "root", None, "a = 0\n")
            _verify(st, rid, "root", score, "a = 0\n")
        other_roles = st.create_run(
            "not-a-task", {"screener": {"name": "critic"}, "budget": budget, "roles": {"models": {}}}, seed=0
        )
    with open_readonly(path) as ro:
        c = views.curves.best_curve(ro, runs["critic"])
        assert c.ceiling == 5.0
        assert c.ceiling_label.startswith("ceiling: peek-oracle run " + runs["oracle"])
        assert "charged only its pick" in c.ceiling_label and "same task, seed, roles and budget" in c.ceiling_label
        assert views.curves.best_curve(ro, runs["random"]).ceiling is None  # another seed: not comparable
        assert views.curves.best_curve(ro, other_roles).ceiling is None  # other models: not comparable


def test_curve_svg_draws_every_verified_score_and_names_the_direction(synthetic):
    from verifyless.report import svg

    st, rid = synthetic
    curve = views.curves.best_curve(st, rid)
    ok = [p for p in curve.points if p.status == "ok" and p.score is not None]
    assert any(p.score < curve.baseline for p in ok), "the fixture has a score below the best-so-far range"
    out = str(svg.curves_svg([curve]))
    assert out.count("<circle") == len(ok)
    assert "higher is better" in out


def test_compare_curves_share_one_y_range(tmp_path):
    from verifyless.report import svg

    path = tmp_path / "c.db"
    with RunStore(path) as st:
        ids = []
        for scores in ((1.0, 1.5), (10.0, 20.0)):
            rid = st.create_run("not-a-task", {"screener": {"name": "critic"}})
            _candidate(st, rid, "root", None, "a = 0\n")
            _verify(st, rid, "root", scores[0], "a = 0\n")
            _candidate(st, rid, "c1", "root", "a = 1\n")
            _verify(st, rid, "c1", scores[1], "a = 1\n")
            ids.append(rid)
    with open_readonly(path) as ro:
        curves = views.curves.compare_curves(ro, ids)
    assert curves[0].y_range == curves[1].y_range and curves[0].y_range is not None
    lo, hi = curves[0].y_range
    assert lo <= 1.0 and hi >= 20.0
    ticks = [_tick_labels(str(svg.curves_svg([c]))) for c in curves]
    assert ticks[0] == ticks[1], "side-by-side panels use the same y axis"


def _tick_labels(figure: str) -> list[str]:
    return re.findall(r'text-anchor="end" class="tick">([^<]+)</text>', figure)


def test_all_node_pages_at_once_equal_one_at_a_time(fx):
    built, st = fx
    every = views.nodes.node_details(st, built["plain"])
    assert [d.id for d in every] == [r["node_id"] for r in st.node_rows(built["plain"])]
    assert every == [views.nodes.node_detail(st, built["plain"], d.id) for d in every]


def _round_rows(html: str) -> dict[str, list[str]]:
    """Candidate id -> the cells of its row in the first screening round's table."""
    table = html[html.index('class="box round"') :]
    table = table[: table.index("</table>")]
    rows = {}
    for row in re.findall(r"<tr class=[^>]*>(.*?)</tr>", table, flags=re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, flags=re.S)]
        rows[cells[1]] = cells
    return rows


def test_a_candidate_without_votes_shows_a_dash_not_zero(synthetic, tmp_path):
    from verifyless.report.render import write_report

    st, rid = synthetic
    html = write_report(st, rid, tmp_path / "r", figures=False).html.read_text()
    c2 = _round_rows(html)["c2"]  # its evidence has no votes, no uncertainty and no valid replies
    assert c2[4] == "—" and c2[5] == "—" and c2[6] == "—", c2


def test_tied_rank_values_show_the_tie_break_that_decided(tmp_path):
    from verifyless.screen.critic import evidence_from_critiques

    path = tmp_path / "t.db"

    def said(verdict, tier=None):
        return f"[IMPROVEMENT] {verdict} --- r" + (f"\n[WINTIER] {tier} --- r" if tier else "")

    with RunStore(path) as st:
        rid = st.create_run("not-a-task", {"screener": {"name": "critic", "options": {"tie_break": "votes"}}})
        for cid in ("root", "c1", "c2", "c3"):
            _candidate(st, rid, cid, None if cid == "root" else "root", f"a = {cid!r}\n")
        ev = {  # c1 and c2 tie on mean label rank (2.5); the BigWin share puts c1 first
            "c1": evidence_from_critiques("c1", [said("improve", "big"), said("tie")]),
            "c2": evidence_from_critiques("c2", [said("improve", "medium"), said("improve", "small")]),
            "c3": evidence_from_critiques("c3", [said("lose")]),
        }
        assert ev["c1"].rank_value == ev["c2"].rank_value != ev["c3"].rank_value
        payload = {
            "screener": "critic",
            "ranking": ["c1", "c2", "c3"],
            "chosen": ["c1"],
            "evidence": {k: v.to_dict() for k, v in ev.items()},
            "round": 1,
        }
        st.append(rid, "screening", payload)
    with open_readonly(path) as ro:
        (r,) = views.nodes.rounds_view(ro, rid)
    by_id = {c.id: c for c in r.candidates}
    assert by_id["c3"].tie_break == "", "no tie, nothing to show"
    assert by_id["c1"].tie_break.startswith("votes: 0.5") and by_id["c2"].tie_break.startswith("votes: 0,"), by_id


def test_the_ensemble_submission_is_in_the_final_view_and_the_report(tmp_path):
    from verifyless.report.render import write_report

    rid = _with_submission(tmp_path / "e.db")
    with open_readonly(tmp_path / "e.db") as ro:
        sub = views.final.final_view(ro, rid).submission
        assert sub is not None and sub.members == ("c1", "root") and sub.score == 2.5 and sub.seconds == 3.5
        assert "submission" not in {e.kind for e in views.runs.other_events(ro, rid)}
        html = write_report(ro, rid, tmp_path / "r", figures=False).html.read_text()
    box = html[html.index("Ensemble submission") :][:1500]
    assert "c1, root" in box and "2.5" in box and "3.5" in box and "mean" in box
