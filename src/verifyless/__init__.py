"""verifyless: verification-efficient ML evolving agents (screen candidate ideas before paying to verify them).

The public faces are listed in ``__all__`` and imported on first use (module ``__getattr__``), so
``import verifyless`` stays cheap and imports nothing else of the package:

* configuration and assembly: ``RunConfig``, ``load_config``, ``build_engine``, ``Engine``, ``load_task``;
* the run store: ``RunStore`` (SQLite) and ``RunStoreProtocol`` (what the engine, report and UI use);
* a model for tests and demos: ``ScriptedModel``;
* the protocols a component implements: the roles (``Briefer``, ``Proposer``, ``Implementer``,
  ``Summarizer``), ``Screener`` and ``LearningScreener``, ``SearchStrategy``, ``Executor``, ``Sandbox``.

Everything else is reached through its module; ``verifyless._cli`` is private.
"""

from __future__ import annotations

import importlib
from typing import Any

_FACES = {
    "RunConfig": "verifyless.config",
    "load_config": "verifyless.config",
    "build_engine": "verifyless.wiring",
    "Engine": "verifyless.engine",
    "load_task": "verifyless.task",
    "RunStore": "verifyless.store",
    "RunStoreProtocol": "verifyless.store",
    "ScriptedModel": "verifyless.model",
    "Briefer": "verifyless.roles.base",
    "Proposer": "verifyless.roles.base",
    "Implementer": "verifyless.roles.base",
    "Summarizer": "verifyless.roles.base",
    "Screener": "verifyless.screen.base",
    "LearningScreener": "verifyless.screen.base",
    "SearchStrategy": "verifyless.search.base",
    "Executor": "verifyless.executors.base",
    "Sandbox": "verifyless.sandbox.base",
}

__all__ = sorted(_FACES)


def __getattr__(name: str) -> Any:
    """Import a public face on first use (``AttributeError`` for any other name, as for a plain module)."""
    if name not in _FACES:
        raise AttributeError(f"module 'verifyless' has no attribute {name!r}")
    value = getattr(importlib.import_module(_FACES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
