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
(``pins``, filled in by the composition root) and shown by ``verifyless show``; a run resumed or replayed on an
artifact whose weights changed is a ``ConfigError``.

Artifact folder: ``head.npz`` (``classes``, ``coef``, ``intercept``, ``mean``, ``scale``) and ``card.json`` (feature
kind, text encoder -- ``minilm`` by default, ``hashing`` for tests and machines without torch --, training data,
held-out metrics). Limits: sentences are split on ``. ``/``! ``/``? ``; summaries
that share no sentence with their parent (LLM-written ones) compare as wholes, where the head has seen less.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import Field

from verifyless.errors import ConfigError
from verifyless.node import Candidate, Evidence, Screening
from verifyless.outcome import THREE
from verifyless.screen.base import ScreenContext, choose_top
from verifyless.screen.critic import child_text, parent_text
from verifyless.screen.features import TextEncoder, make_text_encoder
from verifyless.screen.options import BaseOptions
from verifyless.screen.ranking import order_by_value, route

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


class RewardModelOptions(BaseOptions):
    path: str = Field(..., description="folder of a trained reward-model critic (verifyless train critic-rm)")
    weights: str | None = Field(
        None,
        description="the artifact's tag <folder>@<sha256 prefix>; recorded by the run, a mismatch is an error",
    )


class RewardModelCritic:
    """Ranks candidates by a trained head's P(improve/tie/lose) of the parent -> child texts (module docstring)."""

    def __init__(
        self,
        path: str,
        *,
        weights: str | None = None,
        n_verify: int | None = None,
        name: str = "critic-rm",
        route_threshold: float = 0.25,
        encoder: TextEncoder | None = None,
    ) -> None:
        self.head = load_head(path)
        if weights is not None and weights != self.head.tag:
            raise ConfigError(
                f"the reward-model critic at {path!r} is {self.head.tag}, but the run recorded {weights}: "
                "restore that artifact, or start a new run"
            )
        self.name, self.n_verify, self.route_threshold = name, n_verify, route_threshold
        text = encoder or make_text_encoder(self.head.encoder)  # type: ignore[arg-type]
        if text.dim != self.head.coef.shape[1]:
            raise ConfigError(
                f"{path!r}: its head expects {self.head.coef.shape[1]} features, the encoder gives {text.dim}"
            )
        self.featurizer = PairFeaturizer(text, self.head.features)
        self.pins = {"weights": self.head.tag}  # what the run records about this screener

    def distributions(self, parent: str, children: Sequence[str]) -> np.ndarray:
        """P(improve, tie, lose) of each child text against ``parent`` (rows in ``THREE`` order)."""
        return self.head.probs(self.featurizer.transform([(parent, c) for c in children]))

    def evidence(self, candidate_id: str, probs: Sequence[float]) -> Evidence:
        votes = {v: float(p) for v, p in zip(THREE, probs, strict=True)}
        u = 1.0 - max(votes.values())
        detail = {
            "label_probs": votes,
            "scoring": "reward-model",
            "weights": self.head.tag,
            "uncertain": route(u, self.route_threshold),
            "route_threshold": self.route_threshold,
        }
        return Evidence(candidate_id, 2.0 * votes["improve"] + votes["tie"], (), votes, u, 1, 0, detail)

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.monotonic()
        probs = self.distributions(parent_text(ctx), [child_text(c) for c in candidates])
        evidence = {c.id: self.evidence(c.id, p) for c, p in zip(candidates, probs, strict=True)}
        ids = [c.id for c in candidates]
        ranking = order_by_value({cid: e.rank_value for cid, e in evidence.items()}, ids, ctx.rng)
        return choose_top(self.name, ranking, evidence, self.n_verify, ctx, started)


def recorded_critic(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The reward-model critic a run screened with, for ``show`` and the report: ``{"role", "folder", "tag",
    "now"}`` (``tag``: recorded in the run; ``now``: the folder's tag today, None when it is gone); [] otherwise."""
    screener = config.get("screener") if isinstance(config, Mapping) else None
    if not isinstance(screener, Mapping) or screener.get("name") != "critic-rm":
        return []
    options = screener.get("options") or {}
    folder = str(options.get("path") or "")
    try:
        now: str | None = head_tag(folder)
    except ConfigError:
        now = None
    return [{"role": "screener critic-rm", "folder": folder, "tag": options.get("weights") or now, "now": now}]


__all__ = [
    "CARD",
    "FEATURE_KINDS",
    "HEAD",
    "PairFeaturizer",
    "RewardHead",
    "RewardModelCritic",
    "RewardModelOptions",
    "head_tag",
    "load_head",
    "recorded_critic",
    "save_head",
    "sentences",
]
