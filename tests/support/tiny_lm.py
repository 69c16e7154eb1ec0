"""The tiny random Llama the local-model tests run on, built once per machine into pytest's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from verifyless.train.tiny import cached_tiny_lm


def tiny_lm(config: pytest.Config, *, reads: bool = False) -> Path:
    """The tiny LM's folder (``verifyless.train.tiny.cached_tiny_lm`` under pytest's cache; ``reads``: the variant
    that names the change before its verdict), with torch first held to one thread, as these tests run it.
    Callers skip first when transformers is absent."""
    import torch

    torch.set_num_threads(1)
    return cached_tiny_lm(config.cache.mkdir("verifyless-tiny-lm"), reads=reads)
