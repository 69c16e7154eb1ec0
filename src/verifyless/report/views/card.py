"""The run card: what makes a run's result comparable with another's, in one JSON-ready record.

``run_card(store, run_id)`` reads the stored run only: the models and endpoints its configuration names (never a
key: the store holds none, and the card is redacted again), the machines it ran on (each ``running`` status
records one; a resumed run may list several), wall time (the sum of its parts, from each ``running`` status to
the next status) and evaluator time, its budget caps and what it spent, the seed, the task's fingerprint and data
files (public: what search could read; hidden: only the trusted scorer read them), the preset it started from
(``--preset NAME[:VARIANT]``; null without one, and for runs stored before it was recorded), the screener and
strategy, and what its start resolved (``resolved``: the ``config_resolved`` event's pins, null for runs stored
before 2026-12-05). ``show --json`` (``run_card``), the report (section "Run card") and ``export`` (``<out>.card.json``)
carry the same record. Runs stored before 2026-12-04 have no fingerprint and no machine: those fields are
null / empty.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from verifyless.events import ConfigResolved, RunStatusChanged
from verifyless.report.text import redact
from verifyless.store.protocol import RunStoreProtocol
from verifyless.store.records import Event
from verifyless.task.fingerprint import stored_fingerprint

__all__ = ["SEARCH_SAW", "resolved_line", "resolved_pins", "run_card"]

SEARCH_SAW = (
    "the public data files, the task statement and validation scores; never the hidden data files or a hidden test "
    "score (those are reported only)"
)


def run_card(store: RunStoreProtocol, run_id: str) -> dict[str, Any]:
    """The run card of ``run_id`` (module docstring)."""
    info = store.run(run_id)
    config: Mapping[str, Any] = info.config or {}
    fingerprint = stored_fingerprint(store, run_id)
    parts = fingerprint.parts if fingerprint else {}
    statuses = list(store.events(run_id, RunStatusChanged))
    return redact(
        {
            "run_id": run_id,
            "task": {"name": info.task, "fingerprint": fingerprint.digest if fingerprint else None},
            "preset": config.get("preset"),
            "strategy": (config.get("strategy") or {}).get("name"),
            "screener": (config.get("screener") or {}).get("name"),
            "models": _models(config),
            "resolved": resolved_pins(store, run_id),
            "machines": _machines(statuses),
            "time": {
                "wall_seconds": round(_wall(statuses), 3),
                "evaluator_seconds": store.budget(run_id).evaluator_seconds,
            },
            "budget": {"caps": dict(config.get("budget") or {}), "spent": dataclasses.asdict(store.budget(run_id))},
            "seed": config.get("seed", info.seed),
            "data": {
                "public": sorted(n.removeprefix("public data ") for n in parts if n.startswith("public data ")),
                "hidden": sorted(n.removeprefix("hidden data ") for n in parts if n.startswith("hidden data ")),
                "search_saw": SEARCH_SAW,
            },
        }
    )


def resolved_pins(store: RunStoreProtocol, run_id: str) -> dict[str, Any] | None:
    """What ``run_id``'s start resolved (its ``config_resolved`` event: dotted option keys to values); None for a
    run stored before the event existed (its configuration holds the same values written in)."""
    found = [dict(ev.record.pins) for ev in store.events(run_id, ConfigResolved)]
    return found[0] if found else None


def resolved_line(pins: Mapping[str, Any] | None) -> str | None:
    """One line naming what the run's start resolved (``resolved_pins``): a pinned model as ``model at base_url``, a
    digest by its first 12 digits (the run card keeps it whole); None for a run stored before it was recorded apart."""
    if pins is None:
        return None
    if not pins:
        return "resolved at the start: nothing (the configuration named every choice)"
    return "resolved at the start: " + "; ".join(f"{key} = {_pinned_text(value)}" for key, value in pins.items())


def _pinned_text(value: Any) -> str:
    """A pinned value as the line shows it: a model spec as ``model at base_url``, a digest by its first 12 digits."""
    if isinstance(value, Mapping) and "model" in value:
        return f"{value['model']} at {value.get('base_url') or 'the default endpoint'}"
    if isinstance(value, str) and _DIGEST.fullmatch(value):
        return value[:12]
    return str(value)


_DIGEST = re.compile(r"[0-9a-f]{40,}")  # a sha256 (the warm start's blob) or another long hex digest


def _models(config: Mapping[str, Any]) -> dict[str, Any]:
    """``roles.models`` as stored (pinned model names and base URLs; scripted files; local model paths)."""
    models = (config.get("roles") or {}).get("models") or {}
    return {str(k): v for k, v in sorted(models.items())}


def _machines(statuses: list[Event[RunStatusChanged]]) -> list[dict[str, Any]]:
    """The distinct machines the run's ``running`` statuses recorded, with their host, in order."""
    seen: list[dict[str, Any]] = []
    for ev in statuses:
        record = ev.record
        if record.status == "running" and record.machine:
            entry = {"host": record.host, **record.machine}
            if entry not in seen:
                seen.append(entry)
    return seen


def _wall(statuses: list[Event[RunStatusChanged]]) -> float:
    """Seconds the run ran: from each ``running`` status to the status after it (a part still running counts
    nothing yet)."""
    total, started = 0.0, None
    for ev in statuses:
        if started is not None:
            total += ev.ts - started
            started = None
        if ev.record.status == "running":
            started = ev.ts
    return total
