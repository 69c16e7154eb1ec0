"""Agentic research preference model: choose after running pilot experiments (RPM paper, SPEC 3.2).

Before a pool is ranked, an LLM agent runs small pilot experiments in a
scratch copy of the task's *public* workspace (``public/``, the candidates as
``candidate_<i>.<ext>``, ``parent.<ext>``, ``out/``; never hidden data) through
the injected ``Sandbox`` with the task folder and hidden data in ``hide``.
Tools: ``python`` (script saved as ``pilot_<n>.py``), ``bash`` (``bash -c``)
and ``submit_findings`` (a summary, never a choice).

What the agent and the final judge see: the task, the parent, every candidate
as its plan plus its program (``show="code"``, the default; ``"summary"``
shows plan plus neutral summary), and context nodes: executed, non-buggy
solutions found by BFS from the parent, each with its validation score and
program, as many as fit in ``context_tokens`` (about 4 characters a token).
Programs of context nodes come from ``ScreenContext.program_of``; without it
a context node is shown by its summary. The hardware line names the real
device (``detect_device``: a GPU when ``nvidia-smi`` or ``torch.cuda`` finds
one, else the CPU core count) unless ``device`` is given.

Budget: only pilot execution time counts (measured with the injected
``clock``); the agent is told ``overstatement x`` the real figures. The real
time left is ``budget_s - used``, further capped by the run's evaluator
seconds left (``ScreenContext.budget_left_s``) when the run has that cap.
Each pilot's timeout is ``min(remaining, pilot_limits.wall_seconds)``. After
each submission a feedback call answers ``[NEXT] ...`` or ``[ENOUGH]`` (no
tag means no next experiment). The loop stops on enough, when real remaining
time < ``theta_s`` (checked before the first pilot too: a run whose budget
is nearly spent runs none), once ``max_pilots`` findings have been submitted
(the paper's ``len(s) >= N``), after ``max_turns``, or after
``max_idle_turns`` replies without a tool call; unsubmitted results get one
last turn. A reply with no tool call whose first fenced ``python`` or ``bash``
block is the pilot it describes runs that block as the call
(``code_blocks_as_calls``; a small model served without a tool-call parser
writes its actions so). A final call answers ``[CHOICE] <number>``; an unparseable reply
falls back to ``ctx.rng`` (recorded as ``choice_source``).

Ranking: chosen first, the rest in ``ctx.rng`` order; no votes, so every
uncertainty is 1.0 (this screener never triggers ``verify_uncertain``). The
run-level record (``pilots``: one record per experiment with its seconds,
device and outcome; ``pilot_seconds``, ``findings``, ``feedback``,
``stop_reason``, ``choice_source``) is stored in the chosen candidate's
``Evidence.detail`` only, so ``pilot_seconds`` and ``pilot_records`` count
each pilot once. The engine appends one ``pilot`` event per record and
charges its seconds as evaluator seconds of the run.

Debug steps: as in the paper, the agentic judge is used for Draft and Improve
pools only; a pool made only of DEBUG children is picked uniformly at random
with ``ctx.rng`` (no pilots, no model call). A pool of one is returned as is.

Limits: hiding is only as strong as the sandbox backend; the budget is
checked between tool calls, so one call may overshoot it by its own timeout.
The paper's judge compares two candidates per knockout match; by default
this one investigates the whole pool at once (``matches="pool"``, cheaper on
a CPU machine); ``matches="pairwise"`` runs the paper's knockout
(docs/design/differences-from-papers.md).
Details and reasons: docs/design/surrogate-and-agentic.md.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from verifyless import prompts
from verifyless.events import PilotRan
from verifyless.model.asking import ask_parsed
from verifyless.model.base import Message, Model, ModelRequest, Tool, ToolCall, note_parse
from verifyless.node import Candidate, Evidence, Operator, Screening
from verifyless.roles.parse import code_blocks
from verifyless.sandbox.base import Sandbox
from verifyless.screen.agentic_knockout import knockout
from verifyless.screen.agentic_view import (
    CandidateView,
    describe_parent,
    describe_workspace,
    detect_device,
    format_context_nodes,
    prepare_workspace,
)
from verifyless.screen.base import ScreenContext
from verifyless.screen.health import watch
from verifyless.screen.options import HealthOptions
from verifyless.screen.prompting import metric_line, parse_choice
from verifyless.task.base import Limits, Task

PILOT_TOOLS: tuple[Tool, ...] = (
    Tool(
        "python",
        "Run a Python script in the pilot workspace (your working directory). Returns the exit status "
        "and the tail of stdout and stderr. The script is killed when it exceeds its time cap.",
        {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "the full Python script to run"}},
            "required": ["code"],
        },
    ),
    Tool(
        "bash",
        "Run a shell command with bash in the pilot workspace. Returns the exit status and output tails.",
        {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command line"}},
            "required": ["command"],
        },
    ),
    Tool(
        "submit_findings",
        "Hand over a summary of what your latest pilot experiments measured (numbers, failures, caveats). "
        "This is not a choice between candidates. Returns guidance for the next experiment or says to stop.",
        {
            "type": "object",
            "properties": {"findings": {"type": "string", "description": "what the experiments showed"}},
            "required": ["findings"],
        },
    ),
)

_ARGUMENT = {"python": "code", "bash": "command", "submit_findings": "findings"}
_NUDGE = (
    "Please continue with a tool call: run a pilot with `python` or `bash`, "
    "or report what you measured with `submit_findings`."
)
_BLOCK_TOOL = {"python": "python", "py": "python", "python3": "python", "bash": "bash", "sh": "bash", "shell": "bash"}


def block_call(text: str) -> ToolCall | None:
    """The first fenced ``python`` or ``bash`` block of ``text`` as that tool's call (id ``block-call``), else None.

    Code as the action, as smolagents' code agents and AIDE read their models' replies: Qwen2.5-Coder-1.5B,
    offered the tools through a server with no tool-call parser, wrote every pilot it meant as a fenced block
    and asked the user to run it. Only a block tagged with one of the two languages counts; its body runs in
    the pilot sandbox like any other call, except a one-line bash block ``submit_findings "TEXT"`` (the tool
    written as a command, as the 1.5B did once its pilots had run), which is that tool's call with TEXT.
    """
    for block in code_blocks(text):
        tool = _BLOCK_TOOL.get(block.lang)
        if tool and block.body.strip():
            if tool == "bash" and (findings := _submitted(block.body)) is not None:
                return ToolCall(id="block-call", name="submit_findings", arguments=json.dumps({"findings": findings}))
            return ToolCall(id="block-call", name=tool, arguments=json.dumps({_ARGUMENT[tool]: block.body}))
    return None


def _submitted(command: str) -> str | None:
    """The text of ``submit_findings "..."`` written as a shell command (the tool's name and its text: the 1.5B's
    way of calling it), else None: one line, or one quoted text over several lines; never a script that goes on
    to other commands."""
    command = command.strip()
    if command.partition(" ")[0] != "submit_findings":
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    if len(words) < 2 or ("\n" in command and len(words) != 2):
        return None
    return " ".join(words[1:])


_LAST_CALL = "No more pilot runs are possible. Call submit_findings now with what your latest experiments showed."


@dataclass(frozen=True)
class PilotRun:
    """One executed pilot: what ran, on which device, how it ended and how long it took (real seconds)."""

    index: int
    tool: str
    code: str
    status: str
    reason: str
    returncode: int | None
    seconds: float
    timeout_s: float
    stdout_tail: str
    stderr_tail: str
    device: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class _Session:
    """Mutable state of one investigation (local to a single ``screen`` call)."""

    messages: list[Message]
    limit_s: float  # real seconds available: min(budget_s, the run's evaluator seconds left)
    pilots: list[PilotRun] = dataclasses.field(default_factory=list)
    findings: list[str] = dataclasses.field(default_factory=list)
    feedback: list[dict[str, str]] = dataclasses.field(default_factory=list)
    used: float = 0.0
    turns: int = 0
    idle: int = 0
    unsubmitted: int = 0  # pilots run since the last accepted submission
    pending: bool = False  # feedback proposed an experiment that has not been run yet
    last_call: bool = False
    stop_reason: str = ""

    @property
    def remaining(self) -> float:
        return self.limit_s - self.used


def pilot_seconds(screening: Screening) -> float:
    """Total pilot execution seconds recorded in a screening (0.0 for other screeners)."""
    return float(sum(float(ev.detail.get("pilot_seconds", 0.0)) for ev in screening.evidence.values()))


def pilot_records(screening: Screening, round: int = 0) -> list[PilotRan]:
    """One ``PilotRan`` record per pilot experiment in ``screening`` (of round ``round``).

    Empty for other screeners. The engine appends each as a ``pilot`` event
    charged as evaluator seconds; the full pilot (code, output tails) stays in
    the screening's evidence.
    """
    out = []
    for ev in screening.evidence.values():
        for run in ev.detail.get("pilots", ()):
            out.append(
                PilotRan(
                    index=run["index"],
                    tool=run["tool"],
                    seconds=float(run["seconds"]),
                    device=run.get("device", ""),
                    outcome=run["status"],
                    reason=run.get("reason", ""),
                    round=round,
                )
            )
    return out


class AgenticOptions(HealthOptions):
    """Options of screener ``agentic`` (``AgenticRPM``): the one place their defaults are written."""

    model: str | None = Field(None, description="key in roles.models of the pilot agent's model")
    budget_s: float = Field(300.0, gt=0.0, description="real seconds of pilot execution per investigation")
    overstatement: float = Field(9.0, gt=0.0, description="the agent is told this many times the real figures")
    theta_s: float = Field(60.0, ge=0.0, description="stop once fewer real seconds than this are left")
    max_pilots: int = Field(30, ge=1, description="stop after this many submitted findings (the paper's N)")
    pilot_limits: dict[str, Any] | None = Field(
        None, description="limits of each pilot run, as a task's limits (default: the task's); wall_seconds caps one"
    )
    python: str | None = Field(None, description="interpreter of python pilots (default: the one running verifyless)")
    max_turns: int | None = Field(
        None, ge=1, description="agent turns per investigation (default: 3 x max_pilots + 10)"
    )
    max_idle_turns: int = Field(3, ge=1, description="stop after this many replies in a row without a tool call")
    code_blocks_as_calls: bool = Field(
        True, description="run a reply's first fenced python or bash block when it makes no tool call"
    )
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="sampling temperature (None: the model's)")
    tail_chars: int = Field(2000, ge=0, description="characters of each pilot's stdout and stderr tail shown back")
    program_chars: int = Field(12000, ge=0, description="characters of each candidate's program shown")
    show: Literal["code", "summary"] = Field("code", description="candidates as plan plus code, or plan plus summary")
    context_tokens: int = Field(8000, ge=0, description="token budget of the context nodes shown")
    device: str | None = Field(None, description="the hardware line shown (default: the detected GPU or CPU cores)")
    workspace_root: str | None = Field(None, description="folder of the scratch pilot workspaces (default: temp)")
    matches: Literal["pool", "pairwise"] = Field(
        "pool", description="pool: one investigation of the whole pool; pairwise: the paper's knockout of pairs"
    )

    @field_validator("pilot_limits")
    @classmethod
    def _known_limits(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        known = {f.name for f in dataclasses.fields(Limits)}
        unknown = sorted(set(value or {}) - known)
        if unknown:
            raise ValueError(f"pilot_limits has no {unknown}: use {sorted(known)}")
        return value


class AgenticRPM:
    """Screener that runs sandboxed pilot experiments before choosing (see module doc).

    ``model`` drives the pilot agent; ``feedback_model`` and ``final_model``
    default to it. ``pilot_limits`` (default: the task's limits) bounds each
    pilot; its ``wall_seconds`` is the per-pilot cap. ``clock`` measures pilot
    time (inject a fake one in tests). ``python`` is the interpreter used for
    ``python`` pilots (default: the one running verifyless). ``max_pilots`` is
    N, counted in submitted findings. ``show``, ``program_chars`` and
    ``context_tokens`` shape what the models see; ``device`` overrides the
    detected hardware line. ``matches``: ``pool`` (one investigation over the
    whole pool) or ``pairwise`` (the paper's knockout of two-candidate
    investigations, each with its own budget; see ``knockout``).
    """

    name = "agentic"

    def __init__(
        self,
        model: Model,
        sandbox: Sandbox,
        options: AgenticOptions | None = None,
        *,
        feedback_model: Model | None = None,
        final_model: Model | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.options = opts = options or AgenticOptions()
        self.name = opts.name or "agentic"
        self.model = model
        self.sandbox = sandbox
        self.pilot_limits = Limits(**opts.pilot_limits) if opts.pilot_limits is not None else None
        self.feedback_model = feedback_model or model
        self.final_model = final_model or model
        self.clock = clock
        self.python = opts.python or sys.executable
        self.max_turns = opts.max_turns if opts.max_turns is not None else 3 * opts.max_pilots + 10
        self.view = CandidateView(show=opts.show, program_chars=opts.program_chars, context_tokens=opts.context_tokens)
        self.workspace_root = Path(opts.workspace_root) if opts.workspace_root else None
        self.health = watch(self)  # screen/health.py

    # ------------------------------------------------------------------ screen
    async def screen(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> Screening:
        started = time.perf_counter()
        ids = [c.id for c in candidates]
        detail: dict[str, Any]
        if len(candidates) <= 1:
            chosen_index, detail = 0, {"choice_source": "only candidate", "pilots": [], "pilot_seconds": 0.0}
        elif all(c.operator is Operator.DEBUG for c in candidates):
            chosen_index = ctx.rng.randrange(len(candidates))
            detail = {"choice_source": "random (debug step)", "pilots": [], "pilot_seconds": 0.0}
        elif self.options.matches == "pairwise":
            chosen_index, detail = await knockout(self._choose, ctx, candidates)
        else:
            chosen_index, detail = await self._choose(ctx, candidates)
        n_verify = ctx.n_verify if self.options.n_verify is None else self.options.n_verify
        rest = [ids.index(cid) for cid in detail.get("runners_up", [])]
        return _screening(self.name, ctx, ids, chosen_index, detail, n_verify, time.perf_counter() - started, rest)

    async def _choose(self, ctx: ScreenContext, candidates: Sequence[Candidate]) -> tuple[int, dict[str, Any]]:
        wall_start = self.clock()
        context = self.view.context(ctx)
        limit = (
            self.options.budget_s
            if ctx.budget_left_s is None
            else max(0.0, min(self.options.budget_s, ctx.budget_left_s))
        )
        workspace = prepare_workspace(ctx, candidates, self.workspace_root)
        try:
            session = await self._investigate(ctx, candidates, workspace, context, limit)
        finally:
            shutil.rmtree(workspace, ignore_errors=True)
        index, source, reply = await self._final(ctx, candidates, session, context)
        detail = {
            "chosen": True,
            "choice_source": source,
            "final_reply": reply[-4000:],
            "stop_reason": session.stop_reason,
            "pilots": [p.to_dict() for p in session.pilots],
            "pilot_seconds": session.used,
            "n_pilots": len(session.pilots),
            "n_findings": len(session.findings),
            "findings": list(session.findings),
            "feedback": list(session.feedback),
            "turns": session.turns,
            "budget_s": self.options.budget_s,
            "run_budget_left_s": ctx.budget_left_s,
            "stated_budget_s": limit * self.options.overstatement,
            "device": self._device(ctx.task),
            "context_nodes": [node_id for node_id, _ in context],
            "wall_seconds": self.clock() - wall_start,
        }
        return index, detail

    def _limits(self, task: Task) -> Limits:
        return self.pilot_limits or task.limits

    def _device(self, task: Task) -> str:
        return self.options.device if self.options.device is not None else detect_device(self._limits(task))

    def _stated(self, seconds: float) -> str:
        return f"{max(0.0, seconds) * self.options.overstatement:.0f}"

    # ------------------------------------------------------------------ the agent loop
    async def _investigate(
        self,
        ctx: ScreenContext,
        candidates: Sequence[Candidate],
        workspace: Path,
        context: Sequence[tuple[str, str]],
        limit: float,
    ) -> _Session:
        limits = self._limits(ctx.task)
        messages = prompts.messages(
            "screen/agentic_system",
            task=ctx.task.statement.strip(),
            metric=metric_line(ctx.task),
            workspace=describe_workspace(workspace),
            parent=describe_parent(ctx),
            context=format_context_nodes(context),
            candidates=self.view.describe(ctx.task, candidates),
            stated_budget=self._stated(limit),
            max_pilots=str(self.options.max_pilots),
            pilot_cap=f"{limits.wall_seconds:.0f}",
            device=self._device(ctx.task),
        )
        session = _Session(messages=list(messages), limit_s=limit)
        if limit < self.options.theta_s:
            session.stop_reason = "run budget below theta"  # nothing affordable: no pilot is started
            return session
        while session.turns < self.max_turns:
            session.turns += 1
            reply = await self.model.generate(
                ModelRequest(
                    tuple(session.messages),
                    role="agentic-pilot",
                    tools=PILOT_TOOLS,
                    temperature=self.options.temperature,
                )
            )
            choice = reply.choices[0] if reply.choices else None
            text, calls = (choice.text, choice.tool_calls) if choice else ("", ())
            if not calls and self.options.code_blocks_as_calls and (block := block_call(text)) is not None:
                calls = (block,)
            session.messages.append(Message("assistant", text, tool_calls=tuple(calls)))
            if not calls:
                session.idle += 1
                if session.idle >= self.options.max_idle_turns:
                    session.stop_reason = "agent stopped calling tools"
                    note_parse(self.model, "agentic-pilot", "never", f"no tool call: {text[-200:]!r}")
                    break
                session.messages.append(Message("user", _NUDGE))
                continue
            # a turn with tool calls is a reply the agent could act on: first try, or after the nudge
            note_parse(self.model, "agentic-pilot", "reminder" if session.idle else "first")
            session.idle = 0
            for call in calls:
                result = await self._handle(ctx, candidates, workspace, session, call)
                session.messages.append(Message("tool", result, tool_call_id=call.id, name=call.name))
                if session.stop_reason:
                    break
            if session.stop_reason or self._after_turn(session):
                break
        else:
            session.stop_reason = "max turns reached"
        return session

    def _after_turn(self, session: _Session) -> bool:
        """Apply the stop rules that follow a turn's tool calls; True when the loop ends."""
        out_of_time = session.remaining < self.options.theta_s
        out_of_pilots = len(session.findings) >= self.options.max_pilots
        if out_of_time or out_of_pilots:
            if session.unsubmitted and not session.last_call:
                session.last_call = True
                session.messages.append(Message("user", _LAST_CALL))
                return False
            session.stop_reason = "time below theta" if out_of_time else "max pilots reached"
            return True
        if session.last_call:
            session.stop_reason = "last call"
            return True
        return False

    async def _handle(
        self, ctx: ScreenContext, candidates: Sequence[Candidate], workspace: Path, session: _Session, call: ToolCall
    ) -> str:
        """Execute one tool call and return the text the agent sees."""
        if call.name not in _ARGUMENT:
            return f"Unknown tool {call.name!r}. Available tools: python, bash, submit_findings."
        value = _argument(call.arguments, _ARGUMENT[call.name])
        if value is None:
            return (
                f"Could not read the arguments of {call.name}: expected a JSON object with a string "
                f"field {_ARGUMENT[call.name]!r}."
            )
        if call.name == "submit_findings":
            return await _submit_findings(self, ctx, candidates, session, value)
        if session.remaining <= 0:
            return "No pilot time is left; nothing was run. Call submit_findings with your results."
        run = await self._run_pilot(ctx.task, workspace, call.name, value, len(session.pilots) + 1, session.remaining)
        session.pilots.append(run)
        session.used += run.seconds
        session.unsubmitted += 1
        session.pending = False
        return report(run, self._stated(session.remaining), max(0, self.options.max_pilots - len(session.findings)))

    async def _run_pilot(
        self, task: Task, workspace: Path, tool: str, code: str, index: int, remaining: float
    ) -> PilotRun:
        base = self._limits(task)
        timeout = max(0.0, min(remaining, base.wall_seconds))
        if tool == "python":
            script = f"pilot_{index}.py"
            (workspace / script).write_text(code, encoding="utf-8")
            argv = [self.python, script]
        else:
            argv = ["bash", "-c", code]
        hide = (task.root, *task.hidden_data)
        before = self.clock()
        # The sandbox call blocks; run it in a thread so other coroutines of the engine keep going.
        result = await asyncio.to_thread(
            self.sandbox.run,
            argv,
            workspace,
            dataclasses.replace(base, wall_seconds=timeout),
            env={"PYTHONUNBUFFERED": "1"},
            hide=hide,
        )
        seconds = max(0.0, self.clock() - before)
        return PilotRun(
            index=index,
            tool=tool,
            code=code,
            status=result.status,
            reason=result.reason,
            returncode=result.returncode,
            seconds=seconds,
            timeout_s=timeout,
            stdout_tail=result.stdout_tail[-self.options.tail_chars :],
            stderr_tail=result.stderr_tail[-self.options.tail_chars :],
            device=self._device(task),
        )

    async def _feedback(
        self, ctx: ScreenContext, candidates: Sequence[Candidate], session: _Session
    ) -> tuple[str, str, str]:
        messages = prompts.messages(
            "screen/agentic_feedback",
            task=ctx.task.statement.strip(),
            metric=metric_line(ctx.task),
            candidates=self.view.describe(ctx.task, candidates, plan_only=True),
            findings=_numbered(session.findings),
            time_left=self._stated(session.remaining),
        )
        reply = await ask_parsed(
            self.feedback_model,
            ModelRequest(messages, role="agentic-feedback", temperature=self.options.temperature),
            lambda text: parse_feedback(text) if parse_feedback(text)[0] != "none" else None,
            prompts.render("screen/reminders", "agentic_feedback"),
            reminders=self.options.format_reminders,
        )
        decision, text = reply.value or ("none", "")
        return decision, text, "\n".join(reply.texts)

    async def _final(
        self, ctx: ScreenContext, candidates: Sequence[Candidate], session: _Session, context: Sequence[tuple[str, str]]
    ) -> tuple[int, str, str]:
        messages = prompts.messages(
            "screen/agentic_final",
            task=ctx.task.statement.strip(),
            metric=metric_line(ctx.task),
            context=format_context_nodes(context),
            candidates=self.view.describe(ctx.task, candidates),
            findings=_numbered(session.findings),
            pilots=_digest(session.pilots),
            n=str(len(candidates)),
        )
        numbers = [str(i) for i in range(1, len(candidates) + 1)]
        reply = await ask_parsed(
            self.final_model,
            ModelRequest(messages, role="agentic-final", temperature=self.options.temperature),
            lambda text: parse_choice(text, numbers),
            prompts.render("screen/reminders", "agentic_final", {"n": str(len(candidates))}),
            reminders=self.options.format_reminders,
        )
        raw = "\n".join(reply.texts)
        if reply.value is None:
            return ctx.rng.randrange(len(candidates)), "random (unparseable final reply)", raw
        return int(reply.value) - 1, "model", raw


# ---------------------------------------------------------------------- helpers


def _screening(
    name: str,
    ctx: ScreenContext,
    ids: list[str],
    chosen_index: int,
    detail: dict[str, Any],
    n_verify: int,
    seconds: float,
    order: Sequence[int] = (),
) -> Screening:
    """The chosen candidate first, then ``order`` (indices, best first; a knockout's runners-up), then the
    rest in ``ctx.rng`` order; the run record on the chosen one only."""
    ranking: list[str] = []
    evidence: dict[str, Evidence] = {}
    if ids:
        placed = [chosen_index, *[i for i in order if i != chosen_index]]
        rest = [cid for i, cid in enumerate(ids) if i not in placed]
        ctx.rng.shuffle(rest)
        ranking = [ids[i] for i in placed] + rest
        for pos, cid in enumerate(ranking):
            evidence[cid] = Evidence(
                candidate_id=cid,
                rank_value=float(len(ranking) - pos),
                uncertainty=1.0,
                n_valid=1 if pos == 0 and detail.get("choice_source") == "model" else 0,
                detail=detail if pos == 0 else {"chosen": False},
            )
    chosen = tuple(ranking[: max(0, min(n_verify, len(ranking)))])
    return Screening(screener=name, ranking=tuple(ranking), chosen=chosen, evidence=evidence, seconds=seconds)


_NEXT = re.compile(r"\[\s*NEXT\s*\]", re.IGNORECASE)
_ENOUGH = re.compile(r"\[\s*ENOUGH\s*\]", re.IGNORECASE)


def parse_feedback(text: str) -> tuple[str, str]:
    """``("next", experiment)``, ``("enough", reason)`` or ``("none", "")`` from a feedback reply.

    The tag that appears last wins (a reply may restate the format first). The
    ``[NEXT]`` proposal is everything after the tag, up to 2,000 characters;
    an empty proposal counts as no proposal.
    """
    nexts = list(_NEXT.finditer(text))
    enoughs = list(_ENOUGH.finditer(text))
    last_next = nexts[-1].end() if nexts else -1
    last_enough = enoughs[-1].end() if enoughs else -1
    if last_enough > last_next:
        return "enough", text[last_enough:].strip(" \t:-—\n")[:2000]
    if last_next >= 0:
        proposal = text[last_next:].strip(" \t:-—\n*`")[:2000]
        if proposal and not re.fullmatch(r"<[^>]*>", proposal):
            return "next", proposal
    return "none", ""


def _argument(arguments: str, field: str) -> str | None:
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return None
    if isinstance(parsed, str):
        return parsed
    if isinstance(parsed, dict) and isinstance(parsed.get(field), str):
        return parsed[field]
    return None


def report(run: PilotRun, stated_left: str, findings_left: int) -> str:
    """What the agent reads after one pilot: status, output tails, and the (overstated) budget left."""
    exit_part = f"exit code {run.returncode}" if run.returncode is not None else "no exit code"
    lines = [f"Pilot {run.index}: {run.status} ({exit_part}) after {run.seconds:.1f} s."]
    if run.reason:
        lines.append(f"Reason: {run.reason}")
    lines.append("--- stdout (tail) ---\n" + (run.stdout_tail.strip() or "(empty)"))
    lines.append("--- stderr (tail) ---\n" + (run.stderr_tail.strip() or "(empty)"))
    lines.append(f"Pilot time left: about {stated_left} s; findings you may still submit: {findings_left}.")
    return "\n".join(lines)


def _numbered(items: Sequence[str]) -> str:
    if not items:
        return "(none submitted)"
    return "\n\n".join(f"{i}. {text}" for i, text in enumerate(items, 1))


def _digest(pilots: Sequence[PilotRun], per_pilot: int = 600) -> str:
    if not pilots:
        return "(no pilots were run)"
    parts = []
    for run in pilots:
        out = run.stdout_tail.strip()[-per_pilot:] or "(no output)"
        parts.append(f"- pilot {run.index} ({run.tool}): {run.status} in {run.seconds:.1f} s\n{out}")
    return "\n".join(parts)


__all__ = [
    "AgenticOptions",
    "AgenticRPM",
    "PILOT_TOOLS",
    "PilotRun",
    "detect_device",
    "parse_feedback",
    "pilot_records",
    "pilot_seconds",
]


async def _submit_findings(
    rpm, ctx: ScreenContext, candidates: Sequence[Candidate], session: _Session, findings: str
) -> str:
    if not session.pilots:  # findings rest on runs: a first submission before any pilot would be invented
        return (
            "Not accepted: no pilot has run yet, so there is nothing to report. "
            "Run one with the python or bash tool first, then submit what it showed."
        )
    if session.pending:
        return (
            "Not accepted: the proposed experiment has not been run yet. "
            "Run it with the python tool first, then submit what it showed."
        )
    session.findings.append(findings.strip())
    session.unsubmitted = 0
    if len(session.findings) >= rpm.options.max_pilots:
        session.stop_reason = "max pilots reached"
    elif session.remaining < rpm.options.theta_s:
        session.stop_reason = "time below theta"
    elif session.last_call:
        session.stop_reason = "last call"
    if session.stop_reason:
        return "Findings recorded. The pilot phase is over."
    decision, text, raw = await rpm._feedback(ctx, candidates, session)
    session.feedback.append({"decision": decision, "text": text, "raw": raw[-4000:]})
    if decision != "next":
        session.stop_reason = "feedback: enough" if decision == "enough" else "feedback: no next experiment"
        return "Findings recorded. The evidence is judged sufficient; the pilot phase is over."
    session.pending = True
    return (
        f"Findings recorded. Suggested next experiment:\n{text}\n\n"
        f"Pilot time left: about {rpm._stated(session.remaining)} s."
    )
