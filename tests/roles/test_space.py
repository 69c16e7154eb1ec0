"""Idea spaces and the offline roles, on every built-in task; plus real runs of rendered programs."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from verifyless.errors import TaskError
from verifyless.node import Idea, Operator
from verifyless.program import fixed_region_violation, syntax_error
from verifyless.roles.base import Briefer, Implementer, ParentInfo, ProposeContext, Proposer, RoleFailure, Summarizer
from verifyless.roles.space import (
    DeterministicSummarizer,
    SpaceProposer,
    StaticBriefer,
    TemplateImplementer,
    recognise,
    space_roles,
)
from verifyless.task import load_task
from verifyless.task.base import IdeaOption, IdeaSpace
from verifyless.task.space import SpaceError, render, size

BUILTINS = ("affairs_gbm", "circle_packing", "diabetes", "digits_torch", "moons_torch", "sunspots")
NATIVE = ("diabetes", "moons_torch", "sunspots")


def run(coro):
    return asyncio.run(coro)


def root_context(task, **kw) -> ProposeContext:
    return ProposeContext(task=task, parent=ParentInfo(id="root", program=task.baseline_program), **kw)


# ------------------------------------------------------------------ rendering


def _space(template: str, fragments: dict[str, dict[str, str]]) -> IdeaSpace:
    return IdeaSpace(
        dimensions={
            "a": (IdeaOption("x", "x"), IdeaOption("y", "y")),
            "b": (IdeaOption("p", "p"), IdeaOption("q", "q")),
        },
        template=template,
        baseline={"a": "x", "b": "p"},
        fragments=fragments,
    )


def test_render_indents_block_fragments_and_replaces_inline() -> None:
    space = _space(
        "def f():\n    {{a}}\n    return {{b}}\n",
        {"a": {"x": "v = 1\nw = 2", "y": ""}, "b": {"p": "v", "q": "{{a.alt}}"}, "a.alt": {"x": "0", "y": "9"}},
    )
    assert render(space, {"a": "x", "b": "p"}) == "def f():\n    v = 1\n    w = 2\n    return v\n"
    assert render(space, {"a": "y", "b": "q"}) == "def f():\n    return 9\n"  # empty fragment drops its line
    assert size(space) == 4


def test_render_rejects_bad_assignments_and_cycles() -> None:
    space = _space("{{a}}\n", {"a": {"x": "{{b}}", "y": "1"}, "b": {"p": "{{a}}", "q": "2"}})
    with pytest.raises(SpaceError, match="cycle"):
        render(space, {"a": "x", "b": "p"})
    with pytest.raises(SpaceError, match="no option 'z'"):
        render(space, {"a": "z", "b": "p"})
    with pytest.raises(SpaceError, match="no option for dimension 'b'"):
        render(space, {"a": "x"})


# ------------------------------------------------------------------ roles on built-ins


@pytest.mark.parametrize("name", BUILTINS)
def test_space_is_rich_and_roles_satisfy_protocols(name: str) -> None:
    task = load_task(name)
    assert size(task.idea_space) >= 300
    roles = space_roles(task, seed=3)
    assert isinstance(roles.briefer, Briefer) and isinstance(roles.proposer, Proposer)
    assert isinstance(roles.implementer, Implementer) and isinstance(roles.summarizer, Summarizer)


@pytest.mark.parametrize("name", BUILTINS)
def test_proposer_gives_distinct_ideas_that_render_valid_children(name: str) -> None:
    task = load_task(name)
    ideas = run(SpaceProposer(7).propose(root_context(task), 8))
    assert len(ideas) == 8 and all(isinstance(i, Idea) for i in ideas)
    assert len({i.text for i in ideas}) == 8
    assert len({json.dumps(i.params["assignment"], sort_keys=True) for i in ideas}) == 8
    implementer = TemplateImplementer()
    programs = set()
    parent = ParentInfo(id="root", program=task.baseline_program)
    for idea in ideas:
        changed = idea.params["changed"]
        assert 1 <= len(changed) <= 2 and idea.tags == tuple(changed)
        assert all(idea.params["assignment"][d] != task.idea_space.baseline[d] for d in changed)
        impl = run(implementer.implement(task, parent, idea))
        assert impl.ok, impl.failure
        assert syntax_error(impl.program) is None
        assert fixed_region_violation(task.baseline_program, impl.program, task.band) is None
        programs.add(impl.program)
    assert len(programs) == 8 and task.baseline_program not in programs


@pytest.mark.parametrize("name", BUILTINS)
def test_proposer_is_deterministic_and_does_not_repeat(name: str) -> None:
    task = load_task(name)
    first = run(SpaceProposer(11).propose(root_context(task), 5))
    again = run(SpaceProposer(11).propose(root_context(task), 5))
    assert [i.text for i in first] == [i.text for i in again]
    other = run(SpaceProposer(12).propose(root_context(task), 5))
    assert [i.text for i in first] != [i.text for i in other]

    proposer = SpaceProposer(11)
    seen = {i.text for i in run(proposer.propose(root_context(task), 5))}
    second = run(proposer.propose(root_context(task), 5))
    assert not seen & {i.text for i in second}
    avoided = run(SpaceProposer(11).propose(root_context(task, avoid=tuple(seen)), 5))
    assert not seen & {i.text for i in avoided}


def test_proposer_moves_from_the_parent_assignment_and_uses_references() -> None:
    task = load_task("diabetes")
    space = task.idea_space
    parent_assignment = {**space.baseline, "model": "boosting"}
    parent = ParentInfo(id="p1", program="", idea=Idea("boosting", {"assignment": parent_assignment}))
    ideas = run(SpaceProposer(0).propose(ProposeContext(task=task, parent=parent), 6))
    for idea in ideas:
        diff = {d for d, v in idea.params["assignment"].items() if v != parent_assignment[d]}
        assert diff == set(idea.params["changed"]) and 1 <= len(diff) <= 2

    reference = ParentInfo(id="r", program="", idea=Idea("ref", {"assignment": {**space.baseline, "scaler": "robust"}}))
    ctx = ProposeContext(
        task=task,
        parent=ParentInfo(id="root", program=task.baseline_program),
        operator=Operator.REFERENCE,
        references=(reference,),
    )
    first = run(SpaceProposer(0).propose(ctx, 1))[0]
    assert first.params["assignment"]["scaler"] == "robust" and first.params["changed"] == ["scaler"]


def test_proposer_stops_when_neighbourhood_is_exhausted(tmp_path: Path) -> None:
    task = load_task("diabetes")
    small = IdeaSpace(
        dimensions={"k": (IdeaOption("a", "a"), IdeaOption("b", "b"), IdeaOption("c", "c"))},
        template="K = {{k}}\n",
        baseline={"k": "a"},
        fragments={"k": {"a": "1", "b": "2", "c": "3"}},
    )
    tiny = task.__class__(**{**task.__dict__, "idea_space": small})
    proposer = SpaceProposer(0)
    assert len(run(proposer.propose(root_context(tiny), 5))) == 2
    assert run(proposer.propose(root_context(tiny), 5)) == []


def test_implementer_failures_are_data() -> None:
    task = load_task("diabetes")
    parent = ParentInfo(id="root", program=task.baseline_program)
    missing = run(TemplateImplementer().implement(task, parent, Idea("free text idea")))
    assert not missing.ok and missing.failure.kind == "parse-error"
    bad = run(TemplateImplementer().implement(task, parent, Idea("x", {"assignment": {"model": "nope"}})))
    assert not bad.ok and "cannot render" in bad.failure.reason
    repaired = run(TemplateImplementer().repair(task, task.baseline_program, Idea("x"), "Traceback ..."))
    assert isinstance(repaired.failure, RoleFailure) and repaired.attempts == 0 and repaired.program is None


def test_space_roles_requires_a_space() -> None:
    task = load_task("diabetes")
    bare = task.__class__(**{**task.__dict__, "idea_space": None})
    with pytest.raises(TaskError, match="declares no idea_space"):
        space_roles(bare)


@pytest.mark.parametrize("name", BUILTINS)
def test_summaries_are_neutral_and_recognise_rendered_programs(name: str) -> None:
    task = load_task(name)
    idea = run(SpaceProposer(5).propose(root_context(task), 1))[0]
    child = run(
        TemplateImplementer().implement(task, ParentInfo(id="root", program=task.baseline_program), idea)
    ).program
    summary = run(DeterministicSummarizer().summarize(task, child, idea))
    assert 100 <= len(summary.split()) <= 260
    assert not {"better", "worse", "promising", "likely", "should"} & set(summary.lower().replace(",", " ").split())
    for dim, opt in idea.params["assignment"].items():
        assert next(o for o in task.idea_space.dimensions[dim] if o.name == opt).description.rstrip(".") in summary
    assert run(DeterministicSummarizer().summarize(task, child)) == summary  # recognised without the idea
    assert (
        recognise(task.idea_space, child.split("# EVOLVE-BLOCK-START\n")[1].split("# EVOLVE-BLOCK-END")[0])
        == idea.params["assignment"]
    )
    custom = child.replace("# EVOLVE-BLOCK-END", "EXTRA = 1\n# EVOLVE-BLOCK-END")
    assert "custom code" in run(DeterministicSummarizer().summarize(task, custom))


@pytest.mark.parametrize("name", BUILTINS)
def test_static_brief_has_criteria_per_dimension(name: str) -> None:
    task = load_task(name)
    brief = run(StaticBriefer().brief(task))
    assert task.metric.name in brief.understanding and task.statement.strip()[:40] in brief.understanding
    assert len(brief.criteria) == len(task.idea_space.dimensions) + 3
    assert all(c.startswith(d + ":") for c, d in zip(brief.criteria, task.idea_space.dimensions, strict=False))


# ------------------------------------------------------------------ real runs


def _children(task, count: int = 2) -> list[tuple[str, str]]:
    """The baseline plus ``count`` rendered children (label, program)."""
    ideas = run(SpaceProposer(0).propose(root_context(task), count))
    parent = ParentInfo(id="root", program=task.baseline_program)
    programs = [("baseline", task.baseline_program)]
    for idea in ideas:
        programs.append((idea.text[:60], run(TemplateImplementer().implement(task, parent, idea)).program))
    return programs


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    return env


def _score(task, outdir: Path, public: Path) -> dict[str, float]:
    file, func = task.scorer.split(":")
    spec = importlib.util.spec_from_file_location(f"score_{task.name}", task.root / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, func)(outdir, list(task.hidden_data), public)


def _workspace(task, program: str, where: Path) -> tuple[list[str], Path]:
    """Lay out a workspace as the verification contract does; return (argv, outdir)."""
    (where / "public").mkdir(parents=True)
    (where / "out").mkdir()
    for path in task.public_data:
        shutil.copy(path, where / "public" / path.name)
    (where / task.program_file).write_text(program)
    values = {
        "python": sys.executable,
        "program": str(where / task.program_file),
        "public": str(where / "public"),
        "workdir": str(where),
        "outdir": str(where / "out"),
    }
    return [part.format(**values) for part in task.run_command], where / "out"


def test_native_tasks_run_and_score(tmp_path: Path) -> None:
    """Baseline and two rendered children of every native task run as the contract says and score."""
    jobs = []
    for name in NATIVE:
        task = load_task(name)
        for i, (label, program) in enumerate(_children(task)):
            argv, outdir = _workspace(task, program, tmp_path / f"{name}-{i}")
            jobs.append((task, label, outdir, argv))
    results = []
    for start in range(0, len(jobs), 3):  # three at a time: mostly interpreter start-up, little compute
        batch = [
            (
                t,
                label,
                out,
                subprocess.Popen(
                    argv, cwd=out.parent, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                ),
            )
            for t, label, out, argv in jobs[start : start + 3]
        ]
        for task, label, outdir, proc in batch:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"{task.name} / {label}: {err[-2000:]}"
            results.append((task, label, _score(task, outdir, outdir.parent / "public")))
    by_task: dict[str, list[float]] = {}
    for task, label, metrics in results:
        assert set(task.validation_metrics) | set(task.test_metrics) <= set(metrics), (task.name, label, metrics)
        lo, hi = task.metric.lower, task.metric.upper
        assert (lo is None or metrics[task.metric.name] >= lo) and (hi is None or metrics[task.metric.name] <= hi)
        by_task.setdefault(task.name, []).append(metrics[task.metric.name])
    for name, scores in by_task.items():
        task = load_task(name)
        assert scores[0] == pytest.approx(task.anchors.reference, abs=0.01), f"{name}: reference anchor is stale"
        assert len(set(scores)) > 1, f"{name}: children scored exactly like the baseline"


def test_openevolve_task_evaluates_rendered_children(tmp_path: Path) -> None:
    task = load_task("circle_packing")
    scores = []
    for i, (label, program) in enumerate(_children(task)):
        folder = tmp_path / f"cp-{i}"
        folder.mkdir()
        (folder / task.program_file).write_text(program)
        code = (
            "import json, sys, importlib.util as u; s = u.spec_from_file_location('ev', sys.argv[1]); "
            "m = u.module_from_spec(s); s.loader.exec_module(m); print(json.dumps(m.evaluate(sys.argv[2])))"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code, str(task.evaluator), str(folder / task.program_file)],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
            cwd=folder,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        metrics = json.loads(proc.stdout.strip().splitlines()[-1])
        assert metrics["validity"] == 1.0, (label, metrics)
        scores.append(metrics["combined_score"])
    assert scores[0] == pytest.approx(task.anchors.reference, abs=1e-6)
    assert all(0 < s <= task.anchors.bound + 1e-3 for s in scores)
    broken = tmp_path / "broken.py"
    broken.write_text(task.baseline_program.replace("return best", "return best[0], -best[1]"))
    spec = importlib.util.spec_from_file_location("cp_eval", task.evaluator)
    evaluator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(evaluator)
    result = evaluator.evaluate(str(broken))
    assert result["combined_score"] == 0.0 and "negative radius" in result["error"]


def test_proposer_keeps_finding_new_ideas_after_the_neighbourhood_is_used_up():
    """Greedy search asks the same parent again and again; one- and two-dimension moves run out, jumps do not."""
    import asyncio

    from verifyless.node import Operator
    from verifyless.roles.base import ParentInfo, ProposeContext
    from verifyless.roles.space import space_roles
    from verifyless.task import load_task

    task = load_task("circle_packing")
    roles = space_roles(task, seed=0)
    parent = ParentInfo(id="root", program=task.baseline_program)
    seen = set()
    for call in range(40):
        ideas = asyncio.run(
            roles.proposer.propose(ProposeContext(task=task, parent=parent, operator=Operator.IMPROVE, seed=call), 6)
        )
        assert len(ideas) == 6, f"call {call} ran dry"
        for idea in ideas:
            key = tuple(sorted(idea.params["assignment"].items()))
            assert key not in seen, "an idea was proposed twice from the same parent"
            seen.add(key)
    assert any(len(idea.params["changed"]) >= 3 for idea in ideas)
