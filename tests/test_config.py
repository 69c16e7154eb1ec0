"""Options added after runs were stored: one declaration (``registry.added_later``) holds the default a new run
gets and the value a stored configuration that lacks the option is read with."""

from __future__ import annotations

import pytest

from verifyless.config import RunConfig, added_options, load_config, with_absent_options
from verifyless.config_doc import render
from verifyless.errors import ConfigError


def test_each_option_added_later_declares_the_value_older_runs_read():
    assert added_options() == {
        "screener.warm_start": False,  # no critic learnt from earlier runs existed
        "engine.selection_pool": 0,  # the final node was the strategy's
        "engine.data_report": False,
        "engine.on_screener_error": "fallback",
        "engine.max_screener_fallbacks": None,  # they fell back for ever
    }
    fresh = RunConfig()
    assert (fresh.engine.selection_pool, fresh.engine.data_report, fresh.screener.warm_start) == (5, True, True)


def test_a_stored_configuration_reads_what_it_lacks_as_it_ran_and_keeps_what_it_has():
    stored = RunConfig().model_dump(mode="json")
    del stored["engine"]["selection_pool"], stored["engine"]["data_report"], stored["screener"]["warm_start"]
    stored["engine"]["max_screener_fallbacks"] = 7
    read = RunConfig.model_validate(with_absent_options(stored))
    assert (read.engine.selection_pool, read.engine.data_report, read.screener.warm_start) == (0, False, False)
    assert read.engine.max_screener_fallbacks == 7  # stored: kept, not replaced by the old behaviour
    assert stored["engine"].get("selection_pool") is None  # the stored mapping itself is left as it was


def test_the_reference_shows_both_values():
    rows = {line.split("|")[1].strip(): line for line in render().splitlines() if line.startswith("| `")}
    assert "(a run stored before this option: `0`)" in rows["`engine.selection_pool`"]
    assert "(a run stored before this option: `false`)" in rows["`screener.warm_start`"]
    assert "stored before" not in rows["`engine.candidates`"]


def test_a_bad_section_option_is_named_by_the_key_the_user_wrote():
    with pytest.raises(
        ConfigError, match=r"^invalid configuration: screener\.warm_start: Input should be a valid boolean"
    ):
        load_config(overrides=["screener.warm_start=maybe"])


def test_verifying_more_candidates_per_expansion_than_it_makes_is_refused_naming_both():
    """Issue 54, item 10: ``engine.verify_per_expansion`` above ``engine.candidates`` was accepted silently."""
    with pytest.raises(ConfigError) as info:
        load_config(overrides=["engine.candidates=2", "engine.verify_per_expansion=3"])
    message = str(info.value)
    assert "engine.verify_per_expansion=3 is above engine.candidates=2" in message and "\n" not in message
    assert load_config(overrides=["engine.candidates=2", "engine.verify_per_expansion=2"]).engine.candidates == 2
