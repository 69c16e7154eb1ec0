"""Greedy, islands, linear, MAP-Elites and the registry, driven by a scripted loop with a fake verifier."""

from __future__ import annotations

import random
import zlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verifyless.errors import ConfigError
from verifyless.node import Node, Operator, Status
from verifyless.search.base import Expansion, SearchStrategy, SearchView
from verifyless.search.greedy import GreedyConfig, GreedyStrategy
from verifyless.search.islands import IslandsConfig, IslandsStrategy
from verifyless.search.linear import LinearConfig, LinearStrategy
from verifyless.search.map_elites import IncrementalArchive, build_archive
from verifyless.search.registry import STRATEGIES, build_strategy, strategy_defaults


def fake_verify(node_id: str, exp: Expansion, view: SearchView) -> tuple[Status, float | None]:
    """Deterministic outcome from the node id: ~1 in 5 fails, else parent fitness plus a signed step."""
    h = zlib.crc32(node_id.encode())
    if h % 5 == 0:
        return Status.FAILED, None
    parent = view.nodes.get(exp.parent_id) if exp.parent_id else None
    base = parent.fitness if parent is not None and parent.fitness is not None else 0.0
    return Status.OK, base + ((h >> 3) % 21 - 8) / 100


class Loop:
    """A miniature engine: baseline first, then ask -> make nodes -> tell (incl. a screened-out sibling)."""

    def __init__(self, strategy: SearchStrategy, verify=fake_verify, siblings: bool = True) -> None:
        self.strategy, self.verify, self.siblings = strategy, verify, siblings
        self.view = SearchView()
        self.told: list[Node] = []
        self.count = 0
        self.tell(Node("base", None, Operator.BASELINE, Status.OK, fitness=0.0, score=0.0))

    def tell(self, node: Node) -> None:
        self.view.add(node)
        self.strategy.tell(node)
        self.told.append(node)

    def step(self, k: int = 1) -> list[Expansion]:
        exps = self.strategy.ask(self.view, k)
        for exp in exps:
            self.count += 1
            nid = f"n{self.count}"
            status, fitness = self.verify(nid, exp, self.view)
            self.tell(
                Node(
                    nid,
                    exp.parent_id,
                    exp.operator,
                    status,
                    fitness,
                    idea="idea " * (self.count % 7),
                    reference_ids=exp.reference_ids,
                    island=exp.island,
                    code_length=1000 + zlib.crc32(nid.encode()) % 900,
                )
            )
            if self.siblings:  # the screener's losers: told, never verified
                self.tell(Node(nid + "s", exp.parent_id, exp.operator, Status.SCREENED_OUT, island=exp.island))
        return exps

    def run(self, steps: int, k: int = 1) -> None:
        for _ in range(steps):
            self.step(k)


# ------------------------------------------------------------------- greedy
def test_greedy_drafts_then_improves_best():
    loop = Loop(
        GreedyStrategy(random.Random(0), GreedyConfig(num_drafts=5)),
        verify=lambda nid, e, v: (Status.OK, float(int(nid[1:]) % 4)),
    )
    first = [loop.step()[0] for _ in range(5)]
    assert [e.operator for e in first] == [Operator.DRAFT] * 5
    assert {e.parent_id for e in first} == {"base"}
    nxt = loop.step()[0]
    assert nxt.operator is Operator.IMPROVE and nxt.parent_id == loop.view.best_id
    assert loop.strategy.final(loop.view) == loop.view.best_id


def test_greedy_debugs_newest_buggy_leaf_up_to_depth_limit():
    buggy = {"n2", "n3", "n4", "n5", "n6"}  # n3.. are debug steps of n2; n6 is a second draft's failure
    verify = lambda nid, e, v: (Status.FAILED, None) if nid in buggy else (Status.OK, 1.0)
    loop = Loop(GreedyStrategy(random.Random(0), GreedyConfig(num_drafts=2, max_debug_depth=3)), verify=verify)
    loop.run(2)  # n1 ok draft, n2 buggy draft
    chain = [loop.step()[0] for _ in range(3)]
    assert [(e.operator, e.parent_id) for e in chain] == [
        (Operator.DEBUG, "n2"),
        (Operator.DEBUG, "n3"),
        (Operator.DEBUG, "n4"),
    ]
    # n5 sits at the end of three consecutive debug steps: abandoned, so greedy improves the best.
    nxt = loop.step()[0]
    assert (nxt.operator, nxt.parent_id) == (Operator.IMPROVE, "n1")


def test_greedy_debug_prob_zero_never_debugs():
    loop = Loop(GreedyStrategy(random.Random(0), GreedyConfig(num_drafts=3, debug_prob=0.0)))
    loop.run(40)
    assert all(n.operator is not Operator.DEBUG for n in loop.told)


def test_greedy_screened_out_drafts_do_not_count():
    strat = GreedyStrategy(random.Random(0), GreedyConfig(num_drafts=2))
    loop = Loop(strat, siblings=True, verify=lambda nid, e, v: (Status.OK, 1.0))
    loop.run(2)
    assert loop.step()[0].operator is Operator.IMPROVE  # 2 verified drafts; the 2 screened-out ones ignored


# ------------------------------------------------------------------- linear
def test_linear_follows_newest_and_debugs_with_limit():
    outcome = {"n2": Status.FAILED, "n3": Status.FAILED, "n4": Status.FAILED}
    verify = lambda nid, e, v: (outcome.get(nid, Status.OK), None if nid in outcome else 1.0)
    loop = Loop(LinearStrategy(config=LinearConfig(max_debug_depth=2)), verify=verify)
    steps = [loop.step()[0] for _ in range(5)]
    assert [(e.operator, e.parent_id) for e in steps] == [
        (Operator.IMPROVE, "base"),
        (Operator.IMPROVE, "n1"),
        (Operator.DEBUG, "n2"),
        (Operator.DEBUG, "n3"),
        (Operator.IMPROVE, "n1"),
    ]  # n4 ends two debug steps: back to newest OK


# ------------------------------------------------------------------ islands
def test_islands_rotate_and_migrate_exactly_every_m_rounds():
    cfg = IslandsConfig(n_islands=3, migration_interval=4)
    loop = Loop(IslandsStrategy(random.Random(3), cfg), siblings=True)
    strat = loop.strategy
    assert [e.island for e in strat.ask(loop.view, 3)] == [0, 1, 2]
    for round_no in range(1, 13):
        loop.step(3)
        assert strat.generations == [round_no] * 3
        assert {m.round for m in strat.migrations} == set(range(4, round_no + 1, 4))
    assert len(strat.migrations) == 3 * 3 * 2  # at island-rounds 4, 8, 12: each island to both ring neighbours
    assert {(m.source, m.target) for m in strat.migrations} == {(0, 1), (1, 2), (2, 0), (0, 2), (1, 0), (2, 1)}
    only_next = IslandsStrategy(random.Random(3), IslandsConfig(n_islands=3, migration_targets="next"))
    loop = Loop(only_next)
    loop.run(4, k=3)
    assert {(m.source, m.target) for m in only_next.migrations} == {(0, 1), (1, 2), (2, 0)}


def test_islands_migrate_by_the_most_advanced_island_as_openevolve():
    """M island-rounds counted per island: the first island to reach M since the last migration triggers it."""
    strat = IslandsStrategy(random.Random(0), IslandsConfig(n_islands=3, migration_interval=2, migration_rate=0.5))
    strat.tell(Node("base", None, Operator.BASELINE, Status.OK, fitness=0.0))
    for i, (island, fit) in enumerate([(0, 1.0), (1, 2.0), (0, 3.0)]):
        strat.tell(Node(f"n{i}", "base", Operator.IMPROVE, Status.OK, fitness=fit, island=island))
    assert strat.generations == [2, 1, 0] and strat.last_migration == 2
    by_pair = {(m.source, m.target): m.ids for m in strat.migrations}
    assert by_pair[(0, 1)] == ("n2",) and by_pair[(0, 2)] == ("n2",)  # floor(0.5 * 3) = 1 migrant, both neighbours
    assert by_pair[(1, 0)] == ("n1",) and by_pair[(1, 2)] == ("n1",)
    assert "n2" in strat.members[2] and "n1" in strat.members[2]
    strat.tell(Node("n3", "base", Operator.IMPROVE, Status.FAILED, island=2))  # failures count as island-rounds too
    assert strat.generations == [2, 1, 1] and len(strat.migrations) == 6


def test_islands_record_code_length_for_the_length_feature():
    strat = IslandsStrategy(random.Random(0), IslandsConfig(n_islands=1, features=("length",), bins=4))
    strat.tell(Node("base", None, Operator.BASELINE, Status.OK, fitness=0.0, code_length=1000))
    for i, (length, fit) in enumerate([(1100, 1.0), (1900, 0.5), (1950, 2.0), (1120, 0.1)]):
        strat.tell(
            Node(
                f"n{i}", "base", Operator.IMPROVE, Status.OK, fitness=fit, code_length=length, idea="the same idea text"
            )
        )
    archive = strat.archives[0]
    assert archive.bounds["length"] == (1000.0, 2125.0)  # program lengths (widened by 25%), not idea lengths
    assert archive.elites == {(0,): "n0", (3,): "n2"}
    assert archive.cell_of["n3"] == (0,) and archive.cell_of["n1"] == (3,)


def test_islands_migration_copies_top_members_to_neighbour():
    loop = Loop(IslandsStrategy(random.Random(5), IslandsConfig(n_islands=2, migration_interval=1)))
    loop.step(2)
    strat = loop.strategy
    for m in strat.migrations:
        assert set(m.ids) <= set(strat.members[m.target])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-100, 100, allow_nan=False), min_size=5, max_size=40), st.integers(1, 4))
def test_islands_best_program_always_kept(fitnesses, capacity):
    strat = IslandsStrategy(
        random.Random(0), IslandsConfig(n_islands=2, island_capacity=capacity, features=("score",), bins=2)
    )
    strat.tell(Node("base", None, Operator.BASELINE, Status.OK, fitness=-1000.0))
    for i, f in enumerate(fitnesses):
        strat.tell(Node(f"n{i}", "base", Operator.IMPROVE, Status.OK, fitness=f, island=i % 2))
        best = strat.final(SearchView())
        assert any(best in members for members in strat.members)
        assert all(len(m) <= capacity for m in strat.members)
    assert strat._seen.nodes[strat.final(SearchView())].fitness == max(fitnesses)


def test_islands_parent_sampling_mix_and_inspirations():
    cfg = IslandsConfig(n_islands=1, exploration_ratio=0.2, exploitation_ratio=0.7, elite_ratio=0.1, n_inspirations=3)
    loop = Loop(IslandsStrategy(random.Random(11), cfg), siblings=False)
    loop.run(15)
    modes: Counter[str] = Counter()
    strat = loop.strategy
    for _ in range(600):  # repeated asks without tells use fresh per-ask generators
        for e in strat.ask(loop.view, 1):
            modes[e.note] += 1
            assert e.parent_id in strat.members[0]
            assert e.parent_id not in e.inspiration_ids and len(set(e.inspiration_ids)) == len(e.inspiration_ids)
            assert all(loop.view.nodes[i].ok for i in e.inspiration_ids)
    assert abs(modes["exploration"] / 600 - 0.2) < 0.06
    assert abs(modes["exploitation"] / 600 - 0.7) < 0.06
    assert abs(modes["elite"] / 600 - 0.1) < 0.05


def test_map_elites_keeps_fittest_per_cell_and_tags_axis():
    nodes = [
        Node(f"n{i}", None, Operator.IMPROVE, Status.OK, fitness=float(f), tags=(t,))
        for i, (f, t) in enumerate([(1, "a"), (3, "a"), (2, "b"), (10, "a")])
    ]
    archive = build_archive(nodes, ("tags",), bins=4)
    assert archive.elites == {("a",): "n3", ("b",): "n2"}
    by_score = build_archive(nodes, ("score",), bins=2)
    assert by_score.elites[(1,)] == "n3" and by_score.elites[(0,)] == "n1"


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 15),
            st.floats(-5, 5, allow_nan=False),
            st.integers(0, 3000),
            st.sampled_from(["a", "b"]),
        ),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from([("score", "length"), ("score",), ("length", "tags"), ("score", "val_acc")]),
)
def test_incremental_map_elites_equals_a_rebuild(ops, features):
    archive = IncrementalArchive(features, bins=4)
    members: dict[str, Node] = {}
    for add, key, fitness, length, tag in ops:
        nid = f"n{key}"
        if add and nid not in members:
            node = Node(
                nid,
                None,
                Operator.IMPROVE,
                Status.OK,
                fitness=fitness,
                code_length=length,
                tags=(tag,),
                metrics={"val_acc": fitness / 10},
            )
            members[nid] = node
            archive.add(node)
        elif not add and nid in members:
            del members[nid]
            archive.remove(nid)
        rebuilt = build_archive(list(members.values()), features, bins=4, bounds=archive.bounds)
        assert archive.elites == rebuilt.elites and archive.cell_of == rebuilt.cell_of
        for f, (low, high) in archive.bounds.items():  # sticky bounds cover every value ever added
            assert all(
                low <= (n.fitness if f == "score" else n.code_length if f == "length" else n.metrics[f]) <= high
                for n in members.values()
            )


def test_islands_keep_their_archives_incrementally():
    loop = Loop(IslandsStrategy(random.Random(2), IslandsConfig(island_capacity=8)))
    loop.run(100, k=3)
    strat = loop.strategy
    rebuilds = sum(a.rebuilds for a in strat.archives)
    assert rebuilds < 300 / 5, rebuilds  # re-placing every member is the exception, not one per tell
    for island, ids in enumerate(strat.members):
        archive = strat.archives[island]
        assert list(archive.members) == ids
        nodes = [loop.view.nodes[i] for i in ids]
        assert archive.snapshot() == build_archive(nodes, strat.config.features, strat.config.bins, archive.bounds)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_every_strategy_pickles_and_asks_identically_after_unpickling(name):
    import pickle

    loop = Loop(build_strategy(name, None, random.Random(4)))
    loop.run(20, k=2)
    copy = pickle.loads(pickle.dumps(loop.strategy))
    assert copy.ask(loop.view, 3) == loop.strategy.ask(loop.view, 3)
    for _ in range(10):  # continue both the same way: identical asks all along
        exps = loop.strategy.ask(loop.view, 2)
        assert copy.ask(loop.view, 2) == exps
        n = len(loop.told)
        loop.step(2)
        for node in loop.told[n:]:
            copy.tell(node)
    assert copy.final(loop.view) == loop.strategy.final(loop.view)


# --------------------------------------------------------- resume + registry
@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize("seed", [0, 7])
def test_resume_equivalence(name, seed):
    original = Loop(build_strategy(name, None, random.Random(seed)))
    original.run(25, k=2)
    expected = original.strategy.ask(original.view, 3)  # the first ask after the last tell
    resumed = build_strategy(name, None, random.Random(seed))
    for node in original.told:
        resumed.tell(node)
    assert resumed.ask(original.view, 3) == expected
    # A repeated ask without tells draws from a new per-ask generator, identically in both.
    assert resumed.ask(original.view, 3) == original.strategy.ask(original.view, 3)
    assert resumed.final(original.view) == original.strategy.final(original.view)


def test_registry_errors_name_the_fix():
    with pytest.raises(
        ConfigError, match="strategy.name='beam' is unknown: use 'greedy', 'iid', 'islands', 'linear' or 'mcgs'"
    ):
        build_strategy("beam", None, random.Random(0))
    with pytest.raises(ConfigError, match="n_islandz"):
        build_strategy("islands", STRATEGIES.validate("islands", {"n_islandz": 2}), random.Random(0))
    with pytest.raises(ConfigError, match="sum to 1"):
        build_strategy("islands", STRATEGIES.validate("islands", {"exploration_ratio": 0.5}), random.Random(0))
    with pytest.raises(ConfigError):
        build_strategy("mcgs", STRATEGIES.validate("mcgs", {"tau_branch": "three"}), random.Random(0))
    with pytest.raises(ConfigError, match=r"'mcgs': c0 must be >= c_min, got c0=0.05, c_min=0.1; fix strategy.options"):
        STRATEGIES.validate("mcgs", {"c0": 0.05})
    with pytest.raises(ConfigError, match=r"option w_horizon=-1: .*greater than or equal to 0"):
        STRATEGIES.validate("mcgs", {"w_horizon": -1})
    with pytest.raises(ConfigError, match=r"'iid': unknown option 'x'; it takes no options, so remove it"):
        STRATEGIES.validate("iid", {"x": 1})
    with pytest.raises(ConfigError, match=r"option top_k=0: .*elite set.*fix strategy.options.top_k .*default 5"):
        STRATEGIES.validate("mcgs", {"top_k": 0})
    strat = build_strategy(
        "islands", STRATEGIES.validate("islands", {"n_islands": 4, "features": ["score", "tags"]}), random.Random(0)
    )
    assert isinstance(strat, SearchStrategy) and strat.config.features == ("score", "tags")
    assert strategy_defaults("mcgs")["c0"] == 1.414 and strategy_defaults("greedy")["num_drafts"] == 5
