"""The data report in a run: computed once at a new run's start in the sandbox, stored, reused, in the prompts."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from scripted_runs import Recorder, config

from verifyless import datareport
from verifyless._cli.show import show_data
from verifyless.config import RunConfig, apply_changes, load_config, stored_config, with_absent_options
from verifyless.datareport import DataReport, event_record, report_for_run, status_line
from verifyless.engine.replay import replay_run
from verifyless.events import DataReported
from verifyless.report.render import report_html
from verifyless.report.views.data_report import data_report_view
from verifyless.sandbox.local import LocalSandbox
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.wiring import build_engine

ISOLATED = LocalSandbox().isolation != "process"  # process mode hides nothing (test_datareport.py shows it)


class SpySandbox:
    """Delegates to a real sandbox and records every call's arguments."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, argv, workdir, limits, *, env=None, hide=(), expose=()):
        self.calls.append({"argv": list(argv), "limits": limits, "hide": [Path(p) for p in hide]})
        return self.inner.run(argv, workdir, limits, env=env, hide=hide, expose=expose)


def run(cfg, store, run_id=None):
    """Run (or resume) with recording models and a spying sandbox: (run id, critic requests, brief requests, spy)."""
    engine = build_engine(cfg, store)
    engine.screener.model = critic = Recorder(engine.screener.model)
    engine.roles.briefer.model = brief = Recorder(engine.roles.briefer.model)
    engine.executor.sandbox = spy = SpySandbox(engine.executor.sandbox)
    try:
        result = asyncio.run(engine.run(run_id))
    finally:
        engine.executor.close()
    return result.run_id, critic.requests, brief.requests, spy


def never(*args, **kwargs):
    raise AssertionError("a resumed run computed the data report")


def user_text(request) -> str:
    return next(m.content for m in request.messages if m.role == "user")


def stored_reports(store, run_id):
    return list(store.events(run_id, DataReported))


def test_a_new_run_computes_the_report_in_the_sandbox_once_and_every_prompt_gets_it(tmp_path, monkeypatch):
    monkeypatch.setattr(datareport, "_cache", {})
    cfg = config(tmp_path)
    task = load_task("diabetes")
    with RunStore(cfg.store) as store:
        run_id, critic, brief, spy = run(cfg, store)
        (event,) = stored_reports(store, run_id)
        assert not event.charge  # framework code: charged to no budget, its seconds recorded
        assert event.payload["seconds"] > 0 and event.payload["files"] == [
            "test_inputs.csv",
            "train.csv",
            "val_inputs.csv",
        ]
        report = DataReport.from_json(store.get_text(event.payload["blob"]))
        assert report.content_hash == datareport.task_data_hash(task) and (report.hidden_visible == () or not ISOLATED)
        markdown = event.payload["markdown"].strip()
        assert markdown.startswith("## Data report for diabetes") and "| bmi |" in markdown
        # the critic's prompt as the model received it, and the brief's
        assert critic and all(markdown in user_text(r) for r in critic)
        assert "Metric: " in user_text(critic[0]) and f"\n\n{markdown}\n\n## Parent (already evaluated)" in user_text(
            critic[0]
        )
        assert len(brief) == 1 and f"\n\n{markdown}\n\n## What to write" in user_text(brief[0])
        # the script ran under the candidate's restrictions: task folder, hidden data and run store masked
        (call,) = [c for c in spy.calls if datareport.SCRIPT_NAME in " ".join(c["argv"])]
        assert call["limits"] == task.limits
        assert {task.root, *task.hidden_data, Path(cfg.store).resolve().parent} <= set(call["hide"])
        assert data_report_view(store, run_id).markdown == event.payload["markdown"]
        html = report_html(store, run_id, figures_dir="figures/")
        assert '<h2 id="data">Data report</h2>' in html and "| bmi |" in html and "Data report for diabetes" in html
        assert status_line(event.record).startswith("data report: computed from 3 file(s)")
        # a replay computes it again (a new run): the same bytes, so every cached reply keyed by prompt hits
        monkeypatch.setattr(datareport, "_cache", {})
        replayed = asyncio.run(replay_run(store, run_id, build=build_engine))
        assert replayed.equal, replayed.describe()


@pytest.mark.slow  # two whole runs; the first test replays its run and checks the report is the same bytes
def test_the_report_is_deterministic_across_two_runs(tmp_path, monkeypatch):
    payloads = []
    for name in ("a", "b"):
        monkeypatch.setattr(datareport, "_cache", {})  # computed again, not read from this process's cache
        (tmp_path / name).mkdir()
        cfg = config(tmp_path / name, "diabetes", "budget.verifications=1")
        with RunStore(cfg.store) as store:
            run_id, *_ = run(cfg, store)
            (event,) = stored_reports(store, run_id)
            payloads.append(event.payload)
    assert payloads[0]["blob"] == payloads[1]["blob"] and payloads[0]["markdown"] == payloads[1]["markdown"]


def test_a_resumed_run_reuses_the_stored_report_and_never_recomputes(tmp_path, monkeypatch):
    cfg = config(tmp_path, "diabetes", "budget.verifications=1")
    with RunStore(cfg.store) as store:
        run_id, *_ = run(cfg, store)
        (first,) = stored_reports(store, run_id)
        monkeypatch.setattr(datareport, "data_report", never)
        more = apply_changes(stored_config(store, run_id), {"budget.verifications": 2})
        _, critic, _, _ = run(more, store, run_id)
        assert [e.payload for e in stored_reports(store, run_id)] == [first.payload]
        assert critic and all(first.payload["markdown"].strip() in user_text(r) for r in critic)


def test_without_the_report_prompts_are_as_before_and_a_resume_does_not_add_one(tmp_path, monkeypatch):
    cfg = config(tmp_path, "diabetes", "engine.data_report=false")
    with RunStore(cfg.store) as store:
        run_id, critic, brief, spy = run(cfg, store)
        assert stored_reports(store, run_id) == []
        assert not any(datareport.SCRIPT_NAME in " ".join(c["argv"]) for c in spy.calls)
        text = user_text(critic[0])
        assert "Data report" not in text and "\n\nMetric: " in text and "\n\n## Parent (already evaluated)" in text
        assert "\n\n\n" not in text.split("## Parent")[0]  # no empty heading, no extra blank line
        assert "Data report" not in user_text(brief[0])
        assert status_line(None) == data_report_view(store, run_id).status
        html = report_html(store, run_id, figures_dir="figures/")
        assert (
            '<h2 id="data">Data report</h2>' in html
            and "data report: none" in html
            and '<pre class="datareport">' not in html
        )
        # the option turned on for the resume: the log is not empty, so nothing is computed
        monkeypatch.setattr(datareport, "data_report", never)
        more = apply_changes(stored_config(store, run_id), {"budget.verifications": 3, "engine.data_report": True})
        run(more, store, run_id)
        assert stored_reports(store, run_id) == []


def test_screeners_can_be_given_the_papers_inputs_while_the_brief_keeps_the_report(tmp_path):
    """engine.screener_data_report=false (the critic paper's Table 9): the brief reads the report, the critic reads
    its five fields only, and the critic rows harvested from the run carry no report, as its critic saw none."""
    from verifyless.critic_data.harvest import harvest_run

    cfg = config(tmp_path, "diabetes", "engine.screener_data_report=false")
    with RunStore(cfg.store) as store:
        run_id, critic, brief, _ = run(cfg, store)
        (event,) = stored_reports(store, run_id)
        markdown = event.payload["markdown"].strip()
        assert markdown in user_text(brief[0])
        assert critic and not any("Data report" in user_text(r) for r in critic)
        assert "\n\n## Parent (already evaluated)" in user_text(critic[0])
        rows = harvest_run(store, run_id, min_improving=0).rows
        assert rows and all(row["data_report"] == "" for row in rows)
    older = RunConfig().model_dump(mode="json")
    del older["engine"]["screener_data_report"]  # a run stored before the option: its screeners read the report
    assert RunConfig.model_validate(with_absent_options(older)).engine.screener_data_report is True


def test_a_stored_configuration_without_the_option_reads_it_as_off():
    assert with_absent_options({"engine": {"candidates": 4}})["engine"]["data_report"] is False
    assert with_absent_options({"engine": {"candidates": 4}})["engine"]["candidates"] == 4
    assert with_absent_options({})["engine"]["data_report"] is False
    assert with_absent_options({"engine": {"data_report": True}})["engine"]["data_report"] is True
    assert load_config(overrides=[]).engine.data_report is True  # a new run: on by default


def test_an_openevolve_task_stores_what_could_not_be_computed_and_the_critic_sees_it(tmp_path, monkeypatch):
    cfg = config(tmp_path, "circle_packing")
    with RunStore(cfg.store) as store:
        run_id, critic, _, spy = run(cfg, store)
        (event,) = stored_reports(store, run_id)
        assert event.payload["files"] == [] and event.payload["unavailable"][0].startswith("no public data")
        assert "### Not computed" in event.payload["markdown"]
        assert critic and all("duplicate rows were not computed" in user_text(r) for r in critic)
        assert status_line(event.record).startswith("data report: not computed")
        assert show_data(store, run_id, 5)["data_report"] == status_line(event.record)  # the line `show` prints
        assert not any(datareport.SCRIPT_NAME in " ".join(c["argv"]) for c in spy.calls)  # nothing to run


def test_a_report_that_fails_is_data_not_an_error(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("sandbox gone")

    monkeypatch.setattr(datareport, "data_report", broken)
    report, seconds = report_for_run(load_task("diabetes"), LocalSandbox())
    record = event_record(report, "blob", seconds)
    assert record.files == () and "RuntimeError: sandbox gone" in record.unavailable[0]
    assert "### Not computed" in record.markdown and "sandbox gone" in status_line(record)
