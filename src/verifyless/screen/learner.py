"""The contract between a learning screener and the torch code that trains it (``critic-ttl``).

The screener (``screen/ttl.py``) decides what to learn from and turns each verified pair into a
``Lesson``; an ``AdapterLearner`` (``train/ttl_learner.LoRALearner``) owns the weights: it takes the
optimizer step, writes and reloads adapter versions. The composition root injects the learner's
factory, so ``screen/`` never imports ``train/``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol


@dataclasses.dataclass(frozen=True)
class Lesson:
    """One verified pair as the learner sees it: the critic's prompt, the teacher's (privileged) prompt, the label."""

    messages: list[dict[str, str]]
    teacher: list[dict[str, str]]
    label: str


class AdapterLearner(Protocol):
    """The torch side of ``critic-ttl``: one trainable adapter on the critic's local model.

    ``version`` is the adapter version in use (0: the initial adapter) and ``root`` the folder of the
    versions. ``update`` takes one optimizer step on the lessons (sdft or grpo; ``verdict_of`` reads a
    sampled critique's verdict word for grpo rewards), writes version ``version + 1`` under ``root``
    and returns the loss; ``load`` reloads a stored version. ``local`` is the in-process model;
    ``origin`` names the starting adapter (``<folder>@<weights hash>``; None for a fresh one).
    """

    version: int
    origin: str | None
    root: Path
    local: Any

    def folder(self, version: int) -> Path: ...

    def update(
        self, lessons: Sequence[Lesson], mode: str, seed: int, verdict_of: Callable[[str], str | None]
    ) -> float: ...

    def load(self, version: int, folder: Path) -> None: ...


LearnerFactory = Callable[..., AdapterLearner]


__all__ = ["AdapterLearner", "LearnerFactory", "Lesson"]
