"""Guards before execution: a table of bad implementations, advisory vs blocking, repair, reviewer, config.

Children are made by the real child-making unit with the real LLM implementer
on a ``ScriptedModel`` that writes the band under test, so each row checks the
node status and reason a run would record.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import textwrap
from pathlib import Path

import pytest

from verifyless.child import ChildMaker
from verifyless.errors import ConfigError
from verifyless.guards import Finding, GuardReport, Guards, GuardsConfig, ModuleAvailability
from verifyless.guards.reviewer import parse_review
from verifyless.model.scripted import Rule, ScriptedModel
from verifyless.node import Idea, Status
from verifyless.program import split
from verifyless.roles.llm import llm_roles
from verifyless.roles.options import LLMRoleOptions
from verifyless.roles.render import band_for
from verifyless.task import load_task

DIABETES = load_task("diabetes")
PACKING = load_task("circle_packing")
SUMMARY = " ".join(["The program fits a regularised linear model on the training rows and predicts the rest."] * 10)

CLEAN = '''
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.pipeline import make_pipeline

STRENGTH = 3.0


def fit(x, y):
    """Train on (x, y); return a function mapping inputs to predictions."""
    model = make_pipeline(StandardScaler(), Ridge(alpha=STRENGTH))
    model.fit(x, y)
    return model.predict
'''


def band(text: str) -> str:
    return textwrap.dedent(text).strip("\n") + "\n"


def child_of(task, new_band: str) -> str:
    return split(task.baseline_program, band_for(task, task.baseline_program)).join(band(new_band))


def fenced(text: str) -> str:
    return f"Here is the band.\n```python\n{band(text)}```\n"


def scripted(implement: list[str], repair: list[str] = ()) -> ScriptedModel:
    return ScriptedModel(
        rules=[
            Rule(replies=[fenced(t) for t in implement], role="implementer"),
            Rule(replies=[fenced(t) for t in repair], role="repair"),
            Rule(replies=[SUMMARY], role="summarizer", repeat=True),
        ]
    )


def make(
    task,
    implement: list[str],
    *,
    config: GuardsConfig | None = None,
    repair: list[str] = (),
    repairs: int = 0,
    reviewer=None,
):
    from verifyless.roles.base import ParentInfo

    model = scripted(implement, repair)
    guards = Guards(config or GuardsConfig(), reviewer_model=reviewer)
    roles = llm_roles(model, options=LLMRoleOptions(max_attempts=1))
    maker = ChildMaker(task, roles, guards=guards, guard_repairs=repairs)
    made = asyncio.run(maker.make(ParentInfo("root", task.baseline_program), Idea("standardise, then ridge")))
    return made, model


# ------------------------------------------------------------------ the guard table

LEAK_IN_FIT = """
import sys
from pathlib import Path
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler


def fit(x, y):
    data = Path(sys.argv[sys.argv.index("--data") + 1])
    x_val = np.loadtxt(data / "val_inputs.csv", delimiter=",", skiprows=1)
    scaler = StandardScaler().fit(np.vstack([x, x_val]))
    model = Ridge().fit(scaler.transform(x), y)
    return lambda z: model.predict(scaler.transform(z))
"""
LEAK_BY_NAME = """
import sys
from sklearn.linear_model import Ridge
from sklearn.decomposition import PCA

X_TEST = np.loadtxt(sys.argv[sys.argv.index("--data") + 1] + "/test_inputs.csv", delimiter=",", skiprows=1)
projection = PCA(n_components=5).fit(X_TEST)


def fit(x, y):
    model = Ridge().fit(projection.transform(x), y)
    return lambda z: model.predict(projection.transform(z))
"""
INTERNAL_SPLIT = """
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import train_test_split


def fit(x, y):
    X_train, X_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=0)
    model = HistGradientBoostingRegressor(max_iter=50).fit(X_train, y_train)
    if model.score(X_test, y_test) < 0:
        model = HistGradientBoostingRegressor(max_iter=10).fit(x, y)
    return model.predict
"""
METRIC_WRITE = """
import json
from scipy.optimize import linprog, minimize


def construct_packing():
    with open("out/metrics.json", "w") as fh:
        json.dump({"combined_score": 3.0}, fh)
    centers = np.full((N_CIRCLES, 2), 0.5)
    return centers, np.zeros(N_CIRCLES)
"""

TABLE = [
    # (id, task, band, status, reason fragment)
    ("syntax", DIABETES, "def fit(x, y):\n    return (x,\n", Status.GUARD_FAILED, "does not parse"),
    (
        "undefined-name",
        DIABETES,
        CLEAN.replace("Ridge(alpha", "Ridg(alpha"),
        Status.GUARD_FAILED,
        "undefined_names: name 'Ridg' is used but never defined or imported",
    ),
    (
        "missing-module",
        DIABETES,
        "import xgboost_missing_here\n" + CLEAN,
        Status.GUARD_FAILED,
        "imports: imports 'xgboost_missing_here', which the task's environment does not provide",
    ),
    (
        "hidden-labels-path",
        DIABETES,
        CLEAN + "\nLEAK = np.loadtxt('/work/main/tasks/diabetes/hidden/val_targets.csv')\n",
        Status.GUARD_FAILED,
        "paths: refers to '/work/main/tasks/diabetes/hidden/val_targets.csv', a path outside the workspace",
    ),
    (
        "climbing-out",
        DIABETES,
        CLEAN + "\nLEAK = open('../../hidden/val_targets.csv').read()\n",
        Status.GUARD_FAILED,
        "a path outside the workspace",
    ),
    (
        "fit-reads-val",
        DIABETES,
        LEAK_IN_FIT,
        Status.GUARD_FAILED,
        "leakage: the fit step fit() reads evaluation inputs ('val_inputs.csv'",
    ),
    (
        "fit-on-test-var",
        DIABETES,
        LEAK_BY_NAME,
        Status.GUARD_FAILED,
        "leakage: fit() is given evaluation inputs (X_TEST",
    ),
    (
        "writes-metric",
        PACKING,
        METRIC_WRITE,
        Status.GUARD_FAILED,
        "metric_write: sets the metric 'combined_score' to the literal 3 instead of computing it",
    ),
    ("internal-validation-split-is-fine", DIABETES, INTERNAL_SPLIT, Status.IMPLEMENTED, ""),
    (
        "guarded-import-is-fine",
        DIABETES,
        "try:\n    import xgboost_missing_here\nexcept ImportError:\n    xgboost_missing_here = None\n" + CLEAN,
        Status.IMPLEMENTED,
        "",
    ),
    ("clean", DIABETES, CLEAN, Status.IMPLEMENTED, ""),
]


@pytest.mark.parametrize(
    ("task", "new_band", "status", "reason"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_guard_table(task, new_band, status, reason):
    made, _ = make(task, [new_band])
    assert made.status is status, made.reason
    assert reason in made.reason
    if status is Status.IMPLEMENTED:
        assert made.reason == "" and made.summary


def test_writing_metrics_json_is_reported_too():
    report = asyncio.run(Guards().check(PACKING, PACKING.baseline_program, child_of(PACKING, METRIC_WRITE)))
    reasons = [f.reason for f in report.blocking]
    assert any("'out/metrics.json', the evaluator's own output" in r for r in reasons), reasons


@pytest.mark.parametrize(
    ("rule", "status", "blocking"),
    [("allow", Status.IMPLEMENTED, None), ("warn", Status.IMPLEMENTED, False), ("forbid", Status.GUARD_FAILED, True)],
)
def test_network_and_subprocess_follow_the_task_policy(rule, status, blocking):
    task = dataclasses.replace(DIABETES, policy={"network": rule, "subprocess": rule})
    bad = "import socket\nimport os\n" + CLEAN + "\nos.system('true')\n"
    made, _ = make(task, [bad])
    assert made.status is status, made.reason
    report = asyncio.run(Guards().check(task, task.baseline_program, child_of(task, bad)))
    policy = [f for f in report.findings if f.guard == "policy"]
    if blocking is None:
        assert policy == []
    else:
        assert {f.blocking for f in policy} == {blocking}
        text = " ".join(f.reason for f in policy)
        assert "uses network (import socket" in text and "uses subprocess (os.system()" in text
    if rule == "forbid":
        assert "which the task forbids" in made.reason


# ------------------------------------------------------------------ advisory vs blocking


def test_advisory_findings_let_the_child_through_with_a_note():
    bad = CLEAN.replace("Ridge(alpha", "Ridg(alpha")
    made, _ = make(DIABETES, [bad], config=GuardsConfig(undefined_names="advisory"))
    assert made.status is Status.IMPLEMENTED and made.summary
    assert any("undefined_names (advisory)" in n and "'Ridg'" in n for n in made.notes), made.notes


def test_a_guard_that_is_off_reports_nothing():
    bad = CLEAN.replace("Ridge(alpha", "Ridg(alpha")
    report = asyncio.run(
        Guards(GuardsConfig(undefined_names="off")).check(DIABETES, DIABETES.baseline_program, child_of(DIABETES, bad))
    )
    assert report.findings == ()


def test_report_reason_is_one_line_per_blocking_finding():
    report = GuardReport(
        (
            Finding("paths", True, "refers to '/x'", 3),
            Finding("imports", False, "imports 'y'"),
            Finding("leakage", True, "fit() is given evaluation inputs"),
        )
    )
    assert report.reason() == "paths: refers to '/x'\nleakage: fit() is given evaluation inputs"
    assert [f.guard for f in report.blocking] == ["paths", "leakage"]
    assert report.notes() == ("guard imports (advisory): imports 'y'",)


def test_findings_the_parent_already_has_are_not_reported_by_default():
    parent = child_of(DIABETES, CLEAN + "\nREF = '/srv/reference.csv'\n")
    child = parent.replace("STRENGTH = 3.0", "STRENGTH = 5.0")
    assert asyncio.run(Guards().check(DIABETES, parent, child)).findings == ()
    again = asyncio.run(Guards(GuardsConfig(only_new=False)).check(DIABETES, parent, child))
    assert [f.guard for f in again.blocking] == ["paths"]


# ------------------------------------------------------------------ repair after a guard failure


def test_a_guard_failure_is_repaired_keeping_the_idea():
    bad = CLEAN.replace("Ridge(alpha", "Ridg(alpha")
    made, model = make(DIABETES, [bad], repair=[CLEAN], repairs=1)
    assert made.status is Status.IMPLEMENTED, made.reason
    assert "Ridge(alpha=STRENGTH)" in made.program and made.attempts == 2
    repair_call = next(c.request for c in model.calls if c.request.role == "repair")
    prompt = "\n".join(m.content for m in repair_call.messages)
    assert "name 'Ridg' is used but never defined or imported" in prompt  # the guard's reason
    assert "standardise, then ridge" in prompt  # the same idea
    assert any(n.startswith("guard repair 1 after: undefined_names") for n in made.notes)


def test_a_repair_that_still_fails_stays_guard_failed():
    bad = CLEAN.replace("Ridge(alpha", "Ridg(alpha")
    made, _ = make(DIABETES, [bad], repair=[bad.replace("STRENGTH = 3.0", "STRENGTH = 4.0")], repairs=1)
    assert made.status is Status.GUARD_FAILED and "'Ridg'" in made.reason


# ------------------------------------------------------------------ the LLM reviewer


def test_the_reviewer_can_block_and_is_offline_with_a_scripted_model():
    reviewer = ScriptedModel(
        replies=[
            "The fit uses the validation rows.\nVERDICT: reject\n"
            "ISSUE: line 12 --- the scaler is fitted on the validation inputs"
        ]
    )
    made, _ = make(DIABETES, [CLEAN], config=GuardsConfig(reviewer="blocking"), reviewer=reviewer)
    assert made.status is Status.GUARD_FAILED
    assert made.reason == "reviewer: the scaler is fitted on the validation inputs (line 12)"
    request = reviewer.calls[0].request
    assert request.role == "reviewer" and "Ridge(alpha=STRENGTH)" in request.messages[-1].content


def test_the_reviewer_is_not_asked_when_a_static_guard_already_blocks():
    reviewer = ScriptedModel(replies=["VERDICT: pass"])
    made, _ = make(
        DIABETES, ["import xgboost_missing_here\n" + CLEAN], config=GuardsConfig(reviewer="blocking"), reviewer=reviewer
    )
    assert made.status is Status.GUARD_FAILED and reviewer.calls == []


@pytest.mark.parametrize(
    ("reply", "blocking"),
    [
        ("VERDICT: pass", []),
        ("**VERDICT:** reject\nISSUE: line 3 --- writes the score", [True]),
        ("VERDICT: reject", [True]),
        ("I think it is fine.", [False]),
    ],
)
def test_reviewer_replies_are_parsed(reply, blocking):
    assert [not i.advisory_only for i in parse_review(reply)] == blocking


def test_reviewer_on_without_a_model_is_a_config_error():
    with pytest.raises(ConfigError, match="reviewer model"):
        Guards(GuardsConfig(reviewer="advisory"))


# ------------------------------------------------------------------ environment, task policy, config


def test_module_availability_follows_the_sandbox_environment():
    modules = ModuleAvailability()
    assert modules("numpy") and modules("json") and modules("sys") and not modules("xgboost_missing_here")
    import verifyless

    source = Path(verifyless.__file__).resolve()
    if not any(source.is_relative_to(Path(p).resolve()) for p in (sys.prefix, sys.base_prefix)):
        assert not modules("verifyless"), "an editable checkout is absent inside the sandbox"


def test_openevolve_helper_modules_in_the_task_folder_count_as_available(tmp_path):
    import shutil

    folder = tmp_path / "packing"
    shutil.copytree(PACKING.root, folder)
    (folder / "geometry_helpers.py").write_text("def area(r):\n    return 3.14159 * r * r\n")
    task = load_task(folder)
    program = child_of(
        task,
        "import geometry_helpers\n"
        + METRIC_WRITE.split("def construct_packing")[0]
        + "\ndef construct_packing():\n    return np.zeros((N_CIRCLES, 2)), np.zeros(N_CIRCLES)\n",
    )
    report = asyncio.run(Guards().check(task, task.baseline_program, program))
    assert [f for f in report.findings if f.guard == "imports"] == []


def test_task_yaml_policy_field(tmp_path):
    import shutil

    from verifyless.errors import TaskError

    folder = tmp_path / "diabetes"
    shutil.copytree(DIABETES.root, folder)
    text = (folder / "task.yaml").read_text()
    (folder / "task.yaml").write_text(text + "policy: {network: forbid, subprocess: warn}\n")
    assert dict(load_task(folder).policy) == {"network": "forbid", "subprocess": "warn"}
    assert dict(DIABETES.policy) == {"network": "allow", "subprocess": "allow"}
    (folder / "task.yaml").write_text(text + "policy: {network: never}\n")
    with pytest.raises(TaskError, match="policy"):
        load_task(folder)


def test_run_config_has_a_guards_section():
    from verifyless.config import load_config
    from verifyless.wiring import build_guards

    cfg = load_config(None, ["guards.leakage=advisory", "guards.repair_attempts=2"])
    assert cfg.guards.leakage == "advisory" and cfg.guards.repair_attempts == 2 and cfg.guards.syntax == "blocking"
    assert isinstance(build_guards(cfg, {}), Guards)
    with pytest.raises(ConfigError):
        load_config(None, ["guards.leakage=sometimes"])
    with pytest.raises(ConfigError, match="reviewer"):
        build_guards(load_config(None, ["guards.reviewer=blocking"]), {})
    own = ScriptedModel(replies=["VERDICT: pass"])
    named = build_guards(
        load_config(None, ["guards.reviewer=advisory", "guards.reviewer_model=reviewer"]),
        {"reviewer": own, "default": ScriptedModel(replies=[])},
    )
    assert named.reviewer is not None and named.reviewer.model is own
    assert all(field.description for field in GuardsConfig.model_fields.values())
