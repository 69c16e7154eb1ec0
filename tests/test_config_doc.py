"""docs/configuration.md's reference is generated from the configuration models and must not go stale."""

from __future__ import annotations

from pydantic import BaseModel

from verifyless import config_doc
from verifyless.config import RunConfig


def test_every_config_field_has_a_description():
    missing = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, field in model.model_fields.items():
            if not field.description:
                missing.append(prefix + name)
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
                walk(field.annotation, f"{prefix}{name}.")

    walk(RunConfig, "")
    assert not missing, f"config fields without a description: {missing}"


def test_configuration_reference_is_up_to_date():
    text = config_doc.DOC.read_text()
    assert config_doc.BEGIN in text, "docs/configuration.md lost its generated reference"
    assert config_doc.updated(text) == text, "docs/configuration.md is stale: run `python -m verifyless.config_doc`"
    assert "`engine.snapshot_every`" in text and "`engine.verify_uncertain`" in text


def test_every_component_option_has_a_description_and_is_strict():
    from verifyless.components import COMPONENTS
    from verifyless.registry import StrictOptions

    options = [(kind, c) for kind, registry in COMPONENTS.items() for c in registry.components() if c.options]
    assert any(kind == "strategy" for kind, _ in options), "strategies lost their options"
    loose = [f"{kind}.{c.name}" for kind, c in options if not issubclass(c.options, StrictOptions)]
    assert not loose, f"component options not built on StrictOptions (frozen, unknown keys refused): {loose}"
    missing = [
        f"{kind}.{c.name}.{name}"
        for kind, c in options
        for name, field in c.options.model_fields.items()
        if not field.description
    ]
    assert not missing, f"component options without a description: {missing}"


def test_screener_options_are_in_the_reference():
    text = config_doc.render()
    assert "### Screener options" in text and "`critic` (CriticOptions)" in text and "`k`" in text


def test_the_hand_written_example_names_every_strategy_and_screener():
    import re

    from verifyless.screen.registry import SCREENERS
    from verifyless.search.registry import STRATEGIES

    text = config_doc.DOC.read_text().split(config_doc.BEGIN)[0]
    example = text.split("```yaml")[1].split("```")[0]
    for section, registry in (("strategy", STRATEGIES), ("screener", SCREENERS)):
        block = example.split(f"\n{section}:")[1].split("\n\n")[0]
        listed = set(re.findall(r"[a-z][a-z-]*", " ".join(line.split("#", 1)[-1] for line in block.splitlines())))
        missing = sorted({c.name for c in registry.components()} - listed)
        assert not missing, f"docs/configuration.md's {section} comment does not list {missing}"
