"""The bench/ scripts imported as modules (they are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load(name: str):
    """``bench/<name>.py`` as the module ``bench_<name>``. Benches import their shared ``bench/_*.py`` modules by
    name, as a script run finds them; ``bench/`` goes last on ``sys.path`` so it shadows nothing."""
    if str(BENCH) not in sys.path:
        sys.path.append(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
