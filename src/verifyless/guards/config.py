"""``GuardsConfig``: which guards run before a verification, and whether their findings block.

Each guard's mode is ``off`` (not run), ``advisory`` (its findings are notes on
the child; the program is still verified) or ``blocking`` (a finding makes the
child ``guard-failed`` with the finding as its reason, and it can be repaired).
This is the ``guards:`` section of a run configuration.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Mode = Literal["off", "advisory", "blocking"]


def _blocking(description: str) -> Any:
    """The field of a guard that runs, and blocks, unless the configuration says otherwise."""
    return Field(default="blocking", description=description)


class GuardsConfig(BaseModel):
    """Guards run on every implementation before it may be verified (MLEvolve's code review)."""

    model_config = ConfigDict(extra="forbid")

    syntax: Mode = _blocking("the program must parse as Python")
    undefined_names: Mode = _blocking(
        "a name that is read but never defined, imported or a builtin (a typo, a missing import)"
    )
    imports: Mode = _blocking(
        "a module the sandbox's Python environment cannot import (checked with find_spec against "
        "that environment's path, plus modules the workspace holds); imports inside try/except "
        "ImportError are skipped",
    )
    paths: Mode = _blocking(
        "a literal absolute path (or one climbing out with '..') outside the workspace, e.g. a task "
        "folder's hidden labels; /dev/null, /dev/shm and /proc/self are allowed",
    )
    policy: Mode = _blocking(
        "network or subprocess use that the task forbids (task.yaml 'policy:'); a task's 'warn' "
        "gives advisory findings whatever this says, 'allow' (the default) none",
    )
    metric_write: Mode = _blocking(
        "writing the metric instead of computing it: a literal number stored under the metric's "
        "name, or writing the evaluator's metrics.json",
    )
    leakage: Mode = _blocking(
        "native tasks: the fit step touching the evaluation inputs (validation or test files or "
        "variables passed to a fit call, or read inside the fit function)",
    )
    reviewer: Mode = Field(
        default="off", description="an LLM reviewer reads the change and may reject it (one LLM call per child)"
    )
    reviewer_model: str = Field(
        default="default", description="roles.models key of the model the reviewer uses (falls back to 'default')"
    )
    only_new: bool = Field(
        default=True,
        description="report only findings the parent program does not also have (a task's own harness never "
        "blocks its children)",
    )
    repair_attempts: int = Field(
        default=1,
        ge=0,
        le=5,
        description="how many times a guard-failed implementation goes back to the implementer's repair with "
        "the reasons, keeping the idea, before the child stays guard-failed",
    )


__all__ = ["GuardsConfig", "Mode"]
