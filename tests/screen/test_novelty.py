"""The novelty gate: near copies are rejected before screening, the judge's replies are parsed and watched."""

from __future__ import annotations

import asyncio
import logging
import random

import numpy as np
import pytest
from pydantic import ValidationError

from verifyless.errors import ModelUnavailable, UnparseableReplies
from verifyless.model.scripted import ScriptedModel
from verifyless.node import Candidate, Idea, Operator, Status, content_hash
from verifyless.prompts import load_template
from verifyless.screen.features import HashingTextEncoder, MiniLMTextEncoder
from verifyless.screen.novelty import (
    ArchiveProgram,
    NoveltyGate,
    NoveltyOptions,
    NoveltyVerdict,
    audit_stats,
    changed_lines,
    parse_judge,
)
from verifyless.store import RunStore
from verifyless.task.loader import builtin_tasks_dir, load_task


@pytest.fixture(scope="module")
def task():
    return load_task(builtin_tasks_dir() / "diabetes")


@pytest.fixture(scope="module")
def base(task):
    return task.baseline_program


def variant(base: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert old in base, old
        base = base.replace(old, new)
    return base


def whitespace_copy(base: str) -> str:
    return variant(base, ("STRENGTH = 1.0", "STRENGTH=1.0"), ("\n\n\ndef make_model", "\n\ndef make_model"))


def boosting(base: str) -> str:
    return variant(
        base,
        ("from sklearn.linear_model import Ridge", "from sklearn.ensemble import GradientBoostingRegressor"),
        ("return Ridge(alpha=STRENGTH)", "return GradientBoostingRegressor(n_estimators=300, max_depth=3)"),
        ("return FunctionTransformer()\n\n\ndef make_scaler", "return PolynomialFeatures(2)\n\n\ndef make_scaler"),
    )


def tagged(program: str, word: str) -> str:
    """``program`` with ``word`` in a comment inside its band (the gate reads the band only)."""
    return variant(program, ("STRENGTH = 1.0", f"STRENGTH = 1.0  # {word}"))


def cand(cid: str, program: str, parent: str | None = "root") -> Candidate:
    return Candidate(cid, parent, Operator.IMPROVE, Idea(f"idea of {cid}"), program, content_hash(program))


class CountingEncoder:
    """The hashing encoder, counting the texts it encodes."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = HashingTextEncoder()
        self.dim = self.inner.dim
        self.texts: list[str] = []

    def encode(self, texts):
        self.texts += list(texts)
        return self.inner.encode(texts)


def gate(task, judge=None, **options) -> NoveltyGate:
    return NoveltyGate(task, NoveltyOptions(**options), embedder=HashingTextEncoder(), judge=judge)


def check(g: NoveltyGate, candidates, archive) -> list[NoveltyVerdict]:
    return asyncio.run(g.check(candidates, archive))


# ---------------------------------------------------------------- the embedding gate


def test_a_near_duplicate_is_rejected_with_its_reason_and_a_new_idea_passes(task, base):
    archive = [ArchiveProgram("root", base), ArchiveProgram("a", boosting(base), parent_id="root")]
    near, new = [cand("c1", whitespace_copy(boosting(base))), cand("c2", variant(base, ("Ridge", "Lasso")))]
    dup, fresh = check(gate(task, embed="band", audit_rate=0.0), [near, new], archive)
    assert (dup.outcome, dup.verify, dup.nearest_id) == ("rejected", False, "a")
    assert dup.cosine == pytest.approx(1.0)
    assert "band cosine 1.0000 to node a >= threshold 0.99" in dup.reason
    assert (fresh.outcome, fresh.verify, fresh.nearest_id) == ("accepted", True, "root")
    assert fresh.cosine is not None and fresh.cosine < 0.99 and "< threshold 0.99" in fresh.reason


def test_a_band_equal_to_its_parents_but_for_whitespace_is_rejected_in_either_mode(task, base):
    for embed in ("diff", "band"):
        (verdict,) = check(
            gate(task, embed=embed, audit_rate=0.0), [cand("c1", whitespace_copy(base))], [ArchiveProgram("root", base)]
        )
        assert (verdict.outcome, verdict.nearest_id, verdict.cosine) == ("rejected", "root", 1.0)
        assert verdict.reason == "the band differs from node root's only in whitespace"


def test_an_empty_archive_accepts_and_a_batch_is_checked_against_its_own_accepted_candidates(task, base):
    first, second = check(gate(task, audit_rate=0.0), [cand("c1", boosting(base)), cand("c2", boosting(base))], [])
    assert (first.outcome, first.nearest_id, first.cosine) == ("accepted", None, None)
    assert (second.outcome, second.nearest_id) == ("rejected", "c1")


def test_embeddings_are_cached_by_text_across_checks(task, base):
    enc = CountingEncoder()
    g = NoveltyGate(task, NoveltyOptions(embed="band", audit_rate=0.0), embedder=enc)
    archive = [ArchiveProgram("root", base)]
    check(g, [cand("c1", boosting(base))], archive)
    check(g, [cand("c2", boosting(base)), cand("c3", whitespace_copy(base))], archive)
    assert len(enc.texts) == len(set(enc.texts)) == 3  # root's band, boosting's band, the whitespace copy


def test_audits_verify_a_rejection_anyway_and_replay_with_the_seed(task, base):
    archive = [ArchiveProgram("root", base)]
    dups = [cand(f"c{i}", whitespace_copy(base) + "\n" * i) for i in range(40)]

    def outcomes(seed: int) -> list[str]:
        g = NoveltyGate(task, NoveltyOptions(audit_rate=0.3), embedder=HashingTextEncoder(), rng=random.Random(seed))
        return [v.outcome for v in check(g, dups, archive)]

    first = outcomes(5)
    assert first == outcomes(5)
    assert set(first) == {"rejected", "audited"}  # the copies are rejected against root (and each other)
    (always,) = check(gate(task, audit_rate=1.0), dups[:1], archive)
    assert always.outcome == "audited" and always.verify and "audited: verified anyway" in always.reason
    stats = audit_stats([always, always.to_dict(), NoveltyVerdict("x", "rejected", "root", 1.0, "r")], {"c0"})
    assert (stats.audited, stats.improved, stats.false_rejection_rate) == (2, 2, 1.0)


def test_diff_mode_compares_changes_not_whole_bands(task, base):
    child = variant(base, ("STRENGTH = 1.0", "STRENGTH = 3.0"))
    assert changed_lines(base, child) == "-STRENGTH = 1.0\n+STRENGTH = 3.0"
    archive = [ArchiveProgram("root", base), ArchiveProgram("a", child, parent_id="root")]
    same_change, other_change = check(
        gate(task, embed="diff", audit_rate=0.0), [cand("c1", child + "\n"), cand("c2", boosting(base))], archive
    )
    assert (same_change.outcome, same_change.nearest_id) == ("rejected", "a")
    assert "diff cosine" in same_change.reason
    assert other_change.outcome == "accepted"


def test_options_are_checked(task):
    with pytest.raises(ValidationError, match="judge_lower"):
        NoveltyOptions(threshold=0.9, judge_lower=0.95)
    with pytest.raises(ValidationError):
        NoveltyOptions(audit_rate=1.5)
    with pytest.raises(ValueError, match="no judge model"):
        NoveltyGate(task, NoveltyOptions(judge=True), embedder=HashingTextEncoder())


# ---------------------------------------------------------------- the judge


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("It changes the model.\n[NOVELTY] NOVEL --- gradient boosting instead of ridge", "novel"),
        ("Only renames.\n[NOVELTY] NOT_NOVEL --- same method", "not_novel"),
        ("[NOVELTY] NOT NOVEL --- same method", "not_novel"),
        ("[NOVELTY] not-novel --- same method", "not_novel"),
        ("[novelty]: **Not Novel**", "not_novel"),
        ("<think>maybe [NOVELTY] NOVEL</think>\n[NOVELTY] NOT_NOVEL --- copy", "not_novel"),
        ("The change only edits a comment.\n\n**NOT NOVEL**", "not_novel"),
        ("Verdict: NOVEL", "novel"),
        ("NON-NOVEL --- cosmetic", "not_novel"),
        ("I think this one is not novel at all.", None),
        ("The candidate is fine.", None),
        ("", None),
    ],
)
def test_the_judge_parser_is_tolerant_but_reads_only_a_verdict(reply, answer):
    assert parse_judge(reply) == answer


def judge_gate(task, replies, **options) -> tuple[NoveltyGate, ScriptedModel]:
    model = ScriptedModel(replies=replies, name="judge")
    opts = {"judge": True, "threshold": 0.9999, "judge_lower": 0.0, "audit_rate": 0.0, **options}
    return NoveltyGate(task, NoveltyOptions(**opts), embedder=HashingTextEncoder(), judge=model), model


def test_near_misses_go_to_the_judge_whose_not_novel_rejects(task, base):
    g, model = judge_gate(task, ["[NOVELTY] NOT NOVEL --- same ridge", "[NOVELTY] NOVEL --- boosting"])
    archive = [ArchiveProgram("root", base)]
    near = variant(base, ("Ridge(alpha=STRENGTH)", "Ridge(alpha=STRENGTH, fit_intercept=False)"))
    rejected, accepted = check(g, [cand("c1", near), cand("c2", boosting(base))], archive)
    assert (rejected.outcome, rejected.judge) == ("rejected", "not_novel")
    assert "the judge said NOT_NOVEL" in rejected.reason
    assert (accepted.outcome, accepted.judge) == ("accepted", "novel")
    request = model.calls[0].request
    assert request.role == "novelty_judge" and "node root" in request.messages[1].content
    assert "fit_intercept=False" in request.messages[1].content and "[NOVELTY]" in request.messages[1].content
    names = load_template("screen/novelty").declared
    assert names and not [n for n in names for m in request.messages if "{{" + n + "}}" in m.content]


def test_far_candidates_and_exact_copies_never_reach_the_judge(task, base):
    g, model = judge_gate(task, [], threshold=0.99, judge_lower=0.97)
    archive = [ArchiveProgram("root", base)]
    far, copy = check(g, [cand("c1", boosting(base)), cand("c2", whitespace_copy(base))], archive)
    assert (far.outcome, far.judge, copy.outcome, copy.judge) == ("accepted", None, "rejected", None)
    assert model.calls == []


def test_a_judge_in_an_unexpected_format_warns_then_stops_the_run(task, base, caplog):
    g, _ = judge_gate(task, ["Looks new to me!"] * 4, max_unparsed_replies=3, format_reminders=0)
    archive = [ArchiveProgram("root", base)]
    with caplog.at_level(logging.WARNING, logger="verifyless.screen.health"):
        (verdict,) = check(g, [cand("c1", boosting(base))], archive)
    assert (verdict.outcome, verdict.judge) == ("accepted", "unparsed")  # an unreadable judge never blocks
    assert "novelty judge" in caplog.text and "Looks new to me!" in caplog.text
    with pytest.raises(UnparseableReplies, match="novelty judge .* 3 replies in a row.*NOT_NOVEL"):
        check(g, [cand("c2", tagged(boosting(base), "two")), cand("c3", tagged(boosting(base), "three"))], archive)


def test_a_parsed_reply_resets_the_unparsed_streak(task, base):
    replies = ["??", "??", "[NOVELTY] NOVEL", "??", "??"]
    g, _ = judge_gate(task, replies, max_unparsed_replies=3, format_reminders=0)
    candidates = [cand(f"c{i}", tagged(boosting(base), word)) for i, word in enumerate(("ab", "cd", "ef", "gh", "ij"))]
    verdicts = check(g, candidates, [ArchiveProgram("root", base)])
    assert [v.judge for v in verdicts] == ["unparsed", "unparsed", "novel", "unparsed", "unparsed"]


def test_a_judge_endpoint_failure_accepts_the_candidate(task, base):
    async def fail(request):
        raise ModelUnavailable("endpoint down")

    opts = NoveltyOptions(judge=True, threshold=0.9999, judge_lower=0.0)
    judge = ScriptedModel(function=fail, name="judge")
    g = NoveltyGate(task, opts, embedder=HashingTextEncoder(), judge=judge)
    (verdict,) = check(g, [cand("c1", boosting(base))], [ArchiveProgram("root", base)])
    assert (verdict.outcome, verdict.judge) == ("accepted", "error") and "unavailable" in verdict.reason


# ---------------------------------------------------------------- the record and the real model


def test_a_stored_not_novel_node_round_trips(tmp_path, base):
    with RunStore(tmp_path / "runs.db") as store:
        run_id = store.create_run("diabetes", {})
        store.add_candidate(run_id, cand("c1", base))
        store.append(run_id, "status", {"status": "not-novel", "reason": "band cosine 1.0 to root"}, node_id="c1")
        (node,) = store.nodes(run_id)
    assert node.status is Status.NOT_NOVEL and not node.status.verified and node.reason == "band cosine 1.0 to root"
    assert type(node).from_dict(node.to_dict()) == node


@pytest.mark.skipif(not MiniLMTextEncoder.available(), reason="needs the offline MiniLM wheel")
def test_the_real_minilm_rejects_a_repeated_change_and_sees_a_new_constant_only_in_diff_mode(task, base):
    archive = [ArchiveProgram("root", base), ArchiveProgram("a", boosting(base), parent_id="root")]
    repeat = cand("c1", whitespace_copy(boosting(base)))  # a's change again, reformatted
    constant = cand("c2", variant(base, ("STRENGTH = 1.0", "STRENGTH = 3.0")))
    diff = NoveltyGate(task, NoveltyOptions(audit_rate=0.0))
    same, new = check(diff, [repeat, constant], archive)
    assert (same.outcome, same.nearest_id) == ("rejected", "a") and same.cosine is not None and same.cosine > 0.99
    assert new.outcome == "accepted" and new.cosine is not None and new.cosine < 0.9
    # Whole bands: MiniLM puts the one-constant change above 0.99 (measured 0.9992), so band mode rejects it.
    band = NoveltyGate(task, NoveltyOptions(embed="band", audit_rate=0.0), embedder=diff.embedder)
    (constant_in_band,) = check(band, [constant], archive[:1])
    assert constant_in_band.outcome == "rejected" and constant_in_band.cosine is not None
    assert 0.99 < constant_in_band.cosine < 0.9999
    vectors = diff.embedder.encode(["a", "b"])
    assert vectors.shape == (2, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
