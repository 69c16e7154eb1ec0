"""The role kinds by name (``roles.kind``): ``ROLE_KINDS``, a ``verifyless.registry.Registry``.

A kind's factory is ``(roles, task, models, seed) -> Roles``: ``roles`` is the run's ``roles:``
section (``kind``, ``implement_mode``, ``llm``), ``models`` the run's models by ``roles.models`` key.
``space`` makes children from the task's idea space, without an LLM, unless a ``proposer`` model is
configured (a trained policy, say): then that model proposes from the space's menu
(``roles/menu.py``) and the space builds. ``llm`` makes them with language models, the child-making
keys of ``models`` (``CHILD_ROLE_KEYS`` and ``default``); its options are the ``roles.llm`` section.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from verifyless.errors import ConfigError
from verifyless.registry import Component, Registry
from verifyless.roles.base import Roles
from verifyless.roles.llm import llm_roles
from verifyless.roles.menu import MenuProposer
from verifyless.roles.options import LLMRoleOptions
from verifyless.roles.space import space_roles
from verifyless.task.base import Task

CHILD_ROLE_KEYS = ("brief", "proposer", "implementer", "summarizer")


def check_roles_fit(kind: str, task: Task) -> None:
    """A ``ConfigError`` when roles of ``kind`` cannot make children for ``task`` (space roles need an idea space).

    Checked before a run's store exists (the CLI's pre-flight) and again when the roles are built.
    """
    if kind == "space" and task.idea_space is None:
        raise ConfigError(
            f"task {task.name!r} declares no idea_space, so roles.kind=space cannot make children: "
            f"use roles.kind=llm with a model, or add an idea_space to its {task.settings_file} ({task.root})"
        )


def _space(roles: Any, task: Task, models: Mapping[str, Any], seed: int) -> Roles:
    check_roles_fit("space", task)
    built = space_roles(task, seed)
    if "proposer" in models:  # e.g. a trained policy: the model proposes, the idea space builds
        proposer = MenuProposer(models["proposer"], task, roles.llm.proposer_temperature)
        built = dataclasses.replace(built, proposer=proposer)
    return built


def _llm(roles: Any, task: Task, models: Mapping[str, Any], seed: int) -> Roles:
    child_models = {k: m for k, m in models.items() if k in CHILD_ROLE_KEYS or k == "default"}
    return llm_roles(child_models, implement_mode=roles.implement_mode, options=roles.llm)


ROLE_KINDS = Registry(
    "roles",
    [
        Component("space", _space, None, "the task's idea space, no LLM (a 'proposer' model proposes from its menu)"),
        Component("llm", _llm, LLMRoleOptions, "language models brief, propose, implement and summarise"),
    ],
    name_key="roles.kind",
    options_key="roles.llm",
)

__all__ = ["CHILD_ROLE_KEYS", "ROLE_KINDS", "check_roles_fit"]
