"""The kernel for paid work: record durably, fold, cap the budget, verify with repairs, reuse by hash.

One room for what every paid-verification loop needs (see docs/design/engine.md,
"The kernel for paid work"):

* ``fold``   -- ``RunState.apply(event)``: the one place where an event changes a run's state
  (live and resumed runs alike); ``RunState.known_result`` reads a paid result back by program hash
  (and task tag, ``reuse_key``);
* ``packed`` -- ``Packed``: the state's records by id, unpickled one by one when first read (snapshots);
* ``budget`` -- ``BudgetConfig`` (the one form of a cap) and ``BudgetGate``, whose ``reserve`` is the check;
* ``record`` -- ``Ledger`` and ``append_and_fold``: append an event (with its charge) to the store, then fold it;
* ``paid``   -- ``candidate_from(made, ...)`` and ``verify_with_repairs`` (up to N repairs keeping the idea);
* ``pilots`` -- ``LowFidelity``: pilots and smoke runs at cheaper fidelity levels, each its own charged event.

It imports neither ``verifyless.config`` nor ``verifyless.engine``.
"""

from verifyless.ledger.budget import NO_CAP, BudgetConfig, BudgetGate, Slot
from verifyless.ledger.fold import RunState, reuse_key
from verifyless.ledger.paid import REPAIRABLE, candidate_from, verify_with_repairs
from verifyless.ledger.pilots import SMOKE_STOPS, LowFidelity, low_fidelity_for, run_in_sandbox, smoke_level
from verifyless.ledger.record import Ledger, append_and_fold

__all__ = [
    "NO_CAP",
    "REPAIRABLE",
    "SMOKE_STOPS",
    "BudgetConfig",
    "BudgetGate",
    "Ledger",
    "LowFidelity",
    "RunState",
    "Slot",
    "append_and_fold",
    "candidate_from",
    "low_fidelity_for",
    "reuse_key",
    "run_in_sandbox",
    "smoke_level",
    "verify_with_repairs",
]
