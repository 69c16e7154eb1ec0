"""Reward-model critic (``critic-rm``): a small trained head over frozen MiniLM embeddings of the critic's texts.

The critic reads what the pointwise critic's prompt holds about the change: the parent's and the child's neutral
summaries (``critic.parent_text`` / ``critic.child_text``). Both are cut into sentences; the features of a pair
(``PairFeaturizer``, kind ``sentence-diff``) are the sum of the MiniLM embeddings of the sentences only the child
has minus the sum of those only the parent has, so the head sees what changed and not the whole program again
(kind ``whole``: the embedding of the child's whole text minus the parent's, measured worse; docs/benchmarks.md).
A multinomial logistic head (trained by ``verifyless train critic-rm``, ``train/reward.py``) turns the features
into P(improve), P(tie), P(lose).

Per candidate the evidence is the distribution as ``votes``, u = 1 - max P (routed with the engine's threshold),
``rank_value`` = 2 P(improve) + P(tie) (as ``critic-probs``), one "vote" (``n_valid = 1``: the readout is
deterministic, so there is no k), and ``detail`` with ``label_probs``, ``scoring: "reward-model"`` and
``weights``, the artifact's tag ``<folder>@<sha256 prefix of head.npz>``. The tag is recorded in the run's config
(``critic_pins``, resolved by the composition root before the run is created) and shown by ``verifyless show``; a run resumed or replayed on an
artifact whose weights changed is a ``ConfigError``.

Artifact folder: ``head.npz`` (``classes``, ``coef``, ``intercept``, ``mean``, ``scale``) and ``card.json`` (feature
kind, text encoder -- ``minilm`` by default, ``hashing`` for tests and machines without torch --, training data,
held-out metrics). Limits: sentences are split on ``. ``/``! ``/``? ``; summaries
that share no sentence with their parent (LLM-written ones) compare as wholes, where the head has seen less.

**Learning in the run** (issue 45). Without ``path`` the critic starts from a ``WarmHead`` (fitted by the
composition root on the store's earlier runs of the same task, ``train/warm.py``; its record is a blob of the
run store named by the ``warm`` option) or cold (``warm: cold``: no earlier run). With ``refit`` (the default) it
is an ``OutcomeObserver``: each paid outcome of the run becomes a labelled pair (``outcome.reward_label``: a
failed child is ``lose``), and the head is refitted on the warm pairs plus the run's first ``p`` pairs, where
``p`` is the last point of ``refit_points`` at or below the pairs observed (``min_pairs``, then steps of
``max(2, p // 4)``: about a dozen fits in 50 verifications). The head at a screening is therefore a function of
the outcomes told so far, in tell order: a resume, which tells them again in the same order, and a replay get the
same heads. Until a head exists (cold, fewer than ``min_pairs`` pairs or one label only) the ranking is a
``ctx.rng`` shuffle, every u is 1 and ``detail.reason`` says "cold start". A head from ``path`` is used as it is
(``refit`` does not apply: its training pairs are not in the run).

**Do no harm before learning** (issue 55). With ``gate: evidence`` (what a new run records) a head learnt in the
run ranks only once its record on the run's own paid outcomes is credibly above chance (``screen/gate.py``: each
told outcome is first scored by the head fitted before it, and a one-sided test of its pairwise accuracy on the
run's paid sibling pairs opens the gate; a warm head whose held-out check said "helps" starts open). Until then the critic abstains:
the random screener's ``ctx.rng`` shuffle, ``detail.reason`` says so and ``detail.gate`` holds the state, the
statistic and when it switched. ``probe`` ranks by the head whatever the gate (the adaptive safety net's canaries
measure the head, not its gate); ``abstaining`` tells the net that a pick is random (no audit then).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field, model_validator

from verifyless.errors import ConfigError
from verifyless.events import EventRecord, WarmStarted
from verifyless.node import Candidate, Evidence, Screening
from verifyless.outcome import THREE, Outcome, reward_label
from verifyless.screen.base import ScreenContext, choose_top
from verifyless.screen.critic import child_text, parent_text
from verifyless.screen.features import FeatureKind as EncoderKind
from verifyless.screen.features import MiniLMTextEncoder, TextEncoder, make_text_encoder
from verifyless.screen.gate import RankGate
from verifyless.screen.options import BaseOptions
from verifyless.screen.ranking import order_by_value, route
from verifyless.task.identity import TaskIdentity, same_identity

HEAD = "head.npz"
CARD = "card.json"
FeatureKind = Literal["sentence-diff", "whole"]
FEATURE_KINDS: tuple[str, ...] = ("sentence-diff", "whole")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` followed by white space; empty pieces dropped."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


class PairFeaturizer:
    """(parent text, child text) pairs -> feature rows; each distinct text is encoded once (cached)."""

    def __init__(self, encoder: TextEncoder, kind: str = "sentence-diff") -> None:
        if kind not in FEATURE_KINDS:
            raise ConfigError(f"unknown reward-model features {kind!r}; use one of {', '.join(FEATURE_KINDS)}")
        self.encoder, self.kind = encoder, kind
        self._cache: dict[str, np.ndarray] = {}
        self._rows: dict[tuple[str, str], np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One embedding row per text (encoded in one batch for the texts not seen before)."""
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if new:
            self._cache.update(zip(new, self.encoder.encode(new), strict=True))
        return np.array([self._cache[t] for t in texts]).reshape(len(texts), self.encoder.dim)

    def _sum(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts).sum(axis=0) if texts else np.zeros(self.encoder.dim)

    def row(self, parent: str, child: str) -> np.ndarray:
        """The feature row of one pair (cached)."""
        key = (parent, child)
        if key not in self._rows:
            self._rows[key] = self._row(parent, child)
        return self._rows[key]

    def _row(self, parent: str, child: str) -> np.ndarray:
        if self.kind == "whole":
            both = self.embed([parent, child])
            return both[1] - both[0]
        ps, cs = sentences(parent), sentences(child)
        only_child = [s for s in cs if s not in ps]
        only_parent = [s for s in ps if s not in cs]
        return self._sum(only_child) - self._sum(only_parent)

    def texts_of(self, parent: str, child: str) -> list[str]:
        """The texts a pair's row is made of (its sentences, or the two whole texts)."""
        return [parent, child] if self.kind == "whole" else [*sentences(parent), *sentences(child)]

    def transform(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """Shape ``(len(pairs), encoder.dim)``."""
        self.embed(list(dict.fromkeys(t for p, c in pairs for t in self.texts_of(p, c))))
        return np.array([self.row(p, c) for p, c in pairs]).reshape(len(pairs), self.encoder.dim)


@dataclass(frozen=True)
class RewardHead:
    """A trained head: standardisation, multinomial logistic weights (rows in ``THREE`` order), its card and tag."""

    coef: np.ndarray
    intercept: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    features: str
    tag: str
    encoder: str = "minilm"
    card: Mapping[str, Any] = field(default_factory=dict)
    steps: int = 0  # optimiser iterations of the fit that made it (0 when loaded)

    def probs(self, x: np.ndarray) -> np.ndarray:
        """P(improve, tie, lose) per feature row (softmax of the logistic scores)."""
        z = ((x - self.mean) / self.scale) @ self.coef.T + self.intercept
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return np.asarray(e / e.sum(axis=1, keepdims=True))


def head_tag(folder: str | Path) -> str:
    """``<folder name>@<sha256 prefix of head.npz>`` (as ``model.local.adapter_tag`` names adapters)."""
    path = Path(folder)
    weights = path / HEAD
    if not weights.is_file():
        raise ConfigError(
            f"reward-model critic folder {str(path)!r} has no {HEAD}; train one with "
            "`verifyless train critic-rm TASK --store STORE --out DIR`"
        )
    return f"{path.name}@{hashlib.sha256(weights.read_bytes()).hexdigest()[:16]}"


def load_head(folder: str | Path) -> RewardHead:
    """The head stored in ``folder`` (``ConfigError`` naming the fix when it is missing or malformed)."""
    tag = head_tag(folder)
    path = Path(folder)
    try:
        with np.load(path / HEAD, allow_pickle=False) as z:
            classes = [str(c) for c in z["classes"]]
            order = [classes.index(c) for c in THREE]
            arrays = {k: np.asarray(z[k], dtype=float) for k in ("coef", "intercept", "mean", "scale")}
        card = json.loads((path / CARD).read_text()) if (path / CARD).is_file() else {}
    except (KeyError, ValueError, OSError) as exc:
        raise ConfigError(f"{path / HEAD} is not a reward-model head ({exc}); train it again") from exc
    return RewardHead(
        arrays["coef"][order],
        arrays["intercept"][order],
        arrays["mean"],
        arrays["scale"],
        str(card.get("features", "sentence-diff")),
        tag,
        str(card.get("encoder", "minilm")),
        card,
    )


def save_head(out: str | Path, arrays: Mapping[str, np.ndarray], card: Mapping[str, Any]) -> str:
    """Write ``head.npz`` (``arrays``: classes, coef, intercept, mean, scale) and ``card.json`` into ``out``
    (the head through a temporary file and a rename); the new tag."""
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".npz")
    with os.fdopen(fd, "wb") as fh:
        np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
    os.replace(tmp, folder / HEAD)
    tag = head_tag(folder)
    (folder / CARD).write_text(json.dumps({**card, "weights": tag}, indent=2, default=str))
    return tag


@dataclass(frozen=True)
class HeadSettings:
    """How a head is fitted (``train/reward.py``'s module docstring says why these values)."""

    C: float = 0.1
    features: str = "sentence-diff"
    encoder: str = "minilm"  # or "hashing" (no torch; tests)
    max_iter: int = 2000
    gap: float = 0.01  # sibling pairs whose deltas differ by less are near-ties, left out of pairwise accuracy


class LabelledText(Protocol):
    """What a head is fitted on: the two texts and the three-way label (``offline.world_pairs.TextPair``, or
    ``TextLabel`` below)."""

    @property
    def parent_text(self) -> str: ...

    @property
    def child_text(self) -> str: ...

    @property
    def label(self) -> str: ...


@dataclass(frozen=True)
class TextLabel:
    """One labelled pair a critic learns from (the run's own, or a warm start's)."""

    parent_text: str
    child_text: str
    label: str


def fit_head(featurizer: PairFeaturizer, pairs: Sequence[LabelledText], settings: HeadSettings) -> RewardHead:
    """A head fitted on ``pairs`` (in memory, tag ``unsaved``); classes absent from ``pairs`` get probability 0.

    Standardised features, then scikit-learn's multinomial ``LogisticRegression`` (L2, ``C``, balanced class
    weights so a rare class is not ignored). Deterministic for the same pairs in the same order."""
    from sklearn.linear_model import LogisticRegression

    labels = sorted({p.label for p in pairs})
    if len(labels) < 2:
        raise ConfigError(f"critic data needs two labels at least, these {len(pairs)} pairs hold only {labels}")
    x = featurizer.transform([(p.parent_text, p.child_text) for p in pairs])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale[scale == 0] = 1.0
    model = LogisticRegression(C=settings.C, max_iter=settings.max_iter, class_weight="balanced")
    model.fit((x - mean) / scale, [p.label for p in pairs])
    coef, intercept = _three_rows(model, x.shape[1])
    steps = int(np.max(model.n_iter_))
    return RewardHead(coef, intercept, mean, scale, settings.features, "unsaved", settings.encoder, steps=steps)


def _three_rows(model: Any, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The model's weights as rows in ``THREE`` order; a class it never saw gets a -inf-like bias."""
    classes = [str(c) for c in model.classes_]
    coef, intercept = np.zeros((3, dim)), np.full(3, -1e9)
    if len(classes) == 2:  # sklearn keeps one row for two classes: score(second) - score(first)
        rows = {classes[0]: -0.5 * model.coef_[0], classes[1]: 0.5 * model.coef_[0]}
        bias = {classes[0]: -0.5 * model.intercept_[0], classes[1]: 0.5 * model.intercept_[0]}
    else:
        rows = dict(zip(classes, model.coef_, strict=True))
        bias = dict(zip(classes, model.intercept_, strict=True))
    for i, label in enumerate(THREE):
        if label in rows:
            coef[i], intercept[i] = rows[label], bias[label]
    return coef, intercept


def head_arrays(head: RewardHead) -> dict[str, np.ndarray]:
    return {
        "classes": np.array(THREE),
        "coef": head.coef,
        "intercept": head.intercept,
        "mean": head.mean,
        "scale": head.scale,
    }


def arrays_tag(prefix: str, head: RewardHead) -> str:
    """``<prefix>@<sha256 prefix of the head's weights>``: the tag of a head that lives in a run, not a folder."""
    digest = hashlib.sha256()
    for a in (head.coef, head.intercept, head.mean, head.scale):
        digest.update(np.ascontiguousarray(a, dtype=np.float64).tobytes())
    return f"{prefix}@{digest.hexdigest()[:16]}"


def refit_points(min_pairs: int, upto: int) -> list[int]:
    """The pair counts at which a learning critic refits: ``min_pairs``, then steps of ``max(2, p // 4)``."""
    points, p = [], max(1, min_pairs)
    while p <= upto:
        points.append(p)
        p += max(2, p // 4)
    return points


@dataclass(frozen=True)
class WarmHead:
    """A head fitted at a run's start on the store's earlier runs of its task, as the run records it.

    ``record`` is the JSON-ready blob the run store keeps (``train/warm.py``: the pairs with their run and node
    ids, the head's weights, the held-out check and the verdict); ``digest`` is that blob's hash, which the run's
    configuration pins (``warm``), so a resume or a replay rebuilds this very head instead of fitting another."""

    head: RewardHead
    pairs: tuple[TextLabel, ...]
    digest: str
    record: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def tag(self) -> str:
        return self.head.tag

    @classmethod
    def from_record(cls, record: Mapping[str, Any], digest: str) -> WarmHead:
        h = record["head"]
        head = RewardHead(
            np.asarray(h["coef"], dtype=float),
            np.asarray(h["intercept"], dtype=float),
            np.asarray(h["mean"], dtype=float),
            np.asarray(h["scale"], dtype=float),
            str(h["features"]),
            str(record["tag"]),
            str(h["encoder"]),
            card=record,
        )
        pairs = tuple(TextLabel(p["parent_text"], p["child_text"], p["label"]) for p in record["pairs"])
        return cls(head, pairs, digest, record)


def warm_event(warm: WarmHead) -> WarmStarted:
    """The ``warm_start`` event: what the head is and what it was fitted on (the texts stay in the blob)."""
    r = warm.record
    keep = ("run_id", "parent", "child", "label", "delta")
    return WarmStarted(
        tag=warm.tag,
        blob=warm.digest,
        runs=tuple(r.get("runs", [])),
        pairs=tuple({k: p.get(k) for k in keep} for p in r.get("pairs", [])),
        held_out=r.get("held_out"),
        verdict=r.get("verdict"),
        line=r.get("line"),
        seconds=r.get("seconds"),
    )


def head_record(head: RewardHead) -> dict[str, Any]:
    """A head's weights as JSON lists (``WarmHead.from_record`` reads them back bit for bit: floats round-trip)."""
    return {
        "coef": head.coef.tolist(),
        "intercept": head.intercept.tolist(),
        "mean": head.mean.tolist(),
        "scale": head.scale.tolist(),
        "features": head.features,
        "encoder": head.encoder,
    }


COLD = "cold"
GATES: tuple[str, ...] = ("evidence", "always")


class RewardModelOptions(BaseOptions):
    path: str | None = Field(
        None,
        description="folder of a trained reward-model critic (verifyless train critic-rm); none: learn in the run, "
        "warm-started from the store's earlier runs of the task (screener.warm_start)",
    )
    weights: str | None = Field(
        None,
        description="the artifact's tag <folder>@<sha256 prefix>; recorded by the run, a mismatch is an error",
    )
    warm: str | None = Field(
        None,
        description="recorded by the run, not set by hand: the run store blob holding the warm start (its pairs and "
        "head), or 'cold' when the run started without one",
    )
    refit: bool = Field(True, description="refit the head on the run's own paid outcomes as they arrive")
    min_pairs: int = Field(4, ge=2, description="paid pairs before a cold critic fits its first head (and refits)")
    encoder: EncoderKind = Field(
        "auto",
        description="text encoder of a critic learnt in the run: minilm, hashing (no torch), auto "
        "($VERIFYLESS_CRITIC_ENCODER if set, else minilm when installed, else hashing); recorded by the run",
    )
    C: float = Field(0.1, gt=0.0, description="inverse L2 strength of the head's logistic regression")
    force: bool = Field(
        False, description="use a head trained on another task (heads do not transfer: measured worse than random)"
    )
    gate: Literal["evidence", "always"] | None = Field(
        None,
        description="when a head learnt in the run ranks: evidence (random picks until its record on the run's own "
        "paid outcomes is credibly above chance, screen/gate.py), always (whenever a head exists); recorded by a "
        "new run (evidence); unset, as in runs stored before it: always",
    )

    @model_validator(mode="after")
    def _path_or_learn(self) -> RewardModelOptions:
        if self.path is not None and self.warm not in (None, COLD):
            raise ValueError("a head from path and a warm start exclude each other: give path, or neither")
        return self


def resolve_encoder(kind: str) -> str:
    """What ``encoder: auto`` means here (module docstring of ``RewardModelOptions.encoder``)."""
    if kind != "auto":
        return kind
    chosen = os.environ.get("VERIFYLESS_CRITIC_ENCODER", "").strip().lower()
    if chosen:
        if chosen not in ("minilm", "hashing"):
            raise ConfigError(
                f"VERIFYLESS_CRITIC_ENCODER={chosen!r} is not an encoder: use 'minilm' or 'hashing', or unset it"
            )
        return chosen
    return "minilm" if MiniLMTextEncoder.available() else "hashing"


def critic_pins(options: RewardModelOptions, warm: WarmHead | None) -> dict[str, Any]:
    """The options a ``critic-rm`` built from ``options`` (and the warm head ``warm``) resolves, as its run records
    them: ``weights`` (the folder's ``head_tag``) for a trained head at ``path``; else ``warm`` (the warm head's
    digest, or ``cold``) and ``encoder`` (the warm head's, else ``resolve_encoder``'s). The composition root asks
    for them before it builds anything (``wiring.resolve``); the critic keeps the same dict as ``pins``."""
    if options.path is not None:
        return {"weights": head_tag(options.path)}
    encoder = warm.head.encoder if warm is not None else resolve_encoder(options.encoder)
    pins: dict[str, Any] = {"warm": warm.digest if warm is not None else COLD, "encoder": encoder}
    if options.warm is None:  # a new run (a stored one recorded its warm start): the gate is on unless set
        pins["gate"] = options.gate or "evidence"
    elif options.gate is not None:
        pins["gate"] = options.gate
    return pins


class RewardModelCritic:
    """Ranks candidates by a head's P(improve/tie/lose) of the parent -> child texts (module docstring): a trained
    head from ``path``, or a head learnt in the run (warm-started or cold, refitted on the run's paid outcomes)."""

    def __init__(
        self,
        options: RewardModelOptions | None = None,
        *,
        warm: WarmHead | None = None,
        task: TaskIdentity | None = None,
        route_threshold: float = 0.25,
        text_encoder: TextEncoder | None = None,
    ) -> None:
        """Built from its options whole (``RewardModelOptions``); ``warm`` is the head the options' ``warm`` digest
        names (resolved by the composition root), ``task`` the run's task, ``route_threshold`` the engine's."""
        self.options = opts = options or RewardModelOptions()
        path, weights = opts.path, opts.weights
        self.name, self.n_verify, self.route_threshold = opts.name or "critic-rm", opts.n_verify, route_threshold
        self.warm, self.min_pairs = warm, opts.min_pairs
        self.head: RewardHead | None = load_head(path) if path is not None else warm.head if warm else None
        if path is not None and self.head is not None:
            _check_task(path, self.head, task, opts.force)
        if weights is not None and self.head is not None and weights != self.head.tag:
            where = repr(path) if path is not None else "the warm start"
            raise ConfigError(
                f"the reward-model critic at {where} is {self.head.tag}, but the run recorded {weights}: "
                "restore that artifact, or start a new run"
            )
        kind = self.head.encoder if self.head is not None else resolve_encoder(opts.encoder)
        self.refit = opts.refit and path is None  # a folder's head is used as it is
        self.settings = HeadSettings(C=opts.C, encoder=kind)
        text = text_encoder or make_text_encoder(kind)  # type: ignore[arg-type]
        if self.head is not None and text.dim != self.head.coef.shape[1]:
            raise ConfigError(
                f"{path or 'the warm start'!r}: its head expects {self.head.coef.shape[1]} features, "
                f"the encoder gives {text.dim}"
            )
        self.featurizer = PairFeaturizer(text, self.head.features if self.head else self.settings.features)
        self.base = self.head  # the head the run started with (None: cold)
        self.own: list[TextLabel] = []  # the run's paid pairs, in tell order
        self.fitted_on = 0  # own pairs the current head was fitted on
        self.refits: list[dict[str, Any]] = []  # per refit: pairs, seconds
        self.pins = critic_pins(opts, warm)
        # the gate (screen/gate.py): only a head learnt in the run waits for its evidence
        self.gate = RankGate.from_check(warm.record.get("verdict") if warm else None) if self.gated else None

    def start_events(self) -> list[EventRecord]:
        """Events a new run stores before its first round: the warm start, when there is one (``warm_event``)."""
        return [warm_event(self.warm)] if self.warm is not None else []

    # ------------------------------------------------------------------ learning in the run

    @property
    def gated(self) -> bool:
        """Whether the head ranks only once its record in the run says it helps (``gate: evidence``, learning)."""
        return self.refit and self.options.gate == "evidence"

    @property
    def abstaining(self) -> bool:
        """Whether a gated critic's next screening is a random pick (no head yet, or the gate is closed)."""
        return self.gate is not None and (self.current() is None or not self.gate.open)

    def observe(self, outcome: Outcome) -> None:
        """Keep the paid outcome as a labelled pair (``reward_label``; none for a child without a parent score);
        under the gate, score it first with the head fitted before it (a held-out prediction, ``screen/gate.py``)."""
        if not self.refit:
            return
        label = reward_label(outcome)
        if label is None or (outcome.parent_fitness is None and not outcome.failed):
            return
        pair = TextLabel(outcome.parent_summary, outcome.child_summary, label)
        if self.gate is not None:
            head = self.current()
            score = None
            if head is not None:
                probs = head.probs(self.featurizer.transform([(pair.parent_text, pair.child_text)]))[0]
                score = float(2.0 * probs[0] + probs[1])  # rank_value, THREE order: improve, tie, lose
            self.gate.add(score, outcome.parent_id, None if outcome.failed else outcome.child_fitness)
        self.own.append(pair)

    def current(self) -> RewardHead | None:
        """The head for the next screening: refitted when the pairs observed passed a new ``refit_points`` point."""
        if not self.refit:
            return self.head
        points = refit_points(self.min_pairs, len(self.own))
        due = points[-1] if points else 0
        if due > self.fitted_on:
            pairs = [*(self.warm.pairs if self.warm else ()), *self.own[:due]]
            if len({p.label for p in pairs}) >= 2:
                started = time.process_time()
                fitted = fit_head(self.featurizer, pairs, self.settings)
                base = self.base.tag if self.base is not None else COLD
                self.head = replace(fitted, tag=f"{base}+{due}")
                self.refits.append({"pairs": len(pairs), "own": due, "cpu_s": time.process_time() - started})
            self.fitted_on = due
        return self.head

    @property
    def learns(self) -> bool:
        """Whether paid outcomes change this critic (the adaptive wrapper then keeps its holdout from it)."""
        return self.refit

    @property
    def refit_seconds(self) -> float:
        """CPU seconds this critic spent refitting (the encoding of texts it screened anyway is not counted)."""
        return sum(r["cpu_s"] for r in self.refits)

    # ------------------------------------------------------------------ screening

    def distributions(self, parent: str, children: Sequence[str]) -> np.ndarray:
        """P(improve, tie, lose) of each child text against ``parent`` (rows in ``THREE`` order)."""
        head = self.current()
        if head is None:
            raise ValueError("the critic has no head yet (cold start)")
        return head.probs(self.featurizer.transform([(parent, c) for c in children]))

    def evidence(self, candidate_id: str, probs: Sequence[float], head: RewardHead) -> Evidence:
        votes = {v: float(p) for v, p in zip(THREE, probs, strict=True)}
        u = 1.0 - max(votes.values())
        detail: dict[str, Any] = {
            "label_probs": votes,
            "scoring": "reward-model",
            "weights": head.tag,
            "uncertain": route(u, self.route_threshold),
            "route_threshold": self.route_threshold,
        }
        if self.gate is not None:
            detail["gate"] = self.gate.note()
        return Evidence(candidate_id, 2.0 * votes["improve"] + votes["tie"], (), votes, u, 1, 0, detail)

    def cold(self, candidate_id: str, position: int, n: int, head: RewardHead | None) -> Evidence:
        """The evidence of a random pick: cold (no head yet) or abstaining (the gate is closed)."""
        if head is None:
            need = f"{len(self.own)} of {self.min_pairs} paid pairs with two outcomes" if self.refit else "no head"
            why, tag = f"cold start: {need}", COLD
        else:
            why, tag = self.gate.reason() if self.gate is not None else "abstaining", head.tag
        detail: dict[str, Any] = {"scoring": "reward-model", "weights": tag, "reason": why, "uncertain": True}
        if self.gate is not None:
            detail["gate"] = self.gate.note()
        return Evidence(candidate_id, float(n - position), (), {}, 1.0, 0, 0, detail)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        """Rank by the head; a random pick (``ctx.rng`` shuffle, as ``random``) while cold or abstaining."""
        head = self.current()
        return await self.rank(ctx, candidates, None if self.abstaining else head, head)

    async def probe(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        """A screening that measures the head, gate or not (the safety net's canaries: they test what the head
        would pick, and cost no verification)."""
        head = self.current()
        return await self.rank(ctx, candidates, head, head)

    async def rank(
        self, ctx: ScreenContext, candidates: Sequence[Candidate], ranks: RewardHead | None, head: RewardHead | None
    ) -> Screening:
        started = time.monotonic()
        ids = [c.id for c in candidates]
        if ranks is None:
            ranking = list(ids)
            ctx.rng.shuffle(ranking)
            evidence = {cid: self.cold(cid, i, len(ranking), head) for i, cid in enumerate(ranking)}
            return choose_top(self.name, ranking, evidence, self.n_verify, ctx, started)
        probs = self.distributions(parent_text(ctx), [child_text(c) for c in candidates])
        evidence = {c.id: self.evidence(c.id, p, ranks) for c, p in zip(candidates, probs, strict=True)}
        ranking = order_by_value({cid: e.rank_value for cid, e in evidence.items()}, ids, ctx.rng)
        return choose_top(self.name, ranking, evidence, self.n_verify, ctx, started)


def _check_task(path: str, head: RewardHead, task: TaskIdentity | None, force: bool) -> None:
    """A head trained on another task is refused unless forced (``task/identity.py`` decides "the same")."""
    trained = TaskIdentity.from_dict(head.card.get("task_identity") or head.card.get("task"))
    if task is None or trained is None or same_identity(trained, task) or force:
        return
    raise ConfigError(
        f"the reward-model critic at {path!r} was trained on task {trained.name!r}, not {task.name!r}: heads do not "
        "transfer across tasks (a head of other tasks ranked worse than random, docs/benchmarks.md). Train one on "
        f"this task's runs (verifyless train critic-rm {task.name} ...), drop the screener option path to learn in "
        "the run, or pass screener.options.force=true to use it anyway"
    )


def learned_critic(screener: Any) -> RewardModelCritic | None:
    """The ``RewardModelCritic`` a screener is or wraps (adaptive's ``inner``), else None."""
    for s in (screener, getattr(screener, "inner", None)):
        if isinstance(s, RewardModelCritic):
            return s
    return None


def recorded_critic(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reward-model critic a run screened with, for ``show`` and the report: ``{"role", "folder", "tag",
    "now"}`` (``tag``: recorded in the run; ``now``: the folder's tag today, None when it is gone); [] otherwise."""
    screener = config.get("screener") if isinstance(config, Mapping) else None
    if not isinstance(screener, Mapping) or screener.get("name") != "critic-rm":
        return []
    options = screener.get("options") or {}
    if not options.get("path"):
        return []  # learnt in the run: its heads are in the run's screening events
    folder = str(options.get("path"))
    try:
        now: str | None = head_tag(folder)
    except ConfigError:
        now = None
    return [{"role": "screener critic-rm", "folder": folder, "tag": options.get("weights") or now, "now": now}]


__all__ = [
    "CARD",
    "COLD",
    "FEATURE_KINDS",
    "HEAD",
    "HeadSettings",
    "LabelledText",
    "PairFeaturizer",
    "RewardHead",
    "RewardModelCritic",
    "RewardModelOptions",
    "TextLabel",
    "WarmHead",
    "arrays_tag",
    "critic_pins",
    "fit_head",
    "head_arrays",
    "head_record",
    "head_tag",
    "learned_critic",
    "warm_event",
    "load_head",
    "recorded_critic",
    "refit_points",
    "resolve_encoder",
    "save_head",
    "sentences",
]
