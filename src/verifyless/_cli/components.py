"""``verifyless components``: every name the configuration accepts for a component, from ``COMPONENTS``."""

from __future__ import annotations

import typer
from rich.table import Table

from verifyless._cli.common import console
from verifyless.components import COMPONENTS, registry_of
from verifyless.presets import PRESETS, VARIANTS


def components_command(
    kind: str | None = typer.Argument(None, help=f"only this kind: {', '.join([*COMPONENTS, 'preset'])}"),
) -> None:
    """List the registered components (screeners, strategies, executors, providers, role kinds) and the presets."""
    kinds = [kind] if kind else list(COMPONENTS)
    if kind == "preset":
        kinds = []
    registries = {k: registry_of(k) for k in kinds}  # an unknown kind: a ConfigError naming the kinds
    table = Table(box=None, header_style="bold")
    for col in ("kind", "name", "chosen by", "help"):
        table.add_column(col, overflow="fold")
    for k, registry in registries.items():
        for c in registry.components():
            table.add_row(k, c.name, registry.name_key, c.help)
    if kind in (None, "preset"):
        for name, help_text in PRESETS.items():
            table.add_row("preset", name, "run --preset", help_text)
            for variant, variant_help in VARIANTS.get(name, {}).items():
                table.add_row("preset", f"{name}:{variant}", "run --preset", variant_help)
    console.print(table)
    console.print("Options of each: docs/configuration.md (Reference), or `verifyless run --help`.", highlight=False)
    if kind in (None, "preset"):
        console.print(
            "Presets: docs/presets.md; `verifyless run --preset NAME[:VARIANT] --dry-run` prints one.", highlight=False
        )


__all__ = ["components_command"]
