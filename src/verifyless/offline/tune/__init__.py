"""Screener prompt tuning (``verifyless tune screener``): search instruction edits on a dev slice.

``doc`` splits a prompt into named sections and defines the edits (section
moves, alternative wordings from ``prompts/tune/variants/*.md`` or an LLM prompt writer);
``evaluate`` carves the dev slice and scores a prompt (Dir-3 for the critic,
pairwise accuracy for the tournament's judge); ``search`` runs the seeded
hill climb and reports baseline vs tuned on dev and on the untouched bench
split. See docs/design/screening.md, "Prompt tuning".
"""

__all__: list[str] = []  # the modules are the interface
