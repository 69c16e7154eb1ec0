"""Execution-derived labels: re-exported from ``verifyless.data.labels`` (the one implementation)."""

from verifyless.data.labels import (  # noqa: F401
    FIVE,
    MIN_IMPROVING,
    THREE,
    ChildOutcome,
    LabelResult,
    __all__,  # noqa: F401
    five_level,
    label_children,
    label_pairs,
    label_table,
    parent_five_levels,
    relative_delta,
    three_way,
    to_three,
)
