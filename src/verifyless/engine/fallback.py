"""When the screener's endpoint fails: the fallback policy (``engine.on_screener_error``, ``max_screener_fallbacks``).

A screening whose screener raises ``ModelUnavailable`` (an endpoint that stayed down through its retries) either
stops the run at once (``stop``, exit 6) or becomes a seeded random pick (``fallback``, the default): one
``screener_fallback`` event ``{round, screener, reason, fallbacks, screenings}`` (the counts with this one), a
``screener_fallback`` progress line, and a screening stored under the name ``<screener>-unavailable``
(``screen.base.fallback_screening``), which ``RunState.fallbacks`` counts. A fallback is loud because a
"critic" run that fell back every round is a random run: ``max_screener_fallbacks`` (3) fallbacks in a row stop
the run (exit 6; it resumes with ``--resume``), and a run that ends before that with a screener that never
answered ends with exit 6 too (``check_answered``; its final node is chosen and stored first).
"""

from __future__ import annotations

import logging
import random

from verifyless.config import EngineConfig
from verifyless.engine.lifecycle import mark_stopped
from verifyless.errors import ModelUnavailable
from verifyless.events import ScreenerFellBack
from verifyless.ledger import Ledger
from verifyless.node import Candidate, Screening
from verifyless.screen.base import fallback_screening

log = logging.getLogger(__name__)

__all__ = ["check_answered", "screener_failed"]


def screener_failed(
    ledger: Ledger, eng: EngineConfig, name: str, r: int, rng: random.Random, pool: list[Candidate], exc: Exception
) -> Screening:
    """The screening that stands in for screener ``name``'s failed one in round ``r`` of ``ledger``'s run, or
    ``ModelUnavailable`` when the policy (``eng``: ``on_screener_error``, ``max_screener_fallbacks``) stops it."""
    if eng.on_screener_error == "stop":
        raise ModelUnavailable(
            f"the screener {name!r} failed in round {r} and engine.on_screener_error=stop: {exc}"
        ) from exc
    before = ledger.state.fallbacks
    reason = str(exc)[:2000]
    ledger.emit(ScreenerFellBack(r, name, reason, before.fallbacks + 1, before.screenings + 1))
    counts = ledger.state.fallbacks  # this fallback folded in
    ledger.progress("screener_fallback", {"round": r, "screener": name, "reason": reason, **counts.to_dict()})
    log.warning("round %d: screener %s unavailable, falling back to a seeded random pick: %s", r, name, exc)
    streak = counts.streak
    if eng.max_screener_fallbacks is not None and streak >= eng.max_screener_fallbacks:
        never = "never answered" if counts.answered == 0 else "stopped answering"
        raise ModelUnavailable(
            f"the screener {name!r} {never}: {streak} screenings in a row fell back to a seeded random pick (its "
            f"endpoint failed; a run screened at random is no {name} run); last error: {exc}. Fix its endpoint "
            f"(roles.models), then continue with `verifyless run --resume {ledger.run_id}{_store_flag(ledger)}`; "
            "engine.max_screener_fallbacks=null falls back for ever"
        ) from exc
    order = [c.id for c in pool]
    rng.shuffle(order)
    return fallback_screening(name, order, eng.verify_per_expansion)


def _store_flag(ledger: Ledger) -> str:
    """`` --store PATH`` of the run's store, for a resume command to paste (empty when the store has no path)."""
    path = getattr(ledger.store, "path", None)
    return f" --store {path}" if path else ""


def check_answered(ledger: Ledger, eng: EngineConfig, name: str) -> None:
    """At the end of a run: a screener that never answered (every screening fell back) fails it with exit 6.

    The run's final node is already chosen and stored; the run is marked failed with the reason, as any
    ``ModelUnavailable`` stop is. Off with ``engine.max_screener_fallbacks=null``.
    """
    counts = ledger.state.fallbacks
    if eng.max_screener_fallbacks is None or not counts.fallbacks or counts.answered:
        return
    exc = ModelUnavailable(
        f"the screener {name!r} never answered: all {counts.fallbacks} screenings fell back to a seeded "
        f"random pick, so run {ledger.run_id} was screened at random; fix the screener's endpoint (roles.models) "
        "and run again"
    )
    mark_stopped(ledger.store, ledger.rid, exc)
    raise exc
