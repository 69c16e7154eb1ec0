"""Presets: one plain config file per paper, shipped with the package (``verifyless run --preset NAME``).

A preset is a run configuration in YAML, read as the layer just above the built-in defaults: a ``--config``
file, the CLI's flags and dotted overrides still win over it. Each file states, key by key, which paper
constant it sets and where the paper gives it; ``docs/presets.md`` has the table of constants.

A *variant* (``--preset NAME:VARIANT``) is another arm or setting of the same paper's experiment: the file
``NAME.VARIANT.yaml`` holds only what differs, laid over ``NAME.yaml``. A component section (screener,
strategy, executor) that names another component replaces the preset's section whole (the options of one
component mean nothing to another); anything else merges key by key. The run records the full name
(``RunConfig.preset``), and the run card shows it.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources
from typing import Any

from verifyless.errors import ConfigError
from verifyless.yamlfile import read_yaml

PRESETS = {
    "critic-paper": "Verify Less, Evolve More: OpenEvolve islands 3 x 10 rounds, 16 ideas, a k=16 pointwise critic, "
    "one verification per island round, no repairs",
    "aira-rpm": "AI Research Preference Models: AIRA-dojo greedy Draft/Improve/Debug from drafts, 15 children, a "
    "pairwise tournament with BFS context, 24 h of execution time, the best validation node submitted",
    "mlevolve": "MLEvolve: progressive MCGS over the run's budget, retrospective memory, top-K ensemble submission",
}

VARIANTS = {
    "critic-paper": {
        "none": "the paper's None arm: vanilla OpenEvolve, one idea per island round and no screening",
    },
    "aira-rpm": {
        "agentic": "the Agentic RPM arm: pilot experiments, then the paper's pairwise knockout",
    },
}

COMPONENT_SECTIONS = ("screener", "strategy", "executor")


def preset_names() -> list[str]:
    """Every name ``--preset`` accepts: the presets, then each variant as ``NAME:VARIANT``."""
    return [*PRESETS, *(f"{name}:{v}" for name, variants in VARIANTS.items() for v in variants)]


def _parts(name: str) -> tuple[str, str | None]:
    """(preset, variant or None) of ``name``; a ConfigError naming the known names for anything else."""
    base, _, variant = name.partition(":")
    if base not in PRESETS or (variant and variant not in VARIANTS.get(base, {})) or name.endswith(":"):
        raise ConfigError(f"unknown preset {name!r}; use one of: {', '.join(preset_names())}")
    return base, variant or None


def _file(base: str, variant: str | None) -> str:
    return f"{base}.{variant}.yaml" if variant else f"{base}.yaml"


def preset_text(name: str) -> str:
    """The preset file's text, comments included (what ``--dry-run`` prints); a variant's file follows its
    preset's."""
    base, variant = _parts(name)
    files = [_file(base, None)] + ([_file(base, variant)] if variant else [])
    return "\n".join(resources.files(__package__).joinpath(f).read_text(encoding="utf-8") for f in files)


def load_preset(name: str) -> dict[str, Any]:
    """The preset's settings as a nested mapping (``load_config`` merges them over the defaults); for
    ``NAME:VARIANT`` the variant laid over its preset (module docstring)."""
    base, variant = _parts(name)
    data = _read(base, None)
    if variant:
        overlay(data, _read(base, variant))
    return data


def overlay(data: dict[str, Any], extra: Mapping[str, Any]) -> None:
    """Lay ``extra`` over ``data`` in place: a component section naming another component replaces the section,
    any other mapping merges key by key."""
    for key, value in extra.items():
        here = data.get(key)
        if (
            key in COMPONENT_SECTIONS
            and isinstance(here, dict)
            and isinstance(value, Mapping)
            and _renames(here, value)
        ):
            data[key] = dict(value)
        else:
            _merge(data, {key: value})


def _renames(section: Mapping[str, Any], extra: Mapping[str, Any]) -> bool:
    return "name" in extra and extra["name"] != section.get("name")


def _merge(data: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(data.get(key), dict):
            _merge(data[key], value)
        else:
            data[key] = value


def _read(base: str, variant: str | None) -> dict[str, Any]:
    path = resources.files(__package__).joinpath(_file(base, variant))
    label = f"preset {base}:{variant}" if variant else f"preset {base}"
    with resources.as_file(path) as file:
        data = read_yaml(file, label) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{label} must hold a mapping at the top level")
    return data


__all__ = ["PRESETS", "VARIANTS", "load_preset", "overlay", "preset_names", "preset_text"]
