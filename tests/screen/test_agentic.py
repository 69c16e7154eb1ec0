"""The agentic RPM: scripted model, real sandboxed pilot runs, stop rules and the final choice."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import shlex
from collections.abc import Callable
from pathlib import Path

import pytest
from context_nodes import scored_node

from verifyless.errors import ConfigError
from verifyless.model.base import Choice, ModelReply, ModelRequest, ToolCall
from verifyless.node import Candidate, Idea, Operator, content_hash
from verifyless.roles.base import ParentInfo
from verifyless.sandbox.local import LocalSandbox
from verifyless.screen.agentic import AgenticOptions, AgenticRPM, parse_feedback, pilot_records, pilot_seconds
from verifyless.screen.base import ScreenContext
from verifyless.screen.registry import SCREENERS
from verifyless.task.base import Band, Limits, Metric, Task

SECRET = "SECRET-LABELS-4242"


SANDBOX = LocalSandbox()


# ---------------------------------------------------------------------- a scripted model

_ids = itertools.count()


def tool(name: str, **arguments: str) -> ToolCall:
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=json.dumps(arguments))


Turn = Choice | str | list[ToolCall]


class FakeModel:
    """Answers by role: the pilot agent from ``pilot(turn_index, request)``, feedback and final from callables."""

    name = "fake"

    def __init__(
        self,
        pilot: Callable[[int, ModelRequest], Turn],
        feedback: Callable[[int], str] | str = "[ENOUGH] clear",
        final: str = "[CHOICE] 1 --- it measured best",
    ) -> None:
        self.pilot = pilot
        self.feedback = feedback if callable(feedback) else (lambda _i, text=feedback: text)
        self.final = final
        self.requests: list[ModelRequest] = []
        self.counts = {"agentic-pilot": 0, "agentic-feedback": 0, "agentic-final": 0}

    async def generate(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        i = self.counts[request.role]
        self.counts[request.role] += 1
        if request.role == "agentic-pilot":
            out = self.pilot(i, request)
            choice = (
                out
                if isinstance(out, Choice)
                else (Choice(text=out) if isinstance(out, str) else Choice(text="", tool_calls=tuple(out)))
            )
        elif request.role == "agentic-feedback":
            choice = Choice(text=self.feedback(i))
        else:
            choice = Choice(text=self.final)
        return ModelReply((choice,))

    def tool_messages(self) -> list[str]:
        last_pilot = [r for r in self.requests if r.role == "agentic-pilot"][-1]
        return [m.content for m in last_pilot.messages if m.role == "tool"]


def python_then_submit(code: str = "print('pilot ran')") -> Callable[[int, ModelRequest], Turn]:
    return lambda i, _req: [tool("python", code=code), tool("submit_findings", findings=f"finding {i}")]


# ---------------------------------------------------------------------- task and candidates


@pytest.fixture()
def task(tmp_path: Path) -> Task:
    root = tmp_path / "task"
    (root / "public").mkdir(parents=True)
    (root / "hidden").mkdir()
    (root / "public" / "train.csv").write_text("a,b\n1,2\n")
    (root / "hidden" / "labels.csv").write_text(SECRET + "\n")
    program = "import sys\n# EVOLVE-BLOCK-START\nmodel = 'mean'\n# EVOLVE-BLOCK-END\nprint(model)\n"
    return Task(
        name="toy",
        root=root,
        kind="native",
        statement="Predict b from a.",
        program_file="solution.py",
        baseline_program=program,
        band=Band(),
        metric=Metric("rmse", "minimize"),
        public_data=(root / "public" / "train.csv",),
        hidden_data=(root / "hidden" / "labels.csv",),
        limits=Limits(wall_seconds=5.0),
    )


def _candidates(task: Task, n: int = 3, operator: Operator = Operator.IMPROVE) -> list[Candidate]:
    out = []
    for i in range(n):
        program = task.baseline_program.replace("'mean'", f"'model{i}'")
        out.append(
            Candidate(
                id=f"c{i}",
                parent_id="p",
                operator=operator,
                idea=Idea(f"use model{i}"),
                program=program,
                program_hash=content_hash(program),
                summary=f"fits model{i}",
            )
        )
    return out


def _ctx(task: Task, seed: int = 0, **kwargs) -> ScreenContext:
    return ScreenContext(
        task=task,
        parent=ParentInfo(id="p", program=task.baseline_program, score=1.0),
        rng=random.Random(seed),
        **kwargs,
    )


def _rpm(model: FakeModel, clock=None, **options) -> AgenticRPM:
    options.setdefault("pilot_limits", {"wall_seconds": 5.0})
    options.setdefault("device", "CPU only (test)")  # detect_device is tested on its own below
    opts = SCREENERS.validate("agentic", options)  # as the configuration checks them
    return AgenticRPM(model, SANDBOX, opts) if clock is None else AgenticRPM(model, SANDBOX, opts, clock=clock)


def _screen(rpm: AgenticRPM, task: Task, seed: int = 0, n: int = 3):
    cands = _candidates(task, n)
    return cands, asyncio.run(rpm.screen(_ctx(task, seed), cands))


# ---------------------------------------------------------------------- tests


def test_overstated_budget_pilot_record_and_final_choice(task: Task) -> None:
    model = FakeModel(
        python_then_submit("import os; print('files', sorted(os.listdir('.')))"),
        final="The pilots favour the second one.\n[CHOICE] 2 --- lowest pilot error",
    )
    cands, screening = _screen(_rpm(model), task)
    system = model.requests[0].messages[0].content + model.requests[0].messages[1].content
    assert "2700" in system and "300 " not in system  # only the overstated figure is shown
    assert {t.name for t in model.requests[0].tools} == {"python", "bash", "submit_findings"}
    assert screening.ranking[0] == cands[1].id and screening.chosen == (cands[1].id,)
    assert sorted(screening.ranking) == sorted(c.id for c in cands)
    detail = screening.evidence[cands[1].id].detail
    assert detail["choice_source"] == "model"
    assert detail["stop_reason"] == "feedback: enough"
    (pilot,) = detail["pilots"]
    assert pilot["status"] == "ok" and "candidate_1.py" in pilot["stdout_tail"] and "public" in pilot["stdout_tail"]
    assert pilot["code"].startswith("import os")
    assert detail["pilot_seconds"] == pytest.approx(pilot["seconds"])
    assert pilot_seconds(screening) == pytest.approx(pilot["seconds"])  # counted once
    assert detail["findings"] == ["finding 0"]


def test_stops_at_max_pilots(task: Task) -> None:
    model = FakeModel(python_then_submit(), feedback="[NEXT] run it again on a bigger sample")
    _, screening = _screen(_rpm(model, max_pilots=3), task)
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["n_pilots"] == 3 and len(detail["pilots"]) == 3
    assert detail["stop_reason"] == "max pilots reached"
    assert model.counts["agentic-feedback"] == 2  # no feedback needed once the limit is hit
    assert "bigger sample" in model.tool_messages()[1]


def test_stops_when_real_time_left_is_below_theta(task: Task) -> None:
    ticks = itertools.count(step=50.0)  # every clock reading is 50 s later than the last
    model = FakeModel(python_then_submit(), feedback="[NEXT] try another variant")
    _, screening = _screen(_rpm(model, budget_s=300, theta_s=60, clock=lambda: next(ticks)), task)
    detail = screening.evidence[screening.ranking[0]].detail
    # 5 pilots x 50 s = 250 s used, 50 s left < theta = 60 s.
    assert detail["n_pilots"] == 5 and detail["pilot_seconds"] == pytest.approx(250.0)
    assert detail["stop_reason"] == "time below theta"
    tool_texts = [
        m.content for r in model.requests if r.role == "agentic-pilot" for m in r.messages if m.role == "tool"
    ]
    assert "about 2250 s" in tool_texts[0]  # 250 s of real time left, stated 9x


def test_hung_pilot_is_killed_at_the_remaining_budget(task: Task) -> None:
    model = FakeModel(python_then_submit("while True:\n    pass\n"))
    _, screening = _screen(_rpm(model, budget_s=0.8, theta_s=0.0, pilot_limits={"wall_seconds": 5.0}), task)
    detail = screening.evidence[screening.ranking[0]].detail
    (pilot,) = detail["pilots"]
    assert pilot["status"] == "timeout"
    assert pilot["timeout_s"] == pytest.approx(0.8)  # min(remaining budget, per-pilot cap): killed there, not at 5 s
    assert detail["pilot_seconds"] >= 0.7
    assert detail["stop_reason"] == "time below theta"


def test_hung_pilot_is_killed_at_the_per_pilot_cap(task: Task) -> None:
    model = FakeModel(python_then_submit("while True:\n    pass\n"))
    _, screening = _screen(_rpm(model, pilot_limits={"wall_seconds": 0.5}), task)
    (pilot,) = screening.evidence[screening.ranking[0]].detail["pilots"]
    assert pilot["status"] == "timeout" and pilot["timeout_s"] == pytest.approx(0.5)
    assert pilot["seconds"] >= 0.4


def test_feedback_enough_stops_early_and_refuses_resubmission(task: Task) -> None:
    turns: list[Turn] = [
        [tool("python", code="print(1)"), tool("submit_findings", findings="first")],
        [tool("submit_findings", findings="again without running")],  # refused: proposal pending
        [tool("bash", command="echo second"), tool("submit_findings", findings="second")],
    ]
    model = FakeModel(lambda i, _r: turns[i], feedback=lambda i: ["[NEXT] check candidate 3", "[ENOUGH] done"][i])
    _, screening = _screen(_rpm(model, max_pilots=30), task)
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["findings"] == ["first", "second"]
    assert detail["stop_reason"] == "feedback: enough"
    assert [f["decision"] for f in detail["feedback"]] == ["next", "enough"]
    assert [p["tool"] for p in detail["pilots"]] == ["python", "bash"]
    assert detail["pilots"][1]["stdout_tail"].strip() == "second"
    assert model.counts["agentic-pilot"] == 3
    assert any("Not accepted" in t for t in model.tool_messages())


def test_unparseable_final_reply_falls_back_to_the_run_rng(task: Task) -> None:
    model = FakeModel(python_then_submit(), final="All three look similar to me.")
    cands, screening = _screen(_rpm(model), task, seed=5)
    expected = random.Random(5).randrange(len(cands))
    assert screening.ranking[0] == cands[expected].id
    assert screening.evidence[cands[expected].id].detail["choice_source"] == "random (unparseable final reply)"


def test_hidden_data_is_not_reachable_from_a_pilot(task: Task) -> None:
    hidden = task.hidden_data[0]
    code = (
        "from pathlib import Path\n"
        "print('public:', Path('public/train.csv').read_text().splitlines()[0])\n"
        f"try:\n    print('hidden:', open({str(hidden)!r}).read())\n"
        "except Exception as exc:\n    print('hidden blocked:', type(exc).__name__)\n"
        f"try:\n    print('listing:', sorted(p.name for p in Path({str(task.root)!r}).rglob('*')))\n"
        "except Exception as exc:\n    print('root blocked:', type(exc).__name__)\n"
    )
    turns: list[Turn] = [
        [
            tool("python", code=code),
            tool("bash", command=f"cat {shlex.quote(str(hidden))}"),
            tool("submit_findings", findings="tried"),
        ]
    ]
    model = FakeModel(lambda i, _r: turns[i])
    hides: list[tuple[Path, ...]] = []

    class Recording:
        name = "recording"

        def run(self, argv, workdir, limits, *, env=None, hide=()):
            hides.append(tuple(hide))
            return SANDBOX.run(argv, workdir, limits, env=env, hide=hide)

    rpm = AgenticRPM(model, Recording(), AgenticOptions(pilot_limits={"wall_seconds": 5.0}, device="CPU only (test)"))
    screening = asyncio.run(rpm.screen(_ctx(task), _candidates(task)))
    pilots = screening.evidence[screening.ranking[0]].detail["pilots"]
    assert len(pilots) == 2
    assert all(task.root in h and hidden in h for h in hides) and len(hides) == 2
    assert "public: a,b" in pilots[0]["stdout_tail"]
    for pilot in pilots:
        assert SECRET not in pilot["stdout_tail"] + pilot["stderr_tail"]
    assert "labels.csv" not in pilots[0]["stdout_tail"]


def test_idle_agent_stops_and_bad_arguments_are_reported(task: Task) -> None:
    turns: list[Turn] = [
        [tool("python", code="print(1)"), ToolCall("x", "python", "{not json"), ToolCall("y", "fly", "{}")],
        "thinking...",
        "still thinking",
        "done?",
    ]
    model = FakeModel(lambda i, _r: turns[i])
    _, screening = _screen(_rpm(model, max_idle_turns=3), task)
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["stop_reason"] == "agent stopped calling tools"
    assert detail["n_pilots"] == 1
    assert model.counts["agentic-pilot"] == 4
    messages = [r for r in model.requests if r.role == "agentic-pilot"][1].messages
    tool_texts = [m.content for m in messages if m.role == "tool"]
    assert "Could not read the arguments" in tool_texts[1] and "Unknown tool" in tool_texts[2]


def test_single_candidate_and_debug_pools_skip_the_pilots(task: Task) -> None:
    model = FakeModel(python_then_submit())
    rpm = _rpm(model)
    one = _candidates(task, 1)
    single = asyncio.run(rpm.screen(_ctx(task), one))
    assert single.ranking == (one[0].id,) and single.evidence[one[0].id].detail["choice_source"] == "only candidate"
    debug = _candidates(task, 4, operator=Operator.DEBUG)
    picks = []
    for seed in range(40):  # the paper picks at random on Debug steps: uniform over the pool, seeded by the run
        screening = asyncio.run(rpm.screen(_ctx(task, seed=seed), debug))
        assert screening.ranking[0] == debug[random.Random(seed).randrange(4)].id
        assert screening.evidence[screening.ranking[0]].detail["choice_source"] == "random (debug step)"
        picks.append(screening.ranking[0])
    assert set(picks) == {c.id for c in debug}
    assert model.requests == []
    assert asyncio.run(rpm.screen(_ctx(task), [])).ranking == ()


def test_parse_feedback() -> None:
    assert parse_feedback("[NEXT] subsample 10% and compare 1 vs 3") == ("next", "subsample 10% and compare 1 vs 3")
    assert parse_feedback("**[ENOUGH]** candidate 2 is clearly ahead")[0] == "enough"
    assert parse_feedback("Format: [ENOUGH] <why> or [NEXT] <exp>\n\n[NEXT] rerun with 3 folds")[0] == "next"
    assert parse_feedback("[NEXT] <the experiment>") == ("none", "")
    assert parse_feedback("no tags at all") == ("none", "")


# ---------------------------------------------------------------------- issue 10: fidelity to the RPM paper


def test_max_pilots_counts_submitted_findings_not_runs(task: Task) -> None:
    two_runs = [tool("python", code="print(1)"), tool("bash", command="echo 2")]
    model = FakeModel(
        lambda i, _r: [*two_runs, tool("submit_findings", findings=f"finding {i}")],
        feedback="[NEXT] one more comparison",
    )
    _, screening = _screen(_rpm(model, max_pilots=2), task)
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["n_findings"] == 2 and detail["n_pilots"] == 4  # N = 2 findings, each backed by two runs
    assert detail["stop_reason"] == "max pilots reached"


def test_pilot_records_carry_seconds_device_and_outcome(task: Task) -> None:
    model = FakeModel(
        lambda i, _r: [
            tool("python", code="print('ok')"),
            tool("python", code="raise SystemExit(3)"),
            tool("submit_findings", findings="one ran, one failed"),
        ]
    )
    _, screening = _screen(_rpm(model, device="GPU: Test Card 80GB"), task)
    records = pilot_records(screening)
    assert [(r.index, r.tool, r.outcome, r.device) for r in records] == [
        (1, "python", "ok", "GPU: Test Card 80GB"),
        (2, "python", "failed", "GPU: Test Card 80GB"),
    ]
    assert sum(r.seconds for r in records) == pytest.approx(pilot_seconds(screening))
    first = [r for r in model.requests if r.role == "agentic-pilot"][0].messages[1].content
    assert "Hardware: GPU: Test Card 80GB." in first


def test_the_runs_evaluator_budget_stops_pilots(task: Task) -> None:
    ticks = itertools.count(step=50.0)  # every pilot takes 50 s of (fake) real time
    model = FakeModel(python_then_submit(), feedback="[NEXT] try another variant")
    ctx = _ctx(task, budget_left_s=120.0)  # the run has 120 s of evaluator time left, less than budget_s = 300
    rpm = _rpm(model, budget_s=300, theta_s=60, clock=lambda: next(ticks))
    screening = asyncio.run(rpm.screen(ctx, _candidates(task)))
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["n_pilots"] == 2 and detail["pilot_seconds"] == pytest.approx(100.0)  # 20 s left < theta
    assert detail["stop_reason"] == "time below theta" and detail["stated_budget_s"] == pytest.approx(1080.0)
    first_prompt = [r for r in model.requests if r.role == "agentic-pilot"][0].messages[1].content
    assert "1080 seconds" in first_prompt  # the run's 120 s, overstated 9x

    model = FakeModel(python_then_submit())
    screening = asyncio.run(_rpm(model, theta_s=60).screen(_ctx(task, budget_left_s=30.0), _candidates(task)))
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["stop_reason"] == "run budget below theta" and detail["pilots"] == []
    assert model.counts["agentic-pilot"] == 0 and model.counts["agentic-final"] == 1  # still judged, on code alone


def test_judge_sees_plan_code_and_context_nodes_within_a_token_budget(task: Task) -> None:
    from verifyless.node import Node, Status

    def node(nid: str, parent: str | None, score: float | None, status: Status = Status.OK) -> Node:
        return scored_node(nid, parent, score, status=status, minimise=True)  # validation rmse

    nodes = {
        n.id: n
        for n in (
            node("root", None, 3.0),
            node("p", "root", 1.0),
            node("bad", "p", None, Status.FAILED),
            node("g", "bad", 0.5),
            node("sib", "root", 2.0),
        )
    }
    programs = {nid: f"# program of {nid}\n" + "x = 1\n" * 40 for nid in nodes}
    model = FakeModel(python_then_submit())
    rpm = _rpm(model, context_tokens=10_000)
    cands = _candidates(task)
    asyncio.run(rpm.screen(_ctx(task, nodes=nodes, program_of=programs.__getitem__), cands))
    prompt = [r for r in model.requests if r.role == "agentic-pilot"][0].messages[1].content
    final = [r for r in model.requests if r.role == "agentic-final"][0].messages[1].content
    for text in (prompt, final):
        assert "Plan: use model0" in text and "model = 'model0'" in text  # plan plus the candidate's program
        order = [text.index(f"# program of {n}") for n in ("p", "root", "sib", "g")]  # BFS from the parent
        assert order == sorted(order) and "# program of bad" not in text
        assert "(validation rmse: 0.5)" in text

    model = FakeModel(python_then_submit())
    head = "### Solution 1 (validation rmse: 1)\nPlan: idea of p\nProgram:\n```\n"
    one = len(head + programs["p"].rstrip() + "\n```")
    small = _rpm(model, context_tokens=(one + 10) // 4)  # room for exactly one node
    screening = asyncio.run(small.screen(_ctx(task, nodes=nodes, program_of=programs.__getitem__), cands))
    assert screening.evidence[screening.ranking[0]].detail["context_nodes"] == ["p"]


def test_detect_device_names_a_gpu_from_nvidia_smi_or_the_cpu_cores(tmp_path: Path, monkeypatch) -> None:
    from verifyless.screen import agentic_view

    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'NVIDIA H200, 143771 MiB'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    agentic_view.gpu_names.cache_clear()
    try:
        line = agentic_view.detect_device(Limits(threads=2, memory_mb=4096))
        assert line.startswith("GPU: NVIDIA H200, 143771 MiB;") and "2 CPU thread(s)" in line
        monkeypatch.setenv("PATH", "/nonexistent")
        monkeypatch.setattr(agentic_view, "_torch_gpus", lambda: ())  # no CUDA here; torch is checked on a GPU box
        agentic_view.gpu_names.cache_clear()
        line = agentic_view.detect_device(Limits())
        assert line.startswith(f"CPU only ({len(os.sched_getaffinity(0))} core(s), no GPU)")
    finally:
        agentic_view.gpu_names.cache_clear()


def test_engine_charges_pilot_seconds_to_the_runs_evaluator_budget(tmp_path: Path) -> None:
    from verifyless.config import load_config
    from verifyless.store import RunStore
    from verifyless.testing import fake_engine, fake_task

    (tmp_path / "task").mkdir()
    ticks = itertools.count(step=50.0)  # every pilot takes 50 s of (fake) real time
    model = FakeModel(python_then_submit(), feedback="[NEXT] compare again")
    screener = AgenticRPM(
        model,
        SANDBOX,
        AgenticOptions(pilot_limits={"wall_seconds": 5.0}, device="CPU only (test)"),
        clock=lambda: next(ticks),
    )
    cfg = load_config(
        overrides=[
            "budget.verifications=3",
            "budget.evaluator_seconds=130",
            "engine.candidates=3",
            "engine.pipeline=false",
        ]
    )
    with RunStore(tmp_path / "s.db") as store:
        engine = fake_engine(store, cfg, screener, task=fake_task(tmp_path / "task"))
        result = asyncio.run(engine.run())
        pilots = [e.payload for e in store.events(result.run_id, kinds=["pilot"])]
        used = store.budget(result.run_id)
        screenings = [e.payload for e in store.events(result.run_id, kinds=["screening"])]
    assert [(p["seconds"], p["outcome"], p["device"]) for p in pilots] == [(50.0, "ok", "CPU only (test)")] * 2
    assert used.pilot_seconds == pytest.approx(100.0)
    assert used.evaluator_seconds == pytest.approx(100.0 + 0.01 * used.verifications)  # pilots + verifications
    reasons = [s["evidence"][s["ranking"][0]]["detail"].get("stop_reason") for s in screenings]
    assert reasons[0] == "time below theta"  # 130 s run budget: 2 pilots, then 30 s < theta
    assert "run budget below theta" in reasons[1:]  # later pools start no pilot at all


def test_pairwise_knockout_runs_one_investigation_per_match(task: Task) -> None:
    """matches=pairwise: n-1 two-candidate matches, every pilot kept and charged once, runners-up ranked."""
    model = FakeModel(python_then_submit(), final="[CHOICE] 2 --- the second measured better")
    cands, screening = _screen(_rpm(model, matches="pairwise"), task, n=5)
    detail = screening.evidence[screening.ranking[0]].detail
    matches = detail["matches"]
    assert len(matches) == 4 and model.counts["agentic-final"] == 4  # five candidates: four matches
    assert all(m["winner"] == m["pair"][1] for m in matches)  # the judge always named the second
    assert matches[-1]["winner"] == screening.ranking[0] == screening.chosen[0]
    assert screening.ranking[1] in matches[-1]["pair"]  # the final's loser ranks second
    assert sorted(screening.ranking) == sorted(c.id for c in cands)
    assert detail["n_pilots"] == len(detail["pilots"]) == 4  # one pilot per match, all on the champion's record
    assert pilot_seconds(screening) == pytest.approx(sum(m["pilot_seconds"] for m in matches))
    for request in (r for r in model.requests if r.role == "agentic-final"):
        text = " ".join(m.content for m in request.messages)
        assert sum(f"use model{i}" in text for i in range(5)) == 2  # each judge saw exactly two candidates


def test_pairwise_option_is_validated(task: Task) -> None:
    with pytest.raises(ConfigError, match="matches=.league."):
        _rpm(FakeModel(python_then_submit()), matches="league")


def test_a_fenced_block_without_a_tool_call_runs_as_that_pilot(task: Task) -> None:
    """Qwen2.5-Coder-1.5B on llama-cpp-python's server wrote its pilots as fenced blocks, never as tool calls
    (docs/benchmarks.md): the first python or bash block runs as the call; prose and untagged blocks do not."""
    turns: list[Turn] = [
        "Here is how you can compare them:\n```\nnot a tagged block\n```\n```python\nprint('block ran')\n```",
        [tool("submit_findings", findings="the block printed its line")],
    ]
    model = FakeModel(lambda i, _r: turns[min(i, 1)])
    _, screening = _screen(_rpm(model), task)
    detail = screening.evidence[screening.ranking[0]].detail
    (pilot,) = detail["pilots"]
    assert pilot["code"].strip() == "print('block ran')" and "block ran" in pilot["stdout_tail"]
    assert detail["findings"] == ["the block printed its line"]
    off = FakeModel(lambda i, _r: turns[0])
    _, screening = _screen(_rpm(off, code_blocks_as_calls=False, max_idle_turns=2), task)
    assert screening.evidence[screening.ranking[0]].detail["n_pilots"] == 0


def test_a_bash_block_calling_submit_findings_is_that_tools_call(task: Task) -> None:
    """The 1.5B, once a pilot had failed, wrote ``submit_findings "..."`` as a bash command every turn; run as
    bash it failed again (exit 127) until the turns ran out. It is the submission it means."""
    turns: list[Turn] = [
        "```python\nprint('pilot ran')\n```",
        'Submit your findings:\n```bash\nsubmit_findings "The pilot printed its line."\n```',
    ]
    model = FakeModel(lambda i, _r: turns[min(i, 1)])
    _, screening = _screen(_rpm(model), task)
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["n_pilots"] == 1 and detail["findings"] == ["The pilot printed its line."]


def test_findings_before_any_pilot_are_refused(task: Task) -> None:
    """The 1.5B's first act was to submit invented RMSEs; findings with no pilot behind them are not recorded."""
    turns: list[Turn] = [
        [tool("submit_findings", findings="candidate 1 reached 25.7 (invented)")],
        [tool("python", code="print('ran')")],
        [tool("submit_findings", findings="the pilot printed ran")],
    ]
    model = FakeModel(lambda i, _r: turns[min(i, 2)])
    _, screening = _screen(_rpm(model), task)
    detail = screening.evidence[screening.ranking[0]].detail
    assert detail["findings"] == ["the pilot printed ran"] and detail["n_pilots"] == 1
    assert "no pilot has run yet" in model.tool_messages()[0]
