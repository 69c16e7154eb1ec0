"""Critic datasets as the trainers read them, and a synthetic keyword dataset for tests and smoke runs.

``load_dataset`` and ``messages_for`` are the data package's loader and
``critic_messages``, so training sees exactly the prompt the screening
critic sends.

``keyword_dataset`` builds rows in the shared critic-dataset schema whose
three-way label is decided by one keyword in the child summary. A model can
only beat chance on it by reading the child summary, which makes it a small,
honest target for GRPO tests.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from verifyless.critic_data import critic_messages, load_critic_dataset
from verifyless.errors import ConfigError

KEYWORDS: Mapping[str, str] = {"improve": "ensemble", "tie": "rename", "lose": "delete"}
_TIERS = ("small", "medium", "big")


def load_dataset(path: str | Path) -> Any:
    """The critic ``DatasetDict`` saved at ``path`` (``verifyless.critic_data.load_critic_dataset``: clear ``ConfigError``s)."""
    return load_critic_dataset(path)


def split(dataset: Any, name: str) -> Any:
    if name not in dataset or len(dataset[name]) == 0:
        raise ConfigError(
            f"the critic dataset has no '{name}' rows (splits: "
            f"{ {k: len(v) for k, v in dataset.items()} }); collect more data or choose another split"
        )
    return dataset[name]


def messages_for(row: Mapping[str, Any], prompt: str = "critic") -> list[dict[str, str]]:
    """The critic's chat prompt for one row (``verifyless.critic_data.critic_messages``, the screening critic's own).

    ``prompt``: the template under ``prompts/screen/`` (``critic`` or ``freestyle``).
    """
    return list(critic_messages(row, prompt))


def critique_text(
    label3: str, tier: str | None, reason: str = "from the criteria", criterion: str = "the change"
) -> str:
    """A short critique in the critic's exact output format (``criterion`` is what its one criterion line says)."""
    tier_word = tier if label3 == "improve" and tier else "NA"
    return f"Criterion 1: {criterion}.\n[IMPROVEMENT] {label3} --- {reason}.\n[WINTIER] {tier_word} --- size."


def _summary(keyword: str) -> str:
    # The keyword appears several times so that a tiny random model can pick it out of a long prompt.
    return f"The child will {keyword} it: {keyword} the features, {keyword} the model, {keyword} the outputs."


def keyword_rows(
    n: int,
    rng: random.Random,
    *,
    split_name: str,
    critique_labels: str = "true",
    label_weights: Mapping[str, float] | None = None,
    name_keyword: bool = False,
    balanced: bool = False,
) -> list[dict[str, Any]]:
    """``n`` rows whose label3 is set by a keyword in the child summary.

    ``critique_labels``: ``"true"`` writes critiques with the row's label,
    ``"random"`` with a random verdict (format without the answer), ``"none"`` no critique.
    ``label_weights`` skews how often each label (hence keyword) is drawn (default: uniform).
    ``name_keyword``: the critique's criterion line names the change (``the child will <keyword>``)
    before the verdict, as a critic's reasoning would.
    ``balanced``: labels with a positive weight take turns (row ``i`` gets the ``i``-th in a cycle), so
    any run of consecutive rows is balanced across them.
    """
    rows = []
    labels = sorted(KEYWORDS)
    weights = [float((label_weights or {}).get(label, 0.0 if label_weights else 1.0)) for label in labels]
    cycle = [label for label, w in zip(labels, weights, strict=True) if w > 0]
    for i in range(n):
        label = cycle[i % len(cycle)] if balanced else rng.choices(labels, weights)[0]
        delta = {"improve": 0.1, "tie": 0.0, "lose": -0.1}[label]
        shown = label if critique_labels == "true" else rng.choice(sorted(KEYWORDS))
        criterion = f"the child will {KEYWORDS[label]}" if name_keyword else "the change"
        critique = None if critique_labels == "none" else critique_text(shown, rng.choice(_TIERS), criterion=criterion)
        rows.append(
            {
                "example_id": f"{split_name}-{i}",
                "task": "keyword",
                "run_id": "synthetic",
                "parent_id": f"p{i}",
                "child_id": f"c{i}",
                "task_description": "Improve the score.",
                "understanding": "",
                "criteria": ["what the change does"],
                "parent_summary": "The parent model.",
                "child_summary": _summary(KEYWORDS[label]),
                "idea": f"{KEYWORDS[label]} it",
                "parent_score": 0.5,
                "child_score": 0.5 + delta,
                "delta": delta,
                "higher_is_better": True,
                "label3": label,
                "label5": {"improve": "SmallWin", "tie": "Tie", "lose": "Lose"}[label],
                "critique": critique,
                "stratum": None if critique is None else "sampled",
                "schema_version": 1,
                "source": "synthetic",
                "parent_hash": f"p{i}",
                "child_hash": f"c{i}",
                "created": "",
                "data_report": "",
            }
        )
    return rows


def keyword_dataset(
    out: str | Path,
    *,
    n: Mapping[str, int] | None = None,
    seed: int = 0,
    critique_labels: str = "true",
    label_weights: Mapping[str, float] | None = None,
    name_keyword: bool = False,
    balanced: bool = False,
) -> Path:
    """Save a synthetic keyword ``DatasetDict`` (splits sft/grpo/bench) at ``out``; returns the folder.

    ``critique_labels``, ``label_weights``, ``name_keyword`` and ``balanced`` as in ``keyword_rows``.
    """
    from datasets import Dataset, DatasetDict

    rng = random.Random(seed)
    sizes = dict(n or {"sft": 24, "grpo": 24, "bench": 12})
    splits = {
        name: Dataset.from_list(
            keyword_rows(
                count,
                rng,
                split_name=name,
                critique_labels=critique_labels,
                label_weights=label_weights,
                name_keyword=name_keyword,
                balanced=balanced,
            )
        )
        for name, count in sizes.items()
    }
    DatasetDict(splits).save_to_disk(str(out))
    card = {
        "schema_version": 1,
        "kind": "synthetic keyword dataset (verifyless.train.critic_rows.keyword_dataset)",
        "seed": seed,
        "sizes": sizes,
        "critique_labels": critique_labels,
        "label_weights": dict(label_weights or {}),
        "name_keyword": name_keyword,
        "balanced": balanced,
    }
    (Path(out) / "card.json").write_text(json.dumps(card, indent=2))
    return Path(out)


__all__ = ["KEYWORDS", "critique_text", "keyword_dataset", "keyword_rows", "load_dataset", "messages_for", "split"]
