"""The option records every screener's options build on (each screener's own class sits beside it).

A screener's options are a ``verifyless.registry.StrictOptions`` model: unknown keys are rejected, each
field carries its help text (rendered into docs/configuration.md by ``config_doc``). ``BaseOptions`` holds
what every ranking screener takes, ``HealthOptions`` adds the reply-health checks of screeners that read
model replies, ``LLMOptions`` the model choice and sampling of a one-model screener.
"""

from __future__ import annotations

from pydantic import Field

from verifyless.registry import StrictOptions


class BaseOptions(StrictOptions):
    n_verify: int | None = Field(
        None, ge=0, description="how many of the ranking to verify (default: the engine's engine.verify_per_expansion)"
    )
    name: str | None = Field(None, description="the name recorded in screening events (default: the screener name)")


class HealthOptions(BaseOptions):
    min_parse_rate: float = Field(0.5, ge=0.0, le=1.0, description="warn when fewer of a screening's replies parse")
    max_unparsed_screenings: int = Field(
        3, ge=1, description="stop the run (exit code 8) after this many screenings in a row in which no reply parsed"
    )
    format_reminders: int = Field(
        1,
        ge=0,
        description="times an unreadable reply is sent back with a short format reminder before it counts "
        "as unparsed (0: never; each costs one call)",
    )


class LLMOptions(HealthOptions):
    model: str | None = Field(
        None, description="key in roles.models of the model to use (default: the screener's role key, else 'default')"
    )
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="sampling temperature (None: the model's)")
    max_tokens: int | None = Field(None, ge=1, description="reply length cap per call (None: the model's)")


class LocalCriticOptions(HealthOptions):
    model: str | None = Field(None, description="key in roles.models of the local critic (provider: local)")


__all__ = ["BaseOptions", "HealthOptions", "LLMOptions", "LocalCriticOptions", "StrictOptions"]
