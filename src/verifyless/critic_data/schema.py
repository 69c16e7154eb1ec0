"""The critic dataset schema (one row per verified parent -> child example).

The column contract is shared with the training code (see COMMON contract and
docs/design/critic-data.md). ``SCHEMA_VERSION`` is written into every row and into
the dataset card; ``load_critic_dataset`` refuses (with a clear message) or
migrates datasets written by another version.

``data_report`` is the data report of the run the example came from (markdown, '' when the run had none):
the critic's prompt for a row carries it exactly as the run's critic prompt did (``critic_data.prompt``).
It was added to version 1 with a default (``DEFAULTS``): rows and datasets written before it read as ''.

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

# Every column in its stored order, with its kind: str, optional str (None allowed), float, bool, int,
# or a list of strings. The per-kind tuples below are read off this one table.
_SCHEMA: tuple[tuple[str, str], ...] = (
    ("example_id", "str"),
    ("task", "str"),
    ("run_id", "str"),
    ("parent_id", "str"),
    ("child_id", "str"),
    ("task_description", "str"),
    ("understanding", "str"),
    ("criteria", "strings"),
    ("parent_summary", "str"),
    ("child_summary", "str"),
    ("idea", "str"),
    ("parent_score", "float"),
    ("child_score", "float"),
    ("delta", "float"),
    ("higher_is_better", "bool"),
    ("label3", "str"),
    ("label5", "optional str"),
    ("critique", "optional str"),
    ("stratum", "optional str"),
    ("schema_version", "int"),
    ("source", "str"),
    ("parent_hash", "str"),
    ("child_hash", "str"),
    ("created", "str"),
    ("data_report", "str"),
)
# Columns added to version 1 after datasets were written with it, with the value such a dataset means: a row
# without a data report was made from a run without one, and its prompt had none (``critic_data.prompt``).
DEFAULTS: dict[str, Any] = {"data_report": ""}
COLUMNS: tuple[str, ...] = tuple(name for name, _ in _SCHEMA)
STRING_COLUMNS: tuple[str, ...] = tuple(name for name, kind in _SCHEMA if kind == "str")
FLOAT_COLUMNS: tuple[str, ...] = tuple(name for name, kind in _SCHEMA if kind == "float")
OPTIONAL_STRING_COLUMNS: tuple[str, ...] = tuple(name for name, kind in _SCHEMA if kind == "optional str")


def features() -> Any:
    """The Hugging Face ``Features`` of a split (imports ``datasets``)."""
    from datasets import Features, Sequence, Value

    kinds = {
        "str": Value("string"),
        "optional str": Value("string"),
        "float": Value("float64"),
        "bool": Value("bool"),
        "int": Value("int32"),
        "strings": Sequence(Value("string")),
    }
    spec = {name: kinds[kind] for name, kind in _SCHEMA}
    return Features(spec)


def check_row(row: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first missing column or bad label of ``row``."""
    missing = [c for c in COLUMNS if c not in row and c not in DEFAULTS]
    if missing:
        raise ValueError(f"example {row.get('example_id')!r} lacks columns {missing}")
    if row["label3"] not in ("improve", "tie", "lose"):
        raise ValueError(f"example {row['example_id']!r}: label3 {row['label3']!r} is not improve|tie|lose")
    if row["stratum"] is not None and row["stratum"] not in STRATA:
        raise ValueError(f"example {row['example_id']!r}: stratum {row['stratum']!r} is not one of {STRATA}")


__all__ = ["COLUMNS", "DEFAULTS", "SCHEMA_VERSION", "SPLITS", "STRATA", "check_row", "features"]
