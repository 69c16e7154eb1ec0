"""Names to components: a ``Registry`` of ``Component`` entries, one per kind (screener, strategy, ...).

Each kind keeps its registry beside its components (``screen/registry.py``, ``search/registry.py``,
``executors/registry.py``, ``model/providers.py``, ``roles/kinds.py``); ``verifyless.components``
holds the one map of them all. This module imports no component, so every layer may use it.

A registry says the same things the same way for every kind:

* ``get(name)``: the component, or one ``ConfigError`` line
  ``screener.name='x' is unknown: use 'a', 'b' or 'c'``;
* ``validate(name, options)``: the options as the component's typed options (a pydantic model, usually a
  ``StrictOptions``), or a ``ConfigError`` with one line per problem: an unknown option
  lists the valid ones, a bad value names the option, its help, the fix and its default. Options that
  moved elsewhere (``removed``) name their replacement. A component without options accepts none.
  This is the one place options are checked: the configuration loader calls it, and a programmatic
  caller holding a mapping (bench, offline, tests) calls it before the kind's factory;
* ``typed(name, options)``: what a kind's factory does with the options it is handed: typed options pass
  as they are (never checked again), None means the component's defaults, anything else (a mapping) is a
  ``TypeError`` pointing to ``validate``.

Registries are filled when their module is imported; ``register`` adds or replaces one entry (a
provider from another package, for example).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from verifyless.errors import ConfigError

REQUIRED = object()  # the "default" of an option that has none (``option_fields``)
NOT_ADDED = object()  # ``stored_default`` of an option every stored run has (not declared with ``added_later``)
_STORED = "stored_default"  # the key ``added_later`` writes into a field's ``json_schema_extra``


def added_later(default: Any, *, stored: Any, **kwargs: Any) -> Any:
    """``Field(default, **kwargs)`` for an option added after runs were stored with the options it joined.

    ``stored`` is the value that reproduces what such a run did before the option existed: a stored configuration
    that lacks the option reads it with ``stored`` (``verifyless.config.stored_config``), a new run with
    ``default``; the configuration reference shows both. One declaration holds both values, so an option's old
    behaviour lives beside its help, not in a list elsewhere.
    """
    return Field(default, json_schema_extra={_STORED: stored}, **kwargs)


def stored_default(field: FieldInfo) -> Any:
    """The value ``field`` takes in a stored configuration that lacks it (``added_later``), else ``NOT_ADDED``."""
    extra = field.json_schema_extra
    return extra.get(_STORED, NOT_ADDED) if isinstance(extra, dict) else NOT_ADDED


class StrictOptions(BaseModel):
    """The base of a component's options: frozen, and an unknown option is an error.

    Each field states its range and its help in ``Field(...)``; the registry turns a violation into one
    ``ConfigError`` line and ``config_doc`` renders the help into docs/configuration.md. A check over
    several fields is a ``model_validator`` that raises ``ValueError`` with the fix.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclasses.dataclass(frozen=True)
class Component:
    """One registered component: its ``name``, what builds it, its options type and one line of help.

    ``factory`` is the class or function the kind's builder calls (each kind has its own call shape).
    ``options`` is a pydantic model (its fields are the options), or None for a component that takes
    no options.
    """

    name: str
    factory: Callable[..., Any]
    options: type[BaseModel] | None
    help: str

    def __post_init__(self) -> None:
        if not self.help or "\n" in self.help:
            raise ValueError(f"component {self.name!r} needs one line of help, got {self.help!r}")


class Registry:
    """The components of one ``kind``, by name, in registration order.

    ``name_key`` / ``options_key`` are the configuration keys that choose a component and hold its
    options (``screener.name`` / ``screener.options``); ``doc`` is where its error messages point.
    Iterating a registry yields its names (as a dict would); ``components()`` yields the entries.
    """

    def __init__(
        self,
        kind: str,
        components: Iterable[Component] = (),
        *,
        name_key: str | None = None,
        options_key: str | None = None,
        doc: str = "docs/configuration.md",
        removed: Mapping[str, str] | None = None,
    ) -> None:
        self.kind = kind
        self.name_key = name_key or f"{kind}.name"
        self.options_key = options_key or f"{kind}.options"
        self.doc = doc
        self.removed = dict(removed or {})
        self._entries: dict[str, Component] = {}
        for component in components:
            self.register(component)

    def register(self, component: Component) -> None:
        """Add ``component`` (replacing an earlier entry of the same name)."""
        self._entries[component.name] = component

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def components(self) -> Iterator[Component]:
        return iter(tuple(self._entries.values()))

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"

    def get(self, name: str) -> Component:
        """The component registered as ``name``; a one-line ``ConfigError`` listing the names otherwise."""
        component = self._entries.get(name)
        if component is None:
            raise ConfigError(f"{self.name_key}={name!r} is unknown: use {_either(sorted(self._entries))}")
        return component

    def validate(self, name: str, options: Mapping[str, Any] | None = None) -> Any:
        """``options`` of component ``name`` as its typed options (None for a component without options)."""
        component = self.get(name)
        given = dict(options or {})
        for key, replacement in self.removed.items():
            if key in given:
                raise ConfigError(f"{self.options_key}.{key} was removed; {replacement} (see docs/configuration.md)")
        if component.options is None:
            if given:
                raise ConfigError(f"{self.kind} {name!r} takes no options, got {sorted(given)}; remove them")
            return None
        fields = option_fields(component.options)
        problems = [_unknown(key, fields) for key in given if key not in fields] if not _forbids(component) else []
        if problems:
            raise ConfigError(self._message(name, problems))
        try:
            return _adapter(component.options).validate_python(given)
        except ValidationError as exc:
            raise ConfigError(self._message(name, [self._problem(err, fields) for err in exc.errors()])) from None

    def typed(self, name: str, options: Any = None) -> Any:
        """``options`` of component ``name`` as its factory takes them: typed options as they are, None as its defaults.

        A factory calls this instead of validating again; a mapping (or options of another component) is a
        ``TypeError`` naming ``validate``, which turns a mapping into typed options once.
        """
        component = self.get(name)
        if options is None:
            return self.validate(name)
        if component.options is None or not isinstance(options, component.options):
            raise TypeError(
                f"{self.kind} {name!r} is built from its typed options, got {type(options).__name__}: "
                f"turn a mapping into them with validate({name!r}, mapping) on the {self.kind} registry"
            )
        return options

    def _problem(self, err: Any, fields: Mapping[str, tuple[str, Any]]) -> str:
        loc = tuple(str(p) for p in err.get("loc", ()))
        key = ".".join(loc)
        if err.get("type") == "extra_forbidden":
            return _unknown(key, fields)
        if not key:  # a check over several options (a model validator)
            return f"{error_text(err)}; fix {self.options_key}"
        help_text, default = fields.get(loc[0], ("", REQUIRED))
        hint = f" ({help_text})" if help_text else ""
        if err.get("type") == "missing":
            return f"option {key} is required{hint}; set {self.options_key}.{key}"
        tail = "" if default is REQUIRED else f" or remove it to use the default {default!r}"
        return f"option {key}={err.get('input')!r}: {error_text(err)}{hint}; fix {self.options_key}.{key}{tail}"

    def _message(self, name: str, problems: list[str]) -> str:
        head = f"bad options for {self.kind} {name!r}"
        if len(problems) == 1:
            return f"{head}: {problems[0]} (see {self.doc})"
        return f"{head} (see {self.doc}):\n" + "\n".join(f"  {p}" for p in problems)


def error_text(err: Mapping[str, Any]) -> str:
    """What one pydantic error says, without pydantic's ``Value error, `` / ``Assertion failed, `` lead.

    The one wording of a validation problem for every place that turns a ``ValidationError`` into a
    ``ConfigError`` line (options, the run config, model specs, training settings, task files).
    """
    return str(err.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")


def option_fields(options: type) -> dict[str, tuple[str, Any]]:
    """Option name -> (help, default) of an options model; ``REQUIRED`` for an option without a default."""
    if not (isinstance(options, type) and issubclass(options, BaseModel)):
        raise TypeError(f"options of a component must be a pydantic model, got {options!r}")
    return {
        name: (f.description or "", REQUIRED if f.is_required() else f.get_default(call_default_factory=True))
        for name, f in options.model_fields.items()
    }


def _forbids(component: Component) -> bool:
    """Whether the options type rejects unknown keys itself (a strict pydantic model)."""
    options = component.options
    return (
        isinstance(options, type) and issubclass(options, BaseModel) and options.model_config.get("extra") == "forbid"
    )


def _unknown(key: str, fields: Mapping[str, Any]) -> str:
    if not fields:
        return f"unknown option {key!r}; it takes no options, so remove it"
    return f"unknown option {key!r}; valid options are {sorted(fields)}"


@functools.cache
def _adapter(options: type) -> TypeAdapter[Any]:
    return TypeAdapter(options)


def _either(names: list[str]) -> str:
    quoted = [repr(n) for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


__all__ = [
    "NOT_ADDED",
    "REQUIRED",
    "Component",
    "Registry",
    "StrictOptions",
    "added_later",
    "error_text",
    "option_fields",
    "stored_default",
]
