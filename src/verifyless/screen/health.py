"""Reply health: how many of a screener's LLM replies parsed, and stopping a run whose screener never parses.

Every LLM screener stores, in each candidate's ``Evidence.detail["replies"]``,
the replies *attributed to that candidate*::

    {"parsed": 14, "total": 16, "expected": "[CHOICE] A or B", "example": "<one unparsed reply>"}

Attribution is disjoint (a critic's k critiques belong to their candidate; a
tournament match belongs to the first candidate of its pair; an arbiter's own
reply to the first candidate), so summing over a screening's evidence gives
the screening's totals. ``reply_stats`` does that sum on live ``Evidence`` or
on the stored dicts of a ``screening`` event. The agentic screener (which does
not write ``replies``) is read from its ``choice_source`` and ``final_reply``.

``ReplyHealth`` is the per-run tracker the engine feeds after each screening
is stored: below ``min_parse_rate`` it logs a warning naming the screener, the
model and an unparsed reply; after ``max_unparsed_screenings`` screenings in a
row that parsed nothing it raises ``UnparseableReplies`` (CLI exit code 8).
Screenings without LLM replies (random, oracle, surrogate, the engine's
fallback after an endpoint failure) neither count nor reset the streak.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from verifyless.errors import UnparseableReplies
from verifyless.node import Screening
from verifyless.screen.base import Screener

log = logging.getLogger(__name__)

EXAMPLE_CHARS = 300


@dataclass(frozen=True)
class ReplyStats:
    """Parsed and total replies of one or more screenings, with one unparsed example."""

    parsed: int = 0
    total: int = 0
    expected: str = ""
    example: str = ""

    @property
    def rate(self) -> float | None:
        """Share of replies that parsed; None when there were no replies."""
        return self.parsed / self.total if self.total else None

    def __add__(self, other: ReplyStats) -> ReplyStats:
        return ReplyStats(
            self.parsed + other.parsed,
            self.total + other.total,
            self.expected or other.expected,
            self.example or other.example,
        )

    def to_dict(self) -> dict[str, Any]:
        return {"parsed": self.parsed, "total": self.total, "rate": self.rate}


def replies_detail(parsed: int, total: int, expected: str, unparsed: Iterable[str] = ()) -> dict[str, Any]:
    """The ``detail["replies"]`` entry a screener stores for one candidate."""
    example = next((text for text in unparsed), "")
    out: dict[str, Any] = {"parsed": parsed, "total": total, "expected": expected}
    if example:
        out["example"] = _excerpt(example)
    return out


def _excerpt(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= EXAMPLE_CHARS else "..." + text[-EXAMPLE_CHARS:]


def _detail(evidence: Any) -> Mapping[str, Any]:
    detail = evidence.get("detail") if isinstance(evidence, Mapping) else getattr(evidence, "detail", None)
    return detail or {}


def _agentic(detail: Mapping[str, Any]) -> ReplyStats:
    source = str(detail.get("choice_source", ""))
    if source == "model":
        return ReplyStats(1, 1, "[CHOICE] <candidate number>")
    if "unparseable" in source:
        return ReplyStats(0, 1, "[CHOICE] <candidate number>", _excerpt(detail.get("final_reply", "")))
    return ReplyStats()


def reply_stats(evidence: Mapping[str, Any]) -> ReplyStats:
    """Sum of ``detail["replies"]`` over a screening's evidence (``Evidence`` objects or stored dicts)."""
    total = ReplyStats()
    for ev in evidence.values():
        detail = _detail(ev)
        r = detail.get("replies")
        if isinstance(r, Mapping):
            total += ReplyStats(
                int(r.get("parsed", 0)), int(r.get("total", 0)), str(r.get("expected", "")), str(r.get("example", ""))
            )
        elif "choice_source" in detail:
            total += _agentic(detail)
    return total


def final_stats(matches: Iterable[Mapping[str, Any]]) -> ReplyStats:
    """Reply stats of a final round-robin from its matches (``choice`` None = unparsed)."""
    stats = ReplyStats(expected="[CHOICE] <letter>")
    for m in matches:
        ok = m.get("choice") is not None
        stats += ReplyStats(int(ok), 1, "", "" if ok else _excerpt(m.get("raw", "")))
    return stats


def health_by_screener(
    screenings: Iterable[Screening], final_matches: Sequence[Mapping[str, Any]] = ()
) -> dict[str, dict[str, Any]]:
    """``{screener name: {"parsed", "total", "rate", "screenings"}}`` from a run's stored screenings.

    Only screeners that made LLM replies appear; ``final_matches`` (the matches of its ``final_selection``
    event) add a ``final`` entry for the round-robin.
    """
    out: dict[str, tuple[ReplyStats, int]] = {}
    for screening in screenings:
        stats = reply_stats(screening.evidence)
        if stats.total:
            name = screening.screener or "?"
            before, n = out.get(name, (ReplyStats(), 0))
            out[name] = (before + stats, n + 1)
    if final_matches:
        out["final"] = (final_stats(final_matches), 1)
    return {name: {**s.to_dict(), "screenings": n} for name, (s, n) in out.items()}


def model_names(screener: Any) -> list[str]:
    """Names of the models a screener (and its members or stages) asks, in a stable order."""
    names: list[str] = []
    for attr in ("model", "judge", "final_model"):
        model = getattr(screener, attr, None)
        name = getattr(model, "name", "") if model is not None else ""
        if name and name not in names:
            names.append(name)
    for attr in ("screeners", "members", "stages"):
        for sub in getattr(screener, attr, None) or []:
            names += [n for n in model_names(sub) if n not in names]
    return names


class ReplyHealth:
    """Watches one run's screenings; warns on a low parse rate and stops a screener that never parses."""

    noun = "screener"  # how the warning names what replied
    error: type[Exception] = UnparseableReplies  # raised at the streak limit

    def __init__(
        self, screener: str, model: str = "", min_parse_rate: float = 0.5, max_unparsed_screenings: int = 3
    ) -> None:
        self.screener = screener
        self.model = model or "(unknown model)"
        self.min_parse_rate = min_parse_rate
        self.max_unparsed_screenings = max_unparsed_screenings
        self.streak = 0
        self.seen = ReplyStats()

    @classmethod
    def watching(cls, screener: Any, min_parse_rate: float = 0.5, max_unparsed_screenings: int = 3) -> ReplyHealth:
        """A tracker of ``screener``'s replies, named by its ``name`` and its models (``model_names``).

        An LLM screener builds its own (``.health``) last in its constructor, from its reply-health options.
        """
        return cls(str(screener.name), ", ".join(model_names(screener)), min_parse_rate, max_unparsed_screenings)

    @classmethod
    def for_screener(cls, screener: Screener) -> ReplyHealth:
        """The tracker ``screener`` built (``.health``: the LLM screeners), else one with the defaults."""
        attached = getattr(screener, "health", None)
        if isinstance(attached, ReplyHealth):
            return attached
        return cls(screener.name, ", ".join(model_names(screener)))

    def observe(self, screening: Any) -> ReplyStats:
        """Account one screening; raise ``UnparseableReplies`` when the streak limit is reached."""
        stats = reply_stats(screening.evidence if hasattr(screening, "evidence") else screening.get("evidence", {}))
        return self.account(stats)

    def account(self, stats: ReplyStats) -> ReplyStats:
        """Account one observation's replies (no replies: ignored); raise ``self.error`` at the streak limit.

        Subclasses for other repliers (the engine's child-making roles) set ``noun`` and ``error`` and
        override ``message``.
        """
        if not stats.total:
            return stats
        self.seen += stats
        self.streak = self.streak + 1 if stats.parsed == 0 else 0
        self.warn_low(stats, self.min_parse_rate)
        if self.streak >= self.max_unparsed_screenings:
            raise self.error(self.message(stats))
        return stats

    def warn_low(self, stats: ReplyStats, threshold: float, where: str = "") -> None:
        """Log one WARNING when ``stats`` parsed below ``threshold``: who replied, the rates (this time and
        so far), the format expected and an unparsed reply; ``where`` leads the line (``"round 3: "``)."""
        if stats.rate is None or stats.rate >= threshold:
            return
        log.warning(
            "%sthe %s %r (model %s) parsed only %d of %d replies (%.0f%%, below %.0f%%; %d of %d so far); "
            "expected %s; an unparsed reply: %r",
            where,
            self.noun,
            self.screener,
            self.model,
            stats.parsed,
            stats.total,
            100 * stats.rate,
            100 * threshold,
            self.seen.parsed,
            self.seen.total,
            stats.expected or "the tagged format",
            stats.example,
        )

    def message(self, stats: ReplyStats) -> str:
        return (
            f"screener {self.screener!r} (model {self.model}) produced no parseable reply in {self.streak} "
            f"screenings in a row ({stats.total} replies in the last one), so its picks would be random. "
            f"Expected a final line like {stats.expected or 'the tagged verdict'}; the model wrote: "
            f"{stats.example!r}. Fix: use a model that follows the format (or one fine-tuned for it), raise "
            "its max_tokens if replies are cut off, or choose another screener (screener.name=random to go on "
            "without one); screener.options.max_unparsed_screenings sets how many such screenings stop a run"
        )


def check_final(matches: Iterable[Mapping[str, Any]], model: str = "", min_parse_rate: float = 0.5) -> ReplyStats:
    """Warn (never stop) when a final round-robin parsed below ``min_parse_rate``; returns its stats."""
    stats = final_stats(matches)
    if stats.rate is not None and stats.rate < min_parse_rate:
        log.warning(
            "final round-robin (model %s): only %d of %d replies parsed; expected %s; an unparsed reply: %r",
            model or "(unknown model)",
            stats.parsed,
            stats.total,
            stats.expected,
            stats.example,
        )
    return stats


__all__ = [
    "ReplyHealth",
    "ReplyStats",
    "check_final",
    "final_stats",
    "health_by_screener",
    "model_names",
    "replies_detail",
    "reply_stats",
    "watch",
]


@dataclass(eq=False, repr=False, kw_only=True)
class WatchesReplies:
    """Base of an LLM screener dataclass: the ``health`` tracker built from the reply-health limits of its
    ``options`` (a ``HealthOptions``) once every field is set. A subclass with a ``__post_init__`` of its own
    calls this one last."""

    health: ReplyHealth = field(init=False)

    def __post_init__(self) -> None:
        self.health = watch(self)


def watch(screener: Any) -> ReplyHealth:
    """The ``ReplyHealth`` of ``screener`` from the reply-health limits of its ``options`` (a ``HealthOptions``)."""
    options = screener.options
    return ReplyHealth.watching(screener, options.min_parse_rate, options.max_unparsed_screenings)
