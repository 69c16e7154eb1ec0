"""The critic dataset schema (one row per verified parent -> child example).

The column contract is shared with the training code (see COMMON contract and
docs/design/data.md). ``SCHEMA_VERSION`` is written into every row and into
the dataset card; ``load_critic_dataset`` refuses (with a clear message) or
migrates datasets written by another version.

Columns beyond the shared contract (``source``, ``parent_hash``,
``child_hash``, ``created``) are provenance: where the example came from, and
the program hashes the splitter uses so that no parent program lands in two
splits even when two runs share it (every run of a task starts from the same
baseline).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SCHEMA_VERSION = 1
SPLITS: tuple[str, ...] = ("sft", "grpo", "bench")
STRATA: tuple[str, ...] = ("sampled", "revised", "guided")

STRING_COLUMNS: tuple[str, ...] = (
    "example_id",
    "task",
    "run_id",
    "parent_id",
    "child_id",
    "task_description",
    "understanding",
    "parent_summary",
    "child_summary",
    "idea",
    "label3",
    "source",
    "parent_hash",
    "child_hash",
    "created",
)
FLOAT_COLUMNS: tuple[str, ...] = ("parent_score", "child_score", "delta")
OPTIONAL_STRING_COLUMNS: tuple[str, ...] = ("label5", "critique", "stratum")
COLUMNS: tuple[str, ...] = (
    "example_id",
    "task",
    "run_id",
    "parent_id",
    "child_id",
    "task_description",
    "understanding",
    "criteria",
    "parent_summary",
    "child_summary",
    "idea",
    "parent_score",
    "child_score",
    "delta",
    "higher_is_better",
    "label3",
    "label5",
    "critique",
    "stratum",
    "schema_version",
    "source",
    "parent_hash",
    "child_hash",
    "created",
)


def features() -> Any:
    """The Hugging Face ``Features`` of a split (imports ``datasets``)."""
    from datasets import Features, Sequence, Value

    spec: dict[str, Any] = {}
    for name in COLUMNS:
        if name in STRING_COLUMNS or name in OPTIONAL_STRING_COLUMNS:
            spec[name] = Value("string")
        elif name in FLOAT_COLUMNS:
            spec[name] = Value("float64")
        elif name == "criteria":
            spec[name] = Sequence(Value("string"))
        elif name == "higher_is_better":
            spec[name] = Value("bool")
        elif name == "schema_version":
            spec[name] = Value("int32")
    return Features(spec)


def check_row(row: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first missing column or bad label of ``row``."""
    missing = [c for c in COLUMNS if c not in row]
    if missing:
        raise ValueError(f"example {row.get('example_id')!r} lacks columns {missing}")
    if row["label3"] not in ("improve", "tie", "lose"):
        raise ValueError(f"example {row['example_id']!r}: label3 {row['label3']!r} is not improve|tie|lose")
    if row["stratum"] is not None and row["stratum"] not in STRATA:
        raise ValueError(f"example {row['example_id']!r}: stratum {row['stratum']!r} is not one of {STRATA}")


__all__ = ["COLUMNS", "SCHEMA_VERSION", "SPLITS", "STRATA", "check_row", "features"]
