"""What a new user hit in their first hour (issue 36): one test (or a few) per defect, each run as the user ran it
where that matters -- from a folder outside the checkout."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from pathlib import Path

import pytest
import yaml
from cli_runs import cli
from rich.console import Console
from task_folders import MINIMAL, minimal_task

from verifyless._cli.show import run_row, show_data
from verifyless.config import load_config
from verifyless.engine.baseline import check_baseline, failure_source
from verifyless.errors import ConfigError, ModelUnavailable
from verifyless.node import Screening, Status
from verifyless.preflight import plan
from verifyless.report.export import node_rows
from verifyless.report.render import report_html
from verifyless.report.views.runs import run_summary
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.baselines import RandomScreener
from verifyless.store import RunStore
from verifyless.task import load_task
from verifyless.testing import fake_engine
from verifyless.verify import verify

ROOT = Path(__file__).resolve().parents[2]
DEAD = "http://127.0.0.1:9/v1"  # nothing listens on the discard port: every connection is refused at once


# ---------------------------------------------------------------------- 1. a dead screener endpoint


class Dead:
    """A screener whose endpoint is down; ``answers`` screenings succeed first (a random pick)."""

    name = "critic"

    def __init__(self, answers: int = 0) -> None:
        self.answers = answers
        self.inner = RandomScreener()

    async def screen(self, ctx, candidates) -> Screening:
        if self.answers > 0:
            self.answers -= 1
            return await self.inner.screen(ctx, candidates)
        raise ModelUnavailable(f"cannot reach {DEAD}")


def _cfg(*over: str):
    return load_config(overrides=["engine.candidates=3", "strategy.name=greedy", *over])


def _run(tmp_path, screener, *over: str):
    store = RunStore(tmp_path / "s.db")
    engine = fake_engine(store, _cfg(*over), screener)
    return store, engine, asyncio.run(engine.run())


def test_a_screener_that_never_answers_stops_the_run_with_exit_6_after_3_fallbacks(tmp_path):
    store = RunStore(tmp_path / "s.db")
    engine = fake_engine(store, _cfg("budget.verifications=10"), Dead())
    with pytest.raises(ModelUnavailable, match="never answered") as info:
        asyncio.run(engine.run())
    assert info.value.exit_code == 6 and "3 screenings in a row" in str(info.value)
    assert f"verifyless run --resume {engine.run_id} --store {store.path}" in str(info.value), "the hint keeps --store"
    fallbacks = list(store.events(engine.run_id, kinds=["screener_fallback"]))
    assert [e.payload["round"] for e in fallbacks] == [1, 2, 3] and DEAD in fallbacks[0].payload["reason"]
    assert engine.state.screener_fallbacks == (3, 3)  # (fell back, screenings)
    assert store.run(engine.run_id).status == "failed"
    store.close()


def test_a_screener_that_answered_then_died_stops_after_3_in_a_row_and_the_limit_can_be_lifted(tmp_path):
    store = RunStore(tmp_path / "a.db")
    engine = fake_engine(store, _cfg("budget.verifications=10"), Dead(answers=1))
    with pytest.raises(ModelUnavailable, match="3 screenings in a row"):
        asyncio.run(engine.run())
    assert engine.state.screener_fallbacks == (3, 4)
    store.close()
    store, engine, result = _run(
        tmp_path / "b", Dead(answers=1), "budget.verifications=6", "engine.max_screener_fallbacks=null"
    )
    assert result.stopped == "budget: verifications" and engine.state.screener_fallbacks == (4, 5)
    store.close()


def test_a_run_stored_before_the_fallback_options_falls_back_for_ever_as_it_did():
    from verifyless.config import with_absent_options

    engine = with_absent_options({"engine": {"candidates": 4}})["engine"]
    assert engine["on_screener_error"] == "fallback" and engine["max_screener_fallbacks"] is None
    assert load_config(overrides=[]).engine.max_screener_fallbacks == 3  # a new run stops after 3 in a row


def test_on_screener_error_stop_stops_at_the_first_failure(tmp_path):
    store = RunStore(tmp_path / "s.db")
    engine = fake_engine(store, _cfg("budget.verifications=10", "engine.on_screener_error=stop"), Dead(answers=1))
    with pytest.raises(ModelUnavailable, match="engine.on_screener_error=stop"):
        asyncio.run(engine.run())
    assert engine.state.screener_fallbacks == (0, 1)
    store.close()


def test_a_short_run_whose_screener_never_answered_ends_with_exit_6_and_is_counted_everywhere(tmp_path):
    store = RunStore(tmp_path / "s.db")
    engine = fake_engine(store, _cfg("budget.verifications=3"), Dead())
    with pytest.raises(ModelUnavailable, match="never answered: all 2 screenings fell back"):
        asyncio.run(engine.run())
    run_id = engine.run_id
    assert [e.payload["node_id"] for e in store.events(run_id, kinds=["final"])], "the run still chose its final node"
    assert show_data(store, run_id, 5)["screener_fallbacks"] == {"fallbacks": 2, "screenings": 2}
    assert run_row(store, store.run(run_id))["screener_fallbacks"] == 2
    assert "2 of 2 screenings fell back" in run_summary(store, run_id).fallbacks
    assert "2 of 2 screenings fell back" in report_html(store, run_id, figures_dir="figures")  # report and dashboard
    store.close()


def test_the_live_line_counts_fallbacks():
    from verifyless._cli.progress import LiveProgress

    live = LiveProgress(Console(file=io.StringIO(), width=200), cap=5)
    live("start", {"run_id": "r", "task": "t"})
    live("screener_fallback", {"round": 1, "reason": "down", "fallbacks": 1, "screenings": 1})
    live("round", {"round": 2, "budget": {"verifications": 2, "cap": 5}})
    assert "screener fell back 1/1" in live.bar.tasks[0].description
    live.close()


def test_the_repro_a_dead_critic_endpoint_exits_6_before_anything_is_paid(tmp_path):
    """The endpoint is probed before the store exists (issue 46: two verifications used to be paid first);
    an endpoint that dies later falls back and is counted as the tests above show."""
    env = {"VERIFYLESS_BASE_URL": DEAD, "VERIFYLESS_MODEL": "m"}
    db = tmp_path / "S" / "e.db"
    args = ["run", "diabetes", "-c", "critic", "roles.models.critic=env", "--budget", "3", "--store", str(db)]
    out = cli(*args, "engine.data_report=false", cwd=tmp_path, env=env)
    assert out.returncode == 6, out.stdout + out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"the endpoint {DEAD} does not answer" in errors[0], out.stderr
    assert not db.exists(), "nothing was stored, nothing was paid"


# ---------------------------------------------------------------------- 2. a program that writes no output

SILENT = """import argparse
ap = argparse.ArgumentParser(); ap.add_argument("--data"); ap.add_argument("--out"); ap.parse_args()
# EVOLVE-BLOCK-START
x = 1
# EVOLVE-BLOCK-END
"""


def test_a_program_that_writes_no_output_is_the_candidate_s_failure(tmp_path):
    task = load_task("diabetes")
    v = verify(task, SILENT, LocalSandbox(), workspace_root=tmp_path)
    assert v.status is Status.FAILED and "wrote no output" in v.reason, v.reason
    assert failure_source(task, v) == "program"
    check_baseline(task, v, allow_failed=True)  # engine.allow_failed_baseline=true gets past it


def test_verify_says_the_program_wrote_no_output_not_the_evaluator(tmp_path):
    program = tmp_path / "silent.py"
    program.write_text(SILENT)
    out = cli("verify", "diabetes", str(program), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout + out.stderr
    assert "wrote no output" in text and "evaluator" not in text, text
    assert cli("verify", "diabetes", str(program), "--strict", cwd=tmp_path).returncode == 1


# ---------------------------------------------------------------------- 3. hidden metrics of a minimal task.yaml


def test_undeclared_test_metrics_of_a_minimal_task_yaml_stay_hidden(tmp_path, caplog):
    task = load_task(minimal_task(tmp_path))
    with caplog.at_level(logging.WARNING, logger="verifyless"):
        v = verify(task, task.baseline_program, LocalSandbox(), workspace_root=tmp_path / "ws")
    assert v.status is Status.OK, v.reason
    assert not [k for k in v.metrics if k.startswith(("test_", "hidden_"))], v.metrics  # what search may see
    assert {"test_rmse", "test_mae", "test_r2"} <= set(v.test_metrics) and v.test_score == v.test_metrics["test_rmse"]
    assert "metrics.test" in caplog.text and "test_rmse" in caplog.text


def test_a_validation_metric_named_like_a_hidden_one_is_refused(tmp_path):
    root = minimal_task(tmp_path)
    (root / "task.yaml").write_text(MINIMAL + "metrics: {validation: [val_rmse, test_rmse]}\n")
    with pytest.raises(Exception, match="test_rmse.*metrics.test"):
        load_task(root)


def test_export_never_writes_hidden_named_keys_as_validation_metrics(tmp_path):
    """A run stored before the quarantine (its validation metrics hold ``test_rmse``) exports without it."""
    from verifyless.node import Candidate, Idea, Operator, Verification, content_hash

    with RunStore(tmp_path / "s.db") as store:
        run_id = store.create_run("diabetes", {"task": "diabetes"})
        program = load_task("diabetes").baseline_program
        cand = Candidate("root", None, Operator.BASELINE, Idea("base"), program, content_hash(program), 0)
        store.append(run_id, "node", {**cand.to_dict(), "program": program}, node_id="root")
        v = Verification(Status.OK, "", {"val_rmse": 50.0, "test_rmse": 48.0}, {}, 50.0, None)
        store.append(run_id, "verification", {**v.to_dict(), "fitness": -50.0}, node_id="root", charge=True)
        (row,) = list(node_rows(store, run_id))
    assert json.loads(row["metrics"]) == {"val_rmse": 50.0}


# ---------------------------------------------------------------------- 4. paths inside --config files


def test_paths_in_a_config_file_resolve_against_its_folder(tmp_path):
    cfg = load_config(ROOT / "examples" / "run-critic.yaml")
    spec = cfg.roles.models["critic"]
    assert spec == f"scripted:{ROOT / 'examples' / 'scripted' / 'moons_torch.yaml'}"
    elsewhere = tmp_path / "conf"
    elsewhere.mkdir()
    (elsewhere / "run.yaml").write_text(
        "store: runs/s.db\ntask: mytask\nroles:\n  models:\n"
        "    default: {provider: scripted, script: replies.yaml}\n"
        "screener: {name: critic, options: {prompt_file: critic.md}}\n"
    )
    (elsewhere / "mytask").mkdir()
    cfg = load_config(elsewhere / "run.yaml")
    assert cfg.store == elsewhere / "runs" / "s.db" and cfg.task == str(elsewhere / "mytask")
    assert cfg.roles.models["default"]["script"] == str(elsewhere / "replies.yaml")
    assert cfg.screener.options.prompt_file == str(elsewhere / "critic.md")
    assert load_config(overrides=["roles.models.default=scripted:x.yaml"]).roles.models["default"] == "scripted:x.yaml"


def test_the_readme_config_line_runs_from_outside_the_checkout(tmp_path):
    args = ["run", "moons_torch", "-s", "greedy", "-c", "critic", "--config", str(ROOT / "examples/run-critic.yaml")]
    args += ["engine.candidates=2", "screener.options.k=2", "--budget", "2", "engine.data_report=false"]
    dry = cli(*args, "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    real = cli(*args, "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert real.returncode == 0, real.stdout + real.stderr


# ---------------------------------------------------------------------- 5. a cost-only budget


def test_a_cost_cap_that_cannot_bind_is_refused_and_the_plan_reads_plainly():
    with pytest.raises(ConfigError, match="price table.*budget.verifications"):
        load_config(overrides=["budget.verifications=null", "budget.cost=5"])
    priced = {"provider": "openai", "model": "m", "prices": {"prompt_per_mtok": 1.0, "completion_per_mtok": 2.0}}
    cfg = load_config(values={"budget.verifications": None, "budget.cost": 5, "roles.models": {"default": priced}})
    cfg = cfg.model_copy(update={"roles": cfg.roles.model_copy(update={"kind": "llm"})})
    text = "\n".join(plan(cfg).lines())
    assert "up to not capped" not in text and "not capped by budget.verifications" not in text, text
    assert "budget.cost" in text, text
    unpriced = "\n".join(plan(load_config(overrides=["budget.cost=5", "roles.kind=llm"])).lines())
    assert "cost:          free" not in unpriced and "budget.cost=5 cannot bind" in unpriced, unpriced


# ---------------------------------------------------------------------- 6. replay of an env-var recipe run


def test_replay_of_an_env_recipe_run_needs_no_endpoint_and_the_key_never_reaches_the_store(tmp_path, monkeypatch):
    from verifyless.engine.replay import replay_run
    from verifyless.model.scripted import ScriptedModel
    from verifyless.model.testserver import TestServer
    from verifyless.wiring import build_engine

    key = "sk-first-hour-secret-0123456789"
    db = tmp_path / "s.db"
    over = ["task=circle_packing", "screener.name=critic", "screener.options.k=2", "budget.verifications=2"]
    over += ["engine.candidates=2", "strategy.name=greedy", f"store={db}", "roles.kind=llm", "engine.data_report=false"]
    script = ScriptedModel.from_file(ROOT / "examples" / "scripted" / "circle_packing.yaml")
    with TestServer(script, api_key=key, models=["tiny"]) as server:
        for name, value in (("VERIFYLESS_BASE_URL", server.base_url), ("VERIFYLESS_API_KEY", key)):
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("VERIFYLESS_MODEL", "tiny")
        with RunStore(db) as store:
            engine = build_engine(load_config(overrides=over), store)  # roles.models.default: env, implied
            try:
                result = asyncio.run(engine.run())
            finally:
                engine.executor.close()
            stored = store.run(result.run_id).config
        base_url = server.base_url
    assert stored["roles"]["models"]["default"] == {"provider": "openai", "model": "tiny", "base_url": base_url}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), f"the API key leaked into {path.name}"
    for name in ("VERIFYLESS_API_KEY", "VERIFYLESS_MODEL"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("VERIFYLESS_BASE_URL", DEAD)  # a different endpoint now: the replay must not care
    with RunStore(db) as store:
        report = asyncio.run(replay_run(store, result.run_id, build=build_engine))
    assert report.equal, report.describe()


# ---------------------------------------------------------------------- 7. the dry run validates the task


def test_a_misspelled_task_is_one_line_with_close_matches_and_no_store_is_created(tmp_path):
    for extra in (["--dry-run"], []):
        out = cli("run", "diabets", "--store", str(tmp_path / "s.db"), *extra, cwd=tmp_path)
        assert out.returncode == 2, out.stdout + out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert "'diabetes'" in line and "Traceback" not in line
        assert not (tmp_path / "s.db").exists(), "a run with a bad task creates no store"


def test_the_dry_run_refuses_a_missing_scripted_file(tmp_path):
    out = cli("run", "diabetes", "--dry-run", "roles.kind=llm", "roles.models.default=scripted:nope.yaml", cwd=tmp_path)
    assert out.returncode == 2 and "nope.yaml" in out.stderr, out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, says",
    [
        (["-c", "critic"], "screener 'critic' needs a model under 'critic' or 'default'"),
        (["-c", "adaptive", "screener.options.screener=tournament"], "screener 'tournament' needs a model"),
        (["engine.final_selection=5"], "engine.final_selection needs a judge model"),
        (["novelty.enabled=true", "novelty.judge=true"], "novelty.judge is on but roles.models has no 'default'"),
    ],
)
def test_a_model_the_run_will_ask_for_and_lacks_is_refused_by_the_dry_run_and_before_the_store(tmp_path, args, says):
    env = {"VERIFYLESS_BASE_URL": "", "VERIFYLESS_MODEL": ""}  # no implied default model from the environment
    for extra in (["--dry-run"], []):
        out = cli("run", "diabetes", "--budget", "3", "--store", str(tmp_path / "s.db"), *args, *extra, env=env)
        assert out.returncode == 2, out.stdout + out.stderr
        (line,) = out.stderr.strip().splitlines()
        assert says in line, line
        assert not (tmp_path / "s.db").exists()


def test_an_openevolve_folder_with_the_default_space_roles_is_refused_before_the_plan_and_the_store(tmp_path):
    folder = tmp_path / "oe"
    folder.mkdir()
    (folder / "initial_program.py").write_text("# EVOLVE-BLOCK-START\nX = 1\n# EVOLVE-BLOCK-END\n")
    (folder / "evaluator.py").write_text("def evaluate(program_path):\n    return {'combined_score': 1.0}\n")
    for extra in (["--dry-run"], []):
        out = cli("run", str(folder), "--budget", "3", "--store", str(tmp_path / "s.db"), *extra, cwd=tmp_path)
        assert out.returncode == 2 and out.stdout == "", out.stdout  # no pre-flight plan for a run that cannot start
        (line,) = out.stderr.strip().splitlines()
        assert "declares no idea_space" in line and "roles.kind=llm" in line, line
        assert not (tmp_path / "s.db").exists()


# ---------------------------------------------------------------------- 8. the "show it with" hint


def test_the_show_hint_names_a_store_that_is_not_the_default(tmp_path):
    db = tmp_path / "elsewhere.db"
    out = cli("run", "diabetes", "--budget", "1", "--store", str(db), "engine.data_report=false", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(x for x in out.stdout.splitlines() if "show it with" in x)
    command = line.split("show it with: ")[1].split()
    assert command[:2] == ["verifyless", "show"] and command[3:] == ["--store", str(db)], line
    assert cli(*command[1:]).returncode == 0


@pytest.mark.parametrize(
    "doc, heading", [("docs/design/task-format.md", "### A minimal task.yaml"), ("README.md", "## Tasks")]
)
def test_the_minimal_task_yaml_of_the_docs_is_the_one_tested_here(doc, heading):
    """The minimal examples of task-format.md and the README's Tasks section are the MINIMAL task above."""
    text = (ROOT / doc).read_text()
    block = text.split(heading, 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block) == yaml.safe_load(MINIMAL)
    assert block.count("# R") == 5, "the required keys are marked"
