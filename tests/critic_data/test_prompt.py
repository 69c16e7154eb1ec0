"""One critic prompt for training and serving (issue 47, item 2).

A critic dataset row's prompt (``critic_data.critic_messages``) equals, byte for byte, the prompt the run's
critic was sent for the same parent and child, the run's data report included; a collection stores the data
report as a run does, and the dataset card records whether the prompts carry it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from scripted_runs import Recorder, config

from verifyless.critic_data.collect import CollectSettings
from verifyless.critic_data.dataset import card_data, card_markdown, load_critic_dataset, save_dataset
from verifyless.critic_data.harvest import harvest_run
from verifyless.critic_data.pipeline import CollectWiring, run_collection
from verifyless.critic_data.prompt import critic_messages
from verifyless.events import DataReported
from verifyless.ledger import BudgetConfig
from verifyless.store import RunStore
from verifyless.wiring import build_engine

SCRIPTS = Path(__file__).resolve().parents[2] / "examples" / "scripted"


def _run_with_critic(tmp_path: Path, *extra: str):
    cfg = config(tmp_path, "diabetes", "budget.verifications=3", *extra)
    store = RunStore(cfg.store)
    engine = build_engine(cfg, store)
    engine.screener.model = critic = Recorder(engine.screener.model)
    try:
        result = asyncio.run(engine.run())
    finally:
        engine.executor.close()
    return store, result.run_id, critic.requests


def _sent(requests, row) -> list[dict[str, str]]:
    """The messages the run's critic was sent about this row's child (found by its summary)."""
    for req in requests:
        if any(row["child_summary"] in m.content for m in req.messages):
            return [{"role": m.role, "content": m.content} for m in req.messages]
    raise AssertionError(f"no critic request about {row['child_id']}")


def test_a_training_rows_prompt_is_the_runs_prompt_byte_for_byte(tmp_path):
    store, run_id, requests = _run_with_critic(tmp_path)
    with store:
        rows = harvest_run(store, run_id, min_improving=0).rows
        report = store.events(run_id, DataReported)
        markdown = str(next(iter(report)).record.markdown).strip()
    assert rows and markdown
    for row in rows:
        assert row["data_report"] == markdown
        assert critic_messages(row) == _sent(requests, row)  # the data report in both


def test_without_a_data_report_neither_prompt_has_one(tmp_path):
    store, run_id, requests = _run_with_critic(tmp_path, "engine.data_report=false")
    with store:
        rows = harvest_run(store, run_id, min_improving=0).rows
    assert rows and all(row["data_report"] == "" for row in rows)
    for row in rows:
        assert critic_messages(row) == _sent(requests, row)


def test_the_card_records_the_data_report_and_old_rows_read_without_one(tmp_path):
    store, run_id, _ = _run_with_critic(tmp_path)
    with store:
        rows = list(harvest_run(store, run_id, min_improving=0).rows)
    old = {k: v for k, v in rows[0].items() if k != "data_report"}  # a row written before the column
    splits = {"sft": rows, "bench": [old]}
    card = card_data(splits, settings={})
    assert card["data_report"] == {"in_prompts": "some", "rows_with": len(rows), "rows_without": 1}
    assert "Data report in the critic prompts: some" in card_markdown(card)
    loaded = load_critic_dataset(save_dataset(splits, tmp_path / "ds", card))
    assert loaded["bench"][0]["data_report"] == "" and loaded["sft"][0]["data_report"] == rows[0]["data_report"]


def test_a_collection_stores_the_data_report_as_a_run_does(tmp_path):
    db = tmp_path / "c.db"
    result = run_collection(
        "diabetes",
        db,
        CollectSettings(parents=1, children=2),
        BudgetConfig(verifications=None, tokens=1),
        CollectWiring(models=[f"scripted:{SCRIPTS / 'diabetes.yaml'}"]),
    )
    with RunStore(db) as st:
        (event,) = st.events(result.run_id, DataReported)
        assert event.record.markdown and not event.charge
