"""Presets: one plain config file per paper, shipped with the package (``verifyless run --preset NAME``).

A preset is a run configuration in YAML, read as the layer just above the built-in defaults: a ``--config``
file, the CLI's flags and dotted overrides still win over it. Each file states, key by key, which paper
constant it sets and where the paper gives it; ``docs/presets.md`` has the table of constants.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from verifyless.errors import ConfigError
from verifyless.yamlfile import read_yaml

PRESETS = {
    "critic-paper": "Verify Less, Evolve More: OpenEvolve islands 3 x 10 rounds, 16 ideas, a k=16 pointwise critic, "
    "one verification per island round, no repairs",
    "aira-rpm": "AI Research Preference Models: AIRA-dojo greedy Draft/Improve/Debug, 15 children, a pairwise "
    "tournament with BFS context, the final-node tournament",
    "mlevolve": "MLEvolve: progressive MCGS over the run's budget, retrospective memory, top-K ensemble submission",
}


def preset_text(name: str) -> str:
    """The preset file's text, comments included (what ``--dry-run`` prints)."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; use one of: {', '.join(PRESETS)}")
    return resources.files(__package__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")


def load_preset(name: str) -> dict[str, Any]:
    """The preset's settings as a nested mapping (``load_config`` merges them over the defaults)."""
    preset_text(name)  # the unknown-name message
    path = resources.files(__package__).joinpath(f"{name}.yaml")
    with resources.as_file(path) as file:
        data = read_yaml(file, f"preset {name}") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"preset {name} must hold a mapping at the top level")
    return data


__all__ = ["PRESETS", "load_preset", "preset_text"]
