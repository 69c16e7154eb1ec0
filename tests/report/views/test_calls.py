"""The views behind the dashboard-only pages: per-node LLM calls, usage and score series, lineage layout, highlighting.

Stores come from the real engine (``report_fixtures``: scripted LLM roles on
``circle_packing``) and from synthetic events through the real ``RunStore``.
"""

from __future__ import annotations

import pytest
from report_fixtures import PAYLOADS, SECRET

from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.report import views
from verifyless.store import RunStore
from verifyless.store.readonly import open_readonly
from verifyless.ui.highlight import python_spans
from verifyless.ui.lineage import lineage_view


def test_every_node_gets_the_proposer_implementer_and_summarizer_calls_that_made_it(fx):
    built, st = fx
    rid = built["plain"]
    calls = views.calls.run_calls(st, rid)
    assert calls and all(c.messages and c.replies for c in calls)  # every call's prompt is in the cache
    rows = {r["node_id"]: r for r in st.node_rows(rid)}
    seen: dict[int, str] = {}
    for nid, row in rows.items():
        nc = views.calls.node_calls(st, rid, nid, calls)
        roles = [c.role for c in nc.calls]
        assert roles == (["summarizer"] if nid == "root" else ["proposer", "implementer", "summarizer"]), nid
        idea = " ".join(row["idea"].split())
        if nid != "root":
            assert idea in " ".join(nc.calls[0].replies[0].split())  # the proposer's reply is this node's idea
        for c in nc.calls:
            assert seen.setdefault(c.seq, nid) == nid, f"call {c.seq} linked to two nodes"
        assert nc.prompt_tokens == sum(c.prompt_tokens for c in nc.calls) > 0
    assert views.calls.node_calls(st, rid, "root") == views.calls.node_calls(st, rid, "root", calls)
    assert views.calls.calls_by_node(st, rid) == {nid: views.calls.node_calls(st, rid, nid, calls) for nid in rows}


def test_calls_are_redacted_and_keep_hostile_text_verbatim(fx):
    built, st = fx
    rid = built["hostile"]
    node = views.final.final_view(st, rid).node_id
    calls = views.calls.node_calls(st, rid, node).calls
    assert any(PAYLOADS[0] in r for c in calls for r in c.replies)  # the proposer's reply carries the payload
    assert all(SECRET not in text for c in calls for _, text in c.messages)


def _node(st, rid, cid, parent, island, score=None, idea=None):
    program = f"x = {cid!r}\n"
    st.add_candidate(
        rid,
        Candidate(
            cid,
            parent,
            Operator.IMPROVE,
            Idea(idea or f"a long enough idea for {cid}"),
            program,
            content_hash(program),
            island=island,
            round=1,
        ),
    )
    if score is not None:
        st.add_verification(
            rid,
            cid,
            Verification(
                Status.OK,
                metrics={"m": score, "aux": 2 * score},
                score=score,
                test_score=99.0,
                test_metrics={"secret_test": 1.0},
                run_seconds=1.0,
                program_hash=content_hash(program),
            ),
            score,
        )


@pytest.fixture()
def islands(tmp_path):
    path = tmp_path / "i.db"
    with RunStore(path) as st:
        rid = st.create_run("not-a-task", {})
        _node(st, rid, "root", None, 0, 1.0)
        _node(st, rid, "a", "root", 0, 2.0)
        _node(st, rid, "b", "root", 1, 3.0)
        _node(st, rid, "b1", "b", 1, 4.0)
        _node(st, rid, "b2", "b", 1)  # never verified
        st.append(
            rid,
            "llm_call",
            {"role": "proposer", "model": "m", "prompt_hash": "f" * 64, "prompt_tokens": 5, "cached": False},
        )
        st.append(rid, "final", {"node_id": "b1", "stopped": "budget"})
    with open_readonly(path) as ro:
        yield ro, rid


def test_lineage_puts_islands_apart_and_marks_the_returned_path(islands):
    st, rid = islands
    v = lineage_view(st, rid)
    at = {n.id: n for n in v.nodes}
    assert {n.id for n in v.nodes if n.on_path} == {"root", "b", "b1"} and at["b1"].final
    assert {(e.source, e.target) for e in v.edges if e.on_path} == {("root", "b"), ("b", "b1")}
    bands = {b.island: b for b in v.islands}
    assert bands[0].x1 < bands[1].x0  # islands do not overlap
    for n in v.nodes:
        assert bands[n.island].x0 < n.x < bands[n.island].x1, n.id
    assert at["b1"].r > at["a"].r > at["root"].r and at["b2"].color == "#b8b8b8"  # size by score, grey unverified
    assert at["b1"].y > at["b"].y > at["root"].y and 0 < v.width and 0 < v.height


def test_series_are_validation_only_and_add_up_to_the_ledger(fx, islands):
    built, st = fx
    rid = built["plain"]
    usage = views.series.usage_series(st, rid)
    verifications = list(st.events(rid, kinds=["verification"]))
    assert len(usage.points) == len(verifications) + 1 and usage.points[0].calls == 0
    assert all(a.prompt_tokens <= b.prompt_tokens for a, b in zip(usage.points, usage.points[1:], strict=False))
    budget = st.budget(rid)
    assert (usage.total.prompt_tokens, usage.total.completion_tokens) == (budget.tokens_in, budget.tokens_out)
    scatter = views.series.score_scatter(st, rid)
    assert [p.score for p in scatter.points] == [v.payload.get("score") for v in verifications]
    ist, irid = islands
    s = views.series.score_scatter(ist, irid)
    assert s.metrics == ("aux", "m") and all("secret_test" not in p.metrics for p in s.points)
    assert views.series.usage_series(ist, irid).total.calls == 1


def test_a_call_whose_prompt_is_not_cached_keeps_its_usage_and_links_to_no_node(islands):
    st, rid = islands
    (call,) = views.calls.run_calls(st, rid)
    assert call.messages == () and call.replies == () and call.prompt_tokens == 5
    none = views.calls.node_calls(st, rid, "b")
    assert none.calls == () and none.note and none.cost == 0.0


def test_highlighting_gives_the_source_back_and_classifies_tokens():
    source = 'import os\n@dec\ndef f(x=1.5):  # note\n    return len("a\\"b") + x\nclass C: """doc\n'
    spans = python_spans(source)
    assert "".join(t for _, t in spans) == source
    kinds = {t: c for c, t in spans}
    assert kinds["import"] == kinds["def"] == kinds["return"] == "kw" and kinds["f"] == kinds["C"] == "fn"
    assert kinds["len"] == "bi" and kinds["1.5"] == "num" and kinds["# note"] == "com" and kinds["@dec"] == "dec"
    assert kinds['"a\\"b"'] == "str" and kinds['"""doc\n'] == "str"  # an unterminated string runs to the end
    for text in ("", "(((", "x = '\n", PAYLOADS[0]):
        assert "".join(t for _, t in python_spans(text)) == text
