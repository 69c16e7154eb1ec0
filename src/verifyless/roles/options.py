"""Typed options of the LLM roles (``roles.llm`` in the run configuration).

Defaults follow the critic paper's OpenEvolve setup (appendix I.1): the idea
proposer samples at temperature 0.8, each idea drawn independently; the
summarizer runs at temperature 0.4 and writes 120-200 words. Kept light (pydantic
and the registry only) so that ``verifyless.config`` can import it without pulling in the roles.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from verifyless.registry import StrictOptions


class LLMRoleOptions(StrictOptions):
    """Sampling and prompting options of the four LLM roles."""

    proposer_mode: Literal["independent", "waves"] = Field(
        "independent",
        description="independent: N concurrent draws, none sees another's idea (the papers); "
        "waves: draws in waves of wave_size, each wave told the earlier waves' ideas to avoid",
    )
    proposer_temperature: float = Field(0.8, ge=0.0, le=2.0, description="idea sampling temperature (paper: 0.8)")
    wave_size: int = Field(4, ge=1, description="concurrent draws per wave (proposer_mode=waves only)")
    max_avoid: int = Field(24, ge=0, description="at most this many already-tried ideas are listed to avoid")
    summarizer_temperature: float = Field(0.4, ge=0.0, le=2.0, description="summarizer temperature (paper: 0.4)")
    summary_min_words: int = Field(120, ge=1, description="shortest accepted summary, in words (paper: 120)")
    summary_max_words: int = Field(200, ge=1, description="longest accepted summary, in words (paper: 200)")
    brief_temperature: float = Field(0.3, ge=0.0, le=2.0, description="temperature of the one-off task brief")
    brief_rounds: int = Field(
        1,
        ge=1,
        le=5,
        description="calls of the task brief: 1 asks once; n > 1 is the critic paper's multi-round probing, n - 1 "
        "rounds examining the setup, the data, the metric and the constraints in turn, then the briefing",
    )
    implementer_temperature: float = Field(0.2, ge=0.0, le=2.0, description="temperature of implement and repair")
    max_attempts: int = Field(3, ge=1, le=10, description="implementer replies per child, the first included")
    stepwise_max_steps: int = Field(
        4, ge=2, le=10, description="steps of a plan coded one call each (implement_mode=stage); the rest are merged"
    )
    # Reply caps per role. None sends no cap of the role's own (the model's max_tokens, if any, applies): a cap
    # is part of a request's cache identity, so a default here would make every stored run miss on replay.
    brief_max_tokens: int | None = Field(None, ge=1, description="reply cap of the brief (None: the model's)")
    proposer_max_tokens: int | None = Field(
        None, ge=1, description="reply cap of one proposal, e.g. 768 to stop a runaway reply early (None: the model's)"
    )
    implementer_max_tokens: int | None = Field(None, ge=1, description="reply cap of implement and repair")
    summarizer_max_tokens: int | None = Field(
        None, ge=1, description="reply cap of a summary, e.g. 768 for 120-200 words (None: the model's)"
    )
    format_reminders: int = Field(
        1, ge=0, le=5, description="times a proposal without a readable idea is sent back with a format reminder"
    )

    @model_validator(mode="after")
    def _word_range(self) -> LLMRoleOptions:
        if self.summary_min_words > self.summary_max_words:
            raise ValueError(
                f"summary_min_words ({self.summary_min_words}) must not exceed "
                f"summary_max_words ({self.summary_max_words})"
            )
        return self


__all__ = ["LLMRoleOptions"]
