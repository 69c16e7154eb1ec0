"""The surrogate critic: a small classifier learnt online from outcomes already paid for.

No LLM is involved. Every verified child teaches it one example
``(candidate features, outcome)`` through ``observe``; ``screen`` ranks a new
pool by the predicted probability that a child improves on its parent.

Outcome labels: ``verifyless.outcome.reward_label`` of each ``Outcome``, the
run's one rule (relative, oriented Delta against the run's tie tolerance):
``improve`` / ``tie`` / ``lose`` for a compared child, and ``lose`` for a
failed one (crash, timeout, OOM, contract violation, invalid metric). A failed
child is a wasted verification, which is exactly what screening should avoid,
so it is counted as a loss rather than dropped -- as the policy reward gives it
-1; critic datasets and critic metrics leave it out (``label3``). An OK child
whose parent has no fitness (a draft from nothing, or from a buggy parent)
cannot be compared and teaches nothing; it is skipped.

Five-way labels are confidence tiers, not a magnitude model: the three-way
argmax, and when it is ``improve`` the tier comes from ``P(improve)``
(>= 0.8 BigWin, >= 0.6 MediumWin, else SmallWin). With tens of examples a
regressor on the signed Delta would mostly fit noise; the tiers keep the
five-label ladder usable for reports without pretending to know more.

Fitness mode (``rank_by="fitness"``, the default): no classifier is fitted; ``FitnessModel`` (a Gaussian process on the
options and option pairs of each design, ``features.option_tokens``) learns
the fitness of designs from every verified child and its parent, and the
pool is ranked by ``mean + explore * sd``. Evidence still carries three-way
votes (``P(improve)`` from the predictive distribution) and a five-way tier.

Cold start: until ``min_examples`` outcomes are stored and at least two
different labels have been seen, the ranking is a shuffle with the run's
``ctx.rng`` (exactly the random baseline), every uncertainty is 1.0 and the
evidence says ``cold start``.

Cost: refitting is lazy (only when ``screen`` runs after new outcomes) and is
a multinomial logistic regression on at most a few thousand rows, i.e.
milliseconds with hashing features.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import Field

from verifyless.node import Candidate, Evidence, Screening
from verifyless.outcome import Outcome, reward_label
from verifyless.screen.base import ScreenContext
from verifyless.screen.features import (
    CandidateFeaturizer,
    FeatureKind,
    assignment_tokens,
    make_text_encoder,
    option_tokens,
)
from verifyless.screen.options import BaseOptions

LABELS: tuple[str, str, str] = ("improve", "tie", "lose")
COLD_START = "cold start"


def _change(outcome: Outcome) -> float | None:
    """The absolute change in oriented fitness (the Delta regressor's target); None unless both were scored."""
    child, parent = outcome.child_fitness, outcome.parent_fitness
    return None if outcome.delta is None or child is None or parent is None else child - parent


def five_way(votes: dict[str, float]) -> str:
    """Map three-way probabilities to one of the five labels (confidence tiers, see module doc)."""
    top = max(LABELS, key=lambda label: votes.get(label, 0.0))
    if top == "tie":
        return "Tie"
    if top == "lose":
        return "Lose"
    p = votes.get("improve", 0.0)
    if p >= 0.8:
        return "BigWin"
    if p >= 0.6:
        return "MediumWin"
    return "SmallWin"


@dataclass(frozen=True)
class Example:
    """One stored outcome: the candidate it came from, its label and (when both scored) its Delta."""

    candidate_id: str
    label: str
    delta: float | None


class FitnessModel:
    """Gaussian-process regression of a design's fitness on its option tokens (``features.option_tokens``).

    The kernel is the weighted count of shared tokens (shared options plus,
    with a lower weight, shared option pairs), scaled so a design's prior
    variance is 1 on standardised targets. A design seen twice keeps its
    latest outcome (the built-in tasks are deterministic). A failed
    verification is stored as ``None`` and fitted at a floor below the worst
    working score (``floor_gap`` standard deviations), so failing corners are
    learnt as bad rather than ignored. ``predict`` returns the posterior mean
    and standard deviation in fitness units. Exact, O(n^3) in stored designs:
    milliseconds for the hundreds a run verifies.
    """

    def __init__(self, noise: float = 0.05, floor_gap: float = 0.5) -> None:
        self.noise = noise
        self.floor_gap = floor_gap
        self._vocab: dict[str, int] = {}
        self._keys: dict[tuple[str, ...], int] = {}
        self._tokens: list[dict[str, float]] = []
        self._targets: list[float | None] = []
        self._fit: Any = None

    def __len__(self) -> int:
        return len(self._targets)

    def add(self, tokens: dict[str, float], target: float | None) -> None:
        key = tuple(sorted(tokens))
        if key in self._keys:
            self._targets[self._keys[key]] = target
        else:
            self._keys[key] = len(self._targets)
            self._tokens.append(tokens)
            self._targets.append(target)
            for t in tokens:
                self._vocab.setdefault(t, len(self._vocab))
        self._fit = None

    def known(self, tokens: dict[str, float]) -> float | None:
        """The stored outcome of exactly this design (None if unseen or failed)."""
        i = self._keys.get(tuple(sorted(tokens)))
        return None if i is None else self._targets[i]

    @property
    def usable(self) -> bool:
        """At least two stored designs with two distinct fitted targets."""
        ok = [t for t in self._targets if t is not None]
        return len(self._targets) >= 2 and (len(set(ok)) >= 2 or (bool(ok) and len(ok) < len(self._targets)))

    def _rows(self, token_dicts: Sequence[dict[str, float]]) -> np.ndarray:
        x = np.zeros((len(token_dicts), len(self._vocab)))
        for r, tokens in enumerate(token_dicts):
            total = sum(tokens.values()) or 1.0
            for t, w in tokens.items():
                j = self._vocab.get(t)
                if j is not None:
                    x[r, j] = math.sqrt(w / total)
        return x

    def _fitted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float]:
        if self._fit is None:
            ok = np.array([t for t in self._targets if t is not None], dtype=float)
            spread = float(ok.std()) if ok.size > 1 else 1.0
            spread = spread or 1.0
            floor = (float(ok.min()) if ok.size else 0.0) - self.floor_gap * spread
            y = np.array([floor if t is None else t for t in self._targets], dtype=float)
            mean, scale = float(y.mean()), float(y.std()) or 1.0
            x = self._rows(self._tokens)
            chol = np.linalg.cholesky(x @ x.T + self.noise * np.eye(len(y)))
            alpha = np.linalg.solve(chol.T, np.linalg.solve(chol, (y - mean) / scale))
            self._fit = (x, chol, alpha, mean, scale)
        return self._fit

    def predict(self, token_dicts: Sequence[dict[str, float]]) -> tuple[np.ndarray, np.ndarray]:
        x, chol, alpha, mean, scale = self._fitted()
        xs = self._rows(token_dicts)
        cross = xs @ x.T
        mu = cross @ alpha
        v = np.linalg.solve(chol, cross.T)
        var = np.clip(1.0 - (v**2).sum(axis=0), 1e-12, None)
        return mu * scale + mean, np.sqrt(var) * scale


class SurrogateOptions(BaseOptions):
    """Options of screener ``surrogate`` (``SurrogateScreener``): the one place their defaults are written."""

    rank_by: Literal["fitness", "delta", "improve"] = Field(
        "fitness",
        description="fitness: a Gaussian process on the designs' options, ranked by mean + explore x sd (measured "
        "best on pool worlds, docs/benchmarks.md); delta: a classifier plus a ridge on the change in fitness; "
        "improve: the classifier's P(improve)",
    )
    min_examples: int = Field(
        4, ge=2, description="paid outcomes (of two labels, or two designs) before the model ranks; until then random"
    )
    features: FeatureKind = Field(
        "hashing", description="candidate text features of delta/improve: hashing, minilm or auto (minilm if installed)"
    )
    C: float = Field(4.0, gt=0.0, description="inverse L2 strength of the delta/improve logistic regression")
    explore: float = Field(1.0, ge=0.0, description="fitness: the UCB weight of the predictive standard deviation")
    pair_weight: float = Field(
        0.5, ge=0.0, description="fitness: the weight of shared option pairs against shared options in the kernel"
    )


class SurrogateScreener:
    """Online probabilistic critic over candidate features (implements ``OutcomeObserver``).

    Built from its options whole (``SurrogateOptions``). ``n_verify``: how many to choose; None uses
    ``ctx.n_verify``. ``seed`` (the run's) fixes the estimator's ``random_state``; together with ``ctx.rng``
    (tie-breaks and cold-start shuffles) a run is deterministic.
    """

    def __init__(self, options: SurrogateOptions | None = None, *, seed: int = 0) -> None:
        self.options = options or SurrogateOptions()
        self.name = self.options.name or "surrogate"
        self.seed = seed
        self.fitness_model = FitnessModel()
        self.featurizer = CandidateFeaturizer(make_text_encoder(self.options.features))
        self.features = self.featurizer.text.name
        self._examples: list[Example] = []
        self._rows: list[np.ndarray] = []
        self._model: Any = None
        self._regressor: Any = None
        self._fitted_on = 0  # number of examples the current model has seen

    @property
    def rank_by(self) -> str:
        return self.options.rank_by

    # ------------------------------------------------------------------ learning
    @property
    def examples(self) -> tuple[Example, ...]:
        return tuple(self._examples)

    def observe(self, outcome: Outcome) -> None:
        """Store one verified outcome (``outcome.candidate`` must be set); the model refits lazily at ``screen``."""
        candidate = outcome.candidate
        if candidate is None:
            raise ValueError(f"outcome {outcome.child_id} has no candidate: the surrogate learns from its features")
        if self.options.rank_by == "fitness":
            self._observe_fitness(candidate, outcome)
            return
        label = reward_label(outcome)
        if label is None:
            return
        self._examples.append(Example(candidate.id, label, _change(outcome)))
        self._rows.append(self.featurizer.transform([candidate])[0])

    def _observe_fitness(self, candidate: Candidate, outcome: Outcome) -> None:
        """Fitness mode: store the child's design and outcome, and the parent's design when it is known."""
        self.fitness_model.add(option_tokens(candidate, pair_weight=self.options.pair_weight), outcome.child_fitness)
        parent = candidate.idea.params.get("parent_assignment") if candidate.idea.params else None
        if isinstance(parent, dict) and parent and outcome.parent_fitness is not None:
            self.fitness_model.add(
                assignment_tokens(parent, pair_weight=self.options.pair_weight), outcome.parent_fitness
            )
        label = reward_label(outcome)
        if label is not None:
            self._examples.append(Example(candidate.id, label, _change(outcome)))

    def _ready(self) -> bool:
        if self.options.rank_by == "fitness":
            return len(self.fitness_model) >= self.options.min_examples and self.fitness_model.usable
        return len(self._examples) >= self.options.min_examples and len({e.label for e in self._examples}) >= 2

    def _fit(self) -> None:
        if self._model is not None and self._fitted_on == len(self._examples):
            return
        from sklearn.linear_model import LogisticRegression

        model = LogisticRegression(C=self.options.C, max_iter=2000, random_state=self.seed)
        rows = np.vstack(self._rows)
        model.fit(rows, [e.label for e in self._examples])
        self._model = model
        self._regressor = self._fit_regressor(rows)
        self._fitted_on = len(self._examples)

    def _fit_regressor(self, rows: np.ndarray) -> Any:
        """Ridge on the signed change in fitness; a failed child counts as the worst change seen so far.

        Every paid outcome carries a magnitude, not just a class: ranking a pool
        (one parent, so child fitness and Delta order alike) by expected Delta
        uses that magnitude, which the three-way classifier throws away.
        """
        if self.options.rank_by != "delta":
            return None
        from sklearn.linear_model import Ridge

        deltas = [e.delta for e in self._examples if e.delta is not None]
        if len(deltas) < 2:
            return None
        floor = min(deltas) - 0.1 * (max(deltas) - min(deltas) or abs(min(deltas)) or 1.0)
        target = np.array([e.delta if e.delta is not None else floor for e in self._examples], dtype=float)
        scale = float(np.std(target)) or 1.0
        return Ridge(alpha=1.0).fit(rows, (target - target.mean()) / scale)

    def predict(self, candidates: Sequence[Candidate]) -> list[dict[str, float]]:
        """Three-way probabilities per candidate. Requires a warm model (see ``ready``)."""
        if not self._ready():
            raise RuntimeError(
                f"the surrogate has {len(self._examples)} outcomes of "
                f"{len({e.label for e in self._examples})} labels; it needs {self.options.min_examples} "
                "outcomes and two labels before it can predict"
            )
        self._fit()
        proba = self._model.predict_proba(self.featurizer.transform(candidates))
        classes = list(self._model.classes_)
        return [
            {label: float(row[classes.index(label)]) if label in classes else 0.0 for label in LABELS} for row in proba
        ]

    @property
    def ready(self) -> bool:
        """True once enough outcomes (and two labels) are stored to rank by the model."""
        return self._ready()

    # ------------------------------------------------------------------ screening
    def _rank_by_fitness(
        self, ctx: ScreenContext, candidates: Sequence[Candidate]
    ) -> tuple[list[str], dict[str, Evidence]]:
        """UCB order: predicted fitness + ``explore`` x its standard deviation (seeded shuffle breaks ties)."""
        tokens = [option_tokens(c, pair_weight=self.options.pair_weight) for c in candidates]
        mu, sd = self.fitness_model.predict(tokens)
        ucb = mu + self.options.explore * sd
        parent = self._parent_fitness(candidates)
        order = list(range(len(candidates)))
        ctx.rng.shuffle(order)
        order.sort(key=lambda i: -ucb[i])
        evidence = {}
        for i, c in enumerate(candidates):
            p = 0.5 if parent is None else 0.5 * (1.0 + math.erf((mu[i] - parent) / (sd[i] * math.sqrt(2.0))))
            votes = {"improve": p, "tie": 0.0, "lose": 1.0 - p}
            evidence[c.id] = Evidence(
                candidate_id=c.id,
                rank_value=float(ucb[i]),
                labels=(five_way(votes),),
                votes=votes,
                uncertainty=1.0 - max(p, 1.0 - p),  # the Evidence contract: 1 - max(votes); sd is in detail
                n_valid=1,
                detail={
                    "mode": "model",
                    "rank_by": "fitness",
                    "mean": float(mu[i]),
                    "sd": float(sd[i]),
                    "explore": self.options.explore,
                    "n_designs": len(self.fitness_model),
                },
            )
        return [candidates[i].id for i in order], evidence

    def _parent_fitness(self, candidates: Sequence[Candidate]) -> float | None:
        for c in candidates:
            parent = c.idea.params.get("parent_assignment") if c.idea.params else None
            if isinstance(parent, dict) and parent:
                return self.fitness_model.known(assignment_tokens(parent, pair_weight=self.options.pair_weight))
        return None

    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.perf_counter()
        n_verify = ctx.n_verify if self.options.n_verify is None else self.options.n_verify
        ids = [c.id for c in candidates]
        if not self._ready():
            ranking = list(ids)
            ctx.rng.shuffle(ranking)
            seen = len(self._examples)
            evidence = {
                cid: Evidence(
                    candidate_id=cid,
                    rank_value=float(len(ranking) - pos),
                    uncertainty=1.0,
                    detail={
                        "mode": COLD_START,
                        "reason": f"{COLD_START}: {seen} of {self.options.min_examples} outcomes, "
                        f"{len({e.label for e in self._examples})} distinct labels; random order",
                    },
                )
                for pos, cid in enumerate(ranking)
            }
        elif self.options.rank_by == "fitness":
            ranking, evidence = self._rank_by_fitness(ctx, candidates)
        else:
            votes = self.predict(candidates)
            expected = (
                self._regressor.predict(self.featurizer.transform(candidates)) if self._regressor is not None else None
            )
            key = (lambda i: -expected[i]) if expected is not None else (lambda i: -votes[i]["improve"])
            # Shuffle first, then a stable sort: equal scores keep a seeded random order.
            order = list(range(len(candidates)))
            ctx.rng.shuffle(order)
            order.sort(key=key)
            ranking = [ids[i] for i in order]
            counts = {label: sum(e.label == label for e in self._examples) for label in LABELS}
            evidence = {
                ids[i]: Evidence(
                    candidate_id=ids[i],
                    rank_value=float(expected[i]) if expected is not None else votes[i]["improve"],
                    labels=(five_way(votes[i]),),
                    votes=votes[i],
                    uncertainty=1.0 - max(votes[i].values()),
                    n_valid=1,
                    detail={
                        "mode": "model",
                        "features": self.features,
                        "n_examples": len(self._examples),
                        "rank_by": "delta" if expected is not None else "improve",
                        "label_counts": counts,
                    },
                )
                for i in range(len(candidates))
            }
        chosen = tuple(ranking[: max(0, min(n_verify, len(ranking)))])
        return Screening(
            screener=self.name,
            ranking=tuple(ranking),
            chosen=chosen,
            evidence=evidence,
            seconds=time.perf_counter() - started,
        )


__all__ = ["COLD_START", "Example", "FitnessModel", "LABELS", "SurrogateOptions", "SurrogateScreener", "five_way"]
