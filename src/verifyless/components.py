"""The one map from names to components: ``COMPONENTS`` holds every kind's ``Registry``.

=========== ====================================== ==============================
kind        registry (where it is filled)          chosen by
=========== ====================================== ==============================
screener    ``screen/registry.SCREENERS``          ``screener.name``
strategy    ``search/registry.STRATEGIES``         ``strategy.name``
executor    ``executors/registry.EXECUTORS``       ``executor.name``
provider    ``model/providers.PROVIDERS``          ``roles.models.KEY.provider``
roles       ``roles/kinds.ROLE_KINDS``             ``roles.kind``
=========== ====================================== ==============================

The configuration builds its component unions and checks from this map, ``config_doc`` documents
every component's options from it and ``verifyless components`` lists it. Layer: above the per-kind
registries (it imports them all), below ``config``; nothing a registry imports may import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from verifyless.errors import ConfigError
from verifyless.executors.registry import EXECUTORS
from verifyless.model.providers import PROVIDERS
from verifyless.registry import Component, Registry
from verifyless.roles.kinds import ROLE_KINDS
from verifyless.screen.registry import SCREENERS
from verifyless.search.registry import STRATEGIES

COMPONENTS: Mapping[str, Registry] = MappingProxyType(
    {"screener": SCREENERS, "strategy": STRATEGIES, "executor": EXECUTORS, "provider": PROVIDERS, "roles": ROLE_KINDS}
)


def registry_of(kind: str) -> Registry:
    """The registry of ``kind``; a one-line ``ConfigError`` listing the kinds for an unknown one."""
    registry = COMPONENTS.get(kind)
    if registry is None:
        raise ConfigError(f"component kind {kind!r} is unknown: use {', '.join(map(repr, COMPONENTS))}")
    return registry


def component(kind: str, name: str) -> Component:
    """The component ``name`` of ``kind``; a one-line ``ConfigError`` for an unknown kind or name."""
    return registry_of(kind).get(name)


__all__ = ["COMPONENTS", "component", "registry_of"]
