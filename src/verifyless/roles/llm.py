"""LLM-backed roles: brief, propose, implement (+ repair), summarise.

Each role renders a prompt from ``prompts/roles/*.md`` (``verifyless.prompts``), sends it
with ``model.generate`` and parses the reply (``parse``); roles never talk to
a provider any other way. Candidate-level trouble (an unparseable idea, code
that breaks the band contract) comes back as a ``RoleFailure``; an unusable
endpoint raises ``ModelUnavailable`` from the model and is not caught here.
Only the briefer and the summarizer raise ``ParseError``: their output is
needed for every candidate of a task, so the engine must decide what to do.

Every request names its role (``brief``, ``proposer``, ``implementer``,
``repair``, ``summarizer``) for accounting and routing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, cast

from verifyless.errors import ConfigError, ParseError
from verifyless.model.asking import ask_parsed
from verifyless.model.base import Message, Model, ModelReply, ModelRequest, Usage, note_parse
from verifyless.node import Idea, Operator, content_hash
from verifyless.program import BandError, fixed_region_violation, replace, syntax_error
from verifyless.prompts import block, messages, render
from verifyless.roles import parse
from verifyless.roles.base import (
    Implementation,
    Implementer,
    ParentInfo,
    ProposeContext,
    RoleFailure,
    Roles,
    TaskBrief,
)
from verifyless.roles.options import LLMRoleOptions
from verifyless.roles.render import (
    band_for,
    band_or_program,
    band_rule,
    band_view,
    clip,
    clip_words,
    code_lang,
    direction_phrase,
    score_text,
)
from verifyless.roles.staged import StagedImplementer
from verifyless.task.base import Task

_RAW_KEEP = 4000  # characters of a failed reply kept on its RoleFailure
logger = logging.getLogger(__name__)


def _task_values(task: Task) -> dict[str, object]:
    lim = task.limits
    return {
        "task_name": task.name,
        "statement": task.statement.strip(),
        "metric_name": task.metric.name,
        "direction": direction_phrase(task),
        "program_file": task.program_file,
        "code_lang": code_lang(task),
        "band_rule": band_rule(task),
        "limits": f"{lim.wall_seconds:g} s wall time, {lim.memory_mb} MB memory, {lim.threads} thread(s)",
    }


def _first_choice(reply: ModelReply) -> str | None:
    return reply.choices[0].text if reply.choices else None


# ---------------------------------------------------------------- briefer


class LLMBriefer:
    """Task understanding + 4-10 task-specific criteria, once per task.

    A reply without a parseable criteria list gets one follow-up in the same
    conversation; if that fails too, ``ParseError`` is raised with an excerpt
    of the reply. Results are memoised per (task name, statement hash, rounds).
    ``data_report`` (the run's data report, markdown) is shown after the
    resources when not empty; without it the prompt is as before.

    ``rounds`` > 1 is the critic paper's multi-round probing (prompt ``roles/brief_probe``): one conversation in
    which each of the first ``rounds - 1`` calls examines one side of the task, in the order the paper names them
    (``PROBES``: the setup, the data, the evaluation metric, the modelling constraints), and the last call writes
    the briefing from those notes. Every round is one model call (request role ``brief``), charged and cached as
    any other; the rounds are bounded (at most ``len(PROBES) + 1``). The model reads the same materials as the
    one-call brief and has no tools: the data report stands for looking at the data. ``rounds=1`` (default) is the
    one call of ``roles/brief``, byte for byte as before.
    """

    PROBES = ("setup", "data", "metric", "constraints")

    def __init__(self, model: Model, temperature: float = 0.3, max_tokens: int | None = None, rounds: int = 1) -> None:
        if not 1 <= rounds <= len(self.PROBES) + 1:
            raise ConfigError(f"brief rounds must be between 1 and {len(self.PROBES) + 1}, got {rounds}")
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.rounds = rounds
        self._memo: dict[tuple[str, str, int], TaskBrief] = {}

    async def brief(self, task: Task, data_report: str = "") -> TaskBrief:
        key = (task.name, content_hash(task.statement + task.baseline_program + data_report), self.rounds)
        if key in self._memo:
            return self._memo[key]
        values = _task_values(task)
        others = [m for m in task.validation_metrics if m != task.metric.name]
        files = ", ".join(p.name for p in task.public_data) or "none listed"
        values |= {
            "other_metrics": f"Other validation metrics reported: {', '.join(others)}." if others else "",
            "program": clip(task.baseline_program, 16000),
            "resources": f"Public data files: {files}.\nPer-run limits: {values['limits']}.",
            "data_report": data_report.strip(),
        }
        opening = messages("roles/brief", values) if self.rounds == 1 else await self._probe(values)
        problem: list[ParseError] = []

        def read(text: str) -> tuple[str, tuple[str, ...]] | None:
            try:
                return parse.parse_brief(text)
            except ParseError as exc:
                problem.append(exc)
                return None

        asked = await ask_parsed(
            self.model,
            self._request(opening),
            read,
            lambda _: render("roles/brief", "retry", {"problem": problem[-1]}),
        )
        if asked.value is None:
            raise ParseError(
                f"the briefer's reply for task {task.name!r} could not be parsed twice ({problem[-1]}); "
                f"check the 'brief' model. Reply began: {asked.text[:400]!r}"
            )
        understanding, criteria = asked.value
        result = TaskBrief(understanding=understanding, criteria=criteria)
        self._memo[key] = result
        return result

    def _request(self, conversation: Sequence[Message]) -> ModelRequest:
        return ModelRequest(
            messages=tuple(conversation), role="brief", temperature=self.temperature, max_tokens=self.max_tokens
        )

    async def _probe(self, values: dict[str, object]) -> list[Message]:
        """The probing rounds (one call each, the notes kept in the conversation), then the request for the
        briefing: the conversation the last round is asked with."""
        probes = self.PROBES[: self.rounds - 1]
        common = values | {"rounds": self.rounds}
        conversation = list(
            messages("roles/brief_probe", common | {"probe": render("roles/brief_probe", probes[0], common)})
        )
        for n, probe in enumerate(probes, 1):
            if n > 1:
                text = render("roles/brief_probe", probe, common)
                conversation.append(
                    Message("user", render("roles/brief_probe", "next", common | {"round": n, "probe": text}))
                )
            reply = await self.model.generate(self._request(conversation))
            conversation.append(Message("assistant", _first_choice(reply) or "(no notes)"))
        conversation.append(Message("user", render("roles/brief_probe", "final", common)))
        return conversation


# ---------------------------------------------------------------- proposer


@dataclass(eq=False, repr=False)
class LLMProposer:
    """One concrete idea (an Approach, no code) per request; N per call.

    Draw ``i`` uses seed ``ctx.seed + i``. ``mode="independent"`` (default, as
    in both papers): all N draws run concurrently and each sees only
    ``ctx.avoid`` (ideas tried in earlier rounds), never another draw of this
    call. ``mode="waves"``: the N draws run in sequential waves of
    ``wave_size`` concurrent requests, and every wave also lists the ideas of
    the earlier waves as ones to stay away from, trading latency
    (ceil(N / wave_size) round trips) for diversity. Results keep draw order;
    a failed draw is a ``RoleFailure``.
    """

    model: Model
    temperature: float = 0.8
    mode: Literal["independent", "waves"] = "independent"
    wave_size: int = 4
    max_avoid: int = 24
    format_reminders: int = 1
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.wave_size < 1:
            raise ConfigError(f"proposer wave_size must be at least 1, got {self.wave_size}")
        if self.mode not in ("independent", "waves"):
            raise ConfigError(f"proposer mode must be 'independent' or 'waves', got {self.mode!r}")

    def render(self, ctx: ProposeContext, avoid: tuple[str, ...] = ()) -> tuple[Message, Message]:
        """The system and user messages for one draw (public for inspection and tests)."""
        task, parent = ctx.task, ctx.parent
        values = _task_values(task)
        status = (
            "not run yet" if parent.score is None else f"validation {task.metric.name} = {score_text(parent.score)}"
        )
        if ctx.operator is Operator.DEBUG:
            status = "its last run failed"
        op = ctx.operator if ctx.operator is not Operator.BASELINE else Operator.IMPROVE
        instructions = render(
            "roles/propose",
            f"op_{op.value}",
            {
                **values,
                "score": score_text(parent.score),
                "error": clip(parent.error or "(no output captured)", 3000, keep="end"),
            },
        )
        avoid_items = [f"- {clip_words(a, 80)}" for a in avoid[-self.max_avoid :]]
        parent_idea = [clip_words(parent.idea.text, 150)] if parent.idea and parent.idea.text.strip() else []
        values |= {
            "parent_status": status,
            "parent_band": band_or_program(task, parent.program),
            "parent_idea": block("roles/propose", "parent_idea", parent_idea),
            "inspirations": block(
                "roles/propose",
                "inspirations",
                [
                    f"### Solution {i}{_scored(task, ctx.inspiration_scores, i - 1)}\n{s.strip()}"
                    for i, s in enumerate(ctx.inspirations, 1)
                ],
            ),
            "references": block("roles/propose", "references", [_reference(task, r) for r in ctx.references]),
            "memory": block("roles/propose", "memory", [f"- {m.strip()}" for m in ctx.memory]),
            "avoid": block("roles/propose", "avoid", avoid_items),
            "instructions": instructions,
        }
        return messages("roles/propose", values)

    def instructions(self, ctx: ProposeContext) -> str:
        """What a reply must not merely repeat: the prompt rendered for ``ctx`` without the ideas and solutions it
        lists (an idea may restate one it is told to avoid or to build on; the format line it may not)."""
        bare = dataclasses.replace(
            ctx,
            parent=dataclasses.replace(ctx.parent, idea=None),
            inspirations=(),
            memory=(),
            references=(),
        )
        return "\n".join(m.content for m in self.render(bare))

    async def propose(self, ctx: ProposeContext, n: int) -> list[Idea | RoleFailure]:
        waves = self.mode == "waves"
        results: list[Idea | RoleFailure] = []
        wave = self.wave_size if waves else max(n, 1)
        for start in range(0, n, wave):
            drawn = tuple(r.text for r in results if isinstance(r, Idea)) if waves else ()
            avoid = tuple(ctx.avoid) + drawn
            batch = range(start, min(n, start + wave))
            results += await asyncio.gather(*(self._draw(ctx, i, avoid) for i in batch))
        return results

    async def _draw(self, ctx: ProposeContext, i: int, avoid: tuple[str, ...]) -> Idea | RoleFailure:
        request = ModelRequest(
            messages=self.render(ctx, avoid),
            role="proposer",
            temperature=self.temperature,
            seed=ctx.seed + i,
            max_tokens=self.max_tokens,
        )
        reminder = render("roles/propose", "retry")
        prompt = self.instructions(ctx)

        def read(text: str) -> str | None:  # an approach that only repeats the prompt is no idea
            approach = parse.extract_approach(text)
            return None if approach is None or parse.echoes(approach, prompt) else approach

        asked = await ask_parsed(self.model, request, read, reminder, reminders=self.format_reminders)
        if asked.empty:
            return RoleFailure("model-error", "the model returned no choices")
        if asked.value is None:
            return RoleFailure(
                "parse-error",
                "the reply has no usable Approach section (none, or one that repeats the prompt)",
                raw=asked.text[:_RAW_KEEP],
            )
        return Idea(text=asked.value)


def _scored(task: Task, scores: tuple[float | None, ...], i: int) -> str:
    """`` (validation METRIC: X)`` for the i-th inspiration, '' where its score is unknown."""
    score = scores[i] if i < len(scores) else None
    return "" if score is None else f" (validation {task.metric.name}: {score_text(score)})"


def _reference(task: Task, ref: ParentInfo) -> str:
    who = f"Solution {ref.id}" if ref.id else "A solution"
    head = f"### {who} (validation {task.metric.name}: {score_text(ref.score)})"
    if ref.summary.strip():
        body = ref.summary.strip()
    elif ref.idea and ref.idea.text.strip():
        body = "Idea: " + clip_words(ref.idea.text, 150)
    else:
        body = f"```{code_lang(task)}\n{band_or_program(task, ref.program, 1500)}\n```"
    return f"{head}\n{body}"


# ---------------------------------------------------------------- implementer


@dataclass(eq=False, repr=False)
class LLMImplementer:
    """Rewrite the band to implement an idea, checking the contract after every reply.

    ``mode="full"``: the reply carries the whole new band in a fenced block
    (see ``parse.pick_code_block``). A reply holding the whole program with
    its marker lines is accepted when its fixed regions match. ``mode="diff"``:
    SEARCH/REPLACE blocks applied to the band with forgiving matching (see
    ``parse.apply_edits``). Either mode also accepts the other's format when
    that is all the reply contains.

    Each reply is checked: the band is replaced, the fixed regions must stay
    byte-identical, the program must parse (for ``.py`` files) and must differ
    from its parent. A failed check is sent back as a user message in the same
    conversation, up to ``max_attempts`` replies in total. The final failure
    is ``guard-failed`` when the code was readable but broke a check, or
    ``parse-error`` when no code could be read or applied.
    """

    model: Model
    mode: Literal["full", "diff"] = "full"
    max_attempts: int = 3
    temperature: float = 0.2
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in ("full", "diff"):
            raise ConfigError(f"implementer mode must be 'full' or 'diff', got {self.mode!r}")
        if self.max_attempts < 1:
            raise ConfigError(f"implementer max_attempts must be at least 1, got {self.max_attempts}")

    def _values(self, task: Task, program: str, idea: Idea) -> dict[str, object]:
        view = band_view(task, program)
        return _task_values(task) | {
            "idea": idea.text.strip(),
            "first_line": view.first_line,
            "last_line": view.last_line,
            "head": clip(view.head.rstrip("\n"), 8000, keep="end"),
            "tail": clip(view.tail.rstrip("\n"), 8000),
            "band": view.band.rstrip("\n"),
        }

    def render(self, task: Task, parent: ParentInfo, idea: Idea) -> tuple[Message, Message]:
        """The opening messages for ``implement`` (raises ``BandError`` if the parent has no band)."""
        prompt = "roles/implement" if self.mode == "full" else "roles/implement_diff"
        return messages(prompt, self._values(task, parent.program, idea))

    def render_repair(self, task: Task, program: str, idea: Idea, error: str) -> tuple[Message, Message]:
        values = self._values(task, program, idea)
        values["error"] = clip(error.strip() or "(no output captured)", 4000, keep="end")
        values["output_format"] = render("roles/repair", f"output_{self.mode}", values)
        return messages("roles/repair", values)

    async def implement(self, task: Task, parent: ParentInfo, idea: Idea) -> Implementation:
        try:
            opening = self.render(task, parent, idea)
        except BandError as exc:
            return Implementation(None, RoleFailure("guard-failed", f"the parent program has no usable band: {exc}"), 0)
        retry = "roles/implement" if self.mode == "full" else "roles/implement_diff"
        return await self._chain(task, parent.program, opening, "implementer", retry)

    async def implement_steps(self, task: Task, parent: ParentInfo, idea: Idea, steps: Sequence[str]) -> Implementation:
        """MLEvolve's Stepwise coder: apply the plan ``steps`` one call each, in order, each on the band the
        previous steps left (prompt ``roles/implement_step``, SEARCH/REPLACE edits, same checks and retries as
        ``implement``); the first step that fails fails the whole child, named with its number. Usage and
        attempts add up over the steps, so each step is charged as the LLM call(s) it made."""
        program, usage, attempts = parent.program, Usage(), 0
        plan = "\n".join(f"{k}. {step}" for k, step in enumerate(steps, 1))
        for k, step in enumerate(steps, 1):
            values = self._values(task, program, idea) | {"plan": plan, "step": step, "step_number": k}
            try:
                opening = messages("roles/implement_step", values | {"steps": len(steps)})
            except BandError as exc:
                failure = RoleFailure("guard-failed", f"the program has no usable band: {exc}")
                return Implementation(None, failure, attempts, usage)
            done = await self._chain(task, program, opening, "implementer", "roles/implement_diff")
            usage, attempts = usage + done.usage, attempts + done.attempts
            if done.failure is not None or done.program is None:
                failure = done.failure or RoleFailure("model-error", "no program")
                reason = f"step {k} of {len(steps)}: {failure.reason}"
                return Implementation(None, RoleFailure(failure.kind, reason, failure.raw), attempts, usage)
            program = done.program
        return Implementation(program, None, attempts, usage)

    async def repair(self, task: Task, program: str, idea: Idea, error: str) -> Implementation:
        """Fix ``program`` for ``error`` while keeping ``idea``; same checks as ``implement``."""
        try:
            opening = self.render_repair(task, program, idea, error)
        except BandError as exc:
            return Implementation(
                None, RoleFailure("guard-failed", f"the program to repair has no usable band: {exc}"), 0
            )
        return await self._chain(task, program, opening, "repair", "roles/repair")

    async def _chain(
        self, task: Task, base: str, opening: tuple[Message, Message], role: str, retry_prompt: str
    ) -> Implementation:
        conversation = list(opening)
        usage = Usage()
        failure = RoleFailure("model-error", "no attempt was made")
        for attempt in range(1, self.max_attempts + 1):
            reply = await self.model.generate(
                ModelRequest(
                    messages=tuple(conversation),
                    role=role,
                    temperature=self.retry_temperature(attempt),
                    max_tokens=self.max_tokens,
                )
            )
            usage = usage + reply.usage
            text = _first_choice(reply)
            if text is None:
                failure = RoleFailure("model-error", "the model returned no choices")
                continue
            outcome = self._child(task, base, text)
            if isinstance(outcome, str):
                note_parse(self.model, role, "first" if attempt == 1 else "reminder")
                return Implementation(outcome, None, attempt, usage)
            failure = outcome
            problem = render(retry_prompt, "retry", {"problem": failure.reason, "code_lang": code_lang(task)})
            conversation += [Message("assistant", text), Message("user", problem)]
        note_parse(self.model, role, "never", f"{failure.kind}: {failure.reason}")
        return Implementation(None, failure, self.max_attempts, usage)

    def retry_temperature(self, attempt: int) -> float:
        """``temperature`` for the first reply, then 0.3 higher per retry, at most 1.0 (never below it).

        A real 0.5B model sent the unchanged band back three times at 0.2 though each retry said "nothing was
        changed": near-greedy decoding of a near-identical conversation repeats itself.
        """
        return (
            self.temperature
            if attempt == 1
            else max(self.temperature, min(1.0, self.temperature + 0.3 * (attempt - 1)))
        )

    def _child(self, task: Task, base: str, text: str) -> str | RoleFailure:
        """The checked child program for one reply, or why there is none."""
        raw = text[:_RAW_KEEP]
        band = band_for(task, base)
        old_band = band_view(task, base).band
        code = parse.pick_code_block(text, avoid=old_band)
        try:
            edits = parse.parse_search_replace(text)
        except ParseError as exc:
            if self.mode == "diff" or code is None:
                return RoleFailure("parse-error", str(exc), raw)
            edits = []
        use_edits = bool(edits) and (self.mode == "diff" or code is None or parse.has_search_replace(code))
        if use_edits:
            try:
                new_band = parse.apply_edits(old_band, edits)
            except parse.EditError as exc:
                outside = _matches_outside(base, old_band, edits[exc.index - 1].search)
                return RoleFailure("parse-error", str(exc) + outside, raw)
            child = replace(base, band, new_band)
        elif code is not None:
            child = _interpret_code(task, base, code)
        else:
            want = "a fenced code block with the new band" if self.mode == "full" else "SEARCH/REPLACE blocks"
            return RoleFailure("parse-error", f"the reply contains no code: expected {want}", raw)

        violation = fixed_region_violation(base, child, band)
        if violation is not None:
            return RoleFailure("guard-failed", violation + ". Change only the editable band.", raw)
        if task.program_file.endswith(".py"):
            bad = syntax_error(child, task.program_file)
            if bad is not None:
                return RoleFailure(
                    "guard-failed", f"the program does not parse as Python: {bad}{_line_at(child, bad)}", raw
                )
        if child == base:
            return RoleFailure("guard-failed", "the new band is identical to the current one: nothing was changed", raw)
        return child


def _interpret_code(task: Task, base: str, code: str) -> str:
    """The child program a code block stands for: a band, a band with its markers, or a whole program.

    The result is not checked here; the caller's contract check judges it, so
    a block that mangles the markers or the fixed code is reported precisely.
    """
    band = band_for(task, base)
    view = band_view(task, base)
    start, end = cast(str, band.start_marker), cast(str, band.end_marker)  # set whenever band.lines is None
    if band.lines is None and (start in code or end in code):
        lines = code.strip("\n").split("\n")
        only_band = (
            len(lines) >= 2
            and start in lines[0]
            and end in lines[-1]
            and sum(start in x or end in x for x in lines) == 2
        )
        if only_band:  # the band wrapped in its two marker lines
            return replace(base, band, "\n".join(lines[1:-1]))
        return code if code.endswith("\n") else code + "\n"  # a whole program
    body = code if code.endswith("\n") else code + "\n"
    if band.lines is not None and view.head and body.startswith(view.head) and body.endswith(view.tail):
        return body  # a whole program in a line-range task
    return replace(base, band, code)


def _matches_outside(base: str, band_text: str, search: str) -> str:
    """A hint when a SEARCH text that missed the band sits in the fixed region."""
    needle = search.strip()
    if needle and needle in base and needle not in band_text:
        return " That text is in the fixed code outside the editable band, which must not be edited."
    return ""


def _line_at(program: str, error: str) -> str:
    m = re.match(r"line (\d+):", error)
    if not m:
        return ""
    lines = program.splitlines()
    k = int(m.group(1))
    return f" (file line {k}: {lines[k - 1].strip()[:120]!r})" if 1 <= k <= len(lines) else ""


# ---------------------------------------------------------------- summarizer


class Summary(str):
    """A summary's text; ``warning`` is non-empty when its length stayed outside the asked range.

    It behaves as a plain ``str`` everywhere (prompts, the store); the engine
    records a non-empty ``warning`` on the candidate's node event as
    ``summary_warning``.
    """

    warning: str = ""

    def __new__(cls, text: str, warning: str = "") -> Summary:
        obj = super().__new__(cls, text)
        obj.warning = warning
        return obj


class LLMSummarizer:
    """A neutral, code-grounded description of a program, ``min_words``-``max_words`` words (paper: 120-200).

    Cached by (task name, program hash), so a parent is described once and
    concurrent requests for the same program share one model call. A reply
    whose length is outside the range is asked again once, in the same
    conversation; if neither reply is in range, the one nearer the range is
    kept unchanged, as a ``Summary`` whose ``warning`` reads
    ``length-warning: N words, asked for MIN-MAX`` (also kept in
    ``warnings[program hash]`` and logged). An empty reply twice raises ``ParseError``.
    """

    def __init__(
        self,
        model: Model,
        temperature: float = 0.4,
        min_words: int = 120,
        max_words: int = 200,
        max_tokens: int | None = None,
    ) -> None:
        if not 1 <= min_words <= max_words:
            raise ConfigError(f"summarizer needs 1 <= min_words <= max_words, got {min_words}, {max_words}")
        self.model = model
        self.temperature = temperature
        self.min_words = min_words
        self.max_words = max_words
        self.max_tokens = max_tokens
        self._cache: dict[tuple[str, str], str] = {}
        self._pending: dict[tuple[str, str], asyncio.Future[str]] = {}
        self.calls = 0  # model requests made (cache hits make none)
        self.warnings: dict[str, str] = {}  # program hash -> length warning

    def render(self, task: Task, program: str, idea: Idea | None = None) -> tuple[Message, Message]:
        values = _task_values(task) | {
            "idea": idea.text.strip() if idea and idea.text.strip() else "(not stated)",
            "code": band_or_program(task, program, 16000).rstrip("\n"),
            "min_words": self.min_words,
            "max_words": self.max_words,
        }
        return messages("roles/summarize", values)

    async def summarize(self, task: Task, program: str, idea: Idea | None = None) -> str:
        key = (task.name, content_hash(program))
        if key in self._cache:
            return self._cache[key]
        if key in self._pending:  # another caller is describing this program right now
            return await asyncio.shield(self._pending[key])
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            summary = await self._describe(task, program, idea)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here; waiters re-raise it on their own
            raise
        finally:
            self._pending.pop(key, None)
        self._cache[key] = summary
        future.set_result(summary)
        return summary

    async def _describe(self, task: Task, program: str, idea: Idea | None) -> str:
        conversation = list(self.render(task, program, idea))
        seen: list[str] = []
        for attempt in range(2):
            self.calls += 1
            reply = await self.model.generate(
                ModelRequest(
                    messages=tuple(conversation),
                    role="summarizer",
                    temperature=self.temperature,
                    max_tokens=self.max_tokens,
                )
            )
            text = parse.clean_summary(_first_choice(reply) or "")
            words = len(text.split())
            if self.min_words <= words <= self.max_words:
                note_parse(self.model, "summarizer", "first" if attempt == 0 else "reminder")
                return Summary(text)
            if text:
                seen.append(text)
            values = {"words": words, "min_words": self.min_words, "max_words": self.max_words}
            conversation += [Message("assistant", text), Message("user", render("roles/summarize", "retry", values))]
        note_parse(self.model, "summarizer", "never", f"{len(seen[-1].split()) if seen else 0} words")
        if not seen:
            raise ParseError(
                f"the summarizer returned an empty summary twice for task {task.name!r}; check the 'summarizer' model"
            )
        # Neither reply had the asked-for length: keep the one nearer to the range, tagged.
        best = min(seen, key=self._distance)
        warning = f"length-warning: {len(best.split())} words, asked for {self.min_words}-{self.max_words}"
        self.warnings[content_hash(program)] = warning
        logger.warning("summary for task %s kept out of range (%s)", task.name, warning)
        return Summary(best, warning)

    def _distance(self, text: str) -> int:
        words = len(text.split())
        return max(0, self.min_words - words, words - self.max_words)


# ---------------------------------------------------------------- bundle

_ROLE_KEYS = ("brief", "proposer", "implementer", "summarizer")


def llm_roles(
    models: Mapping[str, Model] | Model,
    *,
    implement_mode: Literal["full", "diff", "stage"] = "full",
    options: LLMRoleOptions | None = None,
) -> Roles:
    """The four LLM roles, one model each, configured by ``options`` (``LLMRoleOptions`` defaults).

    ``models`` is one model for every role, or a mapping with any of the keys
    ``brief``, ``proposer``, ``implementer``, ``summarizer`` and ``default``
    (used for the keys that are absent). Repair uses the implementer's model.
    """
    opts = options or LLMRoleOptions()
    if isinstance(models, Mapping):
        unknown = set(models) - set(_ROLE_KEYS) - {"default"}
        if unknown:
            raise ConfigError(f"unknown role model keys {sorted(unknown)}; use {', '.join(_ROLE_KEYS)} or 'default'")
        missing = [k for k in _ROLE_KEYS if k not in models and "default" not in models]
        if missing:
            raise ConfigError(f"no model for roles {missing}: add them or a 'default' model")
        pick = {k: models[k] if k in models else models["default"] for k in _ROLE_KEYS}
    else:
        pick = dict.fromkeys(_ROLE_KEYS, models)
    return Roles(
        briefer=LLMBriefer(
            pick["brief"],
            temperature=opts.brief_temperature,
            max_tokens=opts.brief_max_tokens,
            rounds=opts.brief_rounds,
        ),
        proposer=LLMProposer(
            pick["proposer"],
            temperature=opts.proposer_temperature,
            mode=opts.proposer_mode,
            wave_size=opts.wave_size,
            max_avoid=opts.max_avoid,
            format_reminders=opts.format_reminders,
            max_tokens=opts.proposer_max_tokens,
        ),
        implementer=_implementer(pick["implementer"], implement_mode, opts),
        summarizer=LLMSummarizer(
            pick["summarizer"],
            temperature=opts.summarizer_temperature,
            min_words=opts.summary_min_words,
            max_words=opts.summary_max_words,
            max_tokens=opts.summarizer_max_tokens,
        ),
    )


def _implementer(model: Model, mode: Literal["full", "diff", "stage"], opts: LLMRoleOptions) -> Implementer:
    """The implementer of ``mode``; ``stage`` codes in MLEvolve's modes by the expansion (``roles/staged.py``)."""

    def one(mode: Literal["full", "diff"]) -> LLMImplementer:
        return LLMImplementer(
            model,
            mode=mode,
            max_attempts=opts.max_attempts,
            temperature=opts.implementer_temperature,
            max_tokens=opts.implementer_max_tokens,
        )

    if mode != "stage":
        return one(mode)
    return StagedImplementer(one("full"), one("diff"), max_steps=opts.stepwise_max_steps)


__all__ = ["LLMBriefer", "LLMImplementer", "LLMProposer", "LLMSummarizer", "Summary", "llm_roles"]
