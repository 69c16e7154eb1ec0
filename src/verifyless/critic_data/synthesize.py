"""Teacher critique synthesis with rejection sampling (critic paper, Section 2.3).

For every example the teacher sees exactly the critic's prompt
(``verifyless.critic_data.critic_messages``) and:

1. **sampled**: ``samples`` critiques (default 8) without the label; if any
   parses (with the critic's own ``parse_verdict``) to the target label, one
   of the matching ones is kept (seeded choice);
2. **revised**: otherwise the most frequent wrong parsed label is ruled out
   in a hint appended to the prompt (``prompts/data/hint.md``) and ``samples``
   more are drawn; a match is kept;
3. **guided**: otherwise the label is revealed (``prompts/data/guided.md``) and the
   teacher is asked for reasoning consistent with it; a parsed match is kept.

When no sampled critique parsed to any label there is nothing to rule out:
the revised stage is skipped and the example goes to the guided stage.
An example none of the three produced keeps ``critique=None`` and
``stratum=None`` and is counted as failed. The target is the five-level
label when the example has one, else the three-way label (compared with the
verdict's direction). The kept text is the teacher's critique verbatim, so it
is in the critic's soft-rubric format by construction of the check.

Calls go through the given model: wrap it in ``CachedModel`` (the CLI does,
with a response cache beside the output) so a rerun pays nothing for
requests already answered. ``synthesize_rows`` also appends every finished
example to a JSON-lines journal and skips examples already in it, so a
killed synthesis resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from verifyless.critic_data.prompt import critic_messages
from verifyless.model.base import Message, ModelRequest, Usage
from verifyless.outcome import FIVE, to_three
from verifyless.prompts import render
from verifyless.screen.critic import parse_verdict

log = logging.getLogger(__name__)

PAPER_SHARES = {"sampled": 44.4, "revised": 31.6, "guided": 23.9}
_TAGS = {
    "BigWin": ("improve", "big"),
    "MediumWin": ("improve", "medium"),
    "SmallWin": ("improve", "small"),
    "Tie": ("tie", "NA"),
    "Lose": ("lose", "NA"),
    "improve": ("improve", "big | medium | small"),
    "tie": ("tie", "NA"),
    "lose": ("lose", "NA"),
}
_WORDS = {
    "BigWin": "a big improvement over the parent",
    "MediumWin": "a medium improvement over the parent",
    "SmallWin": "a small improvement over the parent",
    "Tie": "no change from the parent (a tie)",
    "Lose": "worse than the parent (a loss)",
    "improve": "better than the parent (an improvement)",
    "tie": "no change from the parent (a tie)",
    "lose": "worse than the parent (a loss)",
}


@dataclass(frozen=True)
class SynthesisSettings:
    samples: int = 8
    temperature: float = 0.7
    max_tokens: int | None = None
    seed: int = 0
    concurrency: int = 4


@dataclass(frozen=True)
class Synthesized:
    """The outcome for one example (``stratum`` None = no stage produced a matching critique)."""

    example_id: str
    target: str
    stratum: str | None
    critique: str | None
    ruled_out: str | None = None
    predicted: Mapping[str, list[str | None]] = field(default_factory=dict)  # stage -> parsed labels


def target_of(row: Mapping[str, Any]) -> str:
    return str(row["label5"]) if row.get("label5") else str(row["label3"])


def parsed_label(text: str, target: str) -> str | None:
    """The critique's label in the target's label space (five-level or three-way); None if it does not parse."""
    verdict = parse_verdict(text)
    if verdict is None:
        return None
    return verdict.label if target in FIVE else to_three(verdict.label)


def _messages(messages: list[dict[str, str]]) -> list[Message]:
    return [Message(m["role"], m["content"]) for m in messages]  # type: ignore[arg-type]  # roles from the template


def _with_extra(messages: list[dict[str, str]], extra: str) -> tuple[Message, ...]:
    out = _messages(messages)
    last = max(i for i, m in enumerate(out) if m.role == "user")
    out[last] = Message("user", out[last].content + "\n\n" + extra)
    return tuple(out)


def hint_text(ruled_out: str) -> str:
    improvement, tier = _TAGS[ruled_out]
    wrong = f"{_WORDS[ruled_out]} (`[IMPROVEMENT] {improvement}`" + (
        f", `[WINTIER] {tier}`)" if ruled_out in FIVE and improvement == "improve" else ")"
    )
    return render("data/hint", "text", {"ruled_out": wrong})


def guided_text(target: str) -> str:
    improvement, tier = _TAGS[target]
    return render("data/guided", "text", {"outcome": _WORDS[target], "improvement": improvement, "tier": tier})


class Synthesizer:
    """Runs the three stages for one example at a time; ``usage`` sums what was paid (cache misses)."""

    def __init__(self, model: Any, settings: SynthesisSettings = SynthesisSettings()) -> None:
        self.model = model
        self.settings = settings
        self.usage = Usage()
        self.calls = 0

    async def _sample(self, messages: tuple[Message, ...], offset: int = 0) -> list[str]:
        s = self.settings
        reply = await self.model.generate(
            ModelRequest(
                messages=messages,
                role="teacher",
                temperature=s.temperature,
                max_tokens=s.max_tokens,
                n=s.samples,
                sample_offset=offset,
            )
        )
        self.calls += 1
        if not reply.cached:
            self.usage = self.usage + reply.usage
        return [c.text for c in reply.choices]

    async def one(self, row: Mapping[str, Any]) -> Synthesized:
        target = target_of(row)
        rng = random.Random(f"{self.settings.seed}:{row['example_id']}")
        base = critic_messages(row)
        predicted: dict[str, list[str | None]] = {}
        texts = await self._sample(tuple(_messages(base)))
        kept = self._keep(texts, target, rng, predicted, "sampled")
        if kept is not None:
            return Synthesized(str(row["example_id"]), target, "sampled", kept, None, predicted)
        wrong = Counter(lab for lab in predicted["sampled"] if lab is not None and lab != target)
        ruled_out = _most_frequent(wrong)
        if ruled_out is not None:
            texts = await self._sample(_with_extra(base, hint_text(ruled_out)))
            kept = self._keep(texts, target, rng, predicted, "revised")
            if kept is not None:
                return Synthesized(str(row["example_id"]), target, "revised", kept, ruled_out, predicted)
        texts = await self._sample(_with_extra(base, guided_text(target)))
        kept = self._keep(texts, target, rng, predicted, "guided")
        return Synthesized(
            str(row["example_id"]), target, "guided" if kept is not None else None, kept, ruled_out, predicted
        )

    @staticmethod
    def _keep(
        texts: Sequence[str], target: str, rng: random.Random, predicted: dict[str, list[str | None]], stage: str
    ) -> str | None:
        labels = [parsed_label(t, target) for t in texts]
        predicted[stage] = labels
        matches = [t for t, lab in zip(texts, labels, strict=False) if lab == target]
        return rng.choice(matches) if matches else None


def _most_frequent(counts: Counter[str]) -> str | None:
    """The most frequent wrong label; ties go to the label that comes first in the label order."""
    if not counts:
        return None
    order = list(FIVE) + ["improve", "tie", "lose"]
    top = max(counts.values())
    return min((lab for lab, n in counts.items() if n == top), key=lambda lab: order.index(lab))


def _read_journal(path: Path) -> dict[str, Synthesized]:
    done: dict[str, Synthesized] = {}
    if not path.is_file():
        return done
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill: that example is synthesised again (from the cache)
        done[data["example_id"]] = Synthesized(**data)
    return done


async def synthesize_rows(
    rows: Sequence[Mapping[str, Any]],
    model: Any,
    settings: SynthesisSettings = SynthesisSettings(),
    *,
    journal: Path | None = None,
    progress: Callable[[Synthesized], None] | None = None,
) -> tuple[dict[str, Synthesized], Synthesizer]:
    """Synthesise critiques for ``rows``; returns results by example id and the synthesizer (for usage).

    With ``journal``, finished examples are appended (and fsynced) there and
    examples already in it are not asked again.
    """
    done = _read_journal(journal) if journal is not None else {}
    synth = Synthesizer(model, settings)
    todo = [r for r in rows if str(r["example_id"]) not in done]
    slots = asyncio.Semaphore(max(1, settings.concurrency))
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) if journal is not None else None

    async def run(row: Mapping[str, Any]) -> None:
        async with slots:
            result = await synth.one(row)
        done[result.example_id] = result
        if fd is not None:
            os.write(fd, (json.dumps(asdict(result)) + "\n").encode("utf-8"))
            os.fsync(fd)
        if progress is not None:
            progress(result)

    try:
        await asyncio.gather(*(run(r) for r in todo))
    finally:
        if fd is not None:
            os.close(fd)
    return done, synth


def strata_report(results: Mapping[str, Synthesized]) -> dict[str, Any]:
    """Counts and percentage shares per stratum (failed included), next to the paper's shares."""
    counts = Counter(r.stratum or "failed" for r in results.values())
    total = sum(counts.values())
    names = ("sampled", "revised", "guided", "failed")
    return {
        "examples": total,
        "counts": {k: counts.get(k, 0) for k in names},
        "shares_percent": {k: round(100.0 * counts.get(k, 0) / total, 1) if total else 0.0 for k in names},
        "paper_shares_percent": dict(PAPER_SHARES),
    }


def apply_results(rows: Sequence[Mapping[str, Any]], results: Mapping[str, Synthesized]) -> list[dict[str, Any]]:
    """Rows with ``critique`` and ``stratum`` filled from ``results`` (rows without a result unchanged)."""
    out = []
    for row in rows:
        res = results.get(str(row["example_id"]))
        new = dict(row)
        if res is not None:
            new["critique"], new["stratum"] = res.critique, res.stratum
        out.append(new)
    return out


__all__ = [
    "PAPER_SHARES",
    "SynthesisSettings",
    "Synthesized",
    "Synthesizer",
    "apply_results",
    "guided_text",
    "hint_text",
    "parsed_label",
    "strata_report",
    "synthesize_rows",
    "target_of",
]
