"""Each paper preset against a table of the paper's values (issue 56): the budget axis, the final-node rule, the
screeners' inputs and the arms' context rule included, each row quoting where the paper gives it; its variants
differ from it only where the paper's arms do; and a short scripted run of each completes, naming its preset.
"""

from __future__ import annotations

from typing import Any

import pytest
from scripted_runs import SCRIPTS, run_to_end

from verifyless.config import RunConfig, load_config
from verifyless.errors import ConfigError
from verifyless.events import Finalised, Verified
from verifyless.presets import PRESETS, VARIANTS, load_preset, preset_names, preset_text
from verifyless.report.views.card import run_card
from verifyless.store import RunStore

CRITIC_I1 = "critic paper, Appendix I.1"
SAME_ARMS = "critic paper, Appendix I.1: 'they differ only in whether and how candidate ideas are screened'"

# (dotted key, the paper's value as the preset sets it, where the paper says so)
PAPER: dict[str, list[tuple[str, Any, str]]] = {
    "critic-paper": [
        ("strategy.name", "islands", f"{CRITIC_I1}: OpenEvolve, 'we maintain three islands'"),
        ("strategy.options.n_islands", 3, CRITIC_I1),
        ("strategy.options.migration_interval", 4, f"{CRITIC_I1}: 'migration happens every 4 evolution rounds'"),
        ("engine.max_rounds", 30, f"{CRITIC_I1}: 'evolve each island for 10 rounds'"),
        ("engine.candidates", 16, "critic paper, Appendix I.2: 'a pool of 16 candidate ideas'"),
        ("screener.name", "critic", "critic paper, Appendix I.2: ranked by the critic's average label rank"),
        ("screener.options.k", 16, "critic paper, Appendix I.2: '16 critiques comparing it with the parent'"),
        ("screener.options.temperature", 0.7, f"{CRITIC_I1}: 'All critic models are using temperature of 0.7'"),
        ("screener.options.tie_break", "none", "critic paper, Appendix I.2: the plain average rank"),
        ("engine.verify_per_expansion", 1, "critic paper, Appendix I.2: 'exactly one of the 16 candidates'"),
        ("roles.llm.proposer_mode", "independent", "critic paper, Appendix I.2: ideas drawn independently"),
        ("roles.llm.proposer_temperature", 0.8, f"{CRITIC_I1}: 'The idea proposer is using temperature of 0.8'"),
        ("roles.llm.summarizer_temperature", 0.4, f"{CRITIC_I1}: 'summarizer is using temperature of 0.4'"),
        ("engine.repair_attempts", 0, f"{CRITIC_I1}: one verification per island round (repairs: Section 5 only)"),
        ("engine.pipeline", False, f"{CRITIC_I1}: each round sees the evaluated children of the last"),
        # the budget axis: verifications
        ("budget.verifications", 31, f"{CRITIC_I1}: 'a total budget of 30 verification runs per task' + baseline"),
        ("budget.evaluator_seconds", None, f"{CRITIC_I1}: the axis is the number of verifications"),
        ("engine.smoke", "off", f"{CRITIC_I1}: 'Exactly one selected idea is implemented and verified'"),
        # the final-node rule
        ("engine.final_selection", None, f"{CRITIC_I1}: 'tracks the best verified solution separately'"),
        ("engine.selection_pool", 0, f"{CRITIC_I1}: the best verified program, by its score"),
        # the screeners' inputs
        ("engine.screener_data_report", False, "critic paper, Table 9: task, parent, child, understanding, criteria"),
        # the arms' context rule
        ("engine.tried_ideas", "verified", f"{CRITIC_I1}: the population holds 'previously evaluated solutions'"),
        ("strategy.options.draws", "verified", SAME_ARMS),
    ],
    "aira-rpm": [
        ("strategy.name", "greedy", "RPM paper, Section 2.2: 'greedy parent selection' (AIRA-dojo)"),
        (
            "strategy.options.baseline_counts",
            False,
            "RPM paper, Section 2.1: AIRS-Bench 'without providing baseline code'",
        ),
        ("strategy.options.max_debug_depth", 3, "ours (AIDE's): the paper does not state it"),
        ("engine.candidates", 15, "RPM paper, Section 5.1: '15 child candidate suggestions at each operator step'"),
        ("screener.name", "tournament", "RPM paper, Section 3.3: 'pairwise comparisons in a tournament knockout'"),
        ("screener.options.show", "code", "RPM paper, Section 3.1: plans and code diffs"),
        ("screener.options.context_nodes", None, "RPM paper, Section 3.3: BFS 'up to K non-buggy nodes'"),
        ("engine.verify_per_expansion", 1, "RPM paper, Section 3.3: 'select the single candidate for full execution'"),
        ("engine.repair_attempts", 0, "RPM paper, Section 2.2: failures go to the Debug operator"),
        ("engine.pipeline", False, "RPM paper, Section 2.2: greedy selection knows the previous result"),
        # the budget axis: execution seconds of the selected candidates
        ("budget.evaluator_seconds", 86400.0, "RPM paper, Section 4.1: '24 hours of access to a single H200'"),
        ("budget.verifications", None, "RPM paper, Section 4.1: the axis is time, not a count"),
        ("budget.wall_seconds", None, "RPM paper, Section 7: LLM latency is not counted"),
        ("engine.smoke", "off", "RPM paper, Section 4.1: 'Only the compute time of the selected candidate counts'"),
        # the final-node rule
        (
            "engine.final_selection",
            None,
            "RPM paper, Section 2.2: 'submits the node that achieved the highest validation score'",
        ),
        ("engine.selection_pool", 0, "RPM paper, Appendix D.1: the Validation Oracle is AIRA-dojo's default"),
        # the screeners' inputs
        ("engine.data_report", False, "RPM paper, Section 6: no 'separately prepared, static data report'"),
        # the proposer's context
        ("engine.tried_ideas", "verified", "RPM paper, Section 3.3: unexecuted candidates never enter the tree"),
    ],
}
VARIANT_ROWS: dict[str, list[tuple[str, Any, str]]] = {
    "critic-paper:none": [
        ("engine.candidates", 1, "critic paper, Section 4: 'None denotes vanilla OpenEvolve'"),
        ("screener.name", "random", "critic paper, Appendix I.2: 'Vanilla OpenEvolve does not apply this stage'"),
    ],
    "aira-rpm:agentic": [
        ("screener.name", "agentic", "RPM paper, Section 3.2: pilot experiments before ranking"),
        ("screener.options.matches", "pairwise", "RPM paper, Section 3.3: the RPM plays a tournament knockout"),
        ("screener.options.budget_s", 300.0, "RPM paper, Appendix B.1: 'The real time budget is B=300s'"),
        ("screener.options.overstatement", 9.0, "RPM paper, Appendix B.1: 'B'=2700s, 9 times larger'"),
        ("screener.options.theta_s", 60.0, "RPM paper, Appendix B.1: 'threshold theta=60s'"),
        ("screener.options.max_pilots", 30, "RPM paper, Appendix B.1: 'N=30'"),
    ],
}
# what a variant may change: the arms differ only in screening
ARM_KEYS = {"critic-paper:none": {"screener", "engine.candidates"}, "aira-rpm:agentic": {"screener"}}


def value(cfg: RunConfig, key: str) -> Any:
    out: Any = cfg
    for part in key.split("."):
        out = getattr(out, part)
    return out


@pytest.mark.parametrize(
    ("preset", "key", "paper", "source"),
    [(p, *row) for p, rows in {**PAPER, **VARIANT_ROWS}.items() for row in rows],
)
def test_each_preset_sets_the_papers_value(preset, key, paper, source):
    assert value(load_config(preset=preset), key) == paper, f"{preset}: {key} should be {paper!r} ({source})"


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(data, dict):
        return {prefix: data}
    return {k: v for key, sub in data.items() for k, v in _flat(sub, f"{prefix}{key}.").items()}


@pytest.mark.parametrize("variant", list(ARM_KEYS))
def test_a_variant_differs_from_its_preset_only_in_screening(variant):
    base = _flat(load_config(preset=variant.split(":")[0]).model_dump(mode="json"))
    arm = _flat(load_config(preset=variant).model_dump(mode="json"))
    changed = {k for k in base.keys() | arm.keys() if base.get(k) != arm.get(k)} - {"preset."}
    allowed = ARM_KEYS[variant]
    assert changed and all(any(k.rstrip(".").startswith(a) for a in allowed) for k in changed), sorted(changed)


def test_variants_are_named_listed_and_printed():
    assert preset_names() == [*PRESETS, "critic-paper:none", "aira-rpm:agentic"]
    assert set(VARIANTS) <= set(PRESETS)
    text = preset_text("critic-paper:none")
    assert text.startswith(preset_text("critic-paper")) and "Variant critic-paper:none" in text
    assert load_preset("critic-paper:none")["screener"] == {"name": "random"}  # the critic's options do not follow
    for bad in ("critic-paper:", "critic-paper:nope", "nope:none", "mlevolve:none"):
        with pytest.raises(ConfigError, match="critic-paper:none"):
            load_config(preset=bad)


def test_the_configuration_records_its_preset_and_a_plain_one_none():
    assert load_config(preset="aira-rpm:agentic").preset == "aira-rpm:agentic"
    assert load_config().preset is None


# a short run of each: scripted roles on diabetes, a small budget, fewer candidates to keep it quick
SHORT = {
    "critic-paper": ["budget.verifications=3", "engine.candidates=2", "screener.options.k=2"],
    "critic-paper:none": ["budget.verifications=3"],
    "aira-rpm": ["budget.evaluator_seconds=3", "budget.verifications=3", "engine.candidates=3"],
    "aira-rpm:agentic": [
        "budget.verifications=2",
        "engine.candidates=2",
        "screener.options.budget_s=20",
        "screener.options.theta_s=5",
    ],
    "mlevolve": ["budget.verifications=3", "engine.memory_embedder=hashing"],
}


@pytest.mark.parametrize("preset", list(SHORT))
def test_a_short_scripted_run_of_each_preset_completes_and_its_run_card_names_it(tmp_path, preset):
    cfg = load_config(
        preset=preset,
        overrides=[
            "task=diabetes",
            f"store={tmp_path / 's.db'}",
            f"roles.models.default=scripted:{SCRIPTS / 'diabetes.yaml'}",
            *SHORT[preset],
        ],
    )
    with RunStore(cfg.store) as store:
        result = run_to_end(cfg, store)
        assert store.run(result.run_id).status == "finished"
        assert run_card(store, result.run_id)["preset"] == preset
        (final,) = [ev.record for ev in store.events(result.run_id, Finalised)]
        spent = store.budget(result.run_id)
        runs = sum(ev.record.verification.seconds for ev in store.events(result.run_id, Verified))
    assert spent.verifications >= 2
    if preset.startswith("aira-rpm"):
        assert final.node_id != "root"  # drafts compete, the baseline does not
        # charged: the selected candidates' runs (the baseline's too), and the agentic arm's pilots; nothing else
        assert spent.evaluator_seconds == pytest.approx(runs + spent.pilot_seconds)
        assert (spent.pilot_seconds > 0) == (preset == "aira-rpm:agentic")
