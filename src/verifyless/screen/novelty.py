"""The novelty gate: reject a candidate whose code is a near copy of one already tried, before screening.

Where it runs: after implementation, before screening. A rejected candidate is
never screened and never verified (``Status.NOT_NOVEL`` with the verdict's
reason), except an *audited* one: with probability ``audit_rate`` a rejection is
verified anyway, so the false-rejection rate can be measured (``audit_stats``).

How it decides, per candidate, in the given order:

1. A band equal to its parent's but for whitespace is rejected (cosine 1.0 to the
   parent), in either mode.
2. Embed the candidate's changed lines against its parent's band (``embed="diff"``,
   the default: "was this change already tried?"; lines are compared with their
   whitespace runs made one space, so a re-spaced copy of a change has the same diff) or its whole band
   (``embed="band"``) with the injected ``TextEncoder`` (the offline MiniLM of
   ``screen.features`` by default). An archive entry is embedded the same way
   against its own parent; an entry or candidate whose parent is not in the
   archive is embedded by its whole band. Embeddings are cached by the hash of
   the embedded text, so a program is encoded once per gate.
3. Find the nearest program by cosine among the archive (the run's verified and
   pending programs) and the candidates of this batch accepted before it.
4. cosine >= ``threshold`` (0.99, as ShinkaEvolve): rejected.
   ``judge_lower`` <= cosine < ``threshold`` with a judge: the judge model answers
   NOVEL or NOT_NOVEL; NOT_NOVEL rejects. Otherwise: accepted.

Why diff by default: MiniLM reads a whole band as nearly the same text after a
one-line edit (on the built-in diabetes band, 288 tokens: a changed constant
0.9992, a swapped scaler 0.995, an edited comment 0.997, a different model 0.86;
on longer bands a changed constant reaches 0.99999), so in band mode 0.99 rejects
most small real changes. Diffs of different changes stay far apart (a changed
constant against another value of it 0.92, unrelated changes below 0.5). Bands
are embedded by their first 512 tokens (MiniLM's limit).

The gate never blocks on its own trouble: an unparseable judge reply or a judge
endpoint failure accepts the candidate (and says so in the reason). Judge replies
go through ``ReplyHealth``, one observation per reply: a reply that does not parse
logs a warning, and ``max_unparsed_replies`` unparsed replies in a row raise
``UnparseableReplies`` (CLI exit code 8). Randomness (audits only) comes from the
injected ``random.Random``: one draw per rejection, in candidate order, so a
replay with the same seed and inputs gives the same verdicts.
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

import numpy as np
from pydantic import Field, model_validator

from verifyless.errors import ModelUnavailable
from verifyless.model.asking import ask_parsed
from verifyless.model.base import Model, ModelRequest
from verifyless.node import Candidate, content_hash
from verifyless.prompts import messages, render
from verifyless.registry import StrictOptions
from verifyless.roles.parse import clean_reply
from verifyless.roles.render import band_or_program, code_lang
from verifyless.screen.features import HashingTextEncoder, MiniLMTextEncoder, TextEncoder
from verifyless.screen.health import ReplyHealth, replies_detail
from verifyless.task.base import Task

log = logging.getLogger(__name__)

Outcome = Literal["accepted", "rejected", "audited"]
JudgeAnswer = Literal["novel", "not_novel", "unparsed", "error"]
EXPECTED = "[NOVELTY] NOVEL | NOT_NOVEL"
MAX_STATEMENT_CHARS = 4_000
MAX_BAND_CHARS = 12_000
MAX_TOKENS = 512  # MiniLM's position limit; a band beyond it is embedded by its first 512 tokens


class NoveltyOptions(StrictOptions):
    """Options of the novelty gate (the ``novelty:`` section of a run's config)."""

    enabled: bool = Field(False, description="run the gate between implementation and screening")
    format_reminders: int = Field(
        1, ge=0, description="times an unreadable judge reply is sent back with a format reminder (each costs a call)"
    )
    embed: Literal["band", "diff"] = Field(
        "diff",
        description="diff: embed the lines changed against the parent's band (is this change already tried?); "
        "band: embed the whole band (MiniLM puts most one-line edits of a band above 0.99)",
    )
    embedder: Literal["minilm", "hashing"] = Field(
        "minilm",
        description="minilm: the offline all-MiniLM-L6-v2 (torch); hashing: hashed word counts (no torch, for tests "
        "and cheap runs)",
    )
    threshold: float = Field(0.99, ge=-1.0, le=1.0, description="reject at this cosine or above (ShinkaEvolve: 0.99)")
    judge: bool = Field(False, description="ask an LLM judge NOVEL / NOT_NOVEL for near misses")
    judge_lower: float = Field(
        0.95, ge=-1.0, le=1.0, description="near misses: judge_lower <= cosine < threshold go to the judge"
    )
    judge_model: str | None = Field(
        None, description="key in roles.models of the judge (default: the 'novelty_judge' role key, else 'default')"
    )
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="judge sampling temperature")
    max_tokens: int = Field(400, ge=1, description="judge reply length cap")
    audit_rate: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="probability that a rejected candidate is verified anyway (measures false rejections)",
    )
    min_parse_rate: float = Field(0.5, ge=0.0, le=1.0, description="warn when a judge reply does not parse")
    max_unparsed_replies: int = Field(
        3, ge=1, description="stop the run (exit code 8) after this many unparseable judge replies in a row"
    )

    @model_validator(mode="after")
    def _band(self) -> NoveltyOptions:
        if self.judge_lower > self.threshold:
            raise ValueError(f"judge_lower ({self.judge_lower}) must not exceed threshold ({self.threshold})")
        return self


@dataclass(frozen=True)
class ArchiveProgram:
    """A program the run already has: verified, or pending verification.

    ``parent_id`` names another archive entry; it is read only with ``embed="diff"``
    (an entry whose parent is not in the archive is compared by its whole band).
    """

    node_id: str
    program: str
    parent_id: str | None = None


@dataclass(frozen=True)
class NoveltyVerdict:
    """The gate's decision on one candidate.

    ``outcome``: accepted (go on to screening), rejected (status ``not-novel``, never
    verified) or audited (rejected, but verified anyway). ``nearest_id`` / ``cosine``:
    the closest program seen (None when there was none). ``judge``: the judge's
    answer when it was asked, else None.
    """

    candidate_id: str
    outcome: Outcome
    nearest_id: str | None
    cosine: float | None
    reason: str
    judge: JudgeAnswer | None = None
    judge_reply: str = ""

    @property
    def verify(self) -> bool:
        """Whether the candidate goes on (to screening, or straight to verification when audited)."""
        return self.outcome != "rejected"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- judge replies

_TAGGED = re.compile(
    r"\[\s*NOVELTY\s*\]\s*[:=\-]?\s*[*_`\"']*\s*(NOT[\s_\-]*NOVEL|NON[\s_\-]*NOVEL|NOVEL)\b(?!\s*[|/]\s*\w)", re.I
)
_BARE = re.compile(r"^(?:verdict|answer|novelty)?\s*:?\s*(NOT[\s_\-]*NOVEL|NON[\s_\-]*NOVEL|NOVEL)\s*(?:---.*)?$", re.I)


def parse_judge(text: str) -> JudgeAnswer | None:
    """``novel`` / ``not_novel`` from a judge reply; None when no verdict can be read.

    The last ``[NOVELTY]`` tag wins; without one, the last line that holds only the
    verdict (``NOT NOVEL``, ``**not-novel**``, ``Verdict: NOVEL``) is read. A tag followed by the menu
    (``[NOVELTY] NOVEL | NOT_NOVEL --- ...``, as a real 1.5B judge wrote it) is no verdict. Accepted
    spellings: NOVEL, NOT_NOVEL, NOT NOVEL, not-novel, NON-NOVEL, in any case.
    """
    text = clean_reply(text or "")
    tagged = _TAGGED.findall(text)
    if tagged:
        return _answer(tagged[-1])
    for line in reversed(text.split("\n")):
        m = _BARE.match(line.strip().strip("*_`#>.- \t").strip())
        if m:
            return _answer(m.group(1))
    return None


def _answer(word: str) -> JudgeAnswer:
    return "novel" if word.strip().lower() == "novel" else "not_novel"


class JudgeHealth(ReplyHealth):
    """``ReplyHealth`` for the novelty judge: one observation per judge reply."""

    def observe_reply(self, candidate_id: str, reply: str, parsed: bool) -> None:
        detail = replies_detail(int(parsed), 1, EXPECTED, () if parsed else (reply,))
        self.observe({"evidence": {candidate_id: {"detail": {"replies": detail}}}})

    def message(self, stats: Any) -> str:
        return (
            f"the novelty judge (model {self.model}) produced no parseable verdict in {self.streak} replies in a "
            f"row. Expected a final line like {EXPECTED}; the model wrote: {stats.example!r}. Fix: use a model "
            "that follows the format, raise novelty.max_tokens if replies are cut off, or turn the judge off "
            "(novelty.judge=false keeps the embedding gate); novelty.max_unparsed_replies sets the limit"
        )


# ---------------------------------------------------------------- the gate


class NoveltyGate:
    """Embedding gate with an optional LLM judge for near misses; see the module docstring.

    ``embedder`` defaults to the offline MiniLM; ``judge`` is needed when
    ``options.judge`` is on; ``rng`` drives audits only.
    """

    def __init__(
        self,
        task: Task,
        options: NoveltyOptions | None = None,
        *,
        embedder: TextEncoder | None = None,
        judge: Model | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.task = task
        self.options = options or NoveltyOptions()
        if self.options.judge and judge is None:
            raise ValueError("NoveltyOptions.judge is on but no judge model was given")
        self.embedder: TextEncoder = embedder or default_embedder(self.options)
        self.judge = judge if self.options.judge else None
        self.rng = rng or random.Random(0)
        self.health = JudgeHealth(
            "novelty judge",
            judge.name if judge is not None else "",
            self.options.min_parse_rate,
            self.options.max_unparsed_replies,
        )
        self._cache: dict[str, np.ndarray] = {}

    async def check(self, candidates: Sequence[Candidate], archive: Sequence[ArchiveProgram]) -> list[NoveltyVerdict]:
        """One verdict per candidate, in order (see the module docstring for the rule)."""
        programs = {a.node_id: a for a in archive}
        seen_ids = [a.node_id for a in archive]
        seen_texts = [self._archive_text(a, programs) for a in archive]
        cand_texts = [self._candidate_text(c, programs) for c in candidates]
        await self._embed(seen_texts + cand_texts)
        verdicts = []
        for cand, text in zip(candidates, cand_texts, strict=True):
            verdict = self._whitespace_copy(cand, programs)
            if verdict is None:
                nearest, cosine = self._nearest(text, seen_ids, seen_texts)
                verdict = await self._decide(cand, nearest, cosine, programs)
            verdicts.append(verdict)
            if verdict.outcome == "accepted":
                seen_ids.append(cand.id)
                seen_texts.append(text)
                programs[cand.id] = ArchiveProgram(cand.id, cand.program, cand.parent_id)
        return verdicts

    # -- texts and vectors ---------------------------------------------------
    def _band(self, program: str) -> str:
        return band_or_program(self.task, program, MAX_BAND_CHARS)

    def _archive_text(self, entry: ArchiveProgram, programs: Mapping[str, ArchiveProgram]) -> str:
        parent = programs.get(entry.parent_id or "")
        return self._text(entry.program, parent.program if parent else None)

    def _candidate_text(self, cand: Candidate, programs: Mapping[str, ArchiveProgram]) -> str:
        parent = programs.get(cand.parent_id or "")
        return self._text(cand.program, parent.program if parent else None)

    def _text(self, program: str, parent: str | None) -> str:
        band = self._band(program)
        if self.options.embed == "band" or parent is None:
            return band
        return changed_lines(_spaced(self._band(parent)), _spaced(band)) or band

    async def _embed(self, texts: Iterable[str]) -> None:
        todo = list(dict.fromkeys(t for t in texts if content_hash(t) not in self._cache))
        if not todo:
            return
        vectors = await asyncio.to_thread(self.embedder.encode, todo)
        for text, vector in zip(todo, vectors, strict=True):
            norm = float(np.linalg.norm(vector))
            self._cache[content_hash(text)] = vector / norm if norm > 0 else vector

    def _vector(self, text: str) -> np.ndarray:
        return self._cache[content_hash(text)]

    def _nearest(self, text: str, ids: Sequence[str], texts: Sequence[str]) -> tuple[str | None, float | None]:
        if not ids:
            return None, None
        matrix = np.vstack([self._vector(t) for t in texts])
        sims = matrix @ self._vector(text)
        best = int(np.argmax(sims))  # ties go to the earliest program
        return ids[best], float(sims[best])

    # -- the decision ----------------------------------------------------------
    def _whitespace_copy(self, cand: Candidate, programs: Mapping[str, ArchiveProgram]) -> NoveltyVerdict | None:
        """A rejection when the band equals its parent's but for whitespace (diff mode's diffs cannot see this)."""
        parent = programs.get(cand.parent_id or "")
        if parent is None or _squash(self._band(cand.program)) != _squash(self._band(parent.program)):
            return None
        return self._reject(
            cand.id, parent.node_id, 1.0, f"the band differs from node {parent.node_id}'s only in whitespace"
        )

    async def _decide(
        self,
        cand: Candidate,
        nearest: str | None,
        cosine: float | None,
        programs: Mapping[str, ArchiveProgram],
    ) -> NoveltyVerdict:
        opts = self.options
        if nearest is None or cosine is None:
            return NoveltyVerdict(cand.id, "accepted", None, None, "no program to compare with")
        where = f"{opts.embed} cosine {cosine:.4f} to node {nearest}"
        if cosine >= opts.threshold:
            return self._reject(cand.id, nearest, cosine, f"{where} >= threshold {opts.threshold}")
        if self.judge is None or cosine < opts.judge_lower:
            return NoveltyVerdict(cand.id, "accepted", nearest, cosine, f"{where} < threshold {opts.threshold}")
        answer, reply = await self._ask_judge(cand, programs[nearest], cosine)
        if answer == "not_novel":
            return self._reject(cand.id, nearest, cosine, f"{where}; the judge said NOT_NOVEL", answer, reply)
        said = {"novel": "the judge said NOVEL", "unparsed": "the judge's reply did not parse, so accepted"}
        why = said.get(answer, "the judge was unavailable, so accepted")
        return NoveltyVerdict(cand.id, "accepted", nearest, cosine, f"{where}; {why}", answer, reply)

    def _reject(
        self, cid: str, nearest: str, cosine: float, reason: str, judge: JudgeAnswer | None = None, reply: str = ""
    ) -> NoveltyVerdict:
        if self.rng.random() < self.options.audit_rate:
            return NoveltyVerdict(cid, "audited", nearest, cosine, f"{reason}; audited: verified anyway", judge, reply)
        return NoveltyVerdict(cid, "rejected", nearest, cosine, reason, judge, reply)

    async def _ask_judge(self, cand: Candidate, nearest: ArchiveProgram, cosine: float) -> tuple[JudgeAnswer, str]:
        assert self.judge is not None
        try:
            asked = await ask_parsed(
                self.judge,
                self.request(cand, nearest, cosine),
                parse_judge,
                render("screen/reminders", "novelty"),
                reminders=self.options.format_reminders,
            )
        except ModelUnavailable as exc:
            log.warning("novelty judge unavailable for %s (%s); the candidate is accepted", cand.id, exc)
            return "error", str(exc)
        reply = "\n".join(asked.texts)
        self.health.observe_reply(cand.id, reply, asked.value is not None)
        answer = cast(JudgeAnswer, asked.value or "unparsed")
        return answer, reply

    def request(self, cand: Candidate, nearest: ArchiveProgram, cosine: float) -> ModelRequest:
        """The judge's request for ``cand`` against its nearest program."""
        values = {
            "task": self.task.statement[:MAX_STATEMENT_CHARS],
            "metric": f"{self.task.metric.name} ({self.task.metric.direction})",
            "lang": code_lang(self.task) or "python",
            "nearest_id": nearest.node_id,
            "nearest": self._band(nearest.program),
            "candidate": self._band(cand.program),
            "cosine": f"{cosine:.4f}",
        }
        return ModelRequest(
            messages=messages("screen/novelty", values),
            role="novelty_judge",
            temperature=self.options.temperature,
            max_tokens=self.options.max_tokens,
        )


def default_embedder(options: NoveltyOptions) -> TextEncoder:
    """The encoder ``options.embedder`` names (MiniLM loads lazily on first use)."""
    if options.embedder == "hashing":
        return HashingTextEncoder()
    return MiniLMTextEncoder(max_length=MAX_TOKENS)


def _spaced(text: str) -> str:
    """Each line with its runs of whitespace made one space, so a diff does not list lines changed only in spacing."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def _squash(text: str) -> str:
    """``text`` without any whitespace (so ``a = b`` and ``a=b`` compare equal)."""
    return "".join(text.split())


def changed_lines(before: str, after: str) -> str:
    """The lines of ``after`` that differ from ``before``, as ``-old`` / ``+new`` lines (no context)."""
    out = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        out.append(line)
    return "\n".join(out)


# ---------------------------------------------------------------- audits


@dataclass(frozen=True)
class AuditStats:
    """Audited rejections and how many of them improved on their parent (false rejections)."""

    audited: int
    improved: int

    @property
    def false_rejection_rate(self) -> float | None:
        return self.improved / self.audited if self.audited else None


def audit_stats(verdicts: Iterable[NoveltyVerdict | Mapping[str, Any]], improved: Iterable[str]) -> AuditStats:
    """Count audited verdicts (records or stored dicts) and those whose candidate is in ``improved``."""
    improved_ids = set(improved)
    audited = [
        v.candidate_id if isinstance(v, NoveltyVerdict) else str(v["candidate_id"])
        for v in verdicts
        if (v.outcome if isinstance(v, NoveltyVerdict) else v.get("outcome")) == "audited"
    ]
    return AuditStats(len(audited), sum(cid in improved_ids for cid in audited))


__all__ = [
    "ArchiveProgram",
    "AuditStats",
    "JudgeHealth",
    "NoveltyGate",
    "NoveltyOptions",
    "NoveltyVerdict",
    "audit_stats",
    "changed_lines",
    "parse_judge",
]
