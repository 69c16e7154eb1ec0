"""Fidelity levels: the task format, seeded subsamples, knobs, cascade stages and the recorded level."""

from __future__ import annotations

import ast
import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from verifyless.errors import TaskError
from verifyless.guards.static import undefined_names
from verifyless.node import Status, Verification
from verifyless.sandbox.local import LocalSandbox
from verifyless.store.sqlite import RunStore
from verifyless.task import InvalidTask, load_task
from verifyless.verify import subsample_rows, verify

SANDBOX = LocalSandbox()
ISOLATED = SANDBOX.isolation != "process"
FIXTURE = Path(__file__).parent / "fixtures" / "store-0.1-diabetes-critic.db"

# The program reports what it saw: training rows per label, the knob (argv and environment),
# and whether the hidden labels can be reached from inside.
PROGRAM = """import argparse, json, os, pathlib
ap = argparse.ArgumentParser()
ap.add_argument("--data"); ap.add_argument("--out"); ap.add_argument("--knob", default="")
ap.add_argument("--hidden", default="")
a = ap.parse_args()
# EVOLVE-BLOCK-START
rows = (pathlib.Path(a.data) / "train.csv").read_text().splitlines()[1:]
# EVOLVE-BLOCK-END
seen = {
    "rows": len(rows),
    "positives": sum(r.endswith(",1") for r in rows),
    "first": rows[0],
    "knob_arg": a.knob,
    "knob_env": os.environ.get("TOY_KNOB"),
    "hidden_visible": os.path.exists(a.hidden),
    "public": sorted(os.listdir(a.data)),
}
(pathlib.Path(a.out) / "seen.json").write_text(json.dumps(seen))
"""

SCORER = """import json
from pathlib import Path

def score(outdir, hidden, public):
    seen = json.loads((Path(outdir) / "seen.json").read_text())
    labels = Path(hidden[0]).read_text().splitlines()[1:]
    return {"val_acc": 0.5, "rows": seen["rows"], "hidden_rows": len(labels)}
"""


def toy_spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": "toy",
        "statement": "statement.md",
        "program": "solution.py",
        "metric": {"name": "val_acc", "direction": "maximize"},
        "data": {
            "public": ["public/train.csv", "public/val_inputs.csv"],
            "hidden": ["hidden/val_labels.csv"],
            "target": {"column": "label", "kind": "classification", "files": ["public/train.csv"]},
        },
        "score": "score.py:score",
        "limits": {"wall_seconds": 20, "memory_mb": 1024},
        "fidelity": {
            "env": "TOY_KNOB",
            "full": "all",
            "levels": {
                "tenth": {"data_fraction": 0.1, "seed": 3},
                "small": {"knob": 7},
            },
        },
    }
    spec.update(changes)
    return spec


def make_toy(tmp_path: Path, spec: dict[str, Any] | None = None) -> Path:
    root = tmp_path / "toy"
    (root / "public").mkdir(parents=True, exist_ok=True)
    (root / "hidden").mkdir(exist_ok=True)
    labels = [1 if i % 4 == 0 else 0 for i in range(200)]  # 50 positives, 150 negatives
    train = "x,label\n" + "".join(f"{i},{y}\n" for i, y in enumerate(labels))
    (root / "public" / "train.csv").write_text(train)
    (root / "public" / "val_inputs.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(30)))
    (root / "hidden" / "val_labels.csv").write_text("label\n" + "".join(f"{i % 2}\n" for i in range(30)))
    (root / "statement.md").write_text("Predict the label.")
    (root / "solution.py").write_text(PROGRAM)
    (root / "score.py").write_text(SCORER)
    spec = spec or toy_spec()
    hidden = str(root / "hidden" / "val_labels.csv")
    spec.setdefault(
        "run", f"{{python}} {{program}} --data {{public}} --out {{outdir}} --knob {{fidelity}} --hidden {hidden}"
    )
    (root / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return root


def run_kept(task, tmp_path: Path, level: str, name: str) -> tuple[Verification, dict[str, Any], Path]:
    """Verify the baseline at ``level`` keeping the workspace; return the result, what it saw, the workspace."""
    root = tmp_path / name
    v = verify(task, task.baseline_program, SANDBOX, workspace_root=root, keep_workspace=True, level=level)
    ws = next(root.glob("verifyless-ws-*"))
    return v, json.loads((ws / "out" / "seen.json").read_text()), ws


# ------------------------------------------------------------------ task format


def test_built_in_tasks_declare_levels_where_the_program_honours_them():
    names = {n: load_task(n).fidelity.names for n in ("diabetes", "affairs_gbm", "digits_torch", "moons_torch")}
    assert names["diabetes"] == ("quarter_data", "half_data", "full")
    assert names["affairs_gbm"] == ("quarter_data", "half_data", "full")
    assert names["digits_torch"] == names["moons_torch"] == ("fifth_epochs", "half_epochs", "full")
    digits = load_task("digits_torch")
    assert digits.fidelity.env == "VERIFYLESS_EPOCH_FRACTION" and "VERIFYLESS_EPOCH_FRACTION" in digits.baseline_program
    assert load_task("affairs_gbm").target.kind == "classification"
    assert load_task("diabetes").target.kind == "regression"
    assert load_task("circle_packing").fidelity.names == ("full",)  # no cascade: nothing cheaper


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"fidelity": {"levels": {"full": {"knob": 1}}}}, "other than 'full'"),
        ({"fidelity": {"levels": {"both": {"knob": 1, "data_fraction": 0.5}}}}, "exactly one of data_fraction"),
        ({"fidelity": {"levels": {"none": {}}}}, "exactly one of data_fraction"),
        ({"fidelity": {"levels": {"all": {"data_fraction": 1.0}}}}, "fidelity.levels.all.data_fraction"),
        ({"fidelity": {"env": "lower-case", "levels": {"k": {"knob": 1}}}}, "fidelity.env"),
    ],
)
def test_malformed_fidelity_gives_a_message_naming_the_key(tmp_path, change, expected):
    with pytest.raises(InvalidTask) as err:
        load_task(make_toy(tmp_path, toy_spec(**change)))
    assert expected in str(err.value)


def test_data_fraction_needs_a_declared_target(tmp_path):
    spec = toy_spec(data={"public": ["public/train.csv"], "hidden": ["hidden/val_labels.csv"]})
    with pytest.raises(InvalidTask) as err:
        load_task(make_toy(tmp_path, spec))
    text = str(err.value)
    assert "fidelity.levels.tenth: data_fraction needs data.target" in text and "add 'data.target" in text


def test_the_fidelity_placeholder_needs_a_full_value_and_levels(tmp_path):
    with pytest.raises(InvalidTask, match=r"fidelity.full: the run command uses \{fidelity\}"):
        load_task(make_toy(tmp_path / "a", toy_spec(fidelity={"levels": {"small": {"knob": 7}}})))
    spec = toy_spec()
    del spec["fidelity"]
    spec["data"]["target"] = None
    with pytest.raises(InvalidTask, match=r"uses \{fidelity\} but the task declares no 'fidelity:' levels"):
        load_task(make_toy(tmp_path / "b", spec))


def test_a_target_file_must_be_public(tmp_path):
    spec = toy_spec()
    spec["data"]["target"]["files"] = ["hidden/val_labels.csv"]
    with pytest.raises(InvalidTask, match=r"data.target.files\[0\]: 'hidden/val_labels.csv' is not listed"):
        load_task(make_toy(tmp_path, spec))


def test_an_unknown_level_names_the_known_ones(tmp_path):
    task = load_task(make_toy(tmp_path))
    with pytest.raises(TaskError, match=r"no fidelity level 'tiny'; use one of \['tenth', 'small', 'full'\]"):
        verify(task, task.baseline_program, SANDBOX, workspace_root=tmp_path / "runs", level="tiny")


# ------------------------------------------------------------------ data fraction


def test_subsample_is_seeded_verbatim_and_stratified():
    text = "x,label\n" + "".join(f"{i}.50,{'b' if i % 5 == 0 else 'a'}\n" for i in range(100))
    once, again = subsample_rows(text, 0.3, 1, "label"), subsample_rows(text, 0.3, 1, "label")
    assert once == again and once != subsample_rows(text, 0.3, 2, "label")
    rows = list(csv.reader(io.StringIO(once)))
    assert rows[0] == ["x", "label"]
    assert sum(r[1] == "b" for r in rows[1:]) == 6 and sum(r[1] == "a" for r in rows[1:]) == 24  # 30% of each class
    assert set(once.splitlines()[1:]) <= set(text.splitlines()[1:])  # rows kept byte for byte
    assert once.splitlines()[1:] == [ln for ln in text.splitlines()[1:] if ln in set(once.splitlines())]  # in order
    assert len(subsample_rows(text, 0.3, 1).splitlines()) == 31  # unstratified: 30 rows plus the header


def test_a_data_fraction_level_writes_a_seeded_stratified_subsample_and_never_touches_hidden_data(tmp_path):
    root = make_toy(tmp_path)
    hidden_before = (root / "hidden" / "val_labels.csv").read_bytes()
    task = load_task(root)
    v1, seen1, ws1 = run_kept(task, tmp_path, "tenth", "a")
    v2, seen2, ws2 = run_kept(task, tmp_path, "tenth", "b")
    assert v1.status is Status.OK and v1.fidelity == "tenth", v1.reason
    assert (ws1 / "public" / "train.csv").read_bytes() == (ws2 / "public" / "train.csv").read_bytes()
    assert seen1 == seen2 and seen1["rows"] == 20 and seen1["positives"] == 5  # 10% of 150 and of 50
    assert v1.metrics["rows"] == 20 and v1.test_metrics["hidden_rows"] == 30  # the scorer still sees every hidden label
    assert "hidden_rows" not in v1.metrics  # a hidden_* key is a hidden metric, declared or not (issue 36)
    assert (ws1 / "public" / "val_inputs.csv").read_text().count("\n") == 31  # only the target file is subsampled
    assert seen1["public"] == ["train.csv", "val_inputs.csv"]  # hidden data never copied in
    assert (seen1["knob_arg"], seen1["knob_env"]) == ("all", None)  # a data level leaves the knob at full
    assert (root / "hidden" / "val_labels.csv").read_bytes() == hidden_before
    if ISOLATED:
        assert seen1["hidden_visible"] is False
    full, seen_full, _ = run_kept(task, tmp_path, "full", "c")
    assert seen_full["rows"] == 200 and full.fidelity == "full"


# ------------------------------------------------------------------ knob


def test_a_knob_level_fills_the_placeholder_and_sets_the_variable_only_when_asked(tmp_path):
    task = load_task(make_toy(tmp_path))
    low, seen_low, _ = run_kept(task, tmp_path, "small", "a")
    full, seen_full, _ = run_kept(task, tmp_path, "full", "b")
    assert low.status is Status.OK and low.fidelity == "small"
    assert (seen_low["knob_arg"], seen_low["knob_env"]) == ("7", "7")
    assert (seen_full["knob_arg"], seen_full["knob_env"]) == ("all", None)
    assert seen_low["rows"] == seen_full["rows"] == 200


def test_moons_full_fidelity_keeps_todays_score_and_the_epoch_knob_changes_the_work(tmp_path):
    pytest.importorskip("torch")
    task = load_task("moons_torch")
    full = verify(task, task.baseline_program, SANDBOX, workspace_root=tmp_path)
    fifth = verify(task, task.baseline_program, SANDBOX, workspace_root=tmp_path, level="fifth_epochs")
    assert full.status is Status.OK and fifth.status is Status.OK, (full.reason, fifth.reason)
    assert round(full.score, 4) == task.anchors.reference  # the baseline's score before levels existed
    assert fifth.score != full.score and fifth.fidelity == "fifth_epochs"


def test_diabetes_full_fidelity_keeps_todays_score_and_data_levels_change_it(tmp_path):
    task = load_task("diabetes")
    scores = {
        lv: verify(task, task.baseline_program, SANDBOX, workspace_root=tmp_path, level=lv).score
        for lv in task.fidelity.names
    }
    assert round(scores["full"], 2) == task.anchors.reference
    assert len(set(scores.values())) == 3


# ------------------------------------------------------------------ OpenEvolve cascade

CASCADE = """
def evaluate_stage1(program_path):
    return {"combined_score": 0.3, "stage1": 1.0}

def evaluate_stage2(program_path):
    return {"combined_score": 0.6, "stage2": 1.0}

def evaluate_stage3(program_path):
    return {"combined_score": 0.9, "stage3": 1.0}
"""


def test_openevolve_cascade_stages_are_levels(tmp_path):
    root = tmp_path / "oe"
    root.mkdir()
    (root / "initial_program.py").write_text("# EVOLVE-BLOCK-START\nx = 1\n# EVOLVE-BLOCK-END\n")
    (root / "evaluator.py").write_text(CASCADE)
    task = load_task(root)
    assert task.fidelity.names == ("stage1", "stage2", "full")
    results = {
        lv: verify(task, task.baseline_program, SANDBOX, workspace_root=tmp_path, level=lv)
        for lv in task.fidelity.names
    }
    assert {lv: v.score for lv, v in results.items()} == {"stage1": 0.3, "stage2": 0.6, "full": 0.9}
    assert "stage2" not in results["stage1"].metrics and "stage3" in results["full"].metrics
    assert results["stage2"].fidelity == "stage2"


# ------------------------------------------------------------------ the recorded level


def test_verification_records_its_level_and_old_payloads_load_as_full(tmp_path):
    v = Verification(status=Status.OK, score=1.0, fidelity="half_data")
    assert Verification.from_dict(v.to_dict()) == v
    old = v.to_dict()
    del old["fidelity"]
    assert Verification.from_dict(old).fidelity == "full"
    store_path = tmp_path / "old.db"
    shutil.copy(FIXTURE, store_path)
    store = RunStore(store_path)
    run_id = store.runs()[0].run_id
    payloads = [e.payload for e in store.events(run_id, kinds="verification")]
    assert payloads and all("fidelity" not in p for p in payloads)  # written before the field existed
    assert {Verification.from_dict(p).fidelity for p in payloads} == {"full"}


@pytest.mark.parametrize("name", ["digits_torch", "moons_torch"])
def test_the_epoch_knob_leaves_a_program_without_epochs_valid(name):
    program = load_task(name).baseline_program
    renamed = program.replace("EPOCHS = ", "STEPS = ").replace("range(EPOCHS)", "range(STEPS)")
    assert "EPOCHS = " not in renamed and undefined_names(ast.parse(renamed)) == []  # no guard finding


def _sunspots_outputs(tmp_path: Path, val_origins: list[int], test_origins: list[int]) -> Path:
    """Forecast files of a constant 50 for the given origins (the scorer's input)."""
    out = tmp_path / "out"
    out.mkdir()
    for name, origins in (("val", val_origins), ("test", test_origins)):
        rows = ["origin,year,value", *(f"{o},{o + k},50" for o in origins for k in range(10))]
        (out / f"{name}_forecasts.csv").write_text("\n".join(rows) + "\n")
    return out


def test_sunspots_scores_the_first_k_origins_only_when_the_verifier_names_the_level(tmp_path):
    import importlib.util

    task = load_task("sunspots")
    assert task.fidelity.names == ("first_3_origins", "first_6_origins", "full")
    spec = importlib.util.spec_from_file_location("sunspots_score", task.root / "score.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    hidden = list(task.hidden_data)
    few = _sunspots_outputs(tmp_path, [1899, 1904, 1909], [1959, 1969, 1979])
    low = module.score(few, hidden, tmp_path, level="first_3_origins")
    assert set(low) == {"val_mae", "val_rmse", "test_mae", "test_rmse"}
    with pytest.raises(ValueError, match="lacks"):  # at full fidelity every origin is required, as before
        module.score(few, hidden, tmp_path)
    with pytest.raises(ValueError, match="unknown sunspots fidelity level"):
        module.score(few, hidden, tmp_path, level="half_data")


def test_sunspots_full_fidelity_keeps_todays_score_and_a_band_cannot_skip_origins():
    task = load_task("sunspots")
    full = verify(task, task.baseline_program, SANDBOX)
    assert full.status is Status.OK and full.score == pytest.approx(26.143, abs=1e-3)  # the anchors' reference
    low = verify(task, task.baseline_program, SANDBOX, level="first_3_origins")
    assert low.status is Status.OK and low.fidelity == "first_3_origins" and low.score != full.score
    cheat = task.baseline_program.replace(
        "def forecast(history, horizon):",
        "import os\nos.environ['VERIFYLESS_ORIGINS'] = '1'\n\n\ndef forecast(history, horizon):",
    )
    skipped = verify(task, cheat, SANDBOX)
    assert skipped.status is Status.FAILED and "lacks" in skipped.reason
