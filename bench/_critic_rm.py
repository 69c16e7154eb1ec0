"""The reward-model critic (``critic-rm``) half of ``bench/critic_learning.py --backbone minilm``.

Per shipped pool world (affairs_gbm, diabetes, digits_torch) and per split, a head on frozen MiniLM features
(``screen.reward.PairFeaturizer``, ``train.reward.fit_head``: the product's code) is fitted on the split's train
pairs and scored on its bench pairs; texts are the neutral summaries the offline summariser writes for each
point's rendered program (``offline.world_pairs.point_texts``: what a run's critic reads).

Splits (``offline.world_pairs``; ``leaks(split)`` is asserted empty for each):

* ``by run``: earlier runs are ``--earlier-runs`` greedy replays with the random pick (seeds 1000+, budget
  ``--run-budget``, N ``--pool``), each contributing the pairs it paid for (``run_pairs``: verified child vs the
  incumbent it was proposed from); the bench is ``--later-runs`` later replays (seeds 2000+), keeping only pairs
  whose parent and child never occur in training.
* ``by region``: every labelled pair 1..3 moves apart; a region (one dimension's options, ~30% of the points,
  ``region_split_of``) is held out, pairs crossing it are dropped.
* ``across tasks``: train on every pair of the other two worlds, bench on this world's pairs.

Scores (``train.reward.score``): Dir-3 on the bench balanced per label (seeded), base = the prior (train class
shares: its argmax is one class, so 1/3 on a balanced bench); sibling pairwise accuracy on every bench pair of one
parent whose deltas differ by >= 0.01 (base 0.5); paired bootstrap 95% CIs of trained minus base. A learning
curve refits on 50/100/200/all train rows (seeded subsets). CPU-seconds: ``time.process_time`` of encoding and
fitting; steps: lbfgs iterations.

Search (``--search``): greedy replays (``offline.breakeven.compare_arms``) at budgets 12 and 24, N 6, 20 seeds:
random, iid, base (the head trained across tasks), trained on 2 and on ``--earlier-runs`` earlier runs (seeds
disjoint from the evaluation seeds 0..19; the share of the world's points those runs verified is printed, since
on a world of a few hundred points they have seen much of what a later search meets), oracle. The two critic arms rank each pool by the head's
own P(improve/tie/lose) of the rendered texts, through a saved artifact loaded by ``RewardModelCritic``.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from verifyless.node import Candidate, Screening
from verifyless.offline.breakeven import compare_arms, iid_factory, oracle_factory, random_factory
from verifyless.offline.compare import bootstrap_ci, probability_of_improvement
from verifyless.offline.replay import RandomArm, pick_screening, point_index, replay_run
from verifyless.offline.world_pairs import (
    PairSplit,
    TextPair,
    leaks,
    point_key,
    point_texts,
    region_split_of,
    run_pairs,
    split_by_region,
    split_by_run,
    world_pairs,
)
from verifyless.offline.worlds import World, load_worlds, world_paths
from verifyless.outcome import THREE
from verifyless.screen.base import ScreenContext
from verifyless.screen.features import MiniLMTextEncoder
from verifyless.screen.reward import PairFeaturizer, RewardHead, RewardModelCritic, RewardModelOptions, save_head
from verifyless.task import load_task
from verifyless.train.reward import HeadSettings, fit_head, head_arrays, paired_gain, prior_probs, score

WORLDS = Path(__file__).resolve().parents[1] / "src" / "verifyless" / "builtin" / "worlds"


@dataclass
class WorldData:
    world: World
    texts: list[str]
    pairs: list[TextPair]


def load_data(tie: float, max_moves: int) -> dict[str, WorldData]:
    worlds = load_worlds(world_paths(WORLDS))
    out = {}
    for name, world in worlds.items():
        texts = point_texts(world, load_task(name))
        out[name] = WorldData(world, texts, world_pairs(world, texts, max_moves=max_moves, tie=tie))
    return out


def replay_rows(data: WorldData, seeds: Sequence[int], *, budget: int, pool: int, tie: float) -> list[TextPair]:
    """The pairs random-pick greedy runs paid for, one group per seed."""
    rows = []
    for s in seeds:
        run = replay_run(data.world, RandomArm(), budget=budget, n_candidates=pool, seed=s)
        rows += run_pairs(data.world, run.verified, data.texts, group=f"run{s}", tie=tie)
    return rows


def coverage(d: WorldData, args: Any) -> dict[str, float]:
    """Share of the world's points that 2 and ``--earlier-runs`` earlier runs verified (what the head has seen)."""
    out = {}
    for n in (2, args.earlier_runs):
        seen: set[int] = set()
        for s in range(1000, 1000 + n):
            run = replay_run(d.world, RandomArm(), budget=args.run_budget, n_candidates=args.pool, seed=s)
            seen |= set(run.verified)
        out[f"{n} runs"] = len(seen) / len(d.world)
    return out


def splits(name: str, data: dict[str, WorldData], args: Any) -> dict[str, PairSplit]:
    d = data[name]
    earlier = replay_rows(
        d, range(1000, 1000 + args.earlier_runs), budget=args.run_budget, pool=args.pool, tie=args.tie
    )
    later = replay_rows(d, range(2000, 2000 + args.later_runs), budget=args.run_budget, pool=args.pool, tie=args.tie)
    by_run = split_by_run(earlier + later, {p.group for p in later})
    seen = {k for p in earlier for k in (p.parent_key, p.child_key)}
    unseen = tuple(p for p in d.pairs if p.parent_key not in seen and p.child_key not in seen)
    to_unseen = PairSplit(tuple(earlier), unseen, len(d.pairs) - len(unseen), "earlier runs -> unseen world pairs")
    dim, options = region_split_of(d.world, seed=args.seed)
    where = {point_key(d.world, i): str(p.assignment[dim] in options) for i, p in enumerate(d.world.points)}
    by_region = split_by_region(d.pairs, where.__getitem__, ["True"])
    others = tuple(p for n, o in data.items() if n != name for p in o.pairs)
    across = PairSplit(others, tuple(d.pairs), 0, f"across tasks: train {sorted(n for n in data if n != name)}")
    out = {
        "by run": by_run,
        "by run, unseen pairs": to_unseen,
        f"by region ({dim} in {list(options)})": by_region,
        "across tasks": across,
    }
    for s in out.values():
        assert not leaks(s), s.how
    return out


def balanced(rows: Sequence[TextPair], seed: int) -> list[TextPair]:
    rng = random.Random(seed)
    groups = [[r for r in rows if r.label == label] for label in THREE]
    size = min(len(g) for g in groups if g) if any(groups) else 0
    out = [r for g in groups for r in rng.sample(g, min(size, len(g)))]
    rng.shuffle(out)
    return out


def evaluate(featurizer: PairFeaturizer, train: Sequence[TextPair], bench: Sequence[TextPair], args: Any) -> dict:
    """One fit and its scores (see the module docstring)."""
    settings = HeadSettings(C=args.C)
    started = time.process_time()
    head = fit_head(featurizer, train, settings)
    fit_cpu = time.process_time() - started
    bal = balanced(bench, args.seed)
    x = featurizer.transform([(p.parent_text, p.child_text) for p in bench])
    xb = featurizer.transform([(p.parent_text, p.child_text) for p in bal])
    t_all, t_bal = score(head.probs(x), bench), score(head.probs(xb), bal)
    b_all, b_bal = score(prior_probs(train, len(bench)), bench), score(prior_probs(train, len(bal)), bal)
    return {
        "train": len(train),
        "bench": len(bench),
        "bench_balanced": len(bal),
        "cpu_s": fit_cpu,
        "steps": head.steps,
        "dir3": t_bal.dir3,
        "dir3_base": b_bal.dir3,
        "dir3_gain": paired_gain(t_bal.hits, b_bal.hits),
        "dir3_all": t_all.dir3,
        "dir3_all_base": b_all.dir3,
        "dir3_all_gain": paired_gain(t_all.hits, b_all.hits),
        "pairwise": t_all.pairwise,
        "pairwise_ci": t_all.pairwise_ci,
        "pairs": t_all.pairs,
        "pairwise_gain": paired_gain(t_all.pair_hits, b_all.pair_hits),
        "head": head,
    }


def learning_curve(featurizer: PairFeaturizer, split: PairSplit, sizes: Sequence[int], args: Any) -> list[dict]:
    rows = []
    for n in [*[s for s in sizes if s < len(split.train)], len(split.train)]:
        train = random.Random(args.seed + n).sample(list(split.train), n)
        if len({p.label for p in train}) < 2 or not split.bench:
            continue
        r = evaluate(featurizer, train, split.bench, args)
        rows.append({"rows": n, **{k: v for k, v in r.items() if k != "head"}})
    return rows


# ------------------------------------------------------------------ search


class TextArm:
    """A replay screener: the pick with the highest 2 P(improve) + P(tie) of the reward-model critic over the
    points' rendered texts (probabilities cached per pair; first of equals)."""

    def __init__(self, critic: RewardModelCritic, texts: Sequence[str], name: str, cache: dict) -> None:
        self.critic, self.texts, self.name, self.cache = critic, texts, name, cache

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        parent = point_index(str(ctx.parent.id))
        todo = [point_index(c.id) for c in candidates if (parent, point_index(c.id)) not in self.cache]
        if todo:
            probs = self.critic.distributions(self.texts[parent], [self.texts[i] for i in todo])
            for i, p in zip(todo, probs, strict=True):
                self.cache[(parent, i)] = float(2 * p[0] + p[1])
        values = [self.cache[(parent, point_index(c.id))] for c in candidates]
        j = max(range(len(values)), key=lambda t: (values[t], -t))
        return pick_screening(self.name, candidates, j, ctx, started, values)


def saved_critic(head: RewardHead, folder: Path, encoder: Any) -> RewardModelCritic:
    save_head(folder, head_arrays(head), {"features": head.features, "encoder": head.encoder})
    return RewardModelCritic(RewardModelOptions(path=str(folder), encoder=encoder))


def search(d: WorldData, heads: dict[str, RewardHead], encoder: Any, args: Any) -> dict[int, dict[str, Any]]:
    """Per budget: the replay runs of every arm on seeds 0..seeds-1, and their summary rows."""
    out: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        critics = {n: saved_critic(h, Path(tmp) / n.replace(" ", "-"), encoder) for n, h in heads.items()}
        caches: dict[str, dict] = {n: {} for n in critics}
        arms: dict[str, Any] = {"random": random_factory, "iid": iid_factory}
        for n, critic in critics.items():
            arms[n] = lambda w, s, c=critic, n=n: TextArm(c, d.texts, n, caches[n])
        arms["oracle"] = oracle_factory
        for budget in args.budgets:
            runs = compare_arms(d.world, arms, budget=budget, n_candidates=args.pool, seeds=range(args.seeds))
            out[budget] = {"rows": search_rows(runs, budget)}
    return out


def _interval(e: Any) -> dict[str, float | None]:
    return {"low": e.low, "high": e.high}


def search_rows(runs: dict[str, list[Any]], budget: int) -> list[dict[str, Any]]:
    base = {r.seed: r for r in runs["random"]}
    rows = []
    for arm, rs in runs.items():
        finals = [r.final for r in rs]
        reach = [r.reach(base[r.seed].final) for r in rs]
        to_reach = [v if v is not None else budget for v in reach]
        est = bootstrap_ci(finals)
        p = (
            None
            if arm == "random"
            else probability_of_improvement({"w": finals}, {"w": [r.final for r in runs["random"]]})
        )
        rows.append(
            {
                "arm": arm,
                "final": est.value,
                "final_ci": (est.low, est.high),
                "reach_mean": statistics.fmean(to_reach),
                "reach_ci": _interval(bootstrap_ci(to_reach)),
                "reached": sum(v is not None for v in reach),
                "n": len(rs),
                "p_beat_random": None if p is None else (p.value, p.low, p.high),
            }
        )
    return rows


# ------------------------------------------------------------------ main


def run(args: Any) -> dict[str, Any]:
    started_wall, started_cpu = time.monotonic(), time.process_time()
    data = load_data(args.tie, args.max_moves)
    encoder = MiniLMTextEncoder()
    featurizer = PairFeaturizer(encoder, "sentence-diff")
    texts = list(dict.fromkeys(t for d in data.values() for t in d.texts))
    featurizer.transform([(t, t) for t in texts])  # every sentence of every world, once
    encode_cpu = time.process_time() - started_cpu
    result: dict[str, Any] = {"encode_cpu_s": encode_cpu, "worlds": {}}
    for name in data:
        per: dict[str, Any] = {}
        heads = {}
        for split_name, split in splits(name, data, args).items():
            if not split.bench or len({p.label for p in split.train}) < 2:
                per[split_name] = {"note": "empty bench or one label", "dropped": split.dropped}
                continue
            r = evaluate(featurizer, split.train, split.bench, args)
            heads[split_name] = r.pop("head")
            r["dropped"] = split.dropped
            r["curve"] = learning_curve(featurizer, split, args.sizes, args)
            per[split_name] = r
            print(f"{name} / {split_name}: {fmt_row(r)}", flush=True)
        result["worlds"][name] = {"splits": per}
        if args.search:
            chosen = {"base (across tasks)": heads["across tasks"]}
            few = replay_rows(data[name], range(1000, 1002), budget=args.run_budget, pool=args.pool, tie=args.tie)
            if len({p.label for p in few}) >= 2:
                chosen["trained (2 earlier runs)"] = fit_head(featurizer, few, HeadSettings(C=args.C))
            chosen[f"trained ({args.earlier_runs} earlier runs)"] = heads["by run, unseen pairs"]
            result["worlds"][name]["coverage"] = coverage(data[name], args)
            result["worlds"][name]["search"] = search(data[name], chosen, encoder, args)
            print(f"{name} search done", flush=True)
    result["cpu_s"] = time.process_time() - started_cpu
    result["wall_s"] = time.monotonic() - started_wall
    return result


def fmt(x: float | None, d: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and x != x) else f"{x:.{d}f}"


def ci(g: dict) -> str:
    return f"{fmt(g['diff'], 3)} [{fmt(g['lo'], 3)}, {fmt(g['hi'], 3)}]"


def fmt_row(r: dict) -> str:
    lo, hi = r["pairwise_ci"]
    return (
        f"train {r['train']}, bench {r['bench']} ({r['bench_balanced']} balanced, {r['dropped']} dropped), "
        f"Dir-3 {fmt(r['dir3'])} vs base {fmt(r['dir3_base'])} (gain {ci(r['dir3_gain'])}), "
        f"pairwise {fmt(r['pairwise'])} [{fmt(lo)}, {fmt(hi)}] n={r['pairs']}"
    )


def report(result: dict[str, Any]) -> str:
    lines = [
        "| world | split | train / bench pairs (dropped) | fit CPU s / lbfgs steps | Dir-3 balanced trained / base | gain [95% CI] "
        "| Dir-3 all rows trained / majority | gain [95% CI] | pairwise trained [95% CI] (pairs) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, w in result["worlds"].items():
        for split, r in w["splits"].items():
            if "note" in r:
                lines.append(f"| {name} | {split} | {r['note']} ({r['dropped']} dropped) | | | | | | |")
                continue
            lo, hi = r["pairwise_ci"]
            lines.append(
                f"| {name} | {split} | {r['train']} / {r['bench']} ({r['dropped']}) | {r['cpu_s']:.1f} / {r['steps']} | "
                f"{fmt(r['dir3'])} / {fmt(r['dir3_base'])} | {ci(r['dir3_gain'])} | "
                f"{fmt(r['dir3_all'])} / {fmt(r['dir3_all_base'])} | {ci(r['dir3_all_gain'])} | "
                f"{fmt(r['pairwise'])} [{fmt(lo)}, {fmt(hi)}] ({r['pairs']}) |"
            )
    lines += [
        "",
        "| world | split | train rows | Dir-3 | Dir-3 gain [95% CI] | pairwise [95% CI] |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, w in result["worlds"].items():
        for split, r in w["splits"].items():
            for c in r.get("curve", []):
                lo, hi = c["pairwise_ci"]
                lines.append(
                    f"| {name} | {split} | {c['rows']} | {fmt(c['dir3'])} | {ci(c['dir3_gain'])} | "
                    f"{fmt(c['pairwise'])} [{fmt(lo)}, {fmt(hi)}] |"
                )
    for name, w in result["worlds"].items():
        for budget, s in (w.get("search") or {}).items():
            seen = ", ".join(f"{k} {v:.0%}" for k, v in (w.get("coverage") or {}).items())
            lines += [
                "",
                f"{name}, budget {budget} (world points verified by the earlier runs: {seen}):",
                "",
                "| arm | final [95% CI] | verifications to reach random's final (mean [95% CI]) | reached | P(beat random) [95% CI] |",
                "| --- | --- | --- | --- | --- |",
            ]
            for r in s["rows"]:
                p = r["p_beat_random"]
                pr = "-" if p is None else f"{fmt(p[0], 2)} [{fmt(p[1], 2)}, {fmt(p[2], 2)}]"
                rc = r["reach_ci"] or {}
                lines.append(
                    f"| {r['arm']} | {fmt(r['final'], 4)} [{fmt(r['final_ci'][0], 4)}, {fmt(r['final_ci'][1], 4)}] | "
                    f"{fmt(r['reach_mean'], 1)} [{fmt(rc.get('low'), 1)}, {fmt(rc.get('high'), 1)}] | "
                    f"{r['reached']}/{r['n']} | {pr} |"
                )
    return "\n".join(lines)


def summary_json(result: dict[str, Any]) -> dict[str, Any]:
    """``result`` without numpy values (for result.json)."""

    def clean(x: Any) -> Any:
        if isinstance(x, dict):
            return {str(k): clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        if isinstance(x, (np.floating, np.integer)):
            return x.item()
        return x

    return clean(result)
