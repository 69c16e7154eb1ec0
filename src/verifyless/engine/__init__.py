"""The engine: the one place where task, roles, screener, search, executor and store meet.

Rooms (one idea each; ``Engine`` builds each with the collaborators it needs, never with itself; see
docs/design/engine.md for how an outcome flows through them):

* ``core``      -- ``Engine``: the round, ask -> make children -> screen -> route -> verify/repair -> tell;
* ``verifyless.ledger`` (the kernel for paid work, composed as ``Engine.ledger``) -- the event fold
  ``RunState``, the single write path ``Ledger.emit``, the ``BudgetGate`` and ``verify_with_repairs``;
* ``tells``     -- ``TellQueue`` with named ordering classes (``TellOrder``);
* ``learners``  -- what a told node feeds: strategy, memory, observing and learning screeners;
* ``dispatch``  -- ``Dispatch``: verification chains in flight, claimed programs, the novelty gate;
* ``screen_step`` -- ``ScreenStep``: screen a pool, store and route the screening, dispatch the chosen;
* ``routing``   -- the pure choice of what to verify (``select``; the test is ``screen/ranking.route``);
* ``lifecycle`` -- ``Lifecycle``: the start and the end of a run (brief, baseline, final, result);
* ``ensembles`` -- ``Peers`` (the novelty gate and model ensembles wiring builds) and how ensembles learn;
* ``snapshot``  -- periodic pickled state so resume replays only the log's tail;
* ``resume``    -- ``Resume``: rebuild from the store and finish what a crash left open;
* ``replay``    -- ``replay_run``: re-execute a stored run's decisions from its stored outcomes and compare;
* ``submission`` -- the top-K ensemble submission that ends a run whose task declares how outputs combine;
* ``context``   -- what the roles are shown about a parent.
"""

from verifyless.engine.core import Engine, ProgressFn
from verifyless.engine.ensembles import Peers
from verifyless.engine.lifecycle import RunResult
from verifyless.engine.tells import TellOrder
from verifyless.ledger import BudgetGate, RunState
from verifyless.screen.ranking import route

__all__ = ["BudgetGate", "Engine", "Peers", "ProgressFn", "RunResult", "RunState", "TellOrder", "route"]
