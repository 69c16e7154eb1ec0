"""Variants of the shipped scripted run for benches: ``examples/scripted/diabetes.yaml`` with its implementer
replies rewritten (a model that crashes now and then, one that regularises too hard, one that re-tries).

Benches import it by name (``from _scripted import rewritten``): a bench runs as ``python bench/<name>.py``,
which puts ``bench/`` first on ``sys.path``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "scripted" / "diabetes.yaml"


def rewritten(
    out: Path, rewrite: Callable[[list[str]], list[str]], *, name: str | None = None, source: Path = SCRIPT
) -> Path:
    """Write ``source`` to ``out`` with every implementer rule's replies replaced by ``rewrite(replies)`` (and the
    script's model name set to ``name`` when given); returns ``out``."""
    data = yaml.safe_load(source.read_text())
    for rule in data["rules"]:
        if rule.get("role") == "implementer":
            rule["replies"] = rewrite(rule["replies"])
    if name is not None:
        data["name"] = name
    out.write_text(yaml.safe_dump(data))
    return out
