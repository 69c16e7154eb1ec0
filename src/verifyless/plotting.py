"""Matplotlib for the PNG figures (the ``plot`` extra): the headless backend and one way to save a figure.

``pyplot()`` imports ``matplotlib.pyplot`` on the Agg backend (servers have no display; the backend
must be chosen before pyplot is imported), so importing a module that draws figures costs nothing
until a figure is drawn. ``save_png(fig, path)`` creates the parent folders, lays the figure out,
writes it and closes it (an open figure is never left behind), and returns the path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend; ImportError without the ``plot`` extra."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: str | Path, *, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` as PNG (folders created), close it and return the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=dpi)
    pyplot().close(fig)
    return out


__all__ = ["pyplot", "save_png"]
