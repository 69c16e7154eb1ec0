"""Optional LLM "prompt writer": proposes new wordings of the tunable sections.

With a writer model, ``writer_variants`` asks it, once before the search and
from the baseline prompt, for ``n`` rewrites of every section that has
package variants (the sections meant to be tuned: the reasoning / criteria
and aggregation guidance, the answer instructions, the system text). A reply
is the text between ``<section>`` and ``</section>`` (else the whole reply,
without code fences). A rewrite that changes the section's placeholders is
dropped; the search later skips any candidate that loses the reply tags. The
rewrites join the variant pool and are scored like ours, so a poor one costs
one evaluation and is never kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from verifyless.model.base import Model, ModelRequest
from verifyless.offline.tune.doc import PromptDoc, Variant
from verifyless.prompts import messages, placeholders, template_text

log = logging.getLogger(__name__)
_BLOCK = re.compile(r"<section>\s*(.*?)\s*</section>", re.S | re.IGNORECASE)
_FENCE = re.compile(r"^```\w*\n(.*?)\n```$", re.S)


def section_text(reply: str) -> str:
    """The proposed section body in a writer reply ('' when there is none)."""
    found = _BLOCK.findall(reply or "")
    text = found[-1] if found else (reply or "").strip()
    fenced = _FENCE.match(text)
    return (fenced.group(1) if fenced else text).strip()


async def writer_variants(
    model: Model, doc: PromptDoc, sections: Sequence[str], n: int = 2, *, temperature: float = 0.9
) -> list[Variant]:
    """Up to ``n`` writer rewrites per section in ``sections`` (see module docstring)."""
    found: list[Variant] = []
    for section in sections:
        body = doc.body(section)
        if body is None:
            continue
        names = ", ".join("{{" + p + "}}" for p in sorted(placeholders(body))) or "(none)"
        request = messages("tune/writer", prompt=template_text(doc.template()), section=section, body=body, names=names)
        reply = await model.generate(ModelRequest(messages=request, role="prompt-writer", temperature=temperature, n=n))
        for i, choice in enumerate(reply.choices):
            text = section_text(choice.text)
            if not text or placeholders(text) != placeholders(body):
                log.info("prompt writer reply %d for %r dropped (empty or placeholders changed)", i, section)
                continue
            found.append(Variant(section, f"writer-{len(found) + 1}", text, source="writer"))
    return found


__all__ = ["section_text", "writer_variants"]
